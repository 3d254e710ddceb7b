"""The exact fast path for the trees whose halves overlap: each rank's links shared two ways.

The reduce and the broadcast run at once (schedules/trees.py, NCCL's runTreeSplit), each a chain of
sends and a chain of receives per rank, so a rank's links carry at most two transfers at a time:
one of each half (on multi-GPU nodes every connection is a queue of its own: `split_links` counts
the connections on each link, and C / k is used only where there are at most two). Where every link
carries the transfers of one sender or of one receiver (one switch; a leaf-spine or datacentres
whose inter-switch links one host uses alone), the links that carry the same transfers act as one
(their capacity: the smallest), and all of these have one and the same capacity C, max-min
fairness, which the DES computes by progressive filling over every link at once, is local: a moving
transfer gets C / k, k the most transfers moving on one of its links (1 or 2). Proof: at rate C / 2
every link with two moving transfers is full, so those freeze there; the rest cross only links of
their own and rise to C. A transfer stopped by a link that is down (capacity 0) freezes at 0 and is
not counted on its other links. So a start, a departure or a link going down or up changes the
rates of the transfers on the links it touches and of no others, and one event pass in time order
gives the DES's times (the same rates, the same bits left at each change).

Exactness is checked, not assumed (`split_links`): one-hop routes; every link one-sided (one
sender's or one receiver's transfers) and crossed with weight 1 (one of k parallel links: 1 / k
of every transfer it carries, k x its rate for the group); one capacity for all. Elsewhere
(a WAN or spine that several senders' transfers to several receivers cross, links of different
rates) max-min moves capacity between links: there (`SplitLinks.local` false) only the compiled
pass of fast/trees/kernel.py runs, sharing each component by progressive filling, without link
faults (with them the caller runs the DES). Where no link
carries both halves (two ranks), every transfer is alone and `fast/trees/fixed.py` times it in one
pass with a max-plus linear form; here the finish depends on the start times through the
sharing, so a straggler replay simulates each step.
"""

import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing, assign_paths
from transitsim.network.des.fluid import settled
from transitsim.network.fabric import LOCAL_XFORM, Fabric, Path, Weights
from transitsim.network.fabrics.nodes import tree_nodes
from transitsim.network.fast.shared.fault_delay import delayed_one, down_windows, route_windows
from transitsim.network.fast.shared.not_exact import NotExact
from transitsim.network.fast.trees.compiled import busy, carried, compiled_pass, schedule_lists
from transitsim.network.fast.trees.fixed import TreeTable
from transitsim.network.schedules.dag import Schedule
from transitsim.network.schedules.trees import tree_layout


@dataclass
class SplitLinks:
    """The links of a tree all-reduce grouped by the transfers they carry (a group's links
    carry the same ones), and what the event pass needs of them."""

    capacity: float  # every group's (its slowest link's) payload rate (local sharing)
    groups_of: list[tuple[int, ...]]  # per compiled path: its groups (none for a transform)
    group_resources: list[tuple[int, ...]]
    # per compiled path: (resource, group) of its links at `capacity`, in hop order: the DES
    # names the first of them on a full group as what set the transfer's rate
    binding_of: list[tuple[tuple[int, int], ...]]
    overlap: bool  # some group carries transfers of both halves (else: fixed times)
    # C / k on every group is max-min (one capacity, one-sided groups); else max-min by
    # progressive filling over each component (compiled, fault-free only)
    local: bool = True
    caps: tuple[float, ...] = ()  # per group: its slowest link's rate
    lists: dict[str, list] | None = None  # the schedule as plain lists, made on the first run
    arrays: dict[str, np.ndarray] | None = None  # the same as arrays, for the compiled pass
    busy_index: tuple | None = None  # made on the first run: see _busy


