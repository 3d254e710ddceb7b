"""The exact fast path for hierarchical all-reduce: two ring recurrences around a shared exchange.

Inside each group (datacentre or rack) the reduce-scatter and the all-gather are parallel rings
on links no other transfer uses at the same time (the stages meet at a rendezvous, see
`schedule.hierarchical_layout`), so each transfer takes a fixed time and the per-phase
recurrence of `fast_ring` holds, numpy across every ring at once. Across groups, the shards'
rings share the WAN (or the rack uplinks): there the transfers are timed by processor sharing,
event by event, with the same max-min shares the fluid DES computes (flows of one shared link
with equal caps each get min(cap, C / k), k the flows on it). Message for message this fills
the same ready / sent / arrived times as the DES, up to rounding.

Exactness is checked, not assumed: ring edges of a stage must use disjoint resources, the
flows of the exchange may share only links that carry nothing else (`exclusive_reason`: a host
endpoint holding ranks of several groups carries the other stages too), with equal caps on each,
and a pre-stage transform must not overlap chunks arriving on its host lanes (a posteriori).

Link faults: a transfer alone on its links waits out their down windows (`fault_delay`); a
shared link that goes down stops every flow on it until it is back, as the DES's capacity 0
does. A fault on a link that one exchange flow alone crosses beside a shared one would change
the max-min shares flow by flow: there the caller runs the DES.
"""

import heapq
import itertools
import math

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing
from transitsim.network.des.fluid import SETTLE_REL
from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.hierarchical.processor_sharing import ProcessorSharing, overlap_s
from transitsim.network.fast.shared.fault_delay import (
    Window,
    delayed,
    delayed_one,
    down_windows,
    route_windows,
)
from transitsim.network.fast.shared.not_exact import NotExact
from transitsim.network.schedules.dag import HierLayout, RingStage, Schedule


class MessageTable:
    """Per message, from its compiled path: pre, transfer time alone, post, resources."""

    def __init__(self, schedule: Schedule, path_ids: np.ndarray, paths: list[Path]):
        pre = np.array([p.hops[0].pre_s for p in paths] + [0.0])
        rate = np.array([p.hops[0].rate_bps for p in paths] + [math.inf])
        post = np.array([p.hops[0].post_s for p in paths] + [0.0])
        store = np.array([p.hops[0].store_s_per_bit for p in paths] + [0.0])
        packet = np.array([p.hops[0].packet_bits for p in paths] + [0.0])
        bits = schedule.nbytes * 8.0
        self.path_ids = path_ids
        self.paths = paths
        self.bits = bits
        self.pre = pre[path_ids]
        with np.errstate(divide="ignore", invalid="ignore"):
            self.dur = np.where(bits > 0, bits / rate[path_ids], 0.0)
        store = store[path_ids]
        self.post = post[path_ids] + np.where(
            store != 0.0, np.minimum(bits, packet[path_ids]) * store, 0.0
        )


class MessageFaults:
    """The down windows each message's route crosses, and the time each message stood still."""

    def __init__(self, windows: dict[int, list[Window]], table: MessageTable):
        self.spans = [route_windows(windows, p.hops[0].resources) for p in table.paths] + [()]
        self.faulted = np.array([bool(spans) for spans in self.spans], dtype=bool)
        self.path_ids = table.path_ids  # -1 (a JOIN) picks the last, empty entry
        self.stall = np.zeros(len(table.path_ids))
        self.any = bool(self.faulted.any())

    def hold(
        self, ids: np.ndarray, began: np.ndarray, ended: np.ndarray, work: np.ndarray
    ) -> np.ndarray:
        """The ends of messages `ids` (began + work without faults) with their routes' faults."""
        if not self.any:
            return ended
        flat = ids.ravel()
        path = self.path_ids[flat]
        hit = self.faulted[path]
        if not hit.any():
            return ended
        out = ended.ravel().copy()
        began, work = np.broadcast_to(began, ids.shape).ravel(), work.ravel()
        for p in np.unique(path[hit]).tolist():
            sel = np.flatnonzero(path == p)
            out[sel], self.stall[flat[sel]] = delayed(began[sel], work[sel], self.spans[p])
        return out.reshape(ended.shape)


