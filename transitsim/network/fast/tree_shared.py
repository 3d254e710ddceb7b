"""The exact fast path for the trees whose halves overlap: each rank's links shared two ways.

The reduce and the broadcast run at once (schedules/trees.py, NCCL's runTreeSplit), each a chain
of sends and a chain of receives per rank, so a rank's links carry at most two transfers at a
time: one of each half. Where every link carries the transfers of one sender or of one receiver
(one switch; a leaf-spine or datacentres whose inter-switch links one host uses alone), the
links that carry the same transfers act as one (their capacity: the smallest), and all of these
have one and the same capacity C, max-min fairness, which the DES computes by progressive
filling over every link at once, is local: a moving transfer gets C / k, k the most transfers
moving on one of its links (1 or 2). Proof: at rate C / 2 every link with two moving transfers
is full, so those freeze there; the rest cross only links of their own and rise to C. A
transfer stopped by a link that is down (capacity 0) freezes at 0 and is not counted on its
other links. So a start, a departure or a link going down or up changes the rates of the
transfers on the links it touches and of no others, and one event pass in time order gives the
DES's times (the same rates, the same bits left at each change).

Exactness is checked, not assumed (`split_links`): one-hop routes; every link one-sided (one
sender's or one receiver's transfers) and crossed with weight 1; one capacity for all. Elsewhere
(a WAN or spine that several senders' transfers to several receivers cross, links of different
rates) max-min moves capacity between links: there (`SplitLinks.local` false) only the compiled
pass of fast/tree_kernel.py runs, sharing each component by progressive filling, without link
faults (with them the caller runs the DES). Where no link
carries both halves (two ranks), every transfer is alone and `fast/tree.py` times it in one
pass with a max-plus linear form; here the finish depends on the start times through the
sharing, so a straggler replay simulates each step.
"""

import collections
import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing, assign_paths
from transitsim.network.des.fluid import settled
from transitsim.network.fabric import LOCAL_XFORM, Fabric, Path, Weights
from transitsim.network.fast.fault_delay import delayed_one, down_windows, route_windows
from transitsim.network.fast.tree import TreeTable
from transitsim.network.schedules.dag import Schedule
from transitsim.network.schedules.trees import tree_layout, tree_spacing_on


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
    halves: np.ndarray,
    path_ids: np.ndarray,
    paths: list[Path],
) -> SplitLinks | str:
    """The tree's link groups (sharing per link, C / k, where `local`; else max-min over each
    component), or why neither would be exact here."""
    if any(len(p.hops) != 1 for p in paths):
        return "routes of more than one hop"
    carries: dict[int, set[tuple[int, int]]] = {}  # resource -> (src, dst) pairs it carries
    phases: dict[int, set[int]] = {}
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
            if w != 1.0:
                return "a link carries weighted (transformed) bytes"
            carries.setdefault(r, set()).add((int(schedule.src[m]), int(schedule.dst[m])))
    crossing = (path_ids >= 0) & transfer  # which halves cross each resource
    for key in np.unique(path_ids[crossing] * 2 + halves[crossing]).tolist():
        for r in paths[key // 2].hops[0].resources:
            if r in carries:
                phases.setdefault(r, set()).add(key % 2)
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
    overlap = any(len(phases.get(r, ())) > 1 for r in group_of)
    caps = [min(fabric.resources[r].rate_bps for r in rs) for rs in group_resources]
    if overlap and len(set(caps)) > 1:
        local = False  # links of different rates carry the overlapping halves
    capacity = min(caps, default=math.inf)
    if overlap and not math.isfinite(capacity):
        return "links without a rate"
    groups_of, binding_of = [], []
    for path in paths:
        hop = path.hops[0]
        mine = [group_of[r] for r in hop.resources if r in group_of]
        groups_of.append(tuple(dict.fromkeys(mine)))
        binding_of.append(
            tuple(
                (r, group_of[r])
                for r in hop.resources
                if r in group_of
                and fabric.resources[r].rate_bps == (capacity if local else caps[group_of[r]])
            )
        )
    if not local:
        for m in first.tolist():
            if path_ids[m] >= 0 and transfer[m] and not groups_of[int(path_ids[m])]:
                return "a transfer crosses no link with a rate beside shared ones"
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
    fabric: Fabric, algo: str, payload_bytes: int, pre_transform: bool, weights: Weights
) -> tuple:
    """A tree all-reduce on this fabric: its schedule, compiled paths, time table, and its link
    groups (or why sharing them per link would not be exact)."""
    spacing = tree_spacing_on(fabric, algo, payload_bytes, weights)
    workers = fabric.network.workers
    schedule, halves = tree_layout(algo, workers, payload_bytes, pre_transform, spacing)
    path_ids, compiled = assign_paths(fabric, schedule, weights)
    table = TreeTable.of(schedule, path_ids, compiled)
    links = split_links(fabric, schedule, halves, path_ids, compiled)
    return schedule, path_ids, compiled, table, links


