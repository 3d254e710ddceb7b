"""Plain descriptions of a network, in SI units: the contract between scenarios, the simulator
and replay. Scenario YAML is parsed into these once (units handled there); the simulator only
ever sees numbers in bits/s, seconds and metres.
"""

from dataclasses import dataclass, field

from transitsim.network.background import Background

FIBRE_S_PER_M = 4.9e-9  # propagation delay in fibre, about 4.9 us per km

# TCP over IPv4 over Ethernet, per full segment (bytes): the MTU carries IP (20) and TCP (20)
# headers plus the timestamp option Linux sends by default (12); Ethernet adds its header (14)
# and, on a real wire, FCS (4), preamble (8) and inter-frame gap (12). A Linux qdisc (tc tbf)
# counts the frame without FCS/preamble/gap.
IP_TCP_HEADER_BYTES = 20 + 20 + 12
ETHERNET_HEADER_BYTES = 14
ETHERNET_WIRE_EXTRA_BYTES = 4 + 8 + 12

# A summing switch works on packets, not messages: without a slot size, the payload is summed in
# pieces of one 4 KiB packet (the InfiniBand/RoCE MTU that SHARP-style aggregation sums per
# packet; SwitchML and ATP use smaller ones), so results stream back while uploads continue.
AGG_PIECE_BYTES = 4096

COLLECTIVE_ALGOS = (
    "ring_allreduce",
    "ring_allgather",
    "hierarchical",
    "switch_sum",
    "tree",
    "double_binary_tree",
)
TOPOLOGIES = ("switch", "leaf_spine", "datacentres", "rail_optimised", "fat_tree")
NCCL_PROTOCOLS = ("ll", "ll128", "simple")  # NCCL's three, in the order its tuner tries them


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a cable (full duplex = two of these)."""

    rate_bps: float
    latency_s: float = 0.0  # fixed latency on top of propagation
    length_m: float = 0.0  # propagation = length_m * FIBRE_S_PER_M
    overhead_s: float = 0.0  # per-message overhead (headers, protocol turn-around)
    efficiency: float = 1.0  # payload share of rate_bps once framing/protocol headers are paid
    # other traffic on the link: the share of its payload capacity it holds, over time
    # (network/background.py); None = the link is the training's alone
    background: Background | None = None

    @property
    def propagation_s(self) -> float:
        return self.latency_s + self.length_m * FIBRE_S_PER_M

    @property
    def payload_bps(self) -> float:
        """Payload bits per second the link carries: the line rate less framing and headers."""
        return self.rate_bps * self.efficiency

    @property
    def available_bps(self) -> float:
        """Payload bits per second left to the training flows: the payload rate less the
        background's share (a varying one at its first row; the DES applies its changes)."""
        if self.background is None:
            return self.payload_bps
        return self.payload_bps * (1.0 - self.background.shares[0])


def tcp_efficiency(mtu: int = 1500, *, wire_extra_bytes: int = 0, ack_bytes: float = 0.0) -> float:
    """Payload share of the line for bulk TCP/IPv4 over Ethernet at this MTU.

    One full segment carries mtu - 52 payload bytes in mtu + 14 (+ wire_extra_bytes: 24 on a
    real wire, 0 where a qdisc counts) bytes; ack_bytes is the reverse traffic one data segment
    costs on the same link direction (a ring carries the ACKs of its incoming flow): e.g. 33
    for one 66-byte ACK every second segment. At MTU 1500: 1448 / 1514 = 0.956 (qdisc), 1448 /
    1538 = 0.941 (wire).
    """
    payload = mtu - IP_TCP_HEADER_BYTES
    if payload <= 0:
        raise ValueError(f"mtu {mtu} leaves no room for TCP/IP headers")
    return payload / (mtu + ETHERNET_HEADER_BYTES + wire_extra_bytes + ack_bytes)


@dataclass(frozen=True)
class TransformSpec:
    """An optical transform: one pass per bit plane over power-of-2 chunks of `size` inputs."""

    size: int = 256
    planes: int = 8
    passes_per_s: float = 1e9  # chunk-vector passes per second (one pass = one plane of one chunk)
    latency_s: float = 0.0
    keep: float = 1 / 16  # fraction of each chunk's outputs read out and sent
    input_bytes: int = 2  # bytes per dense input element (BF16): chunks = dense / (size * this)


@dataclass(frozen=True)
class PluggableSpec:
    """The module at a host port: host-side lanes, the optical line, maybe a transform."""

    host_lane_bps: float
    line_bps: float
    transform: TransformSpec | None = None


