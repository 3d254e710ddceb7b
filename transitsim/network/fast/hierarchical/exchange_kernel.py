"""The compiled event loop behind fast/hierarchical/exchange_events.py (imported on first use).

One step of hierarchical's exchange across groups: (time, sequence) events on the fast paths'
binary heap (fast/shared/heap.py; an entry's payload is phase * flows + flow),
and per shared link the flows' targets (served bits at which each is done) on a heap keyed
(target, phase * flows + flow), exactly as `stages.exchange_stage` orders them with
heapq, so a tie is broken the same way and every time comes out the same float. A set's next
departure is kept beside the heap, not on it: each reshare replaces it (with the sequence number
the event loop's pushed departure would take), so the stale departures heapq skips are never
made.
"""

import numpy as np

from transitsim.network.fast.shared.heap import START, pop, push
from transitsim.network.fast.shared.jit import jit

DEPART = 1  # a shared flow departs (kept beside the heap, never on it)
END = 2  # on the heap: a flow that crosses nothing shared ends (a fixed time)
_jit = jit


@_jit
def _target_before(v, key, i, j):
    return v[i] < v[j] or (v[i] == v[j] and key[i] < key[j])


@_jit
def _target_push(v, key, base, size, value, k):
    """Adds (value, k) to the heap at v[base:], key[base:]; returns its new size."""
    i = size
    v[base + i], key[base + i] = value, k
    while i > 0:
        parent = (i - 1) // 2
        if not _target_before(v, key, base + i, base + parent):
            break
        v[base + i], v[base + parent] = v[base + parent], v[base + i]
        key[base + i], key[base + parent] = key[base + parent], key[base + i]
        i = parent
    return size + 1


@_jit
def _target_pop(v, key, base, size):
    """Removes the least (value, k); returns k and the heap's new size."""
    out = key[base]
    last = size - 1
    v[base], key[base] = v[base + last], key[base + last]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= last:
            break
        if child + 1 < last and _target_before(v, key, base + child + 1, base + child):
            child += 1
        if not _target_before(v, key, base + child, base + i):
            break
        v[base + i], v[base + child] = v[base + child], v[base + i]
        key[base + i], key[base + child] = key[base + child], key[base + i]
        i = child
    return out, last


@_jit
def _one_step(ready0, members, pre, dur, post, bits, group, cap, capacity, free, arrive):
    phases, flows = pre.shape
    groups = capacity.shape[0]
    room = 2 * phases * flows + 8  # live events: a flow-phase's start or its fixed end
    t = np.empty(room)
    s = np.empty(room, dtype=np.int64)
    kind = np.empty(room, dtype=np.int64)
    a = np.empty(room, dtype=np.int64)
    pos = np.empty(0, dtype=np.int64)  # no DEPART on this heap: nothing to track
    size = 0
    seq = 0
    pending = np.full((phases, flows), 2, dtype=np.int64)  # deps still missing (after, data)
    due = np.full((phases, flows), -np.inf)
    active = np.zeros(groups, dtype=np.int64)  # processor sharing per link group
    served = np.zeros(groups)
    since = np.zeros(groups)
    rate = np.zeros(groups)
    counts = np.zeros(groups + 1, dtype=np.int64)
    for e in range(flows):
        if group[e] >= 0:
            counts[group[e] + 1] += phases
    base = np.cumsum(counts)
    tv = np.empty(base[groups] + 1)
    tk = np.empty(base[groups] + 1, dtype=np.int64)
    tsize = np.zeros(groups, dtype=np.int64)
    for e in range(flows):
        pending[0, e] = 0
        size = push(t, s, kind, a, pos, size, ready0[e] + pre[0, e], seq, START, e)
        seq += 1
    gt = np.full(groups, np.inf)  # each set's pending departure (time, seq): kept off the heap
    gs = np.zeros(groups, dtype=np.int64)
    while True:
        g = -1  # the set whose departure comes first, if it comes before the heap's least event
        for h in range(groups):
            if gt[h] < np.inf and (g < 0 or gt[h] < gt[g] or (gt[h] == gt[g] and gs[h] < gs[g])):
                g = h
        if g >= 0 and size > 0 and not (gt[g] < t[0] or (gt[g] == t[0] and gs[g] < s[0])):
            g = -1
        if g < 0 and size == 0:
            break
        if g >= 0:  # a shared flow departs
            what, now = DEPART, gt[g]
            served[g] += rate[g] * (now - since[g])
            since[g] = now
            key, tsize[g] = _target_pop(tv, tk, base[g], tsize[g])
            active[g] -= 1
            k, e = key // flows, key % flows
        else:
            size = pop(t, s, kind, a, pos, size)
            now, what, x = t[size], kind[size], a[size]
            k, e = x // flows, x % flows  # (phase, flow), for a start and an end alike
            if what == START:
                if group[e] < 0:  # crosses nothing shared: a fixed time
                    size = push(t, s, kind, a, pos, size, now + dur[k, e], seq, END, x)
                    seq += 1
                    continue
                g = group[e]
                served[g] += rate[g] * (now - since[g])
                since[g] = now
                active[g] += 1
                tsize[g] = _target_push(
                    tv, tk, base[g], tsize[g], served[g] + bits[k, e], k * flows + e
                )
        if g >= 0:  # reshare set g (before the departed flow's successors, as heapq sees it)
            if active[g] == 0:
                rate[g] = 0.0
                gt[g] = np.inf
            else:
                rate[g] = min(cap[g], capacity[g] / float(active[g]))
                left = max(tv[base[g]] - served[g], 0.0)
                gt[g], gs[g] = now + left / rate[g], seq  # replaces the stale one
                seq += 1
            if what == START:
                continue
        free[k, e] = now
        arrive[k, e] = now + post[k, e]
        if k + 1 < phases:
            ring, member = e // members, e % members
            nxt = ring * members + (member + 1) % members
            for q, when in ((e, now), (nxt, arrive[k, e])):  # its own next send, the receiver's
                if when > due[k + 1, q]:
                    due[k + 1, q] = when
                pending[k + 1, q] -= 1
                if pending[k + 1, q] == 0:
                    start = due[k + 1, q] + pre[k + 1, q]
                    size = push(t, s, kind, a, pos, size, start, seq, START, (k + 1) * flows + q)
                    seq += 1


@_jit
def exchange_kernel(ready0, members, pre, dur, post, bits, group, cap, capacity, free, arrive):
    """Every step's exchange (rows of ready0), into free and arrive (steps, phases, flows)."""
    for step in range(ready0.shape[0]):
        _one_step(
            ready0[step],
            members,
            pre,
            dur,
            post,
            bits,
            group,
            cap,
            capacity,
            free[step],
            arrive[step],
        )
