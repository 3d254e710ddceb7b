"""One collective exchange on a network: the public entry point of the network floor.

`simulate_exchange` builds the network's stages, turns the exchange into a schedule of
messages, and times it either message by message in SimPy ("des", the reference) or, where that
is exact, by a recurrence ("fast": per phase for rings, per piece for a sum at one switch, an
event pass sharing each rank's links between the trees' two halves; link faults hold up the
transfers that cross a link while it is down).
"auto" takes the fast path where it is exact and the DES elsewhere.

Background traffic (network/background.py): a constant share is a lower link capacity, which
every path (DES, fast, linear forms) carries exactly. A share that changes in time is timed on
the network frozen at the exchange's start (fast paths allowed) and kept only if no share changes
before the exchange ends; otherwise the fast paths defer to the DES, which applies each change.
Greedy background flows (a share that depends on how many training flows cross a link) are
carried by the DES alone: every method but "fast" takes it.

Host endpoints (`NetworkSpec.host`): one rank a host, each fast path takes them as it takes a
pluggable's lanes (the rank's own Resources in series with its links), exactly. Ranks sharing a
host share its two Resources: the ring and the switch sum stay fast where every phase (piece)
runs in step (`fast/shared/in_step.py`); the hierarchical exchange and, where a host side carries
several senders' transfers to several receivers, the trees run on the DES, as does any ring or
sum whose phases do not start together (stragglers, faults); the max-plus forms are None there.

Transforms (`transform_at`): "pluggable" turns each worker's dense delta into band values in
its own pluggable: inline on the way out for ring_allgather (first hop only; forwarded chunks are
not transformed) and switch_sum; as a pre-stage (dense out through the transform, band back to
the host) for ring_allreduce, hierarchical and the trees, whose hosts must add their own band to
partial sums. "switch" (switch_sum only) sends the dense delta on the uplink and transforms at
the switch port. `loopback`: with a switch transform, each worker also gets its own transformed
band back (twice the bytes down); with a pluggable transform, the band is copied back to the host
over its inbound lanes as it is made; without a transform it changes nothing (the sender already
has its payload).
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network.des.engine import Timing, assign_paths, run_des, unshared_timing
from transitsim.network.exchange_spec import Exchange, validate_exchange
from transitsim.network.fabric import PLAIN, XFORM_PLUGGABLE, XFORM_SWITCH, Fabric, Path, Weights
from transitsim.network.fabrics.nodes import tree_nodes
from transitsim.network.failover import with_failover
from transitsim.network.fast import NotExact
from transitsim.network.fast.hierarchical import lean as hier_lean
from transitsim.network.fast.hierarchical.stages import MessageTable, run_fast_hier
from transitsim.network.fast.ring.lean import LeanDag, LeanRing, LeanTiming
from transitsim.network.fast.ring.recurrence import (
    disjoint_reason,
    ring_finish,
    ring_line_bytes,
    ring_paths,
    run_fast_ring,
)
from transitsim.network.fast.shared.in_step import host_shares, switch_shares
from transitsim.network.fast.switch_sum.recurrence import (
    SwitchPlan,
    run_fast_switch,
    switch_finish,
    switch_line_bytes,
    switch_paths,
    switch_reason,
)
from transitsim.network.fast.trees.fixed import run_fast_tree
from transitsim.network.fast.trees.plan import planned_spacing
from transitsim.network.fast.trees.split import run_split_tree, tree_parts
from transitsim.network.faults import LinkFault, resolve_faults
from transitsim.network.limits import MAX_MESSAGES
from transitsim.network.nccl import applies as nccl_applies
from transitsim.network.nccl import nccl_choice
from transitsim.network.outcome import (
    critical_path,
    finish_times,
    line_bytes,
    link_stats,
    utilisation_frame,
    wan_share,
)
from transitsim.network.schedules.dag import (
    Schedule,
    hierarchical,
    hierarchical_layout,
    piece_sizes,
    ring_allgather,
    ring_allreduce,
    ring_plan,
    switch_sum,
)
from transitsim.network.schedules.trees import TREE_ALGOS, tree_layout
from transitsim.network.spec import NetworkSpec
from transitsim.network.stages import padded_dense_bytes
from transitsim.network.topology import worker_groups
from transitsim.network.varying import frozen_network, next_change_s

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("auto", "des", "fast")


@dataclass
class ExchangeResult:
    finish_s: np.ndarray  # per worker: when it holds the result (absolute, clock of start_s)
    time_s: float  # max(finish_s) - min(start_s)
    transform_s: float  # critical path: ingest (host lanes) and transform time
    wire_s: float  # critical path: link serialisation, propagation, overheads, forwarding
    wait_s: float  # critical path: stragglers, contention, faults (time_s - the two above)
    bytes_sent: np.ndarray  # per worker, on the line
    bytes_received: np.ndarray  # per worker, on the line
    events: int  # SimPy events processed
    method: str = "des"  # the one used: "des" or "fast"
    bottleneck: str = "none"  # what most of the critical path was spent on
    # NCCL mode (network/nccl.py): the protocol, channels and algorithm chosen (None: mode off)
    protocol: str | None = None
    channels: int = 1
    algo: str | None = None
    # of the bytes sent, the share that crossed a WAN link between datacentres (outcome.wan_share)
    wan_share: float = 0.0
    # makes (link_stats, utilisation) on first use: pandas is imported only by who reads them
    frames: Callable[[], tuple] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def link_stats(self) -> "pd.DataFrame":
        """Per resource: link, kind, rate_bps, busy_s, bytes, utilisation."""
        return self._frames[0]

    @functools.cached_property
    def utilisation(self) -> "pd.DataFrame | None":
        """link, t0_s, t1_s, utilisation over time (when recorded), else None."""
        return self._frames[1]

    @functools.cached_property
    def _frames(self) -> tuple:
        assert self.frames is not None
        return self.frames()


_FABRICS: dict[str, Fabric] = {}


def fabric_for(network: NetworkSpec, excluded: frozenset[str] = frozenset()) -> Fabric:
    """The built network, cached by its (frozen, deterministic) description; `excluded`: parallel
    links left out of every stripe (down for the whole exchange, network/failover.py)."""
    key = repr(network) + (repr(sorted(excluded)) if excluded else "")
    fabric = _FABRICS.get(key)
    if fabric is None:
        if len(_FABRICS) >= 8:
            _FABRICS.pop(next(iter(_FABRICS)))
        fabric = _FABRICS[key] = Fabric(network, excluded)
    return fabric


def transform_weights(network: NetworkSpec, exchange: Exchange) -> Weights:
    if exchange.transform_at is None:
        return Weights()
    spec = network.pluggable.transform if exchange.transform_at == "pluggable" else None
    spec = spec or network.switch.transform
    assert spec is not None
    payload = exchange.payload_bytes
    return Weights(
        dense=exchange.dense_bytes / payload,
        padded=padded_dense_bytes(spec, exchange.dense_bytes) / payload,
        loopback=exchange.loopback and exchange.transform_at == "pluggable",
    )


def build_schedule(fabric: Fabric, exchange: Exchange) -> Schedule:
    """The exchange as a DAG of messages on this fabric."""
    network = fabric.network
    workers = network.workers
    at = exchange.transform_at
    payload = exchange.payload_bytes
    if exchange.algo == "ring_allreduce":
        return ring_allreduce(workers, payload, at == "pluggable")
    if exchange.algo == "ring_allgather":
        return ring_allgather(workers, payload, at == "pluggable")
    if exchange.algo in TREE_ALGOS:
        pre = at == "pluggable"
        w = transform_weights(network, exchange)
        spacing = planned_spacing(fabric, exchange.algo, payload, pre, w)
        nodes = tree_nodes(network)
        return tree_layout(exchange.algo, workers, payload, pre, spacing, nodes)[0]
    if exchange.algo == "hierarchical":
        return hierarchical(equal_groups(network), payload, at == "pluggable")
    plan = switch_plan(fabric, exchange)
    return switch_sum(
        workers, plan.aggregator, plan.sizes, plan.kind, plan.slots, exchange.loopback
    )


def equal_groups(network: NetworkSpec) -> np.ndarray:
    """(groups, members) worker ids of the datacentres or racks; hierarchical needs them equal."""
    groups = worker_groups(network)
    sizes = sorted({len(g) for g in groups})
    if len(sizes) != 1:
        raise TransitsimError(
            f"hierarchical needs equal groups: network {network.name!r} splits "
            f"{network.workers} workers into groups of {sizes}"
        )
    return np.array(groups)


def switch_plan(fabric: Fabric, exchange: Exchange) -> SwitchPlan:
    kind = {None: PLAIN, "pluggable": XFORM_PLUGGABLE, "switch": XFORM_SWITCH}[
        exchange.transform_at
    ]
    spec = fabric.network.switch
    plan = SwitchPlan(
        workers=fabric.network.workers,
        aggregator=fabric.node_index[fabric.aggregation_switch()],
        sizes=_pieces(fabric.network, exchange, kind),
        kind=kind,
        slots=spec.agg_slots,
        down_factor=2.0 if (exchange.loopback and kind == XFORM_SWITCH) else 1.0,
    )
    if plan.count > MAX_MESSAGES:
        raise TransitsimError(
            f"a switch sum of {exchange.payload_bytes:,} bytes on {plan.workers:,} workers is "
            f"{plan.count:,} messages, more than the {MAX_MESSAGES:,} it is simulated for: "
            "fewer workers, or larger pieces (switch.agg_slot_bytes)"
        )
    return plan


def _pieces(network: NetworkSpec, exchange: Exchange, kind: int) -> tuple[float, ...]:
    """The switch sum's pieces; none for one worker with nothing to transform (nothing to sum)."""
    if network.workers == 1 and kind == PLAIN:
        return ()
    return piece_sizes(exchange.payload_bytes, network.switch.piece_bytes)