@dataclass(frozen=True)
class SwitchSpec:
    """Forwarding, and optionally in-network aggregation (sum of reducible messages)."""

    forwarding_latency_s: float = 0.0
    store_and_forward: bool = False  # hold each packet before forwarding (cut-through: no)
    mtu_bytes: int = 4096  # packet a store-and-forward switch holds (RoCE/InfiniBand MTU)
    aggregator: bool = False
    agg_slots: int = 0  # 0 = unbounded; else number of in-flight aggregation slots
    agg_slot_bytes: int = 0  # bytes one slot holds (pipelining granularity); 0 = AGG_PIECE_BYTES
    agg_rate_bps: float = float("inf")  # summing rate of the aggregator
    transform: TransformSpec | None = None  # transform computed at the switch port (E' variant)

    @property
    def piece_bytes(self) -> int:
        """Bytes summed per piece: the slot size, else one packet (AGG_PIECE_BYTES)."""
        return self.agg_slot_bytes or AGG_PIECE_BYTES


@dataclass(frozen=True)
class HostSpec:
    """A host's endpoint, in series with its links (LogGP's o and G): what moving a message costs
    the machine itself, not the wire. A gloo/TCP rank is bound by its CPU and kernel, a GPU by
    its channels and copy engines; several ranks on one machine share that endpoint.

    Ranks are placed on hosts in order: ranks [i * ranks_per_host, (i + 1) * ranks_per_host)
    share host i's endpoint (its rate, each direction, shared max-min by their flows), while
    each rank keeps its own link. Placement is by rank whatever the topology (one machine may
    hold ranks of two datacentres, as the testbed's does); ranks_per_host must divide workers.

    - rate_bps: payload bits/s the endpoint moves in each direction: one shared Resource for
      everything its ranks send, one for everything they receive (network/fabric.py), crossed by
      every message besides its links, shared max-min like the links and lanes (des/fluid.py).
      A message carries what the host hands over (the dense delta where a transform is made
      downstream). inf: no Resource at all.
    - per_message_s: a fixed cost every message a rank sends pays before its first bit, once
      per message whatever the route (beside LinkSpec.overhead_s); none for what a summing
      switch sends back.
    - Two ranks of one host talk over their own links as before, crossing the host's send and
      receive sides (no loopback path skips the wire).

    NetworkSpec.host None (or a HostSpec of defaults) models no endpoint: bit for bit the
    links alone. The fast paths take it where they stay exact (docs/engine.md "Host
    endpoints"); elsewhere simulate_exchange runs the DES.
    """

    per_message_s: float = 0.0  # fixed cost of every message a rank on this host sends
    rate_bps: float = float("inf")  # payload bits/s the endpoint moves, each direction, shared
    ranks_per_host: int = 1  # consecutive ranks that share one endpoint


@dataclass(frozen=True)
class ProtocolSpec:
    """One NCCL protocol as the NCCL mode charges it (network/nccl.py; defaults in NCCL_DEFAULTS,
    sources in docs/engine.md "NCCL mode").

    - efficiency: the payload share of what the wire carries (LL: 4 data bytes in each 8-byte
      line, the rest its flag; LL128: 120 in 128; Simple: all of it). Every link's payload rate
      is multiplied by it.
    - latency_s: added to every link's latency while this protocol runs: a message pays it once
      per link it crosses (two on one switch), as NCCL's tuner charges a per-hop latency.
    - channel_rate_bps: the most payload one channel moves per second (NCCL's per-channel caps:
      LL's and LL128's throughput is bounded by the GPU threads that write and poll the flags,
      not by the wire); inf: no cap.
    - channel_bytes: the fewest bytes NCCL gives one channel: below channels x this, fewer
      channels run (NCCL lowers the channel count until each thread has enough work), so a
      small message does not get every channel's rate; 0: every channel always.
    - nvlink_latency_s: what latency_s is on a node's NVLink links (NetworkSpec.nvlink): NCCL
      charges a step inside a node far less than one across the network.
    - base_latency_s: charged once per collective (NCCL's baseLat: launch and set-up), added to
      every worker's finish.
    """

    efficiency: float = 1.0
    latency_s: float = 0.0
    channel_rate_bps: float = float("inf")
    channel_bytes: int = 0
    nvlink_latency_s: float = 0.0
    base_latency_s: float = 0.0


