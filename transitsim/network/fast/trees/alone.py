"""The trees' step where transfers mostly move alone: one longest-path pass, no heap.

fast/trees/kernel.py walks a tree all-reduce's events in time order because the overlapping
halves may share a link group, and then every rate depends on what else is moving. Often
nothing else is: across two datacentres 1,000 km apart (benchmarks/bench_engine.py 1b) every
one of the double binary tree's 261,888 transfers a step moved alone on all its groups, and the
heap, not the sharing, cost the 0.65 s a step. A transfer that is alone moves at its own rate
for its whole life (C where the sharing is per link, else its slowest group's), so its times
are fixed and the step is a longest-path pass over the schedule in a topological order
(`timed_pass`). A transfer whose finish is known otherwise (`fixed_free`: fast/trees/repair.py
simulated the few that met) takes that finish instead.

`overlaps` checks the claim on the times the pass computed, on each group in start order: a
transfer still on its group when the next one starts there (even one the DES's rounding would
settle then: it would leave its groups at that start, not at its finish), or two starting at
once, met it there; every such pair is written out. Where there are none, the
event pass would have met the same situation at every event and its floats are these: the
same sums in the same form, each group's busy time added per busy spell in the same order, a
transfer that a later start on one of its groups finds settled counted busy until that start,
as there (tests/test_tree_kernel.py holds both equal bit for bit).

Each group's start order is kept between calls (a replay's steps mostly keep it) and re-sorted
only where a step changed it.
"""

import numpy as np

from transitsim.network.des.fluid import SETTLE_REL
from transitsim.network.fast.shared.jit import jit

_jit = jit


@_jit
def _settled(finish, time):
    return finish <= time + SETTLE_REL * max(abs(time), abs(finish)) and np.isfinite(finish)


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
def timed_pass(
    first,
    start,
    workers,
    order,
    preds,
    src,
    is_local,
    pre,
    dur,
    post,
    bits,
    has_path,
    rate,
    bound,
    fixed,
    times,
):
    """Every message from order[first] on, each transfer moving alone at `rate` unless
    fixed[0] (its finish, NaN: none) and fixed[1] (what set its rate) say otherwise; those
    before order[first] keep the times they have. preds: (data_ptr, data_idx, after), the
    arrivals and the send each message waits for; times: (ready, free, arrive, began,
    shared_by, off), written here (began: a transfer's start, off: when it left its groups, its
    finish unless fixed[2] says otherwise; both NaN for the rest)."""
    dptr, didx, after = preds
    fixed_free, fixed_bound, fixed_off = fixed
    ready, free, arrive, began, shared_by, off = times
    initial = start.min() if len(start) > 0 else 0.0
    for i in range(first, len(order)):
        m = order[i]
        time = -np.inf
        for p in didx[dptr[m] : dptr[m + 1]]:
            if arrive[p] > time:
                time = arrive[p]
        if after[m] >= 0 and free[after[m]] > time:
            time = free[after[m]]
        if time == -np.inf:
            time = initial
        origin = src[m]
        if origin < workers and start[origin] > time:
            time = start[origin]
        ready[m] = time
        if not has_path[m]:  # a JOIN: nothing to send
            done = time
            after_s = time
        elif is_local[m]:  # the own transform
            done = time + pre[m] + dur[m]
            after_s = done + post[m]
        else:
            now = time + pre[m]
            began[m] = now
            if not np.isnan(fixed_free[m]):
                done = fixed_free[m]
                shared_by[m] = fixed_bound[m]
                off[m] = fixed_off[m]
            else:
                done = now if bits[m] <= 0.0 else now + bits[m] / rate[m]
                shared_by[m] = bound[m]
                off[m] = done
            after_s = done + post[m]
        free[m] = done
        arrive[m] = after_s


@_jit
def overlaps(by_group, began, off, pairs, busy_g):
    """Each group's transfers in start order: every pair that met (the later started before
    the earlier had left, or both at once) into pairs (rows: earlier, later), and the group's
    busy time as the event pass adds it, one busy spell at a time. off: when each transfer
    left its groups (its finish, or the start that settled it). Returns the pairs written, or
    -1 where there were more than pairs holds."""
    gptr, gflows = by_group
    room = len(pairs)
    count = 0
    widest = 1
    for g in range(len(gptr) - 1):
        widest = max(widest, gptr[g + 1] - gptr[g])
    on = np.empty(widest, np.int64)  # the transfers still on the group, and when they leave
    on_began = np.empty(widest)
    on_off = np.empty(widest)
    g = 0
    while g < len(gptr) - 1:
        flows = gflows[gptr[g] : gptr[g + 1]]
        total = 0.0
        spell_begin = 0.0
        spell_end = -np.inf
        held = 0
        before = -np.inf
        sorted_ = True
        for i in range(len(flows)):
            b = flows[i]
            now = began[b]
            if now < before:
                sorted_ = False
                break
            before = now
            kept = 0
            for x in range(held):
                if on_began[x] == now or on_off[x] > now:  # still on the group: they met
                    if count == room:
                        return -1
                    pairs[count, 0] = on[x]
                    pairs[count, 1] = b
                    count += 1
                    on[kept], on_began[kept], on_off[kept] = on[x], on_began[x], on_off[x]
                    kept += 1
                elif on_off[x] > spell_end:
                    spell_end = on_off[x]
            held = kept
            if i == 0:
                spell_begin = now
            elif held == 0:  # the group emptied: one busy spell ends
                total += spell_end - spell_begin
                spell_begin = now
                spell_end = -np.inf
            on[held], on_began[held], on_off[held] = b, now, off[b]
            held += 1
        if not sorted_:  # this step changed the group's start order: sort, then again
            flows[:] = flows[np.argsort(began[flows], kind="mergesort")]
            continue
        for x in range(held):
            if on_off[x] > spell_end:
                spell_end = on_off[x]
        if len(flows) > 0:
            total += spell_end - spell_begin
        busy_g[g] = total
        g += 1
    return count
