"""Max-plus linear exchanges: when every transfer takes a fixed time, the finish is linear.

With fixed transfer times a message is ready at the max of its dependencies' times plus fixed
delays, so the exchange's end is a max-plus linear function of the workers' start times:

    finish = max(max_i (start_i + d_i), max_i start_i)

where d_i is the longest path from worker i's start to any result arriving. d is computed once
per (network, exchange) by one backward sweep over the phases (the ring and switch-sum
recurrences run in reverse), after which a step with any straggler offsets costs O(N), and a
whole run of steps is one numpy expression. This holds exactly where the fast paths hold a
priori (disjoint ring edges; a sum at one switch whose summing rate never binds) and no
pre-stage transform can meet arriving chunks; elsewhere the caller simulates step by step.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import fifo_rate
from transitsim.network.fabric import Fabric, Path, Weights
from transitsim.network.fast.ring import disjoint_reason, ring_paths
from transitsim.network.fast.switch import SwitchPlan, switch_paths, switch_reason
from transitsim.network.schedules.dag import RingPlan


@dataclass(frozen=True)
class Linear:
    """finish(start) = max(max_i(start_i + d_s[i]), max(start)), exactly (see module doc)."""

    d_s: np.ndarray

    def finish_s(self, start_s: np.ndarray) -> np.ndarray:
        """The last finishing time for each row of start times (shape (steps, N) -> (steps,))."""
        start = np.atleast_2d(start_s)
        return np.maximum((start + self.d_s).max(axis=1), start.max(axis=1))

    def critical(self, start_s: np.ndarray) -> np.ndarray:
        """Per row, the worker whose start the finish hangs on."""
        return np.argmax(np.atleast_2d(start_s) + self.d_s, axis=1)


def _times(path: Path, bits: float) -> tuple[float, float]:
    """(a, c) of a one-hop message alone: sender free after a, arrival after c."""
    hop = path.hops[0]
    sent = hop.pre_s + (bits / hop.rate_bps if bits > 0 else 0.0)
    return sent, sent + hop.post_for(bits)


def ring_linear(fabric: Fabric, plan: RingPlan, weights: Weights) -> Linear | None:
    """d for a ring without a pre-stage, by the phase recurrence in reverse (None: not linear)."""
    if plan.pre:
        return None  # the own transform may meet arriving chunks: start-dependent sharing
    paths = ring_paths(fabric, plan, weights)
    if disjoint_reason(fabric, plan, paths) is not None:
        return None
    n, phases = plan.workers, plan.phases
    if phases == 0:
        return Linear(np.zeros(n))
    bits = plan.chunk_bytes * 8.0
    a0, c0 = (np.array(x) for x in zip(*[_times(p, bits) for p in paths.first], strict=True))
    a, c = (np.array(x) for x in zip(*[_times(p, bits) for p in paths.later], strict=True))
    tail = c0 if phases == 1 else c  # L of the last phase: its arrival is a result
    for k in range(phases - 2, -1, -1):
        ak, ck = (a0, c0) if k == 0 else (a, c)
        # phase k of worker i releases its own phase k+1 (sent) and worker i+1's (arrived)
        tail = np.maximum(ak + tail, ck + np.roll(tail, -1))
    return Linear(tail)


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
            pairs = [_times(p, nbytes * 8.0) for p in chosen]
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