def _lists(schedule: Schedule, table: TreeTable) -> dict[str, list]:
    """Successors in CSR form (whose arrival, whose send each message waits for) and the
    per-message columns the event pass reads, as Python lists."""
    count = len(schedule)
    lengths = np.diff(schedule.data_ptr)
    waiters = np.repeat(np.arange(count), lengths)
    arrival_ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(schedule.data_idx, minlength=count), out=arrival_ptr[1:])
    order = np.argsort(schedule.data_idx, kind="stable")
    has_after = np.flatnonzero(schedule.after >= 0)
    sent_ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(schedule.after[has_after], minlength=count), out=sent_ptr[1:])
    sent_order = has_after[np.argsort(schedule.after[has_after], kind="stable")]
    return {
        "waiting": (lengths + (schedule.after >= 0)).tolist(),
        "arrival_ptr": arrival_ptr.tolist(),
        "arrival_next": waiters[order].tolist(),
        "sent_ptr": sent_ptr.tolist(),
        "sent_next": sent_order.tolist(),
        "src": schedule.src.tolist(),
        "local": (schedule.kind == LOCAL_XFORM).tolist(),
        "pre": table.pre.tolist(),
        "dur": table.dur.tolist(),
        "post": table.post.tolist(),
        "bits": (schedule.nbytes * 8.0).tolist(),
        "path_ids": table.path_ids.tolist(),
    }


def _arrays(schedule: Schedule, table: TreeTable, links: SplitLinks) -> dict[str, np.ndarray]:
    """The event pass's columns as arrays, and each message's link groups and binding links
    (those at their group's capacity) in CSR form, for tree_kernel.tree_pass; where each group's
    room for the transfers on it at once (at most all that cross it) begins."""
    lists = links.lists if links.lists is not None else _lists(schedule, table)
    kinds = {"pre": np.float64, "dur": np.float64, "post": np.float64, "bits": np.float64}
    kinds["local"] = np.bool_
    arrays = {k: np.asarray(v, dtype=kinds.get(k, np.int64)) for k, v in lists.items()}
    groups_m = [links.groups_of[p] if p >= 0 else () for p in lists["path_ids"]]
    binding_m = [links.binding_of[p] if p >= 0 else () for p in lists["path_ids"]]
    arrays["gptr"] = np.concatenate([[0], np.cumsum([len(g) for g in groups_m])])
    arrays["gidx"] = np.array([g for gs in groups_m for g in gs], dtype=np.int64)
    arrays["bptr"] = np.concatenate([[0], np.cumsum([len(b) for b in binding_m])])
    arrays["br"] = np.array([r for bs in binding_m for r, _ in bs], dtype=np.int64)
    arrays["bg"] = np.array([g for bs in binding_m for _, g in bs], dtype=np.int64)
    for key in ("gptr", "bptr"):
        arrays[key] = arrays[key].astype(np.int64)
    crossing = np.bincount(arrays["gidx"], minlength=len(links.group_resources))
    arrays["mbase"] = np.concatenate([[0], np.cumsum(crossing)[:-1]]).astype(np.int64)
    arrays["caps"] = np.array(links.caps, dtype=np.float64)
    arrays["data_ptr"], arrays["data_idx"] = schedule.data_ptr, schedule.data_idx
    arrays["after"] = schedule.after.astype(np.int64)
    _alone_arrays(arrays, links)
    return arrays


