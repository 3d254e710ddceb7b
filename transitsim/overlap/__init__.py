"""Overlap of the gradient exchange with the backward pass (design.md, "Overlap").

A real data-parallel step exchanges its gradients bucket by bucket as backward produces them, so
much of a dense all-reduce hides behind compute. This package turns a trace's backward profile
(or, without one, a uniform-backward assumption) into the units one step exchanges, and times a
step that exchanges them as soon as each is ready. It knows nothing of traces' losses: replay
hands it times and bytes, and a function that simulates one exchange on the network floor.
"""

from transitsim.overlap.plan import (
    DDP_BUCKET_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    OVERLAP_MODES,
    Unit,
    plan_units,
)
from transitsim.overlap.step import OverlapStep, UnitTiming, overlapped_step
from transitsim.traces.backward_profile import (
    UNIFORM_BACKWARD_SHARE,
    BackwardProfile,
    backward_profile,
)

__all__ = [
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "OVERLAP_MODES",
    "UNIFORM_BACKWARD_SHARE",
    "BackwardProfile",
    "OverlapStep",
    "Unit",
    "UnitTiming",
    "backward_profile",
    "overlapped_step",
    "plan_units",
]
