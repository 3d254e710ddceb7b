"""The trees' step where a few transfers meet: the event pass over those few, the one pass
over the rest, until the two agree.

fast/trees/alone.py times a step in one longest-path pass where every transfer moves alone on its
link groups. Across two datacentres a step of the double binary tree at 1,024 workers often has a
handful of pairs that meet (measured: 3 pairs in 7 to 11 % of straggler steps, out of 261,888
transfers), and each such step used to go whole to the event pass (0.65 s against 0.009 s). Here
only the transfers that met are simulated event by event, from the starts the one pass gave them
(`cluster_pass`: the event pass's own start, departure, sharing, heap and floats,
fast/trees/kernel.py's `begin` and `leave`, over those flows alone); their finishes are fixed, and
the one pass runs again from the first message they can change. The new times may move other starts,
part the ones that met or make new meetings, so this repeats until the meetings found are the ones
simulated, from the same starts.

Why that is the event pass's answer: at that point every transfer that met another is timed by
the event pass's own arithmetic over every flow it shared a group with, and every other one
moved alone there, which the alone formula times exactly; the event pass is causal, so two
answers that agree in this way up to any time agree after it. Where the event pass's order
would rest on a tie (two events of the simulated flows at the same time), where the meetings
do not settle within MAX_ROUNDS, or where more pairs meet than PAIRS_ROOM holds, `repair`
says so and the caller runs the whole event pass (tests/test_tree_kernel.py holds this equal
to the event pass bit for bit).
"""

import numpy as np

from transitsim.network.fast.shared.heap import START, pop
from transitsim.network.fast.shared.jit import jit
from transitsim.network.fast.trees.alone import overlaps, timed_pass
from transitsim.network.fast.trees.kernel import HEAP, PUSHES, SEQ, begin, leave, push_event

MAX_ROUNDS = 12  # one pass and its check per round
PAIRS_ROOM = 4096  # pairs that met, at most, before the whole event pass is cheaper

# numba caches a function by its own file's time stamp: these passes inline kernel.py's begin
# and leave, so an edit there must touch this file too, or the cache keeps the old code
# (issue 44: kernel.py's decorators moved to fast/shared/jit.py, 2026-12-06)
_jit = jit


@_jit
def _record(f, now, fl, out):
    """A flow that left its groups at now: its finish, binding link and now into out."""
    finish, bound = fl[3], fl[4]
    out[0][f] = max(finish[f], now)
    out[1][f] = bound[f]
    out[2][f] = now  # when it left its groups (before its finish where a start settled it)


SPACING = 1 << 32  # sequence numbers between two starts' (room for the pushes between)


@_jit
def cluster_pass(
    flows, began, released, bits, lk, grp, capacity, local, fl, alive, scratch, st, out
):
    """The event pass over these flows alone, each starting at began (flows in start order):
    each one's finish, binding link and when it left its groups into out. released: per flow,
    the time of the event at which the event pass pushed its start (-inf: before the first).
    fl, alive, scratch: the event pass's per-flow and per-group work arrays (st: its counters,
    STAMP kept across calls); grp's msize is 0 on every group on entry and again on return.

    Two events at one time go in the event pass's order, by when each was pushed: a start at
    its release, a departure at its flow's last change of rate (`since`). The starts' sequence
    numbers are spaced by release, and before each event the departures' numbering moves past
    every start released by then. Where two tied events were pushed at the same time and one
    is a start (their order rests on the whole pass), returns -1; else the events the event
    pass pushes for these flows."""
    rate, since, left, finish, bound, pos = fl
    gptr, gidx = lk[0], lk[1]
    msize = grp[2]
    n = len(flows)
    room = 2 * n + 8
    t = np.empty(room)
    s = np.empty(room, dtype=np.int64)
    kind = np.empty(room, dtype=np.int64)
    a = np.empty(room, dtype=np.int64)
    heap = (t, s, kind, a)
    others = np.empty(n + 1, dtype=np.int64)
    gone = np.empty(n + 1, dtype=np.int64)
    by_release = np.sort(released[flows])
    st[HEAP] = 0
    st[PUSHES] = 0
    for f in flows:
        pos[f] = -1
        bound[f] = -1
        alive[f] = False
    for f in flows:
        rank = np.searchsorted(by_release, released[f], side="left")  # equal: refused below
        st[SEQ] = (rank + 1) * SPACING
        push_event(t, s, kind, a, pos, st, began[f], START, f)
    st[SEQ] = 1
    tie = False
    while st[HEAP] > 0:
        last = pop(t, s, kind, a, pos, st[HEAP])
        st[HEAP] = last
        now, what, f = t[last], kind[last], a[last]
        if last > 0 and t[0] == now and (what == START or kind[0] == START):
            mine = released[f] if what == START else since[f]
            theirs = released[a[0]] if kind[0] == START else since[a[0]]
            if mine == theirs:
                tie = True  # pushed at one time: the order rests on the whole pass
                break
        floor = np.searchsorted(by_release, now, side="right") * SPACING + 1
        if st[SEQ] < floor:
            st[SEQ] = floor
        if what == START:  # those over by now (to rounding) leave before this one joins
            k = begin(
                f, now, fl, heap, st, alive, bits, lk, grp, scratch, capacity, local, others, gone
            )
            for x in range(k):
                _record(gone[x], now, fl, out)
        else:
            leave(f, now, fl, heap, st, alive, lk, grp, scratch, capacity, local)
            _record(f, now, fl, out)
    if tie:
        for f in flows:
            pos[f] = -1
            alive[f] = False
            for g in gidx[gptr[f] : gptr[f + 1]]:
                msize[g] = 0
        return -1
    return st[PUSHES]


