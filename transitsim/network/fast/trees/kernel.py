"""The trees' event pass of fast/trees/split.py compiled with numba (imported on first use).

`run_split_tree` walks a tree all-reduce's messages one Python event at a time: 1.4 s a step
for the tree and 4.1 s for the double binary tree on one switch of 1,024 workers (331,000 and
710,000 events; measured 2026-12-04 at load 0.0), so a 3,000-step straggler replay took hours.
This is the same pass without faults: the same (time, sequence) event order, the same
insertion-ordered members per link group, the same C / k rates and the same floats, so every
time comes out equal to the Python pass's bit for bit (tests/test_tree_kernel.py).

One change of bookkeeping, not of result: where the Python pass leaves a flow's departure on
the heap when its rate changes (and skips it later as stale), here the flow's one departure is
moved to its new (time, sequence) key, and one that ends early is taken off. The live events
come off the heap in the same order; `events` still counts every departure that was pushed.

The heap is the fast paths' one (fast/shared/heap.py, as hierarchical's exchange uses). A
start (`begin`: the transfers it finds settled leave, then it joins and its groups are
reshared) and a departure (`leave`) are written once here, for this whole pass and for the
repair's pass over a few flows (fast/trees/repair.py `cluster_pass`), which differ only in
what they do with a finish.
"""

import numpy as np

from transitsim.network.des.fluid import SETTLE_REL
from transitsim.network.fast.shared.heap import DEPART, START, pop, push, remove, sift
from transitsim.network.fast.shared.jit import inline_jit, jit

# scalar state kept in one int64 array: heap size, next sequence, todo size, pushes, stamp
HEAP, SEQ, TODO, PUSHES, STAMP = 0, 1, 2, 3, 4
_jit = jit
# the helpers are inlined: called per event with tuples of arrays, a call cost ~1.5x the pass
_inline = inline_jit


@_inline
def push_event(t, s, kind, a, pos, st, time, what, m):
    """Pushes (time, the next sequence number, what, m) on the heap, counted."""
    st[HEAP] = push(t, s, kind, a, pos, st[HEAP], time, st[SEQ], what, m)
    st[SEQ] += 1
    st[PUSHES] += 1


@_inline
def _settled(finish, time):
    return finish <= time + SETTLE_REL * max(abs(time), abs(finish)) and np.isfinite(finish)


@_inline
def _satisfied(targets, time, msg, st):
    waiting, due, todo = msg[0], msg[1], msg[2]
    for m in targets:
        if time > due[m]:
            due[m] = time
        waiting[m] -= 1
        if waiting[m] == 0:
            todo[st[TODO]] = m
            st[TODO] += 1


@_inline
def _sent(m, time, msg, st):
    free, arrive, post, sptr, snext, aptr, anext = msg[3:]
    free[m] = time
    _satisfied(snext[sptr[m] : sptr[m + 1]], time, msg, st)
    arrive[m] = time + post[m]
    _satisfied(anext[aptr[m] : aptr[m + 1]], arrive[m], msg, st)


@_inline
def _on_groups(groups, grp, buf):
    """The flows on these groups, each once, in group then insertion order; how many."""
    members, mbase, msize = grp[0], grp[1], grp[2]
    n = 0
    for g in groups:
        for w in range(msize[g]):
            f = members[mbase[g] + w]
            seen = False
            for x in range(n):
                if buf[x] == f:
                    seen = True
                    break
            if not seen:
                buf[n] = f
                n += 1
    return n


@_inline
def _settled_on(g, now, grp, finish, others):
    """The flows on group g over by now (to rounding), into others: how many."""
    members, mbase, msize = grp[0], grp[1], grp[2]
    n = 0
    for w in range(msize[g]):
        o = members[mbase[g] + w]
        if _settled(finish[o], now):
            others[n] = o
            n += 1
    return n


