"""The exact fast path for the trees where their transfers share a link: across datacentres.

On one switch every link of a tree carries the transfers of one sender or of one receiver, and
those are serial, so each transfer takes a fixed time (`fast/tree.py`). Across datacentres the WAN
link carries transfers of several senders to several receivers at once (the tree edges that
cross the boundary, both trees, several chunks in flight), which the DES shares max-min fairly.
Their other links are still private (one sender's or one receiver's serial transfers), so where
the flows of each shared link have one and the same cap of their own, max-min on that link is
processor sharing: k flows each get min(cap, C / k). This module times the schedule in one event
pass: fixed-time transfers off the shared links, processor sharing on them (per link: the bits
each flow has been served, and a heap of the flows' targets), as `fast/hierarchical.py` does for the
hierarchical exchange. Message for message the same ready / sent / arrived times as the DES, up
to rounding; the finish is no longer max-plus linear in the start times (replay simulates each
straggler-perturbed step).

Exactness is checked, not assumed (`shared_reason`): one-hop routes; every link either private
(one sender's or one receiver's transfers) or in exactly one shared set, crossed with weight 1;
the flows of a shared set with equal caps of their own. Link faults: a private transfer waits
out its links' down windows (`fault_delay`); a shared link that goes down stops every flow on it;
a fault on a shared flow's own link would make the shares uneven, so there the caller runs the
DES.
"""

import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing
from transitsim.network.des.fluid import SETTLE_REL
from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.fault_delay import delayed_one, down_windows, route_windows
from transitsim.network.fast.sharing import ProcessorSharing, overlap_s
from transitsim.network.fast.tree import TreeTable, shared_resources
from transitsim.network.schedules.dag import Schedule


@dataclass
class SharedLinks:
    """Per compiled path: its shared set (-1: none); per shared set, its resources, capacity
    and the one cap of their own its flows have."""

    group_of_path: list[int]
    resources: list[tuple[int, ...]]
    capacity: list[float]
    group_cap: list[float]
    # the schedule as plain lists, made on the first run (each step of a replay reuses them)
    lists: dict[str, list] | None = None


def _lists(schedule: Schedule, table: TreeTable, links: SharedLinks) -> dict[str, list]:
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
    groups = np.array(links.group_of_path + [-1], dtype=np.int64)[table.path_ids]
    return {
        "waiting": (lengths + (schedule.after >= 0)).tolist(),
        "arrival_ptr": arrival_ptr.tolist(),
        "arrival_next": waiters[order].tolist(),
        "sent_ptr": sent_ptr.tolist(),
        "sent_next": sent_order.tolist(),
        "group_of": groups.tolist(),
        "src": schedule.src.tolist(),
        "pre": table.pre.tolist(),
        "dur": table.dur.tolist(),
        "post": table.post.tolist(),
        "bits": (schedule.nbytes * 8.0).tolist(),
        "path_ids": table.path_ids.tolist(),
    }


def shared_links(
    fabric: Fabric, schedule: Schedule, path_ids: np.ndarray, paths: list[Path]
) -> SharedLinks | str:
    """The tree's shared links, or why processor sharing would not be exact here."""
    if any(len(p.hops) != 1 for p in paths):
        return "routes of more than one hop"
    shared = set(shared_resources(fabric, schedule, path_ids, paths))
    keys: dict[tuple[int, ...], int] = {}
    groups, caps, resources, capacity = [], [], [], []
    for path in paths:
        hop = path.hops[0]
        mine = tuple(r for r in hop.resources if r in shared)
        own = [
            fabric.resources[r].rate_bps / w
            for r, w in zip(hop.resources, hop.weights, strict=True)
            if r not in shared
        ]
        caps.append(min(own, default=math.inf))
        if not mine:
            groups.append(-1)
            continue
        if any(w != 1.0 for r, w in zip(hop.resources, hop.weights, strict=True) if r in shared):
            return "a shared link carries weighted (transformed) bytes"
        if mine not in keys:
            keys[mine] = len(resources)
            resources.append(mine)
            capacity.append(min(fabric.resources[r].rate_bps for r in mine))
        groups.append(keys[mine])
    seen: set[int] = set()
    for mine in resources:
        if seen & set(mine):
            return "flows share links in overlapping sets"
        seen |= set(mine)
    group_cap = []
    for g in range(len(resources)):
        own = {caps[p] for p, group in enumerate(groups) if group == g}
        if len(own) != 1:
            return "flows sharing a link have different rates of their own"
        group_cap.append(own.pop())
    return SharedLinks(groups, resources, capacity, group_cap)


def private_fault_reason(links: SharedLinks, paths: list[Path], faults) -> str | None:
    """Why a fault would make a shared link's shares uneven (None: it would not)."""
    windows = down_windows(faults)
    shared = {r for mine in links.resources for r in mine}
    for p, path in enumerate(paths):
        if links.group_of_path[p] < 0:
            continue
        own = [r for r in path.hops[0].resources if r not in shared]
        if route_windows(windows, own):
            return "a link fault on a shared flow's own link (uneven max-min shares)"
    return None


