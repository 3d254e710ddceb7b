"""The trees' event pass of fast/tree_shared.py compiled with numba (imported on first use).

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
"""

import numba
import numpy as np

from transitsim.network.des.fluid import SETTLE_REL

START, DEPART = 0, 1
# scalar state kept in one int64 array: heap size, next sequence, todo size, pushes, overflow
HEAP, SEQ, TODO, PUSHES, OVERFLOW = 0, 1, 2, 3, 4
_jit = numba.njit(cache=True, nogil=True)


@_jit
def _before(t, s, i, j):
    return t[i] < t[j] or (t[i] == t[j] and s[i] < s[j])


@_jit
def _swap(t, s, kind, a, pos, i, j):
    t[i], t[j] = t[j], t[i]
    s[i], s[j] = s[j], s[i]
    kind[i], kind[j] = kind[j], kind[i]
    a[i], a[j] = a[j], a[i]
    if kind[i] == DEPART:
        pos[a[i]] = i
    if kind[j] == DEPART:
        pos[a[j]] = j


@_jit
def _sift(t, s, kind, a, pos, i, size):
    """Restores the heap around index i (its key may have moved either way)."""
    while i > 0:
        parent = (i - 1) // 2
        if not _before(t, s, i, parent):
            break
        _swap(t, s, kind, a, pos, i, parent)
        i = parent
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(t, s, child + 1, child):
            child += 1
        if not _before(t, s, child, i):
            break
        _swap(t, s, kind, a, pos, i, child)
        i = child


@_jit
def _push(t, s, kind, a, pos, st, time, what, m):
    i = st[HEAP]
    t[i], s[i], kind[i], a[i] = time, st[SEQ], what, m
    if what == DEPART:
        pos[m] = i
    st[SEQ] += 1
    st[PUSHES] += 1
    st[HEAP] += 1
    _sift(t, s, kind, a, pos, i, st[HEAP])


@_jit
def _remove(t, s, kind, a, pos, st, i):
    """Takes entry i off the heap."""
    last = st[HEAP] - 1
    if kind[i] == DEPART:
        pos[a[i]] = -1
    if i != last:
        t[i], s[i], kind[i], a[i] = t[last], s[last], kind[last], a[last]
        if kind[i] == DEPART:
            pos[a[i]] = i
    st[HEAP] = last
    if i < last:
        _sift(t, s, kind, a, pos, i, last)


@_jit
def _settled(finish, time):
    return finish <= time + SETTLE_REL * max(abs(time), abs(finish)) and np.isfinite(finish)


@_jit
def _satisfied(targets, time, due, waiting, todo, st):
    for m in targets:
        if time > due[m]:
            due[m] = time
        waiting[m] -= 1
        if waiting[m] == 0:
            todo[st[TODO]] = m
            st[TODO] += 1


@_jit
def _sent(m, time, free, arrive, post, due, waiting, todo, st, sptr, snext, aptr, anext):
    free[m] = time
    _satisfied(snext[sptr[m] : sptr[m + 1]], time, due, waiting, todo, st)
    arrive[m] = time + post[m]
    _satisfied(anext[aptr[m] : aptr[m + 1]], arrive[m], due, waiting, todo, st)


@_jit
def _on_groups(groups, members, msize, buf):
    """The flows on these groups, each once, in group then insertion order; how many."""
    n = 0
    for g in groups:
        for w in range(msize[g]):
            f = members[g, w]
            seen = False
            for x in range(n):
                if buf[x] == f:
                    seen = True
                    break
            if not seen:
                buf[n] = f
                n += 1
    return n


@_jit
def _reshare(flows, now, fl, heap, st, gptr, gidx, bptr, br, bg, msize, capacity):
    rate, since, left, finish, bound, pos = fl
    t, s, kind, a = heap
    for f in flows:
        groups = gidx[gptr[f] : gptr[f + 1]]
        most = 1
        if len(groups) > 0:
            most = msize[groups[0]]
            for g in groups[1:]:
                if msize[g] > most:
                    most = msize[g]
        new = capacity / most
        bound[f] = -1
        for x in range(bptr[f], bptr[f + 1]):
            if msize[bg[x]] == most:
                bound[f] = br[x]
                break
        if new == rate[f]:
            continue  # unchanged: keep the projected finish bit for bit
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
            _sift(t, s, kind, a, pos, i, st[HEAP])
        else:
            _push(t, s, kind, a, pos, st, finish[f], DEPART, f)