@_jit
def release_times(flows, preds, is_transfer, off, released):
    """When the event pass pushes each flow's start: at the event that settled the last of the
    messages it waits for (a transfer's departure, or the start that settled it; a message
    with nothing to send is settled at its own release, in the same event), into released.
    False where the walk back would be too long (then the caller runs the whole pass)."""
    dptr, didx, after = preds
    stack = np.empty(4096, dtype=np.int64)
    for f in flows:
        latest = -np.inf
        size = 0
        visits = 0
        stack[size] = f
        size += 1
        while size > 0:
            size -= 1
            m = stack[size]
            visits += 1
            if visits > 100_000:
                return False
            waited = didx[dptr[m] : dptr[m + 1]]
            for i in range(len(waited) + 1):
                p = waited[i] if i < len(waited) else after[m]
                if p < 0:
                    continue
                if is_transfer[p]:
                    if off[p] > latest:
                        latest = off[p]
                else:  # settled when it was released: walk on back
                    if size == len(stack):
                        return False
                    stack[size] = p
                    size += 1
        released[f] = latest
    return True


@_jit
def _components(pairs, count, parent):
    """Union-find over the flows in the pairs: per flow in them, its component's root."""
    for i in range(count):
        for j in range(2):
            parent[pairs[i, j]] = pairs[i, j]
    for i in range(count):
        x, y = pairs[i, 0], pairs[i, 1]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x != y:
            parent[max(x, y)] = min(x, y)
    flows = np.unique(pairs[:count].ravel())
    roots = np.empty(len(flows), dtype=np.int64)
    for i in range(len(flows)):
        x = flows[i]
        while parent[x] != x:
            x = parent[x]
        roots[i] = x
    return flows, roots


class Work:
    """The arrays `repair` keeps between steps (allocated once per schedule)."""

    def __init__(self, count: int, groups: int, crossings: int):
        self.fixed_free = np.full(count, np.nan)
        self.fixed_bound = np.full(count, -1, dtype=np.int64)
        self.fixed_off = np.full(count, np.nan)
        self.released = np.full(count, -np.inf)
        self.began = np.full(count, np.nan)  # per transfer: its start, and when it left
        self.off = np.full(count, np.nan)
        self.fl = (
            np.full(count, -1.0),
            np.zeros(count),
            np.zeros(count),
            np.full(count, np.inf),
            np.full(count, -1, dtype=np.int64),
            np.full(count, -1, dtype=np.int64),
        )
        self.alive = np.zeros(count, dtype=np.bool_)
        self.scratch = (
            np.empty(count + 1, dtype=np.int64),
            np.empty(groups + 1, dtype=np.int64),
            np.zeros(groups, dtype=np.int64),
            np.zeros(count, dtype=np.int64),
            np.zeros(groups),
            np.zeros(groups),
            np.zeros(groups, dtype=np.bool_),
            np.zeros(count),
        )
        self.members = np.full(crossings + 1, -1, dtype=np.int64)
        self.msize = np.zeros(groups, dtype=np.int64)
        self.busy_g = np.zeros(groups)  # the kernel's busy bookkeeping (this module's unread)
        self.busy_from = np.zeros(groups)
        self.st = np.zeros(5, dtype=np.int64)
        self.pairs = np.empty((PAIRS_ROOM, 2), dtype=np.int64)
        self.parent = np.arange(count, dtype=np.int64)
        self.out = (
            np.full(count, np.nan),
            np.full(count, -1, dtype=np.int64),
            np.full(count, np.nan),
        )


