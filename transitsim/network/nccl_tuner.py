"""NCCL's own tuner: the cost model NCCL's ncclTopoTuneModel and ncclTopoGetAlgoTime use to pick an
(algorithm, protocol) for a collective, with NCCL's constants (NVIDIA/nccl 2.30.7, commit 5067397,
src/graph/tuning.cc; docs/engine.md "NCCL's tuner" explains each line).

The NCCL mode (network/nccl.py) asks it which algorithm and protocol to run, then times that
choice with the engine: NCCL chooses by its model, not by the wire, so the choice comes from its
model too. What NCCL reads off its topology search (nodes, ranks, channels, the bandwidth one
channel has inside a node and across nodes, NVLink or PCI inside, the GPU generation) comes from
the network here (`tuner_inputs`); time = latency + bytes / bandwidth, as NCCL predicts it.
"""

import math
from dataclasses import dataclass

from transitsim.network.spec import NetworkSpec

NCCL_VERSION = "2.30.7 (NVIDIA/nccl 5067397, src/graph/tuning.cc)"
PROTOS = ("ll", "ll128", "simple")
ALGOS = ("tree", "ring", "collnet_direct", "nvls")  # NCCL's order (NCCL_ALGO_*), the subset used
GPUS = ("volta", "ampere", "hopper", "blackwell")  # NCCL's compCapIndex

# baseLatencies (us), per algorithm: LL, LL128, Simple
BASE_LAT = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
}
# hwLatencies (us), per hardware, per algorithm: LL, LL128, Simple
HW_LAT = {
    "nvlink": {
        "tree": (0.6, 1.25, 4.0),
        "ring": (0.6, 1.9, 3.4),
        "collnet_direct": (0.0, 0.0, 3.7),
        "nvls": (0.0, 0.0, 25.0),
    },
    "pci": {
        "tree": (1.0, 1.9, 4.0),
        "ring": (1.0, 2.5, 5.7),
        "collnet_direct": (0.0, 0.0, 3.7),
        "nvls": (0.0, 0.0, 0.0),
    },
    "net": {
        "tree": (5.0, 8.5, 14.0),
        "ring": (2.7, 4.0, 14.0),
        "collnet_direct": (0.0, 0.0, 31.0),
        "nvls": (0.0, 0.0, 18.0),
    },
}
# llMaxBws (GB/s): row = the GPU on one node, the CPU (Intel 0, AMD 1) on several; column = nodes
# 1, 2, more
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128_BW = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
PER_CH_MAX_TREE_LL128_BW = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE_BW = (
    (26.5, 18.5, 10.0),
    (24.0, 23.6, 17.8),
    (38.7, 41.4, 36.0),
    (70.0, 42.8, 24.0),
)
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
NET_OVERHEAD_US = (1.0, 2.0)  # getNetOverhead: x86 Intel, x86 AMD
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B .. 256 MiB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9),
)  # fmt: skip


@dataclass(frozen=True)
class TunerInputs:
    """What NCCL's tuner reads off its topology search, in its units (GB/s per channel, us)."""

    ranks: int
    nodes: int
    channels: int
    bw_intra: float  # GB/s one channel moves inside a node (graph bwIntra)
    bw_inter: float  # GB/s one channel moves between nodes (graph bwInter)
    tree_bw_intra: float = 0.0  # the tree graph's bwIntra (0: bw_intra), up to 2 x bwInter
    gpu: str = "hopper"
    nvlink: bool = True  # inside a node NVLink (NCCL_HW_NVLINK), else PCI
    nvls: bool = False  # the NVSwitch sums (NVLink SHARP)
    collnet: bool = False  # the network's switches sum (CollNet / SHARP)
    amd_cpu: bool = False


def _index2(nodes: int) -> int:
    return nodes - 1 if nodes <= 2 else 2


