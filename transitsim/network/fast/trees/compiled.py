"""The trees' fault-free step, compiled: the one pass, the repair, or the whole event pass.

`fast/trees/split.py` groups a tree all-reduce's links and proves where sharing them is exact;
without link faults its steps are timed here, cheapest first: where every transfer moves alone
on its groups, one longest-path pass (`fast/trees/alone.py`); where a few meet, those few by the
event pass and the rest by that pass (`fast/trees/repair.py`); else the whole event pass
(`fast/trees/kernel.py`). The schedule's columns are laid out once per tree (`links.arrays`),
with the work arrays the passes reuse from step to step. `links` is split.py's SplitLinks.
"""

import collections

import numpy as np

from transitsim.network.des.engine import Timing
from transitsim.network.fabric import LOCAL_XFORM, Fabric
from transitsim.network.fast.trees.fixed import TreeTable
from transitsim.network.schedules.dag import Schedule


def schedule_lists(schedule: Schedule, table: TreeTable) -> dict[str, list]:
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


def _arrays(schedule: Schedule, table: TreeTable, links) -> dict[str, np.ndarray]:
    """The event pass's columns as arrays, and each message's link groups and binding links
    (those at their group's capacity) in CSR form, for kernel.tree_pass; where each group's
    room for the transfers on it at once (at most all that cross it) begins."""
    lists = links.lists if links.lists is not None else schedule_lists(schedule, table)
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


def _alone_arrays(arrays: dict[str, np.ndarray], links) -> None:
    """What fast/trees/alone.py needs: each transfer's rate and binding link when it moves alone
    (C where sharing is per link, else its slowest group's: max-min over itself alone) and each
    group's transfers (kept in start order there, from one step to the next)."""
    from transitsim.network.fast.trees.alone import topological_order

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
    arrays["preds"] = (arrays["data_ptr"], arrays["data_idx"], arrays["after"])
    keys = ("src", "local", "pre", "dur", "post", "bits")
    arrays["pass_columns"] = (  # what alone.timed_pass reads of each message
        *(arrays[k] for k in keys),
        arrays["path_ids"] >= 0,
        arrays["alone_rate"],
        arrays["alone_bound"],
    )


# how each fault-free step was timed, counted since the process began (the benchmark and the
# tests read it): "alone" (one pass), "repaired" (a few met), "event" (the others declined),
# "asked" (the event pass alone, alone=False)
TIMED_BY: collections.Counter = collections.Counter()


def compiled_pass(fabric, table: TreeTable, links, start: np.ndarray, alone: bool = True) -> Timing:
    """The fault-free pass: where every transfer moves alone on its groups, the one pass of
    fast/trees/alone.py; where a few meet, those few by the event pass and the rest by the one
    pass (fast/trees/repair.py); else the whole event pass of fast/trees/kernel.py (numba,
    imported here on first use). `alone` False: the event pass only (the tests compare)."""
    from transitsim.network.fast.trees.alone import overlaps, timed_pass
    from transitsim.network.fast.trees.repair import Work, repair

    if links.arrays is None:
        links.arrays = _arrays(table.schedule, table, links)
        links.arrays["carried"] = carried(fabric, table)  # the same every step
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
            c["preds"],
            *c["pass_columns"],
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
        busy_s=busy(fabric, table, links, ready, free, busy_g),
        bytes=c["carried"].copy(),
    )


def _event_pass(
    start: np.ndarray,
    table: TreeTable,
    links,
    c: dict[str, np.ndarray],
    times: tuple[np.ndarray, np.ndarray, np.ndarray],
    shared_by: np.ndarray,
    busy_g: np.ndarray,
) -> int:
    """kernel.tree_pass over these columns, into times (ready, free, arrive), shared_by
    and busy_g: the events pushed."""
    from transitsim.network.fast.trees.kernel import tree_pass

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


def carried(fabric: Fabric, table: TreeTable) -> np.ndarray:
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


def busy(fabric, table: TreeTable, links, ready_s, free_s, busy_g) -> np.ndarray:
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