def split_links(
    fabric: Fabric,
    schedule: Schedule,
    lanes: np.ndarray,
    path_ids: np.ndarray,
    paths: list[Path],
) -> SplitLinks | NotExact:
    """The tree's link groups (sharing per link, C / k, where `local`; else max-min over each
    component), or why neither would be exact here. A connection's transfers go one at a time
    (`lanes`, schedules/trees.py), so a group crossed by one connection carries one transfer at
    a time, by two at most two (the C / k rule's case); more, and max-min is not local."""
    if any(len(p.hops) != 1 for p in paths):
        return NotExact("routes of more than one hop")
    carries: dict[int, set[tuple[int, int]]] = {}  # resource -> (src, dst) pairs it carries
    stripe: dict[int, float] = {}  # resource -> the weight every transfer crosses it with
    lanes_on: dict[int, set[int]] = {}  # resource -> the connections that cross it
    transfer = schedule.kind != LOCAL_XFORM
    _, first = np.unique(path_ids, return_index=True)
    for m in first.tolist():
        p = int(path_ids[m])
        if p < 0 or not transfer[m]:
            continue
        hop = paths[p].hops[0]
        for r, w in zip(hop.resources, hop.weights, strict=True):
            if not math.isfinite(fabric.resources[r].rate_bps):
                continue
            if w != 1.0 and r not in fabric.bundle_of:
                return NotExact("a link carries weighted (transformed) bytes")
            if stripe.setdefault(r, w) != w:  # one of parallel links (wan_links k): 1 / k
                return NotExact("transfers cross a parallel link with different stripes")
            carries.setdefault(r, set()).add((int(schedule.src[m]), int(schedule.dst[m])))
    crossing = (path_ids >= 0) & transfer  # which connections cross each resource
    for p, lane in set(zip(path_ids[crossing].tolist(), lanes[crossing].tolist(), strict=True)):
        for r in paths[p].hops[0].resources:
            if r in carries:
                lanes_on.setdefault(r, set()).add(lane)
    keys: dict[frozenset, int] = {}
    group_of: dict[int, int] = {}
    local = True  # every link one-sided: per-link sharing is max-min (with one capacity)
    for r, pairs in carries.items():
        if len({s for s, _ in pairs}) > 1 and len({d for _, d in pairs}) > 1:
            local = False  # a WAN or spine that several senders cross to several receivers
        group_of[r] = keys.setdefault(frozenset(pairs), len(keys))
    group_resources: list[list[int]] = [[] for _ in keys]
    for r, g in group_of.items():
        group_resources[g].append(r)
    most = max((len(lanes_on.get(r, ())) for r in group_of), default=0)
    overlap = most > 1  # two connections on a link: transfers can meet there
    if most > 2:
        local = False  # three at once: a transfer's share depends on links beyond its own
    # a parallel link carries 1 / k of each transfer it stripes: k x its rate for the group
    effective = {r: fabric.resources[r].rate_bps / stripe[r] for r in group_of}
    caps = [min(effective[r] for r in rs) for rs in group_resources]
    if overlap and len(set(caps)) > 1:
        local = False  # links of different rates carry the overlapping halves
    capacity = min(caps, default=math.inf)
    if overlap and not math.isfinite(capacity):
        return NotExact("links without a rate")
    groups_of, binding_of = [], []
    for path in paths:
        hop = path.hops[0]
        mine = [group_of[r] for r in hop.resources if r in group_of]
        groups_of.append(tuple(dict.fromkeys(mine)))
        binding_of.append(
            tuple(
                (r, group_of[r])
                for r in hop.resources
                if r in group_of and effective[r] == (capacity if local else caps[group_of[r]])
            )
        )
    if not local:
        for m in first.tolist():
            if path_ids[m] >= 0 and transfer[m] and not groups_of[int(path_ids[m])]:
                return NotExact("a transfer crosses no link with a rate beside shared ones")
    return SplitLinks(
        capacity,
        groups_of,
        [tuple(rs) for rs in group_resources],
        binding_of,
        overlap or not local,
        local,
        tuple(caps),
    )


def tree_parts(
    fabric: Fabric,
    algo: str,
    payload_bytes: int,
    pre_transform: bool,
    weights: Weights,
    spacing: int,
) -> tuple:
    """A tree all-reduce on this fabric with this spacing (fast/trees/plan.py): its schedule,
    compiled paths, time table, and its link groups (or why sharing them per link would not be
    exact)."""
    workers = fabric.network.workers
    nodes = tree_nodes(fabric.network)
    schedule, _, lanes = tree_layout(algo, workers, payload_bytes, pre_transform, spacing, nodes)
    path_ids, compiled = assign_paths(fabric, schedule, weights)
    table = TreeTable.of(schedule, path_ids, compiled)
    links = split_links(fabric, schedule, lanes, path_ids, compiled)
    return schedule, path_ids, compiled, table, links