def _alone_arrays(arrays: dict[str, np.ndarray], links: SplitLinks) -> None:
    """What fast/tree_alone.py needs: each transfer's rate and binding link when it moves alone
    (C where sharing is per link, else its slowest group's: max-min over itself alone) and each
    group's transfers (kept in start order there, from one step to the next)."""
    from transitsim.network.fast.tree_alone import topological_order

    gptr, gidx, bptr, bg, br = (arrays[k] for k in ("gptr", "gidx", "bptr", "bg", "br"))
    caps = arrays["caps"]
    count = len(gptr) - 1
    rate = np.full(count, float(links.capacity))
    bound = np.full(count, -1, dtype=np.int64)
    for m in np.flatnonzero(np.diff(gptr) > 0).tolist():
        groups = gidx[gptr[m] : gptr[m + 1]]
        if not links.local:
            rate[m] = caps[groups].min()
        for y in range(bptr[m], bptr[m + 1]):
            if links.local or caps[bg[y]] <= rate[m]:
                bound[m] = br[y]
                break
    arrays["alone_rate"], arrays["alone_bound"] = rate, bound
    arrays["moving"] = (arrays["path_ids"] >= 0) & ~arrays["local"]  # on link groups
    arrays["transfers"] = int(np.count_nonzero(arrays["moving"]))
    owner = np.repeat(np.arange(count, dtype=np.int64), np.diff(gptr))
    moving = ~arrays["local"][owner]  # the own transform holds its lanes, not a group
    owner, on = owner[moving], gidx[moving]
    order = np.argsort(on, kind="stable")
    arrays["group_ptr"] = np.concatenate(
        [[0], np.cumsum(np.bincount(on, minlength=len(links.group_resources)))]
    ).astype(np.int64)
    arrays["group_flows"] = owner[order]
    arrays["order"] = topological_order(
        arrays["waiting"],
        (arrays["sent_ptr"], arrays["sent_next"]),
        (arrays["arrival_ptr"], arrays["arrival_next"]),
    )
    arrays["position"] = np.empty(count, dtype=np.int64)
    arrays["position"][arrays["order"]] = np.arange(count)


# how each fault-free step was timed, counted since the process began (the benchmark and the
# tests read it): "alone" (one pass), "repaired" (a few met), "event" (the others declined),
# "asked" (the event pass alone, alone=False)
TIMED_BY: collections.Counter = collections.Counter()


def _compiled_pass(
    fabric, table: TreeTable, links: SplitLinks, start: np.ndarray, alone: bool = True
) -> Timing:
    """The fault-free pass: where every transfer moves alone on its groups, the one pass of
    fast/tree_alone.py; where a few meet, those few by the event pass and the rest by the one
    pass (fast/tree_repair.py); else the whole event pass of fast/tree_kernel.py (numba,
    imported here on first use). `alone` False: the event pass only (the tests compare)."""
    from transitsim.network.fast.tree_alone import overlaps, timed_pass
    from transitsim.network.fast.tree_repair import Work, repair

    if links.arrays is None:
        links.arrays = _arrays(table.schedule, table, links)
        links.arrays["carried"] = _carried(fabric, table)  # the same every step
    c = links.arrays
    count = len(table.schedule)
    ready, free, arrive = (np.full(count, np.nan) for _ in range(3))
    shared_by = np.full(count, -1, dtype=np.int64)
    busy_g = np.zeros(len(links.group_resources))
    start = np.ascontiguousarray(start, dtype=np.float64)
    pushed = None
    if alone:
        work = c.get("work")
        if work is None:
            work = c["work"] = Work(count, len(links.group_resources), len(c["gidx"]))
        began, off = work.began, work.off  # the transfers' own: the pass writes them
        times = (ready, free, arrive, began, shared_by, off)
        timed_pass(
            0,
            start,
            table.schedule.workers,
            c["order"],
            (c["data_ptr"], c["data_idx"], c["after"]),
            c["src"],
            c["local"],
            c["pre"],
            c["dur"],
            c["post"],
            c["bits"],
            c["path_ids"] >= 0,
            c["alone_rate"],
            c["alone_bound"],
            (work.fixed_free, work.fixed_bound, work.fixed_off),
            times,
        )
        met = overlaps((c["group_ptr"], c["group_flows"]), began, off, work.pairs, busy_g)
        if met == 0:
            pushed = 2 * c["transfers"]  # a start and a departure each
            TIMED_BY["alone"] += 1
        elif met > 0:
            pushed = repair(
                c,
                work,
                start,
                table.schedule.workers,
                links.capacity,
                links.local,
                times,
                busy_g,
                met,
            )
            TIMED_BY["repaired"] += pushed is not None
    if pushed is None:
        TIMED_BY["event" if alone else "asked"] += 1
        ready[:], free[:], arrive[:], shared_by[:], busy_g[:] = np.nan, np.nan, np.nan, -1, 0.0
        pushed = _event_pass(start, table, links, c, (ready, free, arrive), shared_by, busy_g)
    stood = np.zeros(count)
    return Timing(
        ready_s=ready,
        free_s=free,
        arrive_s=arrive,
        events=int(pushed),
        stall_s=stood,
        stall0_s=stood,
        shared_by=shared_by,
        busy_s=_busy(fabric, table, links, ready, free, busy_g),
        bytes=c["carried"].copy(),
    )


