"""A sum at one switch's max-plus linear form: d by the per-piece recurrence in reverse (see
fast/shared/maxplus.py for the form and where it holds)."""

import numpy as np

from transitsim.network.des.engine import fifo_rate
from transitsim.network.fabric import Fabric, Path, Weights
from transitsim.network.fast.shared.maxplus import Linear, one_hop_times
from transitsim.network.fast.switch_sum.recurrence import SwitchPlan, switch_paths, switch_reason


def _fifo_gaps(fabric: Fabric, plan: SwitchPlan, paths) -> tuple[np.ndarray, np.ndarray]:
    """Per piece j and worker: how long after piece j - 1's arrival piece j can arrive at the
    earliest on a store-and-forward route where its hold is shorter (-inf elsewhere)."""
    pieces, n = len(plan.sizes), plan.workers
    gaps = []
    for chosen, ends, factor in (
        (paths.ups, lambda i: (i, plan.aggregator), 1.0),
        (paths.downs, lambda i: (plan.aggregator, i), plan.down_factor),
    ):
        gap = np.full((pieces, n), -np.inf)
        bits = np.asarray(plan.sizes, dtype=float) * factor * 8.0
        for i, path in enumerate(chosen):
            rate = fifo_rate(fabric, *ends(i), path)
            if rate <= 0.0 or pieces < 2:
                continue
            hop = path.hops[-1]
            held = {b: hop.post_for(b) - hop.post_s for b in set(bits.tolist())}
            hold = np.array([held[b] for b in bits.tolist()])
            shorter = np.flatnonzero(hold[1:] < hold[:-1]) + 1
            gap[shorter, i] = bits[shorter] / rate
        gaps.append(gap)
    return gaps[0], gaps[1]


def switch_linear(fabric: Fabric, plan: SwitchPlan, weights: Weights) -> Linear | None:
    """d for a sum at one switch, by the per-piece recurrence in reverse (None: not linear)."""
    paths = switch_paths(fabric, plan, weights)
    if switch_reason(fabric, plan, paths) is not None:
        return None
    n = plan.workers
    if not plan.sizes:
        return Linear(np.zeros(n))
    up_of: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    down_of: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def timed(cache, chosen: list[Path], nbytes: float):
        if nbytes not in cache:
            pairs = [one_hop_times(p, nbytes * 8.0) for p in chosen]
            cache[nbytes] = tuple(np.array(x) for x in zip(*pairs, strict=True))
        return cache[nbytes]

    pieces = len(plan.sizes)
    # store-and-forward: a piece whose hold is shorter than the one before's arrives no sooner
    # than that one + its bits over the last link (des.engine.fifo_arrival): arrival j releases
    # arrival j + 1 after gap[j + 1] (-inf where it never binds)
    up_gap, down_gap = _fifo_gaps(fabric, plan, paths)
    up_tail: list[np.ndarray] = [np.empty(0)] * pieces
    down_next = None
    up_landed = down_landed = None  # the longest tail from piece j + 1's arrival
    for j in range(pieces - 1, -1, -1):
        size = plan.sizes[j]
        a_d, c_d = timed(down_of, paths.downs, size * plan.down_factor)
        landed = np.zeros(n)  # its arrival is a result
        if plan.slots and j + plan.slots < pieces:
            landed = np.maximum(landed, up_tail[j + plan.slots])  # frees a slot
        if down_landed is not None:
            landed = np.maximum(landed, down_gap[j + 1] + down_landed)
        down_landed = landed
        down = c_d + landed
        if down_next is not None:
            down = np.maximum(down, a_d + down_next)  # releases the port's next result
        join = down.max()  # the sum of piece j releases every port's result
        a_u, c_u = timed(up_of, paths.ups, size)
        landed = np.full(n, join)
        if up_landed is not None:
            landed = np.maximum(landed, up_gap[j + 1] + up_landed)
        up_landed = landed
        up = c_u + landed
        if j + 1 < pieces:
            up = np.maximum(up, a_u + up_tail[j + 1])  # releases the worker's next piece
        up_tail[j] = up
        down_next = down
    return Linear(up_tail[0])