def stage_reason(fabric: Fabric, stage: RingStage, paths: list[Path], path_ids) -> NotExact | None:
    """Why a ring stage's edges could share a resource (None: they cannot)."""
    first = stage.ids[0].ravel()
    used: set[int] = set()
    total = 0
    for m in first.tolist():
        resources = fabric.path_resources(paths[path_ids[m]])
        used |= resources
        total += len(resources)
    return None if len(used) == total else NotExact("ring edges of a stage share a resource")


class ExchangeGroups:
    """The cross-group stage's flows grouped by the one shared link they cross, if they do."""

    def __init__(self, fabric: Fabric, stage: RingStage, paths: list[Path], path_ids):
        self.reason: NotExact | None = None
        edges = stage.ids[0].ravel()
        hops = [paths[path_ids[m]].hops[0] for m in edges.tolist()]
        count: dict[int, int] = {}
        for hop in hops:
            for r in hop.resources:
                count[r] = count.get(r, 0) + 1
        self.group = np.full(len(edges), -1, dtype=np.int64)
        self.cap = np.zeros(len(edges))
        self.capacity: list[float] = []
        self.resources: list[tuple[int, ...]] = []
        # per group: the resource the DES names as what set a slowed flow's rate (the first, in
        # hop order, of those that fill first: the slowest per unit of weight)
        self.binding: list[int] = []
        self.weights: list[tuple[float, ...]] = []
        keys: dict[tuple[int, ...], int] = {}
        for e, hop in enumerate(hops):
            shared = tuple(r for r in hop.resources if count[r] > 1)
            own = [
                fabric.resources[r].rate_bps / w
                for r, w in zip(hop.resources, hop.weights, strict=True)
                if count[r] == 1
            ]
            self.cap[e] = min(own, default=math.inf)
            if not shared:
                continue
            weight = dict(zip(hop.resources, hop.weights, strict=True))
            if any(weight[r] != 1.0 and r not in fabric.bundle_of for r in shared):
                self.reason = NotExact("a shared link carries weighted (transformed) bytes")
                return
            # a parallel link (wan_links k) carries its stripe of every flow, weight 1/k: the
            # bundle moves k x one link's rate (fabric.py's even split)
            rate = {r: fabric.resources[r].rate_bps / weight[r] for r in shared}
            binding = min(shared, key=rate.__getitem__)  # the first of the slowest
            if shared not in keys:
                keys[shared] = len(self.capacity)
                self.capacity.append(rate[binding])
                self.weights.append(tuple(weight[r] for r in shared))
                self.resources.append(shared)
                self.binding.append(binding)
            elif self.weights[keys[shared]] != tuple(weight[r] for r in shared):
                self.reason = NotExact("flows cross a shared link with different stripes")
                return
            self.group[e] = keys[shared]
        seen: set[int] = set()
        for shared in self.resources:
            if seen & set(shared):
                self.reason = NotExact("flows share links in overlapping sets")
                return
            seen |= set(shared)
        for g in range(len(self.capacity)):
            caps = self.cap[self.group == g]
            if not np.all(caps == caps[0]):
                self.reason = NotExact("flows sharing a link have different rates of their own")
                return

    def mark_slowed(self, ids: np.ndarray, slowed: np.ndarray, shared_by: np.ndarray) -> None:
        """shared_by[m] = its group's binding resource for each message m of the stage (`ids`:
        phase x edges) that sharing slowed (`slowed`, by message from the stage's first), as
        the DES names what set its rate."""
        flat = ids.reshape(ids.shape[0], -1)
        hit = flat[:, self.group >= 0]
        groups = np.broadcast_to(self.group[self.group >= 0], hit.shape)
        mask = slowed[hit - flat[0, 0]]
        shared_by[hit[mask]] = np.array(self.binding, dtype=np.int64)[groups[mask]]


