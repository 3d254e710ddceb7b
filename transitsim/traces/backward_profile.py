"""A trace's backward profile: which gradients are ready when, as fractions of the backward.

The trainer records it once per run (trainer/loop/profile.py) under meta["backward_profile"]. Traces
without one (older recordings, imported logs) get the uniform-backward assumption: gradient
bytes become ready at a constant rate over the backward, and the backward is 2/3 of
forward+backward (its FLOPs are twice the forward's). Replay says which one it used.
"""

import math
from dataclasses import dataclass
from typing import Any

from transitsim.base.errors import TransitsimError

UNIFORM_BACKWARD_SHARE = 2.0 / 3.0
PROFILE_KEY = "backward_profile"
# Each tensor is a unit of the overlapped exchange (DeMo sends per tensor), so replay's work
# grows with their count: 10,000 took 15 s on an 8-row trace. The largest dense models have
# under 1,000 parameter tensors (GPT-2 XL 580, Llama-3 70B 723); the trainer's presets ~100.
MAX_TENSORS = 4096


@dataclass(frozen=True)
class BackwardProfile:
    """Parameter tensors in registration order: element counts and ready fractions.

    measured False: the uniform assumption (no tensors; bytes ready evenly over the backward).
    """

    numel: tuple[int, ...]
    ready: tuple[float, ...]
    backward_share: float  # backward / (forward + backward)
    measured: bool
    buckets: bool = False  # the tensors are the job's own buckets, as a profile timed them

    @property
    def source(self) -> str:
        return "measured backward profile" if self.measured else "uniform-backward assumption"


def _fraction(value: Any, key: str) -> float:
    """A number as JSON writes one; true, "0.5" and null are not fractions of the backward
    (float() would take the first two as 1.0 and 0.5 and use them)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} must be a number, got {value!r}"[:120])
    try:
        return float(value)
    except OverflowError:  # a JSON integer beyond any float
        raise ValueError(f"{key} is beyond any float ({len(str(value))} digits)") from None


def uniform_profile() -> BackwardProfile:
    return BackwardProfile((), (), UNIFORM_BACKWARD_SHARE, measured=False)


def backward_profile(meta: dict[str, Any]) -> BackwardProfile:
    """The trace's profile, or the uniform assumption when it has none.

    A profile that is there but malformed is an error (one line, naming the trace): silently
    falling back would hide a broken recording.
    """
    raw = meta.get(PROFILE_KEY)
    if raw is None:
        return uniform_profile()
    name = meta.get("name", "?")
    try:
        tensors = raw["tensors"]
        if isinstance(tensors, list) and len(tensors) > MAX_TENSORS:
            raise TransitsimError(
                f"trace {name!r}: {PROFILE_KEY} lists {len(tensors):,} tensors (at most "
                f"{MAX_TENSORS:,}: a model's parameter tensors, each a unit of the overlap)"
            )
        numel = tuple(t["numel"] for t in tensors)
        ready = tuple(_fraction(t["ready"], "ready") for t in tensors)
        share = _fraction(raw["backward_share"], "backward_share")
    except (KeyError, TypeError, ValueError) as exc:
        raise TransitsimError(f"trace {name!r}: malformed {PROFILE_KEY} ({exc})") from None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n <= 2**53 for n in numel):
        raise TransitsimError(f"trace {name!r}: {PROFILE_KEY} numel must be whole numbers")
    if not numel or any(n <= 0 for n in numel):
        raise TransitsimError(f"trace {name!r}: {PROFILE_KEY} needs tensors with numel > 0")
    if not all(math.isfinite(r) and 0.0 <= r <= 1.0 for r in ready):
        raise TransitsimError(f"trace {name!r}: {PROFILE_KEY} ready fractions must lie in [0, 1]")
    if not (math.isfinite(share) and 0.0 < share <= 1.0):
        raise TransitsimError(f"trace {name!r}: {PROFILE_KEY} backward_share must lie in (0, 1]")
    buckets = raw.get("buckets", False) is True
    return BackwardProfile(numel, ready, share, measured=True, buckets=buckets)
