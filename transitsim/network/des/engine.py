"""The reference: every message of a schedule as its own transfers, run by SimPy.

One callback chain per message: wait for its dependencies, then for each hop a fixed delay, a
fluid transfer on the shared resources, another fixed delay. Contention, stragglers and link
faults all come out of the fluid engine. This is the naive per-transfer loop the fast ring path
is checked against (O(N^2) events for a ring).
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.background import capacity_schedule
from transitsim.network.des.fluid import ExactEnvironment, FluidEngine
from transitsim.network.fabric import JOIN, Fabric, Hop, Path, Weights
from transitsim.network.schedules.dag import Schedule


@dataclass
class Timing:
    """When each message became ready, had been sent (first hop done) and arrived."""

    ready_s: np.ndarray
    free_s: np.ndarray
    arrive_s: np.ndarray
    events: int
    stall_s: np.ndarray  # per message: time its transfers stood still (link faults)
    stall0_s: np.ndarray  # per message: the same, first hop only
    shared_by: np.ndarray  # per message: the resource that last set its rate (-1: none)
    busy_s: np.ndarray  # per resource
    bytes: np.ndarray  # per resource
    samples: tuple[np.ndarray, ...] | None = None  # (resource, time, utilisation from then on)


def unshared_timing(
    ready_s: np.ndarray,
    free_s: np.ndarray,
    arrive_s: np.ndarray,
    events: int,
    busy_s: np.ndarray,
    carried_bytes: np.ndarray,
    samples: tuple[np.ndarray, ...] | None = None,
) -> Timing:
    """The Timing of a fast path: without faults or sharing, no message ever stalls or is slowed."""
    still = np.zeros(len(ready_s))
    return Timing(
        ready_s=ready_s,
        free_s=free_s,
        arrive_s=arrive_s,
        events=events,
        stall_s=still,
        stall0_s=still,
        shared_by=np.full(len(ready_s), -1, dtype=np.int64),
        busy_s=busy_s,
        bytes=carried_bytes,
        samples=samples,
    )


@dataclass(frozen=True)
class ResourceFault:
    resource: int
    down_from_s: float
    down_until_s: float


def assign_paths(
    fabric: Fabric, schedule: Schedule, weights: Weights
) -> tuple[np.ndarray, list[Path]]:
    """Compile each distinct (src, dst, kind) once; returns per-message path ids (-1: JOIN)."""
    nodes = len(fabric.node_names)
    keys = (schedule.src * nodes + schedule.dst) * 8 + schedule.kind
    unique, inverse = np.unique(keys, return_inverse=True)
    paths: list[Path] = []
    ids = np.empty(len(unique), dtype=np.int64)
    for position, key in enumerate(unique.tolist()):
        kind, pair = key % 8, key // 8
        if kind == JOIN:
            ids[position] = -1
            continue
        ids[position] = len(paths)
        paths.append(fabric.path(pair // nodes, pair % nodes, kind, weights))
    return ids[inverse.reshape(-1)], paths


def fifo_rate(fabric: Fabric, src: int, dst: int, path: Path) -> float:
    """The payload rate of the last link of the route src -> dst (node indices) where a
    store-and-forward switch holds its packets; 0.0 elsewhere (no hold: nothing can overtake,
    see `fifo_arrival`)."""
    if path.hops[-1].store_s_per_bit == 0.0:
        return 0.0
    names = fabric.node_names
    links = fabric.route_links(names[src], names[dst])
    return links[-1].spec.payload_bps if links else 0.0


def fifo_rates(
    fabric: Fabric, schedule: Schedule, path_ids: np.ndarray, paths: list[Path]
) -> list[float]:
    """`fifo_rate` of every compiled path."""
    rates = [0.0] * len(paths)
    _, first = np.unique(path_ids, return_index=True)
    for m in first.tolist():
        p = int(path_ids[m])
        if p >= 0:
            rates[p] = fifo_rate(fabric, int(schedule.src[m]), int(schedule.dst[m]), paths[p])
    return rates


def fifo_arrival(
    hop: Hop, bits: float, own_s: float, previous: tuple[float, float] | None, rate_bps: float
) -> float:
    """When a message arrives on a store-and-forward route: never before the message that left
    its sender on the same route before it, and then its own bits on the last link after that
    one's (each switch forwards a port's packets in order). Only a message whose hold is shorter
    than the previous one's (a short last piece behind full ones) can overtake it; everywhere
    else the bound already holds, so it is not applied (and no rounding can move a result).
    `previous` is (hold_s, arrive_s) of that message, or None."""
    if previous is None or rate_bps <= 0.0:
        return own_s
    hold = hop.post_for(bits) - hop.post_s
    if hold >= previous[0]:
        return own_s
    behind = previous[1] + bits / rate_bps
    return behind if behind > own_s else own_s


def _reverse(keys: np.ndarray, values: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of `values` grouped by `keys`: for each message, the messages waiting on it."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=count), out=ptr[1:])
    return ptr, values[order]


def run_des(
    fabric: Fabric,
    schedule: Schedule,
    path_ids: np.ndarray,
    paths: list[Path],
    start_s: np.ndarray,
    faults: list[ResourceFault],
    record: bool = False,
    clock_s: float = 0.0,
) -> Timing:
    """Run every message of `schedule` as fluid transfers; exact absolute event times.

    Capacities change at link faults and wherever a link's background share changes
    (`fabric.backgrounds`, read at clock_s + t: clock_s is when t = 0 on the replay clock).
    """
    count = len(schedule)
    workers = schedule.workers
    initial = float(np.min(start_s)) if len(start_s) else 0.0
    env = ExactEnvironment(initial)
    capacity, changes = capacity_schedule(
        list(fabric.capacities()), faults, fabric.backgrounds, initial, clock_s
    )
    engine = FluidEngine(env, np.asarray(capacity), record, fabric.greedy, fabric.bundle_of)
    ready = np.full(count, np.nan)
    free = np.full(count, np.nan)
    arrive = np.full(count, np.nan)
    stall = np.zeros(count)
    stall0 = np.zeros(count)
    shared_by = np.full(count, -1, dtype=np.int64)
    lengths = np.diff(schedule.data_ptr)
    waiting = (lengths + (schedule.after >= 0)).tolist()
    waiters = np.repeat(np.arange(count), lengths)
    arrival_ptr, arrival_next = _reverse(schedule.data_idx, waiters, count)
    has_after = np.flatnonzero(schedule.after >= 0)
    sent_ptr, sent_next = _reverse(schedule.after[has_after], has_after, count)
    arrival_ptr, arrival_next = arrival_ptr.tolist(), arrival_next.tolist()
    sent_ptr, sent_next = sent_ptr.tolist(), sent_next.tolist()
    bits = (schedule.nbytes * 8.0).tolist()
    src = schedule.src.tolist()
    starts = [float(s) for s in start_s]
    hops_of = [paths[p].hops if p >= 0 else () for p in path_ids.tolist()]
    # store-and-forward routes: per (src, dst), the (hold, arrival) of the last message sent
    fifo_rate = [0.0] + fifo_rates(fabric, schedule, path_ids, paths)  # index: path id + 1
    path_of = (path_ids + 1).tolist()
    route_of = (schedule.src * len(fabric.node_names) + schedule.dst).tolist()
    last_on_route: dict[int, tuple[float, float]] = {}

    # Logical times travel with the callbacks (t), so a transfer settled a rounding step early
    # still counts from its projected finish; a message is ready at the latest of its deps.
    due = [-np.inf] * count
    arrived = [0]  # messages arrived: when all have, no capacity change can matter

    def satisfied(targets: list[int], t: float) -> None:
        for m in targets:
            due[m] = max(due[m], t)
            waiting[m] -= 1
            if waiting[m] == 0:
                release(m, due[m])

    def release(m: int, t: float) -> None:
        s = src[m]
        if s < workers and starts[s] > t:
            env.at(starts[s], lambda _e: begin(m, starts[s]))
        else:
            begin(m, t)

    def begin(m: int, t: float) -> None:
        ready[m] = t
        if not hops_of[m]:  # a JOIN: nothing to send
            free[m] = arrive[m] = t
            arrived[0] += 1
            satisfied(sent_next[sent_ptr[m] : sent_ptr[m + 1]], t)
            satisfied(arrival_next[arrival_ptr[m] : arrival_ptr[m + 1]], t)
            return
        hop_begin(m, 0, t)

    def hop_begin(m: int, h: int, t: float) -> None:
        pre = hops_of[m][h].pre_s
        if pre > 0:
            env.at(t + pre, lambda _e: transfer(m, h, t + pre))
        else:
            transfer(m, h, t)

    def transfer(m: int, h: int, t: float) -> None:
        hop = hops_of[m][h]
        done = lambda *a: transferred(m, h, *a)  # noqa: E731
        engine.start(hop.resources, hop.weights, bits[m], done, t, hop.bases)

    def transferred(m: int, h: int, t: float, stalled_s: float, bound: int) -> None:
        if bound >= 0:
            shared_by[m] = bound  # the resource it shared last: any slow-down is charged to it
        if stalled_s > 0:
            stall[m] += stalled_s
            if h == 0:
                stall0[m] = stalled_s
        if h == 0:
            free[m] = t
            satisfied(sent_next[sent_ptr[m] : sent_ptr[m + 1]], t)
        hop = hops_of[m][h]
        post = hop.post_for(bits[m])
        rate = fifo_rate[path_of[m]] if h + 1 == len(hops_of[m]) else 0.0
        if rate > 0.0:  # a store-and-forward route: in order behind the message before it
            route = route_of[m]
            end = fifo_arrival(hop, bits[m], t + post, last_on_route.get(route), rate)
            last_on_route[route] = (post - hop.post_s, end)
            env.at(end, lambda _e: hop_end(m, h, end))
        elif post > 0:
            env.at(t + post, lambda _e: hop_end(m, h, t + post))
        else:
            hop_end(m, h, t)

    def hop_end(m: int, h: int, t: float) -> None:
        if h + 1 < len(hops_of[m]):
            hop_begin(m, h + 1, t)
            return
        arrive[m] = t
        arrived[0] += 1
        satisfied(arrival_next[arrival_ptr[m] : arrival_ptr[m + 1]], t)

    # Capacity changes one instant at a time, each scheduled as the one before it takes effect,
    # and none once every message has arrived (a background series may hold 100,000 rows).
    # Urgent: at a tie they come before every other event, as they did when all were scheduled
    # first. Changes of one instant are applied together (parallel links restripe once).
    ahead = [next(changes, None)]

    def batch() -> list | None:
        first = ahead[0]
        if first is None:
            return None
        taken = [first]
        while True:
            change = next(changes, None)
            if change is None or change[0] != first[0]:
                ahead[0] = change
                return taken
            taken.append(change)

    def next_change(_e: object = None, pending: list | None = None) -> None:
        if pending is not None:
            engine.set_capacities([(c[1], c[2]) for c in pending])
        if arrived[0] >= count:
            return
        taken = batch()
        if taken is not None:
            env.at(taken[0][0], lambda e, c=taken: next_change(e, c), urgent=True)

    next_change()
    for m in np.flatnonzero(np.asarray(waiting) == 0).tolist():
        env.at(initial, lambda _e, m=m: release(m, initial))
    env.run()
    engine.close()
    return Timing(
        ready_s=ready,
        free_s=free,
        arrive_s=arrive,
        events=env.processed,
        stall_s=stall,
        stall0_s=stall0,
        shared_by=shared_by,
        busy_s=np.asarray(engine.busy_s),
        bytes=np.asarray(engine.bytes),
        samples=(
            tuple(np.array(c) for c in zip(*engine.samples, strict=True))
            if engine.samples
            else None
        ),
    )