def _start_times(start_s: object, workers: int) -> np.ndarray:
    if start_s is None:
        return np.zeros(workers)
    start = np.asarray(start_s, dtype=float)
    if start.shape != (workers,):
        raise TransitsimError(
            f"start_s must hold one time per worker ({workers}), got {start.shape}"
        )
    if not np.all(np.isfinite(start)):
        raise TransitsimError("start_s must be finite")
    return start


def simulate_exchange(
    network: NetworkSpec,
    exchange: Exchange,
    *,
    start_s: np.ndarray | None = None,
    faults: list[LinkFault] | None = None,
    method: str = "auto",
    record_utilisation: bool = False,
    clock_s: float = 0.0,
) -> ExchangeResult:
    """Time one exchange: per-worker finish, breakdown, bytes and link figures.

    start_s: when each worker joins (stragglers); default all at 0. faults: links down for a
    while. method: "des" (per-transfer SimPy reference), "fast" (the collective's fast path; an
    error where it would not be exact), "auto" (fast where exact, else des).
    clock_s: the time on the replay clock at which start_s and the faults' times are 0; only a
    link background that changes in time reads it (network/background.py). There, "auto" and
    "fast" time the exchange on the network frozen at its start and keep that where no share
    changes before it ends; otherwise the DES applies each change at its time.
    """
    if method not in METHODS:
        raise TransitsimError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if (
        not isinstance(clock_s, int | float)
        or isinstance(clock_s, bool)
        or not math.isfinite(clock_s)
    ):
        raise TransitsimError(f"clock_s must be a finite number of seconds, got {clock_s!r}")
    if nccl_applies(network, exchange):
        return _nccl(network, exchange, start_s, faults, method, record_utilisation, clock_s)
    fabric = fabric_for(network)
    validate_exchange(network, exchange)
    start = _start_times(start_s, network.workers)
    resource_faults = resolve_faults(fabric, faults)
    if sends_nothing(exchange):
        return _nothing_sent(fabric, start)
    weights = transform_weights(network, exchange)
    if fabric.greedy:  # rates depend on how many training flows share each link: the DES
        if method == "fast":
            raise TransitsimError(
                "method 'fast' would not be exact here: a link carries greedy background "
                "flows; use 'des'"
            )
        return _des(fabric, exchange, weights, start, resource_faults, record_utilisation, clock_s)
    if fabric.backgrounds:
        begin_s = clock_s + float(start.min())
        if method != "des":
            steady = simulate_exchange(
                frozen_network(network, begin_s),
                exchange,
                start_s=start,
                faults=faults,
                method=method,
                record_utilisation=record_utilisation,
            )
            if clock_s + float(np.max(steady.finish_s)) <= next_change_s(network, begin_s):
                return steady
            if method == "fast":
                raise TransitsimError(
                    "method 'fast' would not be exact here: a link's background share changes "
                    "during the exchange; use 'des'"
                )
        return _des(fabric, exchange, weights, start, resource_faults, record_utilisation, clock_s)

    reason = "no fast path for this collective"
    if method != "des":
        fast = _fast_failover(fabric, exchange, weights, start, resource_faults, record_utilisation)
        if isinstance(fast, ExchangeResult):
            return fast
        reason = fast.reason
    if method == "fast":
        raise TransitsimError(f"method 'fast' would not be exact here: {reason}; use 'des'")
    return _des(fabric, exchange, weights, start, resource_faults, record_utilisation)


