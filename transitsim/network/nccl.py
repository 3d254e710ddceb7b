"""The NCCL mode (NetworkSpec.nccl): NCCL's protocols (LL, LL128, Simple) and channels on top of
the engine, DES and fast paths alike.

NCCL moves a collective over C channels, parallel rings (or trees) over the same links, each
given an equal share of the buffer, with one protocol for the whole call. Which algorithm and
protocol: what NCCL's own tuner predicts fastest (network/nccl_tuner.py, its cost model and
constants from tuning.cc); `tuner: engine` takes the engine's least time instead (calibrated
networks, whose protocols are fitted). The choice is timed as one channel of protocol p sees the
network:

- every link's payload rate x p's efficiency, shared by the channels crossing it, and at most
  p's channel rate (and NCCL's per-channel cap with its tuner); on a multi-GPU node each
  channel leaves through its own rail's NIC, so a NIC is shared by n / G channels, not n;
- every link's latency + p's latency (the NVLink figure on NVLink links): a message pays it per
  link crossed; p's base latency once per call;
- the host endpoints', pluggables' and summing switch's rates shared by the channels (/ n); a
  switch sum is timed whole (its aggregation buffer is the switch's);
- its share of the buffer, ceil(payload / n) bytes (the largest share: the last to finish);
- n = C channels, fewer for a small buffer: NCCL drops channels until each carries at least
  p's channel_bytes (its threads x per-thread threshold), so n = clamp(payload // channel_bytes,
  1, C).

The channels are identical, so one is timed and its finish times are the collective's; the
bytes a worker sends are n channels' worth. The choice is made once per (network, exchange):
NCCL's tuner knows nothing of stragglers or faults; the exchange is then timed with the chosen
protocol on the caller's start times, faults and method. Exchanges through a transform are not
NCCL's and run as without the mode.

Where a measured table shows where NCCL switched, `thresholds` say so: "auto" then takes the
protocol of the payload's size range (below the first threshold the first allowed protocol, and
so on), the rule NCCL_LL_THRESHOLD and NCCL_LL128_THRESHOLD once set; the calibration fits them
(calibrate/nccl_fit.py).
"""

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from transitsim.base.errors import TransitsimError
from transitsim.network.exchange_spec import Exchange
from transitsim.network.fabrics.nodes import FABRIC_TOPOLOGIES
from transitsim.network.nccl_tuner import ALGOS as TUNER_ALGOS
from transitsim.network.nccl_tuner import (
    GPUS,
    channel_cap_bps,
    latency_us,
    nodes_of,
    time_us,
    tuner_inputs,
)
from transitsim.network.spec import (
    NCCL_PROTOCOLS,
    LinkSpec,
    NcclSpec,
    NetworkSpec,
    PluggableSpec,
    ProtocolSpec,
)

PROTOCOL_CHOICES = (*NCCL_PROTOCOLS, "auto")
ALGORITHM_CHOICES = (None, "auto")
# the all-reduces NCCL's algorithm choice picks among (NVLS: the switch sum where it sums)
ALL_REDUCE_ALGOS = ("ring_allreduce", "double_binary_tree", "tree", "switch_sum")
MAX_CHANNELS = 64  # NCCL's MAXCHANNELS


@dataclass(frozen=True)
class NcclChoice:
    """What the NCCL mode runs for one exchange: the algorithm, the protocol, the channels, and
    the network and exchange one channel sees (timed with the engine as it is)."""

    algo: str
    protocol: str
    channels: int
    split: int  # the parts the payload is timed in: the channels, one for a switch sum
    network: NetworkSpec
    exchange: Exchange
    time_s: float  # all workers starting together, no faults (base latency in)
    base_s: float  # the protocol's base latency, once per call, on top of the channel's time