@_jit
def tree_pass(
    start,
    workers,
    waiting,
    aptr,
    anext,
    sptr,
    snext,
    src,
    local,
    pre,
    dur,
    post,
    bits,
    gptr,
    gidx,
    bptr,
    br,
    bg,
    capacity,
    count_groups,
    width,
    ready,
    free,
    arrive,
    shared_by,
    busy_g,
    has_path,
):
    """Every message's times into ready, free, arrive (and shared_by, busy per group), in time
    order; per message its link groups (gptr/gidx) and binding links (bptr/br/bg). Returns the
    events pushed, or -1 where a group would hold more than `width` transfers at once."""
    count = len(waiting)
    st = np.zeros(5, dtype=np.int64)
    room = 2 * count + 8
    t = np.empty(room)
    s = np.empty(room, dtype=np.int64)
    kind = np.empty(room, dtype=np.int64)
    a = np.empty(room, dtype=np.int64)
    pos = np.full(count, -1, dtype=np.int64)
    heap = (t, s, kind, a)
    due = np.full(count, -np.inf)
    rate = np.full(count, -1.0)
    since = np.zeros(count)
    left = np.zeros(count)
    finish = np.full(count, np.inf)
    bound = np.full(count, -1, dtype=np.int64)
    alive = np.zeros(count, dtype=np.bool_)
    fl = (rate, since, left, finish, bound, pos)
    members = np.full((count_groups, width), -1, dtype=np.int64)
    msize = np.zeros(count_groups, dtype=np.int64)
    busy_from = np.zeros(count_groups)
    todo = np.empty(count, dtype=np.int64)
    most_groups = 1
    for m in range(count):
        most_groups = max(most_groups, gptr[m + 1] - gptr[m])
    buf = np.empty(most_groups * width + 1, dtype=np.int64)
    others = np.empty(width, dtype=np.int64)

    initial = 0.0
    if len(start) > 0:
        initial = start.min()
    for m in range(count):
        if waiting[m] == 0:
            due[m] = initial
            todo[st[TODO]] = m
            st[TODO] += 1
    first = True
    while first or st[HEAP] > 0:
        if not first:
            last = st[HEAP] - 1
            _swap(t, s, kind, a, pos, 0, last)  # the least event to the end, then off
            now, what, f = t[last], kind[last], a[last]
            if what == DEPART:
                pos[f] = -1
            st[HEAP] = last
            _sift(t, s, kind, a, pos, 0, last)
            groups = gidx[gptr[f] : gptr[f + 1]]
            if what == START:
                # transfers over by now (to rounding) leave before this one joins
                for g in groups:
                    n = 0
                    for w in range(msize[g]):
                        o = members[g, w]
                        if _settled(finish[o], now):
                            others[n] = o
                            n += 1
                    for x in range(n):
                        if alive[others[x]]:
                            _complete(
                                others[x],
                                now,
                                fl,
                                heap,
                                st,
                                alive,
                                members,
                                msize,
                                busy_g,
                                busy_from,
                                shared_by,
                                buf,
                                gptr,
                                gidx,
                                bptr,
                                br,
                                bg,
                                capacity,
                                free,
                                arrive,
                                post,
                                due,
                                waiting,
                                todo,
                                sptr,
                                snext,
                                aptr,
                                anext,
                            )
                alive[f] = True
                rate[f], since[f], left[f], finish[f] = -1.0, now, bits[f], np.inf
                for g in groups:
                    if msize[g] == 0:
                        busy_from[g] = now
                    if msize[g] == width:
                        st[OVERFLOW] = 1
                        return -1
                    members[g, msize[g]] = f
                    msize[g] += 1
                n = _on_groups(groups, members, msize, buf)
                _reshare(buf[:n], now, fl, heap, st, gptr, gidx, bptr, br, bg, msize, capacity)
            else:
                _complete(
                    f,
                    now,
                    fl,
                    heap,
                    st,
                    alive,
                    members,
                    msize,
                    busy_g,
                    busy_from,
                    shared_by,
                    buf,
                    gptr,
                    gidx,
                    bptr,
                    br,
                    bg,
                    capacity,
                    free,
                    arrive,
                    post,
                    due,
                    waiting,
                    todo,
                    sptr,
                    snext,
                    aptr,
                    anext,
                )
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
                _satisfied(snext[sptr[m] : sptr[m + 1]], time, due, waiting, todo, st)
                _satisfied(anext[aptr[m] : aptr[m + 1]], time, due, waiting, todo, st)
            elif local[m]:  # the own transform: alone on its lanes
                _sent(
                    m,
                    time + pre[m] + dur[m],
                    free,
                    arrive,
                    post,
                    due,
                    waiting,
                    todo,
                    st,
                    sptr,
                    snext,
                    aptr,
                    anext,
                )
            else:
                _push(t, s, kind, a, pos, st, time + pre[m], START, m)
    return st[PUSHES]


@_jit
def _complete(
    f,
    now,
    fl,
    heap,
    st,
    alive,
    members,
    msize,
    busy_g,
    busy_from,
    shared_by,
    buf,
    gptr,
    gidx,
    bptr,
    br,
    bg,
    capacity,
    free,
    arrive,
    post,
    due,
    waiting,
    todo,
    sptr,
    snext,
    aptr,
    anext,
):
    """Off its groups, the others reshared, then sent (des.fluid.FluidEngine._complete)."""
    rate, since, left, finish, bound, pos = fl
    t, s, kind, a = heap
    alive[f] = False
    if pos[f] >= 0:  # ended early (settled by a later start): its departure is off the heap
        _remove(t, s, kind, a, pos, st, pos[f])
    groups = gidx[gptr[f] : gptr[f + 1]]
    for g in groups:
        for w in range(msize[g]):
            if members[g, w] == f:
                for x in range(w, msize[g] - 1):
                    members[g, x] = members[g, x + 1]
                msize[g] -= 1
                break
        if msize[g] == 0:
            busy_g[g] += now - busy_from[g]
    n = _on_groups(groups, members, msize, buf)
    _reshare(buf[:n], now, fl, heap, st, gptr, gidx, bptr, br, bg, msize, capacity)
    if bound[f] >= 0:
        shared_by[f] = bound[f]
    _sent(
        f, max(finish[f], now), free, arrive, post, due, waiting, todo, st, sptr, snext, aptr, anext
    )