def _fast_failover(fabric, exchange, weights, start, faults, record) -> "ExchangeResult | NotExact":
    """The fast path with parallel links down for the whole exchange left out (failover.py)."""

    def same_plan(reduced: Fabric) -> bool:  # a tree's chunk spacing is planned all links up
        if exchange.algo not in TREE_ALGOS:
            return True
        plan = (exchange.algo, exchange.payload_bytes, exchange.transform_at == "pluggable")
        return planned_spacing(fabric, *plan, weights) == planned_spacing(reduced, *plan, weights)

    return with_failover(
        fabric,
        faults,
        float(start.min()),
        functools.partial(fabric_for, fabric.network),
        lambda f: _fast(f, exchange, weights, start, faults, record),
        same_plan,
    )


def _fast(fabric, exchange, weights, start, faults, record) -> "ExchangeResult | NotExact":
    """The collective's fast path, or why it would not be exact."""
    if exchange.algo in ("ring_allreduce", "ring_allgather"):
        return _fast_ring(fabric, exchange, weights, start, faults, record)
    if exchange.algo == "switch_sum":
        return _fast_switch(fabric, exchange, weights, start, faults, record)
    if exchange.algo == "hierarchical":
        return _fast_hier(fabric, exchange, weights, start, faults, record)
    if exchange.algo in TREE_ALGOS:
        return _fast_tree(fabric, exchange, weights, start, faults, record)
    return NotExact("no fast path for this collective")