@_inline
def _join(f, now, groups, fl, bits, alive, grp):
    """A transfer starts: on its groups, last in their order, no rate yet."""
    rate, since, left, finish = fl[0], fl[1], fl[2], fl[3]
    members, mbase, msize, busy_from = grp[0], grp[1], grp[2], grp[5]
    alive[f] = True
    rate[f], since[f], left[f], finish[f] = -1.0, now, bits[f], np.inf
    for g in groups:
        if msize[g] == 0:
            busy_from[g] = now
        members[mbase[g] + msize[g]] = f
        msize[g] += 1


@_inline
def _apply(f, new, now, fl, heap, st):
    """A flow's new rate from now: bits left counted, its departure moved (as FluidEngine)."""
    rate, since, left, finish, bound, pos = fl
    t, s, kind, a = heap
    if new == rate[f]:
        return  # unchanged: keep the projected finish bit for bit
    elapsed = now - since[f]
    if rate[f] > 0 and elapsed > 0:
        left[f] = max(0.0, left[f] - rate[f] * elapsed)
    base = max(now, since[f])
    rate[f] = new
    since[f] = base
    if left[f] <= 0.0:
        finish[f] = base
    else:
        finish[f] = base + left[f] / new
    if pos[f] >= 0:  # the flow's departure moves to its new key (a new sequence number)
        i = pos[f]
        t[i], s[i] = finish[f], st[SEQ]
        st[SEQ] += 1
        st[PUSHES] += 1
        sift(t, s, kind, a, pos, i, st[HEAP])
    else:
        push_event(t, s, kind, a, pos, st, finish[f], DEPART, f)


@_inline
def _share_local(seeds, now, fl, heap, st, lk, grp, scratch, capacity):
    """One capacity, one-sided groups: a moving transfer gets C / k, k the most transfers on
    one of its groups (fast/trees/split.py's proof)."""
    gptr, gidx, bptr, br, bg = lk
    msize = grp[2]
    bound = fl[4]
    buf = scratch[0]
    n = _on_groups(seeds, grp, buf)
    for x in range(n):
        f = buf[x]
        groups = gidx[gptr[f] : gptr[f + 1]]
        most = 1
        if len(groups) > 0:
            most = msize[groups[0]]
            for g in groups[1:]:
                if msize[g] > most:
                    most = msize[g]
        bound[f] = -1
        for y in range(bptr[f], bptr[f + 1]):
            if msize[bg[y]] == most:
                bound[f] = br[y]
                break
        _apply(f, capacity / most, now, fl, heap, st)


@_inline
def _share_maxmin(seeds, now, fl, heap, st, lk, grp, scratch):
    """Max-min by progressive filling over the flows connected to the seed groups, as
    des.fluid.fair_shares does over their links (a group acts as its slowest link)."""
    gptr, gidx, bptr, br, bg = lk
    members, mbase, msize, gcap = grp[0], grp[1], grp[2], grp[3]
    bound = fl[4]
    buf, queue, gmark, fmark, rem, load, sat, newrate = scratch
    st[STAMP] += 1
    stamp = st[STAMP]
    nq = 0
    for g in seeds:
        if gmark[g] != stamp:
            gmark[g] = stamp
            queue[nq] = g
            nq += 1
    nf = 0
    qi = 0
    while qi < nq:  # the component: groups and flows reached through shared groups
        g = queue[qi]
        qi += 1
        for w in range(msize[g]):
            f = members[mbase[g] + w]
            if fmark[f] != stamp:
                fmark[f] = stamp
                buf[nf] = f
                nf += 1
                for h in gidx[gptr[f] : gptr[f + 1]]:
                    if gmark[h] != stamp:
                        gmark[h] = stamp
                        queue[nq] = h
                        nq += 1
    for i in range(nq):
        rem[queue[i]] = gcap[queue[i]]
    for x in range(nf):
        newrate[buf[x]] = -1.0  # not frozen yet
    level = 0.0
    unfrozen = nf
    while unfrozen > 0:
        for i in range(nq):
            load[queue[i]] = 0.0
        for x in range(nf):
            f = buf[x]
            if newrate[f] < 0:
                for h in gidx[gptr[f] : gptr[f + 1]]:
                    load[h] += 1.0
        delta = np.inf
        for i in range(nq):
            g = queue[i]
            if load[g] > 0 and rem[g] / load[g] < delta:
                delta = rem[g] / load[g]
        if not delta < np.inf:
            break  # flows on no group (none in a tree: split_links refuses them)
        level += delta
        for i in range(nq):
            g = queue[i]
            sat[g] = load[g] > 0 and rem[g] / load[g] <= delta
            if load[g] > 0:
                rem[g] = 0.0 if sat[g] else rem[g] - delta * load[g]
        for x in range(nf):
            f = buf[x]
            if newrate[f] >= 0:
                continue
            for h in gidx[gptr[f] : gptr[f + 1]]:
                if sat[h]:
                    newrate[f] = level
                    unfrozen -= 1
                    for y in range(bptr[f], bptr[f + 1]):
                        if sat[bg[y]]:
                            bound[f] = br[y]
                            break
                    break
    for x in range(nf):
        f = buf[x]
        _apply(f, newrate[f], now, fl, heap, st)