def _simulate(c: dict, work: Work, members: np.ndarray, times, preds, lk, grp, capacity, local):
    """One component of flows that met, by the event pass from their starts now: (finish,
    binding link, when each left its groups, events pushed), or None where it must not."""
    if not release_times(members, preds, c["moving"], times[5], work.released):
        return None
    pushed = cluster_pass(
        members,
        times[3],
        work.released,
        c["bits"],
        lk,
        grp,
        capacity,
        local,
        work.fl,
        work.alive,
        work.scratch,
        work.st,
        work.out,
    )
    if pushed < 0:
        return None
    return (work.out[0][members], work.out[1][members], work.out[2][members], int(pushed))


def repair(c: dict, work: Work, start, workers, capacity, local, times, busy_g, met: int):
    """Times the step where `met` pairs (in work.pairs, from the one pass already in `times`)
    met: the flows that met by the event pass, the rest by the one pass, until they agree.
    Returns the events the event pass would have pushed, or None where it must run whole."""
    preds = c["preds"]
    lk = (c["gptr"], c["gidx"], c["bptr"], c["br"], c["bg"])
    grp = (work.members, c["mbase"], work.msize, c["caps"], work.busy_g, work.busy_from)
    began = times[3]
    fixed = np.zeros(0, dtype=np.int64)  # flows whose finish is fixed now
    touched = [fixed]  # every flow given a fixed finish on the way (cleared on return)
    simulated: dict[tuple, tuple] = {}  # a component's flows -> (their starts, its results)
    try:
        for _ in range(MAX_ROUNDS):
            flows, roots = _components(work.pairs, met, work.parent)
            pushes = 0
            moved = []
            for root in np.unique(roots).tolist():
                members = flows[roots == root]
                members = members[np.lexsort((members, began[members]))]
                key = tuple(members.tolist())
                starts = began[members].copy()
                held = simulated.get(key)
                if held is not None and np.array_equal(held[0], starts):
                    result = held[1]
                else:
                    result = _simulate(c, work, members, times, preds, lk, grp, capacity, local)
                    if result is None:
                        return None
                    simulated[key] = (starts, result)
                free, bound, off, pushed = result
                pushes += pushed
                differs = (
                    ~(work.fixed_free[members] == free)
                    | ~(work.fixed_off[members] == off)
                    | (work.fixed_bound[members] != bound)
                )
                if differs.any():
                    work.fixed_free[members] = free
                    work.fixed_bound[members] = bound
                    work.fixed_off[members] = off
                    moved.append(members[differs])
                    touched.append(members)
            gone = np.setdiff1d(fixed, flows)
            if len(gone):
                work.fixed_free[gone] = np.nan
                work.fixed_bound[gone] = -1
                work.fixed_off[gone] = np.nan
                moved.append(gone)
            fixed = flows
            if not moved:  # the meetings found are those simulated, from the same starts
                return 2 * (c["transfers"] - len(fixed)) + pushes
            first = int(c["position"][np.concatenate(moved)].min())
            timed_pass(
                first,
                start,
                workers,
                c["order"],
                preds,
                *c["pass_columns"],
                (work.fixed_free, work.fixed_bound, work.fixed_off),
                times,
            )
            met = overlaps((c["group_ptr"], c["group_flows"]), began, times[5], work.pairs, busy_g)
            if met < 0:
                return None
        return None
    finally:
        every = np.concatenate(touched)
        work.fixed_free[every] = np.nan
        work.fixed_bound[every] = -1
        work.fixed_off[every] = np.nan