def check_nccl(nccl: NcclSpec, name: str = "network") -> None:
    """One-line TransitsimError for an NCCL block the mode cannot run."""
    if not isinstance(nccl, NcclSpec):
        raise TransitsimError(f"{name}: nccl must be an NcclSpec, got {type(nccl).__name__}")
    if nccl.protocol not in PROTOCOL_CHOICES:
        raise TransitsimError(
            f"{name}: nccl.protocol must be one of {', '.join(PROTOCOL_CHOICES)}, "
            f"got {nccl.protocol!r}"
        )
    if nccl.tuner not in ("nccl", "engine"):
        raise TransitsimError(f"{name}: nccl.tuner must be nccl or engine, got {nccl.tuner!r}")
    if nccl.gpu not in GPUS:
        raise TransitsimError(f"{name}: nccl.gpu must be one of {', '.join(GPUS)}")
    if nccl.cpu not in ("intel", "amd"):
        raise TransitsimError(f"{name}: nccl.cpu must be intel or amd, got {nccl.cpu!r}")
    if nccl.algorithm not in ALGORITHM_CHOICES:
        raise TransitsimError(f"{name}: nccl.algorithm must be auto or absent")
    channels = nccl.channels
    whole = isinstance(channels, int) and not isinstance(channels, bool)
    if not whole or not 1 <= channels <= MAX_CHANNELS:
        raise TransitsimError(f"{name}: nccl.channels must be 1..{MAX_CHANNELS}, got {channels!r}")
    if not nccl.protocols or any(p not in NCCL_PROTOCOLS for p in nccl.protocols):
        raise TransitsimError(
            f"{name}: nccl.protocols must name some of {', '.join(NCCL_PROTOCOLS)}"
        )
    if nccl.protocol != "auto" and nccl.protocol not in nccl.protocols:
        raise TransitsimError(
            f"{name}: nccl.protocol {nccl.protocol} is not among nccl.protocols "
            f"({', '.join(nccl.protocols)}): name it there too, or set protocol auto"
        )
    _check_thresholds(nccl, name)
    for protocol in NCCL_PROTOCOLS:
        spec = nccl.spec(protocol)
        where = f"{name}: nccl.{protocol}"
        if not 0 < spec.efficiency <= 1:
            raise TransitsimError(f"{where}.efficiency must lie in (0, 1], got {spec.efficiency}")
        for key in ("latency_s", "nvlink_latency_s", "base_latency_s"):
            value = getattr(spec, key)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise TransitsimError(f"{where}.{key[:-2]} must be >= 0, got {value}")
        if not spec.channel_rate_bps > 0:
            raise TransitsimError(f"{where}.channel_rate must be > 0")
        if isinstance(spec.channel_bytes, bool) or not (
            isinstance(spec.channel_bytes, int) and spec.channel_bytes >= 0
        ):
            raise TransitsimError(f"{where}.channel_bytes must be an integer >= 0")


def _check_thresholds(nccl: NcclSpec, name: str) -> None:
    """Thresholds, where given: one fewer than the protocols, positive, increasing, with auto."""
    thresholds = tuple(nccl.thresholds)
    if not thresholds:
        return
    allowed = len(set(nccl.protocols))
    if nccl.protocol != "auto":
        raise TransitsimError(f"{name}: nccl.thresholds choose among protocols: give protocol auto")
    if len(thresholds) != allowed - 1:
        raise TransitsimError(
            f"{name}: nccl.thresholds must hold one size fewer than nccl.protocols ({allowed}), "
            f"got {len(thresholds)}"
        )
    finite = all(isinstance(t, int | float) and math.isfinite(t) and t > 0 for t in thresholds)
    if not finite or any(b <= a for a, b in zip(thresholds, thresholds[1:], strict=False)):
        raise TransitsimError(f"{name}: nccl.thresholds must be positive and increasing")


def by_size(nccl: NcclSpec, payload_bytes: float) -> str:
    """The protocol the thresholds give a payload: the first allowed one (in NCCL's order)
    below whose threshold it lies, else the last."""
    ordered = [p for p in NCCL_PROTOCOLS if p in nccl.protocols]
    for protocol, threshold in zip(ordered, nccl.thresholds, strict=False):
        if payload_bytes < threshold:
            return protocol
    return ordered[-1]


