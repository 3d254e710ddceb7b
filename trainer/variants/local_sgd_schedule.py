"""When the local-SGD variants (H, H-s, L) exchange, and which tensors each exchange carries.

Pure arithmetic on step numbers and tensor shapes (no torch), so the byte accounting, the trace
and the optimiser read one schedule. Steps are 1-based here, as in the trace: step `done` is the
one whose row says `step = done`, and an exchange "at step t" starts when step t's inner update
is done.

- H and L: one fragment (the whole model), synchronised at every step t with t % H == 0.
- H-s: P fragments, fragment p synchronised at the steps t >= 1 with t = p * H / P (mod H)
  (Streaming DiLoCo's staggered schedule: a fragment every H/P steps, each one every H steps);
  its outer update lands tau steps later, at the end of step t + tau.

Fragments are made of whole tensors, balanced by size: tensors from the largest down (ties in
parameter order) each join the fragment with the fewest values so far (ties: the lowest index).
The paper strides transformer blocks over fragments; the presets here have 2-8 blocks, too few
for 5 fragments of about equal size, and equal sizes are what keeps the peak bandwidth down.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    """The exchange schedule of one run: H inner steps, P fragments, tau steps of overlap."""

    inner_steps: int  # H
    fragments: int = 1  # P
    overlap: int = 0  # tau

    def __post_init__(self) -> None:
        if self.inner_steps < 1 or self.fragments < 1 or self.inner_steps % self.fragments:
            raise ValueError(
                f"P = {self.fragments} fragments must divide H = {self.inner_steps} inner steps"
            )
        if not 0 <= self.overlap < self.inner_steps:
            raise ValueError(f"overlap tau = {self.overlap} must lie in 0..H-1")

    @property
    def stride(self) -> int:
        """Steps between two fragments' syncs: H / P."""
        return self.inner_steps // self.fragments

    def offset(self, fragment: int) -> int:
        """The residue mod H of fragment p's sync steps: p * H / P."""
        return fragment * self.stride

    def sync_fragment(self, done: int) -> int | None:
        """The fragment whose exchange starts at the end of step `done`, or None."""
        if done < 1:
            return None
        residue = done % self.inner_steps
        if residue % self.stride:
            return None
        return residue // self.stride

    def landing_fragment(self, done: int) -> int | None:
        """The fragment whose outer update is applied to the replicas at the end of `done`."""
        return self.sync_fragment(done - self.overlap)

    def sync_steps(self, fragment: int, steps: int) -> list[int]:
        """Every step <= steps at which `fragment` starts an exchange."""
        first = self.offset(fragment) or self.inner_steps
        return list(range(first, steps + 1, self.inner_steps))


def assign_fragments(shapes: dict[str, tuple[int, ...]], fragments: int) -> dict[str, int]:
    """Tensor name -> fragment, balancing the values per fragment (module docstring)."""
    if fragments < 1:
        raise ValueError(f"fragments must be >= 1, got {fragments}")
    if fragments > len(shapes):
        raise ValueError(f"{fragments} fragments for {len(shapes)} tensors: some would be empty")
    names = list(shapes)
    sizes = [math.prod(shapes[name]) for name in names]
    load = [0] * fragments
    out: dict[str, int] = {}
    for i in sorted(range(len(names)), key=lambda i: -sizes[i]):  # stable: ties in order
        target = min(range(fragments), key=lambda p: (load[p], p))
        out[names[i]] = target
        load[target] += sizes[i]
    return {name: out[name] for name in names}