@_inline
def _share(seeds, now, fl, heap, st, lk, grp, scratch, capacity, local):
    if local:
        _share_local(seeds, now, fl, heap, st, lk, grp, scratch, capacity)
    else:
        _share_maxmin(seeds, now, fl, heap, st, lk, grp, scratch)


@_inline
def leave(f, now, fl, heap, st, alive, lk, grp, scratch, capacity, local):
    """A transfer is over: off the heap (where a later start settled it first) and off its
    groups, each group's busy spell counted where it empties, the others on them reshared
    (des.fluid.FluidEngine._complete). The caller then takes its finish, max(finish, now)."""
    pos = fl[5]
    t, s, kind, a = heap
    gptr, gidx = lk[0], lk[1]
    members, mbase, msize, busy_g, busy_from = grp[0], grp[1], grp[2], grp[4], grp[5]
    alive[f] = False
    if pos[f] >= 0:  # ended early (settled by a later start): its departure is off the heap
        st[HEAP] = remove(t, s, kind, a, pos, st[HEAP], pos[f])
    groups = gidx[gptr[f] : gptr[f + 1]]
    for g in groups:
        base = mbase[g]
        for w in range(msize[g]):
            if members[base + w] == f:
                for x in range(w, msize[g] - 1):
                    members[base + x] = members[base + x + 1]
                msize[g] -= 1
                break
        if msize[g] == 0:
            busy_g[g] += now - busy_from[g]
    _share(groups, now, fl, heap, st, lk, grp, scratch, capacity, local)


@_inline
def begin(f, now, fl, heap, st, alive, bits, lk, grp, scratch, capacity, local, others, gone):
    """A transfer starts: the transfers on its groups over by now (to rounding) leave first,
    into gone in the order they left (returns how many), then it joins, its groups reshared.
    The event loop's start, for the whole pass (`tree_pass`) and the repair's
    (fast/trees/repair.py) alike; each takes the finishes of those gone its own way."""
    gptr, gidx = lk[0], lk[1]
    finish = fl[3]
    groups = gidx[gptr[f] : gptr[f + 1]]
    n = 0
    for g in groups:
        k = _settled_on(g, now, grp, finish, others)
        for x in range(k):
            o = others[x]
            if alive[o]:
                leave(o, now, fl, heap, st, alive, lk, grp, scratch, capacity, local)
                gone[n] = o
                n += 1
    _join(f, now, groups, fl, bits, alive, grp)
    _share(groups, now, fl, heap, st, lk, grp, scratch, capacity, local)
    return n


@_inline
def _done(f, now, fl, msg, st, shared_by):
    """A transfer that left its groups at now is sent: its binding link, and what it releases."""
    finish, bound = fl[3], fl[4]
    if bound[f] >= 0:
        shared_by[f] = bound[f]
    _sent(f, max(finish[f], now), msg, st)