# NCCL's defaults (src/graph/tuning.cc and src/include/device.h of NVIDIA/nccl 2.30.7, commit
# 5067397; docs/engine.md "NCCL mode"): wire efficiency 8/4 for LL, 128/120 for LL128; the ring's
# per-step latency over the network (hwLatencies NET ring 2.7, 4.0, 14.0 us) and over NVLink
# (NVLINK ring 0.6, 1.9, 3.4 us), each split over the two links a step crosses; the ring's
# baseLatencies (6.6, 14.0, 8.4 us) once per call; no channel cap of its own (with NCCL's tuner
# the caps are its tables', network/nccl_tuner.py channel_cap_bps); the threads x per-thread
# threshold below which a channel is dropped (512 x 8, 640 x 8, 512 x 64 bytes).
NCCL_DEFAULTS = {
    "ll": ProtocolSpec(0.5, 1.35e-6, float("inf"), 512 * 8, 0.3e-6, 6.6e-6),
    "ll128": ProtocolSpec(120 / 128, 2.0e-6, float("inf"), 640 * 8, 0.95e-6, 14.0e-6),
    "simple": ProtocolSpec(1.0, 7.0e-6, float("inf"), 512 * 64, 1.7e-6, 8.4e-6),
}
TUNERS = ("nccl", "engine")  # NCCL's cost model (network/nccl_tuner.py), or the engine's times
GPU_GENERATIONS = ("volta", "ampere", "hopper", "blackwell")


@dataclass(frozen=True)
class NcclSpec:
    """The NCCL mode (network/nccl.py): each exchange runs on `channels` parallel rings (or
    trees) with one of NCCL's protocols, each protocol's efficiency and latency applied to the
    links. protocol "auto" takes the allowed protocol NCCL's own tuner predicts fastest
    (network/nccl_tuner.py; tuner "engine": the engine's least time instead); algorithm "auto"
    also picks ring, double binary tree or (where the switch sums: NVLS, CollNet) the switch sum
    for an all-reduce. `thresholds` (one fewer than `protocols`, increasing) make "auto" choose
    the protocol by size instead, as NCCL did where a measured table shows it: the first protocol
    below thresholds[0] payload bytes, the next below thresholds[1], the last above
    (NCCL_LL_THRESHOLD's and NCCL_LL128_THRESHOLD's rule); empty: by the tuner."""

    protocol: str = "auto"  # one of NCCL_PROTOCOLS, or "auto"
    channels: int = 1
    algorithm: str | None = None  # None: the exchange's own; "auto": the fastest all-reduce
    protocols: tuple[str, ...] = NCCL_PROTOCOLS  # those "auto" may choose (NCCL_PROTO)
    thresholds: tuple[float, ...] = ()  # payload bytes where "auto" switches protocol (by size)
    tuner: str = "nccl"  # who chooses for "auto": NCCL's cost model, or "engine" (least time)
    gpu: str = "hopper"  # the GPU generation NCCL's tuner reads its per-channel caps for
    cpu: str = "intel"  # the hosts' CPU vendor (intel, amd): NCCL's LL cap across nodes reads it
    ll: ProtocolSpec = NCCL_DEFAULTS["ll"]
    ll128: ProtocolSpec = NCCL_DEFAULTS["ll128"]
    simple: ProtocolSpec = NCCL_DEFAULTS["simple"]

    def spec(self, protocol: str) -> ProtocolSpec:
        return {"ll": self.ll, "ll128": self.ll128, "simple": self.simple}[protocol]


@dataclass(frozen=True)
class NetworkSpec:
    """A whole network: `workers` hosts in one of TOPOLOGIES."""

    name: str
    topology: str
    workers: int
    host_link: LinkSpec
    pluggable: PluggableSpec | None = None
    switch: SwitchSpec = field(default_factory=SwitchSpec)
    hosts_per_rack: int = 0  # leaf_spine: hosts under each leaf switch
    spine_link: LinkSpec | None = None  # leaf_spine: leaf <-> spine
    datacentres: int = 1  # datacentres: hosts split evenly across them
    wan_link: LinkSpec | None = None  # datacentres: one direction of each WAN link
    wan_links: int = 1  # parallel WAN links between each pair of datacentres
    collective: str | None = None  # force one of COLLECTIVE_ALGOS for every variant
    link_overrides: dict[str, LinkSpec] = field(default_factory=dict)  # edge name -> LinkSpec
    # cluster fabrics (network/fabrics): GPUs per node on an NVLink switch, one NIC per GPU
    gpus_per_node: int = 0  # rail_optimised, fat_tree (0 elsewhere: hosts are single GPUs)
    nvlink: LinkSpec | None = None  # each GPU's link to its node's NVLink switch, each way
    racks_per_pod: int = 0  # fat_tree: leaves per aggregation switch (0: one pod)
    oversubscription: float = 1.0  # fat_tree: capacity below a tier over the capacity above
    host: HostSpec | None = None  # the endpoints (None: free, as the links alone are modelled)
    nccl: NcclSpec | None = None  # NCCL's protocols and channels (None: off, the links alone)