def _event_pass(
    start: np.ndarray,
    table: TreeTable,
    links: SplitLinks,
    c: dict[str, np.ndarray],
    times: tuple[np.ndarray, np.ndarray, np.ndarray],
    shared_by: np.ndarray,
    busy_g: np.ndarray,
) -> int:
    """tree_kernel.tree_pass over these columns, into times (ready, free, arrive), shared_by
    and busy_g: the events pushed."""
    from transitsim.network.fast.tree_kernel import tree_pass

    ready, free, arrive = times
    count = len(table.schedule)
    groups = len(links.group_resources)
    msg = (
        c["waiting"].copy(),
        np.full(count, -np.inf),
        np.empty(count, dtype=np.int64),
        free,
        arrive,
        c["post"],
        c["sent_ptr"],
        c["sent_next"],
        c["arrival_ptr"],
        c["arrival_next"],
    )
    lk = (c["gptr"], c["gidx"], c["bptr"], c["br"], c["bg"])
    grp = (
        np.full(len(c["gidx"]) + 1, -1, dtype=np.int64),  # room: every crossing at once
        c["mbase"],
        np.zeros(groups, dtype=np.int64),
        c["caps"],
        busy_g,
        np.zeros(groups),
    )
    return tree_pass(
        start,
        table.schedule.workers,
        msg,
        c["src"],
        c["local"],
        c["pre"],
        c["dur"],
        c["bits"],
        c["path_ids"] >= 0,
        lk,
        grp,
        float(links.capacity),
        links.local,
        shared_by,
        ready,
    )


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
    Without faults the compiled pass (fast/tree_kernel.py) gives the same floats; it alone
    shares max-min where per-link sharing is not (`links.local` false), and not with faults."""
    if not links.local and faults:
        raise ValueError("max-min over components is compiled without link faults: run the DES")
    if compiled and not faults or not links.local:
        return _compiled_pass(fabric, table, links, np.asarray(start_s, dtype=float), alone)
    schedule = table.schedule
    count = len(schedule)
    workers = schedule.workers
    start = np.asarray(start_s, dtype=float).tolist()
    if links.lists is None:
        links.lists = _lists(schedule, table)
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
        busy_s=_busy(fabric, table, links, ready_s, free_s, busy_g),
        bytes=_carried(fabric, table),
    )


def _carried(fabric: Fabric, table: TreeTable) -> np.ndarray:
    """Bytes per resource: every message's bytes times its weight there."""
    ids = np.flatnonzero(table.path_ids >= 0)
    nbytes = np.bincount(
        table.path_ids[ids], weights=table.schedule.nbytes[ids], minlength=len(table.paths)
    )
    carried = np.zeros(len(fabric.resources))
    for p in np.flatnonzero(nbytes > 0).tolist():
        hop = table.paths[p].hops[0]
        for r, w in zip(hop.resources, hop.weights, strict=True):
            carried[r] += w * nbytes[p]
    return carried


def _busy(fabric, table: TreeTable, links: SplitLinks, ready_s, free_s, busy_g) -> np.ndarray:
    """Busy time per resource, as the DES counts it (while a transfer is on it, stood still or
    not): a group's union of spans, plus the own transform's span (before any of them)."""
    if links.busy_index is None:  # which group each resource is in, the own transforms
        pairs = [(r, g) for g, resources in enumerate(links.group_resources) for r in resources]
        local = np.flatnonzero((table.schedule.kind == LOCAL_XFORM) & (table.path_ids >= 0))
        links.busy_index = (
            np.array([r for r, _ in pairs], dtype=np.int64),
            np.array([g for _, g in pairs], dtype=np.int64),
            local.tolist(),
        )
    resources, groups, local = links.busy_index
    busy = np.zeros(len(fabric.resources))
    busy[resources] = np.asarray(busy_g, dtype=float)[groups]
    for m in local:
        span = free_s[m] - (ready_s[m] + table.pre[m])
        for r in table.paths[int(table.path_ids[m])].hops[0].resources:
            busy[r] += span
    return busy