def exclusive_reason(layout: HierLayout, paths: list[Path], path_ids, exchange) -> NotExact | None:
    """Why the exchange's shared links are not its alone (None: they are). A WAN or rack uplink
    carries nothing but the exchange; a host endpoint whose ranks lie in several groups (one
    machine holding two sites) is shared by the exchange and by the other stages too, whose
    transfers could overlap the exchange's there: then the DES."""
    shared = {r for resources in exchange.resources for r in resources}
    if not shared:
        return None
    ids = [stage.ids.ravel() for stage in layout.stages if not stage.across]
    if layout.pre is not None:
        ids.append(np.asarray(layout.pre).ravel())
    if not ids:
        return None
    used = np.unique(path_ids[np.concatenate(ids)])
    for p in used[used >= 0].tolist():
        if shared & set(paths[p].hops[0].resources):
            return NotExact(
                "a resource the exchange's flows share carries other stages' transfers too"
            )
    return None


def exchange_groups(fabric: Fabric, stage: RingStage, paths: list[Path], path_ids):
    """The exchange's flows by shared link (cached per stage: it walks every flow's path)."""
    key = id(stage)
    cached = _GROUPS.get(key)
    if cached is None or cached[0] is not stage:
        if len(_GROUPS) >= 8:
            _GROUPS.pop(next(iter(_GROUPS)))
        cached = _GROUPS[key] = (stage, ExchangeGroups(fabric, stage, paths, path_ids))
    return cached[1]


_GROUPS: dict[int, tuple] = {}


def _ring_stage(
    ready0: np.ndarray,
    stage: RingStage,
    table: MessageTable,
    timing,
    held: MessageFaults | None = None,
) -> None:
    """Fill ready/free/arrive of a stage of fixed-time parallel rings (the ring recurrence)."""
    ready_s, free_s, arrive_s = timing
    ready = ready0
    for k in range(stage.ids.shape[0]):
        ids = stage.ids[k]
        began = ready + table.pre[ids]
        free = began + table.dur[ids]
        if held is not None:
            free = held.hold(ids, began, free, table.dur[ids])
        arrive = free + table.post[ids]
        ready_s[ids], free_s[ids], arrive_s[ids] = ready, free, arrive
        ready = np.maximum(free, np.roll(arrive, 1, axis=1))