def exchange_time_s(network: NetworkSpec, exchange: Exchange) -> float:
    """One exchange's time, every worker starting at 0 (the NCCL mode's candidates)."""
    return simulate_exchange(network, exchange).time_s


def _nccl(network, exchange, start_s, faults, method, record, clock_s) -> ExchangeResult:
    """The NCCL mode: one channel of the chosen protocol timed as any exchange; n channels'
    bytes (network/nccl.py)."""
    validate_exchange(network, exchange)
    choice = nccl_choice(network, exchange, exchange_time_s)
    result = simulate_exchange(
        choice.network,
        choice.exchange,
        start_s=start_s,
        faults=faults,
        method=method,
        record_utilisation=record,
        clock_s=clock_s,
    )
    base = choice.base_s  # NCCL's base latency: once per call, on every worker's finish
    return dataclasses.replace(
        result,
        finish_s=result.finish_s + base,
        time_s=result.time_s + base,
        wire_s=result.wire_s + base,
        bytes_sent=result.bytes_sent * choice.split,
        bytes_received=result.bytes_received * choice.split,
        protocol=choice.protocol,
        channels=choice.channels,
        algo=choice.algo,
    )


def _des(fabric, exchange, weights, start, faults, record, clock_s=0.0) -> ExchangeResult:
    """The exchange message by message in SimPy: the reference, exact for every input."""
    schedule = build_schedule(fabric, exchange)
    path_ids, compiled = assign_paths(fabric, schedule, weights)
    timing = run_des(fabric, schedule, path_ids, compiled, start, faults, record, clock_s)
    finish = finish_times(schedule, timing, start)
    sent, received = line_bytes(schedule, path_ids, compiled)

    def path_of(m: int) -> Path | None:
        return compiled[path_ids[m]] if path_ids[m] >= 0 else None

    return _result(fabric, schedule, path_of, timing, start, finish, sent, received, "des")


def sends_nothing(exchange: Exchange) -> bool:
    """An exchange of no bytes (a local-SGD inner step): no message is sent, as NCCL returns at
    once from a collective of count 0, so each worker holds its (unchanged) result at its start."""
    return exchange.payload_bytes == 0 and exchange.dense_bytes == 0


