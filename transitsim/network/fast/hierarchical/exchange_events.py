"""hierarchical's exchange across groups, event by event, for many steps at once (compiled).

`stages.exchange_stage` times the shards' rings across groups by processor sharing on the WAN, one
Python event at a time: about 5 s a step at 65,536 workers in 2 datacentres (262,144 flow
events), so 3,000 straggler steps would take four hours. Stragglers make phases meet on the WAN in
nearly every step, so the phase-by-phase vector form of fast/hierarchical/maxplus.py does not apply.
This is the same event loop (fault-free), compiled with numba: the same events in the same order,
(time, sequence) keys, the same processor-sharing arithmetic, so the same floating-point times as
`exchange_stage` (tests/test_shared_events.py): 72 ms a step at 65,536 workers (2.29 s per 32-step
block, measured 2026-12-04). numba is imported on first use: nothing else pays for it.
"""

import numpy as np


def exchange_events(
    ready0: np.ndarray,
    members: int,
    pre: np.ndarray,
    dur: np.ndarray,
    post: np.ndarray,
    bits: np.ndarray,
    group: np.ndarray,
    cap: np.ndarray,
    capacity: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """free and arrive (steps, phases, flows) of the exchange's rings for each step's ready0
    (steps, flows); per phase and flow pre, dur, post and bits (phases, flows); per flow its
    shared group (-1: none); per group the flows' own cap and the link's capacity."""
    from transitsim.network.fast.hierarchical.exchange_kernel import (
        exchange_kernel,  # numba: on first use
    )

    ready0 = np.ascontiguousarray(np.atleast_2d(ready0), dtype=np.float64)
    steps, flows = ready0.shape
    phases = pre.shape[0]
    free = np.empty((steps, phases, flows))
    arrive = np.empty((steps, phases, flows))
    exchange_kernel(
        ready0,
        members,
        np.ascontiguousarray(pre, dtype=np.float64),
        np.ascontiguousarray(dur, dtype=np.float64),
        np.ascontiguousarray(post, dtype=np.float64),
        np.ascontiguousarray(bits, dtype=np.float64),
        np.ascontiguousarray(group, dtype=np.int64),
        np.ascontiguousarray(cap, dtype=np.float64),
        np.ascontiguousarray(capacity, dtype=np.float64),
        free,
        arrive,
    )
    return free, arrive
