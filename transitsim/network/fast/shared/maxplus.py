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

Here the form and the one-hop times it is built from; each collective computes its own d:
fast/ring/maxplus.py `ring_linear`, fast/switch_sum/maxplus.py `switch_linear`,
fast/trees/fixed.py `tree_linear` (and hierarchical's stage-vectorised form,
fast/hierarchical/maxplus.py).
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.fabric import Path


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


def one_hop_times(path: Path, bits: float) -> tuple[float, float]:
    """(a, c) of a one-hop message alone: sender free after a, arrival after c."""
    hop = path.hops[0]
    sent = hop.pre_s + (bits / hop.rate_bps if bits > 0 else 0.0)
    return sent, sent + hop.post_for(bits)