def bandwidth(t: TunerInputs, coll: str, algo: str, proto: str) -> float:
    """NCCL's algorithm bandwidth (GB/s) of (algo, proto) for this collective; 0: not usable."""
    gpu = GPUS.index(t.gpu)
    i2 = _index2(t.nodes)
    i1 = gpu if t.nodes == 1 else int(t.amd_cpu)
    ll_max = LL_MAX_BW[i1][i2]
    ppn = t.ranks / t.nodes
    nsteps = 2 * (t.ranks - 1) if coll == "all_reduce" else t.ranks - 1
    if coll != "all_reduce" and algo != "ring":
        return 0.0  # all-gather: ring (NVLS and CollNet need features not modelled)
    if algo in ("nvls", "collnet_direct") and proto != "simple":
        return 0.0
    if algo == "nvls" and (not t.nvls or t.nodes > 1 or t.channels < 2):
        return 0.0  # NVLS across nodes needs CollNet; NVLS needs 2 channels
    if algo == "collnet_direct" and (not t.collnet or t.nodes == 1):
        return 0.0
    bw = t.bw_intra if t.nodes <= 2 or algo == "collnet_direct" else t.bw_inter
    if algo == "tree" and t.nodes <= 2 and t.tree_bw_intra > 0:
        bw = t.tree_bw_intra
    if algo == "nvls":
        intra = t.bw_intra * NVLS_EFFICIENCY[gpu] * (t.channels - 1) / t.channels * 2.0
        bw = min(intra, t.bw_inter)
    bus = t.channels * bw
    if algo == "ring" and proto == "ll":
        bus = min(ll_max, bus * 0.5)
    if algo == "ring" and proto == "ll128":
        bus = min(bus * 0.92, t.channels * PER_CH_MAX_RING_LL128_BW[gpu][i2])
    if algo == "tree":
        bus = min(bus * 0.92, t.channels * PER_CH_MAX_TREE_BW[gpu][i2])
        if proto == "ll":
            bus = min(bus / 3.8, ll_max)
        if proto == "ll128":
            factor = 7.0 / 9.0 if t.nodes == 1 else 120.0 / 128.0
            bus = min(bus * factor, t.channels * PER_CH_MAX_TREE_LL128_BW[gpu][i2])
    if algo == "collnet_direct":
        factor = ppn / t.channels
        factor -= (factor - 1) / 2
        bus /= factor
        if gpu >= GPUS.index("hopper"):
            bus *= 0.85
    ratio = t.ranks / nsteps if algo in ("ring", "nvls") else 0.5
    return bus * ratio