def run_split_tree(
    fabric: Fabric,
    table: TreeTable,
    links: SplitLinks,
    start_s: np.ndarray,
    faults: list[ResourceFault] | None = None,
    compiled: bool = True,
    alone: bool = True,
) -> Timing:
    """Every message's times, in time order: transfers share each link group as max-min does
    there (C / k), a group with a link down stops its transfers (call split_links first).
    Without faults the compiled pass (fast/trees/kernel.py) gives the same floats; it alone
    shares max-min where per-link sharing is not (`links.local` false), and not with faults."""
    if not links.local and faults:
        raise ValueError("max-min over components is compiled without link faults: run the DES")
    if compiled and not faults or not links.local:
        return compiled_pass(fabric, table, links, np.asarray(start_s, dtype=float), alone)
    schedule = table.schedule
    count = len(schedule)
    workers = schedule.workers
    start = np.asarray(start_s, dtype=float).tolist()
    if links.lists is None:
        links.lists = schedule_lists(schedule, table)
    lists = links.lists
    src, local, pre, dur, post, bits = (
        lists[k] for k in ("src", "local", "pre", "dur", "post", "bits")
    )
    path_ids = lists["path_ids"]
    arrival_ptr, arrival_next = lists["arrival_ptr"], lists["arrival_next"]
    sent_ptr, sent_next = lists["sent_ptr"], lists["sent_next"]
    waiting = list(lists["waiting"])
    groups_of, binding_of, capacity = links.groups_of, links.binding_of, links.capacity
    windows = down_windows(faults or [])
    held = [route_windows(windows, p.hops[0].resources) for p in table.paths]
    count_groups = len(links.group_resources)

    ready, free, arrive = [math.nan] * count, [math.nan] * count, [math.nan] * count
    stall = [0.0] * count
    due = [-math.inf] * count
    shared_by = [-1] * count
    # per flow (a message on its way): rate, when its bits were last counted, bits left,
    # projected finish, version (stale departures), time stood still, what set its rate
    rate = [-1.0] * count
    since = [0.0] * count
    left = [0.0] * count
    finish = [math.inf] * count
    version = [0] * count
    stalled = [0.0] * count
    bound = [-1] * count
    alive = [False] * count
    members: list[dict[int, None]] = [{} for _ in range(count_groups)]  # insertion-ordered
    is_down = [False] * count_groups
    busy_g = [0.0] * count_groups
    busy_from = [0.0] * count_groups
    events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, a, b)
    CAPACITY, START, DEPART = 0, 1, 2
    seq = itertools.count().__next__
    for g, resources in enumerate(links.group_resources):  # pushed first: at a tie, first
        for begin, end in route_windows(windows, resources):
            heapq.heappush(events, (begin, seq(), CAPACITY, g, 1))
            heapq.heappush(events, (end, seq(), CAPACITY, g, 0))

    groups_m = [groups_of[p] if p >= 0 else () for p in path_ids]  # per message
    binding_m = [binding_of[p] if p >= 0 else () for p in path_ids]
    stopped = [False] * count  # a link of its groups is down: rate 0, not counted
    moving_on = [0] * count_groups  # per group: its transfers not stopped

    def reshare(flows, now: float) -> None:
        """des.fluid.FluidEngine._share for these flows: the new rate where it changed."""
        for f in flows:
            if stopped[f]:
                new = 0.0
            else:
                most = max([moving_on[g] for g in groups_m[f]], default=1)
                new = capacity / most
                bound[f] = next((r for r, g in binding_m[f] if moving_on[g] == most), -1)
            if new == rate[f]:
                continue  # unchanged: keep the projected finish bit for bit
            elapsed = now - since[f]
            if rate[f] > 0 and elapsed > 0:
                left[f] = max(0.0, left[f] - rate[f] * elapsed)
            elif rate[f] == 0 and elapsed > 0:
                stalled[f] += elapsed
            base = max(now, since[f])
            rate[f] = new
            since[f] = base
            version[f] += 1
            if left[f] <= 0.0:
                finish[f] = base
            elif new <= 0.0:
                finish[f] = math.inf
                continue
            else:
                finish[f] = base + left[f] / new
            heapq.heappush(events, (finish[f], seq(), DEPART, f, version[f]))

    def on_groups(groups) -> list[int]:
        return list(dict.fromkeys(f for g in groups for f in members[g]))

    todo: list[int] = []  # released messages not timed yet

    def satisfied(targets: list[int], t: float) -> None:
        for m in targets:
            if t > due[m]:
                due[m] = t
            waiting[m] -= 1
            if waiting[m] == 0:
                todo.append(m)

    def sent(m: int, t: float) -> None:
        free[m] = t
        satisfied(sent_next[sent_ptr[m] : sent_ptr[m + 1]], t)
        arrive[m] = t + post[m]
        satisfied(arrival_next[arrival_ptr[m] : arrival_ptr[m + 1]], arrive[m])

    def complete(f: int, now: float) -> None:
        """des.fluid.FluidEngine._complete: off its groups, the others reshared, then done."""
        alive[f] = False
        version[f] += 1
        groups = groups_m[f]
        for g in groups:
            members[g].pop(f, None)
            moving_on[g] -= not stopped[f]
            if not members[g]:
                busy_g[g] += now - busy_from[g]
        reshare(on_groups(groups), now)
        stall[f] = stalled[f]
        if bound[f] >= 0:
            shared_by[f] = bound[f]
        sent(f, max(finish[f], now))

    def begin(f: int, t: float) -> None:
        groups = groups_m[f]
        for g in groups:  # transfers over by now (to rounding) leave before this one joins
            for other in [o for o in members[g] if settled(finish[o], t)]:
                if alive[other]:
                    complete(other, t)
        alive[f] = True
        rate[f], since[f], left[f], finish[f] = -1.0, t, bits[f], math.inf
        stopped[f] = any(is_down[g] for g in groups)
        for g in groups:
            if not members[g]:
                busy_from[g] = t
            members[g][f] = None
            moving_on[g] += not stopped[f]
        reshare(on_groups(groups), t)

    def drain() -> None:
        while todo:
            m = todo.pop()
            t = due[m]
            s = src[m]
            if s < workers and start[s] > t:
                t = start[s]
            ready[m] = t
            p = path_ids[m]
            if p < 0:  # a JOIN: nothing to send
                free[m] = arrive[m] = t
                satisfied(sent_next[sent_ptr[m] : sent_ptr[m + 1]], t)
                satisfied(arrival_next[arrival_ptr[m] : arrival_ptr[m + 1]], t)
            elif local[m]:  # the own transform: alone on its lanes (both halves wait for it)
                end, stall[m] = delayed_one(t + pre[m], dur[m], held[p])
                sent(m, end)
            else:
                heapq.heappush(events, (t + pre[m], seq(), START, m, 0))

    initial = float(min(start)) if start else 0.0
    for m in np.flatnonzero(np.asarray(waiting) == 0).tolist():
        due[m] = initial
        todo.append(m)
    drain()
    processed = 0
    while events:
        t, _, kind, a, b = heapq.heappop(events)
        processed += 1
        if kind == START:
            begin(a, t)
        elif kind == CAPACITY:
            is_down[a] = bool(b)
            for f in members[a]:  # stopped or moving again: counted on its groups or not
                now_stopped = any(is_down[g] for g in groups_m[f])
                if now_stopped != stopped[f]:
                    stopped[f] = now_stopped
                    for g in groups_m[f]:
                        moving_on[g] += -1 if now_stopped else 1
            reshare(on_groups({g for f in members[a] for g in groups_m[f]}), t)
        elif alive[a] and version[a] == b:  # a departure, unless stale
            complete(a, t)
        drain()

    ready_s, free_s, arrive_s = np.array(ready), np.array(free), np.array(arrive)
    stood = np.array(stall)
    return Timing(
        ready_s=ready_s,
        free_s=free_s,
        arrive_s=arrive_s,
        events=processed,  # starts, departures and link changes (JOINs and transforms: none)
        stall_s=stood,
        stall0_s=stood,  # one hop: the first is the whole
        shared_by=np.array(shared_by, dtype=np.int64),
        busy_s=busy(fabric, table, links, ready_s, free_s, busy_g),
        bytes=carried(fabric, table),
    )