def run_shared_tree(
    fabric: Fabric,
    table: TreeTable,
    links: SharedLinks,
    start_s: np.ndarray,
    faults: list[ResourceFault] | None = None,
) -> Timing:
    """Every message's times: fixed-time transfers and processor-shared links, in time order
    (call shared_links, and with faults private_fault_reason, first)."""
    schedule = table.schedule
    count = len(schedule)
    workers = schedule.workers
    start = np.asarray(start_s, dtype=float).tolist()
    if links.lists is None:
        links.lists = _lists(schedule, table, links)
    lists = links.lists
    src, pre, dur, post, bits = (lists[k] for k in ("src", "pre", "dur", "post", "bits"))
    path_ids, group_of = lists["path_ids"], lists["group_of"]
    arrival_ptr, arrival_next = lists["arrival_ptr"], lists["arrival_next"]
    sent_ptr, sent_next = lists["sent_ptr"], lists["sent_next"]
    waiting = list(lists["waiting"])
    windows = down_windows(faults or [])
    held = [route_windows(windows, p.hops[0].resources) for p in table.paths]

    ready, free, arrive = [math.nan] * count, [math.nan] * count, [math.nan] * count
    stall = [0.0] * count
    due = [-math.inf] * count
    busy_shared = [0.0] * len(links.resources)
    down = [route_windows(windows, mine) for mine in links.resources]
    slowed = [False] * count
    events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, a, b)
    START, DEPART, CAPACITY = 0, 1, 2
    seq = itertools.count().__next__
    sharing = ProcessorSharing(links.capacity, links.group_cap, events, seq, DEPART, busy_shared)
    sharing.push_windows(down, CAPACITY)

    # Messages off the shared links are timed as soon as they are released, without events:
    # their times follow from their dependencies alone, and whatever they release later on a
    # shared link is pushed at its own (later) time, so the events stay in time order.
    todo: list[int] = []  # released messages not timed yet

    def satisfied(targets_: list[int], t: float) -> None:
        for m in targets_:
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
                continue
            t = t + pre[m]
            if group_of[m] >= 0:
                heapq.heappush(events, (t, seq(), START, m, 0))
            elif held[p]:
                end, stall[m] = delayed_one(t, dur[m], held[p])
                sent(m, end)
            else:
                sent(m, t + dur[m])

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
            sharing.start(group_of[a], t, bits[a], a)
        elif kind == CAPACITY:
            sharing.set_down(a, t, bool(b))
        else:  # DEPART of the flow with the least left on link set a (unless stale)
            m = sharing.depart(a, t, b)
            if m is None:
                continue
            began = ready[m] + pre[m]
            stall[m] = still = overlap_s(began, t, down[a])
            slowed[m] = t - began - still > dur[m] * (1 + SETTLE_REL)
            sent(m, t)
            drain()

    ready_s, free_s, arrive_s = np.array(ready), np.array(free), np.array(arrive)
    stood = np.array(stall)
    busy, carried = _usage(fabric, table, links, ready_s, free_s, busy_shared)
    first_res = [mine[0] for mine in links.resources]
    shared_by = np.array(
        [first_res[group_of[m]] if slowed[m] else -1 for m in range(count)], dtype=np.int64
    )
    return Timing(
        ready_s=ready_s,
        free_s=free_s,
        arrive_s=arrive_s,
        events=processed,  # shared links' starts, departures and changes (the rest: none)
        stall_s=stood,
        stall0_s=stood,  # one hop: the first is the whole
        shared_by=shared_by,
        busy_s=busy,
        bytes=carried,
    )


def _usage(fabric, table: TreeTable, links: SharedLinks, ready_s, free_s, busy_shared):
    """Bytes per resource, and busy time: the sum of its transfers' spans (from the start of
    sending to the last bit sent, as the DES counts), or for a shared link the union of its
    flows' spans."""
    ids = np.flatnonzero(table.path_ids >= 0)
    path_ids = table.path_ids[ids]
    count = len(table.paths)
    span = free_s[ids] - (ready_s[ids] + table.pre[ids])
    nbytes = np.bincount(path_ids, weights=table.schedule.nbytes[ids], minlength=count)
    spans = np.bincount(path_ids, weights=span, minlength=count)
    carried = np.zeros(len(fabric.resources))
    busy = np.zeros(len(fabric.resources))
    shared = {r for mine in links.resources for r in mine}
    for p in np.flatnonzero(nbytes > 0).tolist():
        hop = table.paths[p].hops[0]
        for r, w in zip(hop.resources, hop.weights, strict=True):
            carried[r] += w * nbytes[p]
            if r not in shared:
                busy[r] += spans[p]
    for g, mine in enumerate(links.resources):
        for r in mine:
            busy[r] = busy_shared[g]
    return busy, carried
