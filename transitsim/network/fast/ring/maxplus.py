"""A ring's max-plus linear form: d by the per-phase recurrence in reverse (see
fast/shared/maxplus.py for the form and where it holds)."""

import numpy as np

from transitsim.network.fabric import Fabric, Weights
from transitsim.network.fast.ring.recurrence import disjoint_reason, ring_paths
from transitsim.network.fast.shared.maxplus import Linear, one_hop_times
from transitsim.network.schedules.dag import RingPlan


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
    a0, c0 = (np.array(x) for x in zip(*[one_hop_times(p, bits) for p in paths.first], strict=True))
    a, c = (np.array(x) for x in zip(*[one_hop_times(p, bits) for p in paths.later], strict=True))
    tail = c0 if phases == 1 else c  # L of the last phase: its arrival is a result
    for k in range(phases - 2, -1, -1):
        ak, ck = (a0, c0) if k == 0 else (a, c)
        # phase k of worker i releases its own phase k+1 (sent) and worker i+1's (arrived)
        tail = np.maximum(ak + tail, ck + np.roll(tail, -1))
    return Linear(tail)
