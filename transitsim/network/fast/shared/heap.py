"""The compiled event heap of the fast paths' numba event loops (hierarchical's exchange across
groups, fast/hierarchical/exchange_kernel.py; the trees' event pass and its repair,
fast/trees/kernel.py and fast/trees/repair.py).

A binary heap over parallel arrays: time t, sequence s, kind and one int64 payload a per entry,
least (time, sequence) first, as the Python passes order their events with heapq, so a tie is
broken the same way and every event comes off in the same order. Where an entry of kind DEPART
sits is kept in pos (pos[a] = its index, -1 once off), so a flow's departure can be moved to a
new key (`sift`) or taken off (`remove`); entries of other kinds are not tracked (pos may then
be empty). Every helper is inlined into its loop: called per event, a call cost ~1.5x the pass.
"""

from transitsim.network.fast.shared.jit import inline_jit

START, DEPART = 0, 1
_inline = inline_jit


@_inline
def before(t, s, i, j):
    """Entry i comes off before entry j: (time, sequence) order."""
    return t[i] < t[j] or (t[i] == t[j] and s[i] < s[j])


@_inline
def swap(t, s, kind, a, pos, i, j):
    t[i], t[j] = t[j], t[i]
    s[i], s[j] = s[j], s[i]
    kind[i], kind[j] = kind[j], kind[i]
    a[i], a[j] = a[j], a[i]
    if kind[i] == DEPART:
        pos[a[i]] = i
    if kind[j] == DEPART:
        pos[a[j]] = j


@_inline
def sift_up(t, s, kind, a, pos, i):
    """Moves entry i up while it comes off before its parent."""
    while i > 0:
        parent = (i - 1) // 2
        if not before(t, s, i, parent):
            break
        swap(t, s, kind, a, pos, i, parent)
        i = parent
    return i


@_inline
def sift_down(t, s, kind, a, pos, i, size):
    """Moves entry i down while a child comes off before it."""
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and before(t, s, child + 1, child):
            child += 1
        if not before(t, s, child, i):
            break
        swap(t, s, kind, a, pos, i, child)
        i = child


@_inline
def sift(t, s, kind, a, pos, i, size):
    """Restores the heap around index i (its key may have moved either way)."""
    i = sift_up(t, s, kind, a, pos, i)
    sift_down(t, s, kind, a, pos, i, size)


@_inline
def push(t, s, kind, a, pos, size, time, seq, what, x):
    """Adds entry (time, seq, what, x); returns the heap's new size."""
    t[size], s[size], kind[size], a[size] = time, seq, what, x
    if what == DEPART:
        pos[x] = size
    sift_up(t, s, kind, a, pos, size)
    return size + 1


@_inline
def pop(t, s, kind, a, pos, size):
    """Moves the least entry to index size - 1 (off the heap) and restores the heap on the
    rest; returns that index, the heap's new size."""
    last = size - 1
    swap(t, s, kind, a, pos, 0, last)
    if kind[last] == DEPART:
        pos[a[last]] = -1
    sift_down(t, s, kind, a, pos, 0, last)
    return last


@_inline
def remove(t, s, kind, a, pos, size, i):
    """Takes entry i off the heap; returns the heap's new size."""
    last = size - 1
    if kind[i] == DEPART:
        pos[a[i]] = -1
    if i != last:
        t[i], s[i], kind[i], a[i] = t[last], s[last], kind[last], a[last]
        if kind[i] == DEPART:
            pos[a[i]] = i
    if i < last:
        sift(t, s, kind, a, pos, i, last)
    return last
