"""The exact fast path for the pipelined trees where no link carries both halves: fixed times.

`tree_layout` gives each rank a chain of sends and a chain of receives per half (reduce,
broadcast), and numbers messages in a topological order. Where no link carries transfers of
both halves and every link carries one sender's or one receiver's transfers (`split_links`:
two ranks on a switch), no two transfers are ever on a link at once, whatever the start times:
each takes its fixed time, and one pass in id order gives the DES's ready / sent / arrived
times (the same operations: ready + pre + bits / rate, + post), and the finish is max-plus
linear in the start times (`tree_linear`). A link fault holds up the transfers crossing the link
while it is down (`fault_delay`); they are still alone on their links, so the pass stays exact
(but no longer linear). Where the halves overlap, `fast/trees/split.py` shares the links.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing, unshared_timing
from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.shared.fault_delay import delayed_one, down_windows, route_windows
from transitsim.network.fast.shared.maxplus import Linear
from transitsim.network.schedules.dag import Schedule


@dataclass
class TreeTable:
    """Per message: the time its sender is busy (a), until it arrives (c), and its sources."""

    schedule: Schedule
    path_ids: np.ndarray
    paths: list[Path]
    pre: np.ndarray
    dur: np.ndarray
    post: np.ndarray

    @classmethod
    def of(cls, schedule: Schedule, path_ids: np.ndarray, paths: list[Path]) -> "TreeTable":
        pre = np.array([p.hops[0].pre_s for p in paths] + [0.0])[path_ids]
        rate = np.array([p.hops[0].rate_bps for p in paths] + [np.inf])[path_ids]
        bits = schedule.nbytes * 8.0
        with np.errstate(divide="ignore", invalid="ignore"):
            dur = np.where(bits > 0, bits / rate, 0.0)
        pairs = zip(path_ids.tolist(), bits.tolist(), strict=True)
        post = np.array([paths[p].hops[0].post_for(b) if p >= 0 else 0.0 for p, b in pairs])
        return cls(schedule, path_ids, paths, pre, dur, post)


def run_fast_tree(
    fabric: Fabric,
    table: TreeTable,
    start_s: np.ndarray,
    faults: list[ResourceFault] | None = None,
) -> Timing:
    """Every message's times in one pass in id order (where split_links finds no overlap)."""
    schedule = table.schedule
    count = len(schedule)
    workers = schedule.workers
    start = np.asarray(start_s, dtype=float).tolist()
    src = schedule.src.tolist()
    after = schedule.after.tolist()
    ptr = schedule.data_ptr.tolist()
    idx = schedule.data_idx.tolist()
    pre, dur, post = table.pre.tolist(), table.dur.tolist(), table.post.tolist()
    windows = down_windows(faults or [])
    held = [route_windows(windows, p.hops[0].resources) for p in table.paths] + [()]
    path_ids = table.path_ids.tolist()
    stall = [0.0] * count
    ready, free, arrive = [0.0] * count, [0.0] * count, [0.0] * count
    for m in range(count):
        s = src[m]
        t = start[s] if s < workers else -np.inf
        a = after[m]
        if a >= 0 and free[a] > t:
            t = free[a]
        for k in range(ptr[m], ptr[m + 1]):
            if arrive[idx[k]] > t:
                t = arrive[idx[k]]
        ready[m] = t
        spans = held[path_ids[m]]
        if spans:
            sent, stall[m] = delayed_one(t + pre[m], dur[m], spans)
        else:
            sent = (t + pre[m]) + dur[m]
        free[m] = sent
        arrive[m] = sent + post[m]
    stood = np.array(stall)
    busy, carried = _usage(table, len(fabric.resources), stood)
    timing = unshared_timing(np.array(ready), np.array(free), np.array(arrive), 0, busy, carried)
    if windows:
        timing.stall_s = timing.stall0_s = stood  # one hop: the first is the whole
    return timing


def _usage(table: TreeTable, resources: int, stall: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and busy time per resource: the sums over its transfers (they never overlap),
    time stood still at a fault included, as the DES counts it."""
    ids = np.flatnonzero(table.path_ids >= 0)
    path_ids = table.path_ids[ids]
    count = len(table.paths)
    nbytes = np.bincount(path_ids, weights=table.schedule.nbytes[ids], minlength=count)
    spans = np.bincount(path_ids, weights=table.dur[ids] + stall[ids], minlength=count)
    carried = np.zeros(resources)
    busy = np.zeros(resources)
    for p in np.flatnonzero(nbytes > 0).tolist():
        hop = table.paths[p].hops[0]
        for r, w in zip(hop.resources, hop.weights, strict=True):
            carried[r] += w * nbytes[p]
            busy[r] += spans[p]
    return busy, carried


def tree_linear(table: TreeTable) -> Linear:
    """d of finish = max_i(start_i + d_i): the longest path from each worker's start, by one pass
    in reverse id order (the messages' successors all have larger ids)."""
    schedule = table.schedule
    count = len(schedule)
    workers = schedule.workers
    a = (table.pre + table.dur).tolist()
    c = (table.pre + table.dur + table.post).tolist()
    after = schedule.after.tolist()
    ptr = schedule.data_ptr.tolist()
    idx = schedule.data_idx.tolist()
    counts = schedule.counts.tolist()
    dst = schedule.dst.tolist()
    neg = -np.inf
    via_free = [neg] * count  # longest tail released by m's send being done
    via_arrive = [neg] * count  # ... by its arrival
    tail = [neg] * count
    for m in range(count - 1, -1, -1):
        best = via_arrive[m]
        if counts[m] and dst[m] < workers and best < 0.0:
            best = 0.0
        whole = c[m] + best
        sent = a[m] + via_free[m]
        tail[m] = whole if whole > sent else sent
        t = tail[m]
        if after[m] >= 0 and t > via_free[after[m]]:
            via_free[after[m]] = t
        for k in range(ptr[m], ptr[m + 1]):
            if t > via_arrive[idx[k]]:
                via_arrive[idx[k]] = t
    d = np.full(workers, neg)
    np.maximum.at(d, schedule.src, np.array(tail))
    return Linear(d)