def exchange_stage(
    ready0: np.ndarray,
    stage: RingStage,
    table: MessageTable,
    flows: ExchangeGroups,
    timing,
    busy,
    held: MessageFaults | None = None,
    down: list[tuple] | None = None,
) -> np.ndarray:
    """Fill the cross-group rings' times, sharing each shared link max-min fairly (events).

    `held`: the faults of flows that cross nothing shared; `down`: per shared link, the windows
    in which it is down (every flow on it stands still). Returns, per flow, whether sharing
    slowed it (for the critical path's breakdown).
    """
    ready_s, free_s, arrive_s = timing
    phases, rings, members = stage.ids.shape
    ids = stage.ids.reshape(phases, -1)
    edges = rings * members
    group = flows.group
    groups = len(flows.capacity)
    slowed = np.zeros(ids.size, dtype=bool)
    events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, a, b)
    seq = itertools.count().__next__
    START, DEPART, CAPACITY = 0, 1, 2
    # the flows of a shared link have one cap of their own (ExchangeGroups checks it)
    caps = [float(flows.cap[np.argmax(group == g)]) for g in range(groups)]
    sharing = ProcessorSharing(flows.capacity, caps, events, seq, DEPART, busy)
    down = down or [()] * groups
    sharing.push_windows(down, CAPACITY)
    pending = np.zeros((phases, edges), dtype=np.int64)  # deps still missing (after, data)
    due = np.full((phases, edges), -np.inf)
    pre, dur, post, bits = table.pre, table.dur, table.post, table.bits
    ids_list = ids.tolist()

    def release(k: int, e: int, t: float) -> None:
        m = ids_list[k][e]
        ready_s[m] = t
        heapq.heappush(events, (t + pre[m], seq(), START, k, e))

    def satisfied(k: int, e: int, t: float) -> None:
        if t > due[k, e]:
            due[k, e] = t
        pending[k, e] -= 1
        if pending[k, e] == 0:
            release(k, e, float(due[k, e]))

    def done(k: int, e: int, m: int, t: float) -> None:
        free_s[m] = t
        arrive_s[m] = t + post[m]
        if k + 1 < phases:
            satisfied(k + 1, e, t)  # its own next send
            ring, member = divmod(e, members)
            nxt = ring * members + (member + 1) % members
            satisfied(k + 1, nxt, float(arrive_s[m]))  # the receiver's next send

    pending[0, :] = 0
    if phases > 1:
        pending[1:, :] = 2
    for e, t in enumerate(ready0.ravel().tolist()):
        release(0, e, t)
    while events:
        t, _, kind, a, b = heapq.heappop(events)
        if kind == START:
            k, e = a, b
            m = ids_list[k][e]
            g = int(group[e])
            if g < 0:  # crosses nothing shared: a fixed time (held up by its own faults)
                end = t + dur[m]
                if held is not None and held.faulted[held.path_ids[m]]:
                    end, held.stall[m] = delayed_one(t, dur[m], held.spans[held.path_ids[m]])
                heapq.heappush(events, (end, seq(), DEPART, -1 - e, k))
                continue
            sharing.start(g, t, bits[m], (k, e))
            continue
        if kind == CAPACITY:  # a shared link goes down (b = 1) or comes back (b = 0)
            sharing.set_down(a, t, bool(b))
            continue
        if a < 0:  # a fixed-time flow ends
            e, k = -1 - a, b
            done(k, e, ids_list[k][e], t)
            continue
        g = a
        key = sharing.depart(g, t, b)
        if key is None:
            continue
        k, e = key
        m = ids_list[k][e]
        began = ready_s[m] + pre[m]
        still = overlap_s(began, t, down[g]) if down[g] else 0.0
        if still and held is not None:
            held.stall[m] = still
        slowed[m - ids_list[0][0]] = t - began - still > dur[m] * (1 + SETTLE_REL)
        done(k, e, m, t)
    return slowed