def channels_for(spec: ProtocolSpec, channels: int, payload_bytes: int) -> int:
    """The channels NCCL runs for this buffer: all C, fewer while each would carry less than
    channel_bytes (never fewer than one)."""
    if spec.channel_bytes <= 0:
        return channels
    return max(1, min(channels, payload_bytes // spec.channel_bytes))


def _link(
    link: LinkSpec | None, spec: ProtocolSpec, share: float, latency_s: float | None = None
) -> LinkSpec | None:
    """The link as one of `share` channels of this protocol sees it (latency_s: what the
    protocol adds on this link; its network latency by default)."""
    if link is None:
        return None
    payload = min(link.payload_bps * spec.efficiency / share, spec.channel_rate_bps)
    latency = link.latency_s + (spec.latency_s if latency_s is None else latency_s)
    if not math.isfinite(link.rate_bps):  # an unlimited wire: only the cap can bind
        if not math.isfinite(payload):
            return dataclasses.replace(link, latency_s=latency)
        return dataclasses.replace(link, rate_bps=payload, efficiency=1.0, latency_s=latency)
    return dataclasses.replace(link, efficiency=payload / link.rate_bps, latency_s=latency)


def nic_share(network: NetworkSpec, share: int) -> float:
    """How many of `share` channels one NIC carries: on a multi-GPU node (a fabric, a NIC per
    GPU) each channel's ring leaves the node through its own rail's NIC, as NCCL maps channels
    to NICs, so n channels over G NICs put n / G on each (at least one); elsewhere every channel
    crosses every link."""
    if network.topology in FABRIC_TOPOLOGIES and network.gpus_per_node > 1:
        return max(1.0, share / network.gpus_per_node)
    return float(share)


def channel_network(
    network: NetworkSpec, protocol: str, share: int, cap_bps: float = math.inf
) -> NetworkSpec:
    """The network one of `share` channels of `protocol` sees (the module doc); NCCL mode off.
    cap_bps: a further cap on one channel's rate (NCCL's tables, with its tuner)."""
    assert network.nccl is not None
    spec = network.nccl.spec(protocol)
    spec = dataclasses.replace(spec, channel_rate_bps=min(spec.channel_rate_bps, cap_bps))
    host = network.host
    if host is not None and math.isfinite(host.rate_bps):
        host = dataclasses.replace(host, rate_bps=host.rate_bps / share)
    pluggable = network.pluggable
    if pluggable is not None:
        pluggable = PluggableSpec(
            pluggable.host_lane_bps / share, pluggable.line_bps / share, pluggable.transform
        )
    switch = network.switch
    if math.isfinite(switch.agg_rate_bps):
        switch = dataclasses.replace(switch, agg_rate_bps=switch.agg_rate_bps / share)
    nics = nic_share(network, share)
    nvlink = network.nvlink
    if nvlink is None and network.topology in FABRIC_TOPOLOGIES and network.gpus_per_node > 1:
        nvlink = network.host_link  # the fabric's NVLink cables are its host link's kind
    return dataclasses.replace(
        network,
        host_link=_link(network.host_link, spec, nics),
        spine_link=_link(network.spine_link, spec, nics),
        wan_link=_link(network.wan_link, spec, share),
        nvlink=_link(nvlink, spec, share, spec.nvlink_latency_s),
        link_overrides={k: _link(v, spec, share) for k, v in network.link_overrides.items()},
        host=host,
        pluggable=pluggable,
        switch=switch,
        nccl=None,
    )


def applies(network: NetworkSpec, exchange: Exchange) -> bool:
    """The mode runs: the network has it, and the exchange is one of NCCL's (no transform, and
    something to send)."""
    return (
        network.nccl is not None
        and exchange.transform_at is None
        and (exchange.payload_bytes > 0 or exchange.dense_bytes > 0)
    )


def candidates(network: NetworkSpec, exchange: Exchange) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs the mode weighs, in NCCL's order; with NCCL's tuner, those
    its model can time, fastest first (the first that the network runs is taken)."""
    nccl = network.nccl
    assert nccl is not None
    protocols = list(nccl.protocols) if nccl.protocol == "auto" else [nccl.protocol]
    protocols = [p for p in NCCL_PROTOCOLS if p in protocols]
    if nccl.protocol == "auto" and nccl.thresholds:
        protocols = [by_size(nccl, exchange.payload_bytes)]
    algos = [exchange.algo]
    if nccl.algorithm == "auto" and exchange.algo in ALL_REDUCE_ALGOS:
        algos = ["ring_allreduce", "double_binary_tree"]
        if network.switch.aggregator:
            algos.append("switch_sum")
    pairs = []
    for algo in algos:
        for protocol in protocols:
            if algo == "switch_sum" and exchange.algo != "switch_sum" and protocol != "simple":
                continue  # NVLS runs Simple only
            pairs.append((algo, protocol))
    pairs = pairs or [(algo, "simple") for algo in algos]
    if nccl.tuner == "nccl" and len(pairs) > 1:
        return by_tuner(network, exchange, pairs)
    return pairs


def tuner_algo(network: NetworkSpec, algo: str) -> str:
    """NCCL's name for a transitsim collective: the switch sum is NVLS on one node, CollNet
    (SHARP) across nodes; a hierarchical all-reduce is timed as NCCL's ring."""
    if algo in ("tree", "double_binary_tree"):
        return "tree"
    if algo == "switch_sum":
        return "nvls" if nodes_of(network)[0] == 1 else "collnet_direct"
    return "ring"


def tuner_bytes(exchange: Exchange, workers: int) -> int:
    """The bytes NCCL's tuner times: the buffer (an all-gather's whole output)."""
    if exchange.algo == "ring_allgather":
        return exchange.payload_bytes * workers
    return exchange.payload_bytes


def by_tuner(
    network: NetworkSpec, exchange: Exchange, pairs: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The pairs NCCL's tuner can time, least predicted time first (NCCL's order on a tie);
    all of them, in order, where it can time none."""
    inputs = tuner_inputs(network)
    coll = "all_gather" if exchange.algo == "ring_allgather" else "all_reduce"
    size = tuner_bytes(exchange, network.workers)
    timed = []
    for index, (algo, protocol) in enumerate(pairs):
        name = tuner_algo(network, algo)
        predicted = time_us(inputs, coll, name, protocol, size)
        if math.isfinite(predicted):
            order = (TUNER_ALGOS.index(name), NCCL_PROTOCOLS.index(protocol), index)
            timed.append((predicted, order, (algo, protocol)))
    return [pair for _, _, pair in sorted(timed)] or pairs


_CHOICES: dict[tuple, NcclChoice] = {}


def nccl_choice(
    network: NetworkSpec, exchange: Exchange, time_s_of: Callable[[NetworkSpec, Exchange], float]
) -> NcclChoice:
    """The (algorithm, protocol, channels) this exchange runs with; cached. With NCCL's tuner the
    first candidate the network runs; with tuner "engine" the one of least engine time.

    time_s_of times one candidate with the engine (exchange.py passes its own
    simulate_exchange: this module sits below the exchange and does not import it)."""
    key = (repr(network), exchange)
    if key in _CHOICES:
        return _CHOICES[key]
    assert network.nccl is not None
    check_nccl(network.nccl, network.name)
    best: NcclChoice | None = None
    refusal = None
    for algo, protocol in candidates(network, exchange):
        spec = network.nccl.spec(protocol)
        share = channels_for(spec, network.nccl.channels, exchange.payload_bytes)
        # the switch sum is timed whole: its aggregation buffer is the switch's, not a channel's
        split = 1 if algo == "switch_sum" else share
        cap, base = math.inf, spec.base_latency_s
        if network.nccl.tuner == "nccl":
            inputs = tuner_inputs(network)
            name = tuner_algo(network, algo)
            cap = channel_cap_bps(inputs, name, protocol)
            if algo == "switch_sum":  # NVLS / CollNet: NCCL's latency for it, whole
                base = latency_us(inputs, "all_reduce", name, protocol) * 1e-6
        one = channel_network(network, protocol, split, cap)
        part = dataclasses.replace(
            exchange, algo=algo, payload_bytes=math.ceil(exchange.payload_bytes / split)
        )
        try:
            time_s = time_s_of(one, part) + base
        except TransitsimError as exc:
            if algo == exchange.algo and network.nccl.tuner == "engine":
                raise
            refusal = exc  # an algorithm this network cannot run: not a candidate
            continue
        choice = NcclChoice(algo, protocol, share, split, one, part, time_s, base)
        if network.nccl.tuner == "nccl":
            best = choice
            break
        if best is None or time_s < best.time_s:
            best = choice
    if best is None:
        raise refusal or TransitsimError("nccl: nothing to choose from")
    if len(_CHOICES) >= 256:
        _CHOICES.pop(next(iter(_CHOICES)))
    _CHOICES[key] = best
    return best