def _nothing_sent(fabric: Fabric, start: np.ndarray) -> ExchangeResult:
    """The result of an exchange that sends nothing: every worker done at its own start."""
    none = np.zeros(0)
    timing = unshared_timing(
        none, none, none, 0, np.zeros(len(fabric.resources)), np.zeros(len(fabric.resources))
    )
    time_s = float(start.max() - start.min())
    return ExchangeResult(
        finish_s=start.copy(),
        time_s=time_s,
        transform_s=0.0,
        wire_s=0.0,
        wait_s=time_s,
        bytes_sent=np.zeros(len(start)),
        bytes_received=np.zeros(len(start)),
        events=0,
        method="fast",
        bottleneck="wait" if time_s > 0 else "none",
        frames=functools.partial(_frames, fabric, timing, time_s),
    )


def _fast_ring(fabric, exchange, weights, start, faults, record) -> ExchangeResult | NotExact:
    """The ring by its per-phase recurrence, or why that would not be exact."""
    if faults and record:
        return NotExact("utilisation over time with link faults is recorded by the DES")
    transform = exchange.transform_at is not None
    plan = ring_plan(exchange.algo, fabric.network.workers, exchange.payload_bytes, transform)
    paths = ring_paths(fabric, plan, weights)
    reason = disjoint_reason(fabric, plan, paths)
    shares = None
    if reason is not None:
        host = fabric.network.host
        if host is None or host.ranks_per_host == 1 or faults or record:
            return reason
        shares = host_shares(fabric, paths.first, paths.later, plan.pre)  # ranks sharing hosts
        if isinstance(shares, NotExact):
            return shares
    timing = run_fast_ring(fabric, plan, paths, start, record, faults, shares)
    if isinstance(timing, NotExact):
        return timing
    sent, received = ring_line_bytes(plan, paths)
    path_of = functools.partial(paths.of, plan)
    if isinstance(timing, LeanRing):  # checkpoints, times recomputed for the walk back
        finish, dag = timing.times.finish_s(start), LeanDag(plan, timing.times)
        lean = LeanTiming(timing)
        return _result(fabric, dag, path_of, lean, start, finish, sent, received, "fast")
    finish = ring_finish(plan, timing, start)
    return _result(fabric, plan, path_of, timing, start, finish, sent, received, "fast")


_HIER: dict[tuple, tuple] = {}


def hier_dag(fabric: Fabric, exchange: Exchange, weights: Weights) -> tuple:
    """hierarchical's schedule, layout and compiled paths, built once per network and exchange."""
    key = (repr(fabric.network), fabric.excluded, exchange)
    built = _HIER.get(key)
    if built is None:
        if len(_HIER) >= 4:
            _HIER.pop(next(iter(_HIER)))
        groups = equal_groups(fabric.network)
        schedule, layout = hierarchical_layout(
            groups, exchange.payload_bytes, exchange.transform_at == "pluggable"
        )
        path_ids, compiled = assign_paths(fabric, schedule, weights)
        table = MessageTable(schedule, path_ids, compiled)
        built = _HIER[key] = (schedule, layout, path_ids, compiled, table)
    return built


def _fast_hier(fabric, exchange, weights, start, faults, record) -> ExchangeResult | NotExact:
    """hierarchical by its stage recurrences and a shared exchange, or why not exact."""
    if record:
        return NotExact("utilisation over time is recorded by the DES")
    groups = equal_groups(fabric.network)
    if hier_lean.is_lean(groups.shape, exchange.transform_at == "pluggable"):
        if exchange.transform_at == "pluggable":
            return NotExact("a pre-stage transform on hierarchical past its lean size")
        key = (repr(fabric.network), fabric.excluded, exchange)
        parts = hier_lean.cached_parts(key, fabric, groups, exchange.payload_bytes, weights)
        lean = hier_lean.time_lean(fabric, parts, start, faults)
        return lean if isinstance(lean, NotExact) else _result(fabric, *lean, "fast")
    schedule, layout, path_ids, compiled, table = hier_dag(fabric, exchange, weights)
    timing = run_fast_hier(fabric, schedule, layout, path_ids, compiled, start, table, faults)
    if not isinstance(timing, Timing):
        return timing
    finish = finish_times(schedule, timing, start)
    sent, received = line_bytes(schedule, path_ids, compiled)

    def path_of(m: int) -> Path | None:
        return compiled[path_ids[m]] if path_ids[m] >= 0 else None

    return _result(fabric, schedule, path_of, timing, start, finish, sent, received, "fast")