def latency_us(t: TunerInputs, coll: str, algo: str, proto: str) -> float:
    """NCCL's latency (us) of (algo, proto) for this collective."""
    p = PROTOS.index(proto)
    ppn = t.ranks / t.nodes
    intra_hw = "nvlink" if t.nvlink else "pci"
    intra = HW_LAT[intra_hw][algo][p]
    inter = HW_LAT["net"]["tree" if ppn == 1 else algo][p]  # graph latencyInter: 0
    lat = BASE_LAT[algo][p]
    nsteps = 2 * (t.ranks - 1) if coll == "all_reduce" else t.ranks - 1
    if algo == "ring":
        hw = intra_hw if t.nodes == 1 else "net"
        if t.nodes == 1:
            intra = HW_LAT[hw]["ring"][p]
        overhead = 0.0
        if t.nodes > 1:
            overhead = NET_OVERHEAD_US[int(t.amd_cpu)] * (3 if proto == "simple" else 1)
        intra = max(intra, overhead)
        inter_steps = 0 if t.nodes == 1 else (2 if coll == "all_reduce" else 1) * (t.nodes - 1)
        return lat + (nsteps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return lat + 2 * ((t.ranks // t.nodes - 1) * intra + int(math.log2(t.nodes)) * inter)
    if algo == "collnet_direct":
        local = t.ranks // t.nodes - 1
        return lat + 2 * (min(1, local) * intra + local * 0.4) + inter
    # nvls
    return intra + (inter if t.nodes > 1 else 0.0)


def time_us(t: TunerInputs, coll: str, algo: str, proto: str, nbytes: int) -> float:
    """ncclTopoGetAlgoTime for one operation: latency + bytes / bandwidth; inf where unusable."""
    bw = bandwidth(t, coll, algo, proto)
    if bw <= 0:
        return math.inf
    lat = latency_us(t, coll, algo, proto)
    log_size = int(math.log2(nbytes >> 6)) if nbytes >> 6 > 0 else -1
    if algo == "tree" and coll == "all_reduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[PROTOS.index(proto)][log_size]
    if (
        algo == "ring"
        and proto == "simple"
        and t.nodes > 1
        and coll == "all_reduce"
        and nbytes / (t.channels * t.ranks) >= 64
    ):
        lat *= 1.9 if GPUS.index(t.gpu) < GPUS.index("ampere") else 1.4  # the ring's plateau
    return lat + nbytes / (1000.0 * bw)


def choose(
    t: TunerInputs, coll: str, nbytes: int, algos: tuple[str, ...], protos: tuple[str, ...]
) -> tuple[str, str, float]:
    """(algo, proto, predicted us) of least predicted time, NCCL's order breaking ties."""
    best = ("", "", math.inf)
    for algo in ALGOS:
        if algo not in algos:
            continue
        for proto in PROTOS:
            if proto not in protos:
                continue
            time = time_us(t, coll, algo, proto, nbytes)
            if time < best[2]:
                best = (algo, proto, time)
    return best


def channel_cap_bps(t: TunerInputs, algo: str, proto: str) -> float:
    """The most one channel of (algo, proto) moves, in link bits/s, by NCCL's tables: LL's
    llMaxBw shared by the channels, LL128's and the tree's per-channel maxima; inf: no cap."""
    gpu = GPUS.index(t.gpu)
    i2 = _index2(t.nodes)
    ll_max = LL_MAX_BW[gpu if t.nodes == 1 else int(t.amd_cpu)][i2] / t.channels
    cap = math.inf
    if algo == "ring" and proto == "ll":
        cap = ll_max
    if algo == "ring" and proto == "ll128":
        cap = PER_CH_MAX_RING_LL128_BW[gpu][i2]
    if algo == "tree":
        cap = PER_CH_MAX_TREE_BW[gpu][i2]
        if proto == "ll":
            cap = min(cap, ll_max)
        if proto == "ll128":
            cap = min(cap, PER_CH_MAX_TREE_LL128_BW[gpu][i2])
    return cap * 8e9


def nodes_of(network: NetworkSpec) -> tuple[int, int]:
    """(nodes, ranks per node) as NCCL would see them: a fabric's GPUs per node, else the ranks
    that share a host endpoint, else one rank a node."""
    per_node = network.gpus_per_node
    if per_node <= 0:
        per_node = network.host.ranks_per_host if network.host is not None else 1
    return max(1, network.workers // per_node), per_node


def tuner_inputs(network: NetworkSpec) -> TunerInputs:
    """The tuner's inputs from a network: its nodes and channels, and the bandwidth one channel
    has as NCCL's ring graph would find it (docs/engine.md "NCCL's tuner")."""
    nccl = network.nccl
    assert nccl is not None
    nodes, per_node = nodes_of(network)
    channels = nccl.channels
    fabric = network.gpus_per_node > 1
    intra_link = network.nvlink or network.host_link
    intra = intra_link.payload_bps if fabric else network.host_link.payload_bps
    if network.host is not None and math.isfinite(network.host.rate_bps):
        intra = min(intra, network.host.rate_bps / network.host.ranks_per_host)
    inter = network.host_link.payload_bps * (min(per_node, channels) if fabric else 1)
    inter = intra if nodes == 1 else min(inter, intra)
    intra_ch = (intra if nodes == 1 else inter) / 8e9 / channels
    # ncclTopoCompute's pass 2 raises a tree graph's bwIntra up to twice its bwInter where
    # NVLink allows ("increase bwIntra for trees (2 nodes or collnet)", search.cc)
    tree_ch = min(2 * inter, intra) / 8e9 / channels
    return TunerInputs(
        ranks=network.workers,
        nodes=nodes,
        channels=channels,
        bw_intra=intra_ch,
        bw_inter=inter / 8e9 / channels,
        tree_bw_intra=tree_ch,
        gpu=nccl.gpu,
        nvlink=fabric,
        nvls=network.switch.aggregator and nodes == 1,
        # a fabric's summing switch is its NVSwitch (NVLS): across nodes NCCL runs that only with
        # CollNet enabled (NVLS trees, not modelled); elsewhere a summing switch is CollNet's
        collnet=network.switch.aggregator and nodes > 1 and not fabric,
        amd_cpu=nccl.cpu == "amd",
    )
