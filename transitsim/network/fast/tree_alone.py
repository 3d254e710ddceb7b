"""The trees' step when no transfer ever meets another on a link group: one pass, no heap.

fast/tree_kernel.py walks a tree all-reduce's events in time order because the overlapping
halves may share a link group, and then every rate depends on what else is moving. Often
nothing else is: across two datacentres 1,000 km apart (benchmarks/bench_engine.py 1b) every
one of the double binary tree's 261,888 transfers a step moved alone on all its groups, and the
heap, not the sharing, cost the 0.65 s a step. A transfer that is alone moves at its own rate
for its whole life (C where the sharing is per link, else its slowest group's), so its times
are fixed and the step is a longest-path pass over the schedule in any topological order.

Whether that held is checked on the times this pass computes, on each group in start order:
every transfer must have settled (finished, to the DES's rounding) by the next one's start, and
no two may start at once. Then the event pass would have met the same situation at every
event, and its floats are these: the same sums in the same form, the busy time per group added
in the same order, a transfer that a later start on one of its groups finds settled counted
busy until that start, as there. Where the check fails, the caller runs the event pass; the
cost of the attempt is this one pass (tests/test_tree_kernel.py holds both equal bit for bit).

Each group's start order is kept between calls (a replay's steps mostly keep it) and re-sorted
only where a step changed it.
"""

import numba
import numpy as np

from transitsim.network.des.fluid import SETTLE_REL

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _settled(finish, time):
    return finish <= time + SETTLE_REL * max(abs(time), abs(finish)) and np.isfinite(finish)


@_jit
def _raise(targets, time, due):
    for m in targets:
        if time > due[m]:
            due[m] = time


@_jit
def topological_order(waiting, sent, arrived):
    """An order in which every message comes after those it waits for: the schedule's own
    where it is one (then the pass reads its columns in sequence), else Kahn's."""
    count = len(waiting)
    sptr, snext = sent
    aptr, anext = arrived
    in_order = True
    for m in range(count):
        for t in snext[sptr[m] : sptr[m + 1]]:
            in_order = in_order and t > m
        for t in anext[aptr[m] : aptr[m + 1]]:
            in_order = in_order and t > m
    if in_order:
        return np.arange(count)
    left = waiting.copy()
    order = np.empty(count, dtype=np.int64)
    todo = np.empty(count, dtype=np.int64)
    size = done = 0
    for m in range(count):
        if left[m] == 0:
            todo[size] = m
            size += 1
    while size > 0:
        size -= 1
        m = todo[size]
        order[done] = m
        done += 1
        for successors in (snext[sptr[m] : sptr[m + 1]], anext[aptr[m] : aptr[m + 1]]):
            for t in successors:
                left[t] -= 1
                if left[t] == 0:
                    todo[size] = t
                    size += 1
    return order[:done]


@_jit
def _in_start_order(flows, began):
    """Sorts a group's flows by start in place where they are not (stable: ties keep order)."""
    for i in range(1, len(flows)):
        if began[flows[i]] < began[flows[i - 1]]:
            order = np.argsort(began[flows], kind="mergesort")
            flows[:] = flows[order]
            return


@_jit
def alone_pass(
    start,
    workers,
    order,
    waiting,
    src,
    is_local,
    pre,
    dur,
    post,
    bits,
    has_path,
    sent,
    arrived,
    rate,
    bound,
    by_group,
    busy_g,
    ready,
    free,
    arrive,
    shared_by,
):
    """Every message's times as if each transfer moved alone at `rate`, into ready, free,
    arrive, shared_by and busy_g; True where every transfer did move alone (else the outputs
    are not the event pass's and the caller runs it). sent/arrived: successors in CSR form
    (ptr, next); order: topological_order's; waiting: how many each message waits for (read,
    not changed); by_group: (ptr, flows) each group's transfers, kept in start order."""
    count = len(bits)
    sptr, snext = sent
    aptr, anext = arrived
    gptr, gflows = by_group
    due = np.full(count, -np.inf)
    began = np.full(count, np.nan)
    initial = start.min() if len(start) > 0 else 0.0
    for m in order:
        time = initial if waiting[m] == 0 else due[m]
        origin = src[m]
        if origin < workers and start[origin] > time:
            time = start[origin]
        ready[m] = time
        if not has_path[m]:  # a JOIN: nothing to send
            done = time
            after = time
        elif is_local[m]:  # the own transform
            done = time + pre[m] + dur[m]
            after = done + post[m]
        else:
            now = time + pre[m]
            began[m] = now
            done = now if bits[m] <= 0.0 else now + bits[m] / rate[m]
            after = done + post[m]
            if bound[m] >= 0:
                shared_by[m] = bound[m]
        free[m] = done
        arrive[m] = after
        _raise(snext[sptr[m] : sptr[m + 1]], done, due)
        _raise(anext[aptr[m] : aptr[m + 1]], after, due)
    # each transfer off its groups at its finish, or where a later start found it settled
    off = free.copy()
    for g in range(len(gptr) - 1):
        flows = gflows[gptr[g] : gptr[g + 1]]
        _in_start_order(flows, began)
        for i in range(1, len(flows)):
            before, now = flows[i - 1], flows[i]
            if began[now] == began[before] or not _settled(free[before], began[now]):
                return False  # two on this group at once: they shared it
            if began[now] < off[before]:
                off[before] = began[now]
    for g in range(len(gptr) - 1):
        total = 0.0
        for f in gflows[gptr[g] : gptr[g + 1]]:
            total += off[f] - began[f]
        busy_g[g] = total
    return True