_TREES: dict[tuple, tuple] = {}


def tree_dag(fabric: Fabric, exchange: Exchange, weights: Weights) -> tuple:
    """A tree all-reduce's schedule, compiled paths, time table and its link groups (or why
    sharing them per link would not be exact: then the DES), built once per network and
    exchange."""
    key = (repr(fabric.network), fabric.excluded, exchange)
    built = _TREES.get(key)
    if built is None:
        if len(_TREES) >= 4:
            _TREES.pop(next(iter(_TREES)))
        plan = (exchange.algo, exchange.payload_bytes, exchange.transform_at == "pluggable")
        spacing = planned_spacing(fabric, *plan, weights)
        built = _TREES[key] = tree_parts(fabric, *plan, weights, spacing)
    return built


def _fast_tree(fabric, exchange, weights, start, faults, record) -> ExchangeResult | NotExact:
    """A pipelined tree by fixed transfer times (no link carries both halves) or by its links
    shared per link (the halves overlap), or why neither would be exact."""
    if record:
        return NotExact("utilisation over time is recorded by the DES")
    schedule, path_ids, compiled, table, links = tree_dag(fabric, exchange, weights)
    if isinstance(links, NotExact):
        return links
    if not links.local and faults:
        return NotExact("links shared max-min across a WAN or spine, with link faults (the DES's)")
    if links.overlap:
        timing = run_split_tree(fabric, table, links, start, faults)
    else:
        timing = run_fast_tree(fabric, table, start, faults)
    finish = finish_times(schedule, timing, start)
    sent, received = line_bytes(schedule, path_ids, compiled, cache=True)

    def path_of(m: int) -> Path | None:
        return compiled[path_ids[m]] if path_ids[m] >= 0 else None

    return _result(fabric, schedule, path_of, timing, start, finish, sent, received, "fast")


def _fast_switch(fabric, exchange, weights, start, faults, record) -> ExchangeResult | NotExact:
    """The in-network all-reduce by its per-piece recurrence, or why that would not be exact."""
    if record:
        return NotExact("utilisation over time is recorded by the DES")
    plan = switch_plan(fabric, exchange)
    paths = switch_paths(fabric, plan, weights)
    reason = switch_reason(fabric, plan, paths)
    shares = None
    if reason is not None:
        host = fabric.network.host
        if host is None or host.ranks_per_host == 1 or faults:
            return reason
        shares = switch_shares(fabric, paths.ups, paths.downs, plan.workers)  # in step
        if isinstance(shares, NotExact):
            return shares
    timing = run_fast_switch(fabric, plan, paths, start, faults, shares)
    if not isinstance(timing, Timing):
        return timing
    finish = switch_finish(plan, timing, start)
    sent, received = switch_line_bytes(plan, paths)
    path_of = functools.partial(paths.of, plan)
    return _result(fabric, plan, path_of, timing, start, finish, sent, received, "fast")


def _result(fabric, dag, path_of, timing, start, finish, sent, received, method) -> ExchangeResult:
    time_s = float(finish.max() - start.min())
    breakdown = critical_path(fabric, dag, path_of, timing, start, finish)
    return ExchangeResult(
        finish_s=finish,
        time_s=time_s,
        transform_s=breakdown.transform_s,
        wire_s=breakdown.wire_s,
        wait_s=breakdown.wait_s,
        bytes_sent=sent,
        bytes_received=received,
        events=int(timing.events),
        method=method,
        bottleneck=breakdown.bottleneck,
        wan_share=wan_share(fabric, timing.bytes),
        frames=functools.partial(_frames, fabric, timing, time_s),
    )


def _frames(fabric: Fabric, timing: Timing, time_s: float) -> tuple:
    recorded = timing.samples is not None
    return link_stats(fabric, timing, time_s), utilisation_frame(
        fabric, timing
    ) if recorded else None