def run_fast_hier(
    fabric: Fabric,
    schedule: Schedule,
    layout: HierLayout,
    path_ids: np.ndarray,
    paths: list[Path],
    start_s: np.ndarray,
    table: MessageTable | None = None,
    faults: list[ResourceFault] | None = None,
) -> Timing | NotExact:
    """Time every message of hierarchical's schedule, or say why that would not be exact."""
    table = table if table is not None else MessageTable(schedule, path_ids, paths)
    windows = down_windows(faults or [])
    held = MessageFaults(windows, table) if windows else None
    exchange = None
    down: list[tuple] = []
    for stage in layout.stages:
        if stage.across:
            exchange = exchange_groups(fabric, stage, paths, path_ids)
            if exchange.reason is not None:
                return exchange.reason
            reason = exclusive_reason(layout, paths, path_ids, exchange)
            if reason is not None:
                return reason
            if windows:
                down = [route_windows(windows, shared) for shared in exchange.resources]
                reason = _private_fault(stage, paths, path_ids, exchange, windows)
                if reason is not None:
                    return reason
        else:
            reason = stage_reason(fabric, stage, paths, path_ids)
            if reason is not None:
                return reason
    count = len(schedule)
    ready_s, free_s, arrive_s = (np.full(count, np.nan) for _ in range(3))
    timing = (ready_s, free_s, arrive_s)
    start = np.asarray(start_s, dtype=float)
    workers = schedule.workers
    last_recv = np.full(workers, -np.inf)  # arrival of the last message each worker received
    last_sent = np.full(workers, -np.inf)  # when each worker had sent its last message
    pre_free = None
    if layout.pre is not None:
        ids = layout.pre
        began = start + table.pre[ids]
        free = began + table.dur[ids]
        if held is not None:
            free = held.hold(ids, began, free, table.dur[ids])
        ready_s[ids], free_s[ids], arrive_s[ids] = start, free, free + table.post[ids]
        last_recv = arrive_s[ids].copy()
        pre_free = free
    busy_shared = np.zeros(len(exchange.capacity) if exchange else 0)
    slowed = np.zeros(0, dtype=bool)
    for stage in layout.stages:
        rings = stage.rings
        ready0 = np.maximum(np.maximum(start[rings], last_recv[rings]), last_sent[rings])
        if stage.rendezvous:
            ready0 = np.maximum(ready0, last_recv[np.roll(rings, -1, axis=1)])
        if stage.across and exchange is not None:
            slowed = exchange_stage(
                ready0, stage, table, exchange, timing, busy_shared, held, down or None
            )
        else:
            _ring_stage(ready0, stage, table, timing, held)
        last_sent[rings] = free_s[stage.ids[-1]]
        last_recv[rings] = np.roll(arrive_s[stage.ids[-1]], 1, axis=1)
    if pre_free is not None and layout.stages:
        first = layout.stages[0]
        into = np.roll(first.ids[0], 1, axis=1)  # the first chunk each member receives
        began = ready_s[into] + table.pre[into]
        owner = first.rings
        if np.any(began < pre_free[owner] - SETTLE_REL * np.abs(pre_free[owner])):
            return NotExact("a chunk arrives while the own transform runs")
    shared_by = np.full(count, -1, dtype=np.int64)
    if exchange is not None and len(slowed):
        cross = next(s for s in layout.stages if s.across)
        exchange.mark_slowed(cross.ids, slowed, shared_by)
    busy, carried = _usage(fabric, schedule, table, timing, exchange, busy_shared)
    still = held.stall if held is not None else np.zeros(count)  # one hop: the first is the whole
    return Timing(
        ready_s=ready_s,
        free_s=free_s,
        arrive_s=arrive_s,
        events=sum(s.ids.shape[0] for s in layout.stages) + 1,
        stall_s=still,
        stall0_s=still,
        shared_by=shared_by,
        busy_s=busy,
        bytes=carried,
    )


def _private_fault(
    stage: RingStage, paths, path_ids, exchange: ExchangeGroups, windows
) -> NotExact | None:
    """Why a fault would make the exchange's shares uneven (None: it would not)."""
    shared = {r for resources in exchange.resources for r in resources}
    for e, m in enumerate(stage.ids[0].ravel().tolist()):
        if exchange.group[e] < 0:
            continue
        own = [r for r in paths[path_ids[m]].hops[0].resources if r not in shared]
        if route_windows(windows, own):
            return NotExact("a link fault on an exchange flow's own link (uneven max-min shares)")
    return None


def _usage(fabric, schedule, table, timing, exchange, busy_shared):
    """Bytes each resource carried, and its busy time: the sum of its transfers' times, or for a
    shared link the union of its flows' (from the event loop)."""
    ready_s, free_s, _ = timing
    ids = np.flatnonzero(table.path_ids >= 0)
    path_ids = table.path_ids[ids]
    span = free_s[ids] - (ready_s[ids] + table.pre[ids])
    paths = int(path_ids.max()) + 1 if len(ids) else 0
    bytes_by_path = np.bincount(path_ids, weights=schedule.nbytes[ids], minlength=paths)
    span_by_path = np.bincount(path_ids, weights=span, minlength=paths)
    carried = np.zeros(len(fabric.resources))
    busy = np.zeros(len(fabric.resources))
    for p in np.flatnonzero(bytes_by_path > 0).tolist() + []:
        hop = table.paths[p].hops[0]
        for r, w in zip(hop.resources, hop.weights, strict=True):
            carried[r] += w * bytes_by_path[p]
            busy[r] += span_by_path[p]
    if exchange is not None:
        for group, resources in enumerate(exchange.resources):
            for r in resources:
                busy[r] = busy_shared[group]
    return busy, carried