@_jit
def tree_pass(
    start,
    workers,
    msg,
    src,
    is_local,
    pre,
    dur,
    bits,
    has_path,
    lk,
    grp,
    capacity,
    local,
    shared_by,
    ready,
):
    """Every message's times into ready and msg's free and arrive (and shared_by, busy per
    group in grp), in time order. msg: (waiting, due, todo, free, arrive, post, sent CSR,
    arrival CSR); lk: per message its link groups (gptr/gidx) and binding links (bptr/br/bg);
    grp: per group its members' room (members, mbase), msize, capacity, busy and busy-from.
    local: C / k sharing (one capacity); else max-min over each component. Returns the events
    pushed."""
    count = len(bits)
    groups_count = len(grp[2])
    due, todo, free, arrive = msg[1], msg[2], msg[3], msg[4]
    sptr, snext, aptr, anext = msg[6], msg[7], msg[8], msg[9]
    st = np.zeros(5, dtype=np.int64)
    room = 2 * count + 8
    t = np.empty(room)
    s = np.empty(room, dtype=np.int64)
    kind = np.empty(room, dtype=np.int64)
    a = np.empty(room, dtype=np.int64)
    pos = np.full(count, -1, dtype=np.int64)
    heap = (t, s, kind, a)
    rate = np.full(count, -1.0)
    since = np.zeros(count)
    left = np.zeros(count)
    finish = np.full(count, np.inf)
    bound = np.full(count, -1, dtype=np.int64)
    alive = np.zeros(count, dtype=np.bool_)
    fl = (rate, since, left, finish, bound, pos)
    scratch = (
        np.empty(count + 1, dtype=np.int64),  # flows
        np.empty(groups_count + 1, dtype=np.int64),  # groups
        np.zeros(groups_count, dtype=np.int64),  # group stamps
        np.zeros(count, dtype=np.int64),  # flow stamps
        np.zeros(groups_count),  # capacity left
        np.zeros(groups_count),  # load
        np.zeros(groups_count, dtype=np.bool_),  # saturated
        np.zeros(count),  # new rates
    )
    others = np.empty(count + 1, dtype=np.int64)
    gone = np.empty(count + 1, dtype=np.int64)

    initial = 0.0
    if len(start) > 0:
        initial = start.min()
    for m in range(count):
        if msg[0][m] == 0:
            due[m] = initial
            todo[st[TODO]] = m
            st[TODO] += 1
    first = True
    while first or st[HEAP] > 0:
        if not first:
            last = pop(t, s, kind, a, pos, st[HEAP])  # the least event, off the heap
            st[HEAP] = last
            now, what, f = t[last], kind[last], a[last]
            if what == START:
                n = begin(
                    f,
                    now,
                    fl,
                    heap,
                    st,
                    alive,
                    bits,
                    lk,
                    grp,
                    scratch,
                    capacity,
                    local,
                    others,
                    gone,
                )
                for x in range(n):
                    _done(gone[x], now, fl, msg, st, shared_by)
            else:
                leave(f, now, fl, heap, st, alive, lk, grp, scratch, capacity, local)
                _done(f, now, fl, msg, st, shared_by)
        first = False
        while st[TODO] > 0:  # the released messages, last released first
            st[TODO] -= 1
            m = todo[st[TODO]]
            time = due[m]
            origin = src[m]
            if origin < workers and start[origin] > time:
                time = start[origin]
            ready[m] = time
            if not has_path[m]:  # a JOIN: nothing to send
                free[m] = arrive[m] = time
                _satisfied(snext[sptr[m] : sptr[m + 1]], time, msg, st)
                _satisfied(anext[aptr[m] : aptr[m + 1]], time, msg, st)
            elif is_local[m]:  # the own transform: alone on its lanes
                _sent(m, time + pre[m] + dur[m], msg, st)
            else:
                push_event(t, s, kind, a, pos, st, time + pre[m], START, m)
    return st[PUSHES]
