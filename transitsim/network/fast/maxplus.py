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
    up_tail: list[np.ndarray] = [np.empty(0)] * pieces
    down_next = None
    for j in range(pieces - 1, -1, -1):
        size = plan.sizes[j]
        a_d, c_d = timed(down_of, paths.downs, size * plan.down_factor)
        down = c_d.copy()  # its arrival is a result
        if down_next is not None:
            down = np.maximum(down, a_d + down_next)  # releases the port's next result
        if plan.slots and j + plan.slots < pieces:
            down = np.maximum(down, c_d + up_tail[j + plan.slots])  # frees a slot
        join = down.max()  # the sum of piece j releases every port's result
        a_u, c_u = timed(up_of, paths.ups, size)
        up = c_u + join
        if j + 1 < pieces:
            up = np.maximum(up, a_u + up_tail[j + 1])  # releases the worker's next piece
        up_tail[j] = up
        down_next = down
    return Linear(up_tail[0])
