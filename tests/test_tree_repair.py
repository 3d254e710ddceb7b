"""fast/trees/repair.py's event pass over a few flows, on a case worked out by hand.

Three flows, max-min over two groups of capacity 1 (bits a second): X on g0, Z on g0 and g1, Y
on g1. X starts at 0 (1 bit), Z at 0.25 (10 bits), so both run at 1/2 from 0.25 and X ends at
0.25 + 0.75 / 0.5 = 1.75, exactly when Y (1 bit) starts. The event pass takes two events at one
time in the order it pushed them: X's departure (pushed at 0.25, when its rate last changed)
before Y's start (pushed at Y's release, 1.0). So at 1.75 Z speeds up to 1 as X leaves, then
slows to 1/2 as Y joins; Y ends at 3.75, and Z then runs alone: 10 - 0.5 * 1.5 - 0.5 * 2 =
8.25 bits left, done at 12.0. Events pushed: 3 starts, a departure each, and a new departure
for every change of rate (X at 0.25; Z at 1.75 twice and at 3.75): 10. Had Y's start gone
first, nobody's rate would change at 1.75: 8 events.
"""

import numpy as np

from transitsim.network.fast.trees.repair import Work, cluster_pass

GROUPS_OF = [[0], [0, 1], [1]]  # X, Z, Y


def _run(released: list[float]) -> tuple[int, np.ndarray]:
    work = Work(count=3, groups=2, crossings=4)
    gptr = np.array([0, 1, 3, 4], dtype=np.int64)
    gidx = np.array([g for gs in GROUPS_OF for g in gs], dtype=np.int64)
    lk = (gptr, gidx, gptr.copy(), gidx.copy(), gidx.copy())  # a group's link binds it
    grp = (work.members, np.array([0, 2]), work.msize, np.ones(2), work.busy_g, work.busy_from)
    pushed = cluster_pass(
        np.array([0, 1, 2], dtype=np.int64),
        np.array([0.0, 0.25, 1.75]),
        np.array(released),
        np.array([1.0, 10.0, 1.0]),
        lk,
        grp,
        1.0,
        False,
        work.fl,
        work.alive,
        work.scratch,
        work.st,
        work.out,
    )
    assert not work.msize.any(), "every flow has left its groups"
    return int(pushed), work.out[0]


def test_a_departure_pushed_before_a_start_at_the_same_time_goes_first():
    pushed, free = _run([-np.inf, 0.1, 1.0])
    assert pushed == 10
    np.testing.assert_array_equal(free, [1.75, 12.0, 3.75])


def test_a_tie_between_events_pushed_at_one_time_is_refused():
    """Y released at 0.25, the time X's departure was last pushed: which of the two the event
    pass took first rests on the rest of the pass, so the caller must run all of it."""
    pushed, _ = _run([-np.inf, 0.1, 0.25])
    assert pushed == -1
