"""How a tensor is cut into DCT chunks (spec §7.2), and how many coefficients each chunk keeps.

Rule R (DeMo's) picks the largest divisor of a side that is <= the target; rule P2 (the optics'
rule) the largest power of two. Chunks are laid out as a batch: (..., chunks, h, w) for 2-D
tiles, (..., chunks, m) for 1-D runs, so one matmul transforms every chunk of a tensor at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # chunk sizes and byte accounting need no torch at run time
    import torch

CHUNK_MODES = ("1d", "2d")


def side_divisor(n: int, target: int) -> int:
    """Rule R: the largest divisor of n that is <= target (n itself when n <= target)."""
    if n < 1 or target < 1:
        raise ValueError(f"chunk side needs n >= 1 and target >= 1, got n={n}, target={target}")
    if n <= target:
        return n
    for side in range(target, 0, -1):
        if n % side == 0:
            return side
    return 1


def side_pow2(n: int, target: int) -> int:
    """Rule P2: the largest power of two dividing n and <= target (doubling from 1)."""
    if n < 1 or target < 1:
        raise ValueError(f"chunk side needs n >= 1 and target >= 1, got n={n}, target={target}")
    side = 1
    while n % (2 * side) == 0 and 2 * side <= target:
        side *= 2
    return side


CHUNK_RULES = {"R": side_divisor, "P2": side_pow2}


def k_per_chunk(m: int, keep: float) -> int:
    """Coefficients kept per chunk of m: max(1, round(m * keep)), Python round (ties to even)."""
    return max(1, round(m * keep))


@dataclass(frozen=True)
class Chunker:
    """The chunking of one tensor: 2-D tiles of h x w, or 1-D runs of m (then h == 1)."""

    shape: tuple[int, ...]
    h: int
    w: int
    two_d: bool

    @property
    def m(self) -> int:
        return self.h * self.w

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def chunks(self) -> int:
        return self.numel // self.m

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """(h, w) for tiles, (m,) for runs: what band orderings and transforms depend on."""
        return (self.h, self.w) if self.two_d else (self.m,)

    def to_chunks(self, x: torch.Tensor) -> torch.Tensor:
        """(*lead, *shape) -> (*lead, chunks, h, w) or (*lead, chunks, m); tiles row-major."""
        lead = x.shape[: x.dim() - len(self.shape)]
        if not self.two_d:
            return x.reshape(*lead, self.chunks, self.m)
        return self.tiled_view(x).reshape(*lead, self.chunks, self.h, self.w)

    def tiled_view(self, x: torch.Tensor) -> torch.Tensor:
        """A strided view (*lead, R/h, C/w, h, w) of a 2-D tensor (no copy)."""
        rows, cols = self.shape
        lead = x.shape[: x.dim() - 2]
        n = len(lead)
        tiles = x.reshape(*lead, rows // self.h, self.h, cols // self.w, self.w)
        return tiles.transpose(n + 1, n + 2)

    def from_chunks(self, c: torch.Tensor) -> torch.Tensor:
        """Inverse of `to_chunks`: (*lead, chunks, ...) -> (*lead, *shape)."""
        if not self.two_d:
            lead = c.shape[: c.dim() - 2]
            return c.reshape(*lead, *self.shape)
        lead = c.shape[: c.dim() - 3]
        n = len(lead)
        rows, cols = self.shape
        tiles = c.reshape(*lead, rows // self.h, cols // self.w, self.h, self.w)
        return tiles.transpose(n + 1, n + 2).reshape(*lead, rows, cols)


def make_chunker(shape: tuple[int, ...], mode: str, target: int, rule: str = "R") -> Chunker:
    """Chunk a tensor of `shape` in `mode` ("1d" | "2d") at `target` with rule "R" or "P2".

    2-D mode tiles matrices; anything that is not a matrix falls back to 1-D runs of the
    flattened tensor. 1-D mode cuts every tensor, flattened row-major, into runs.
    """
    if mode not in CHUNK_MODES:
        raise ValueError(f"chunk_mode must be one of {CHUNK_MODES}, got {mode!r}")
    if rule not in CHUNK_RULES:
        raise ValueError(f"chunk rule must be one of {tuple(CHUNK_RULES)}, got {rule!r}")
    side = CHUNK_RULES[rule]
    shape = tuple(int(s) for s in shape)
    if mode == "2d" and len(shape) == 2:
        return Chunker(shape, side(shape[0], target), side(shape[1], target), True)
    numel = 1
    for s in shape:
        numel *= s
    return Chunker(shape, 1, side(numel, target), False)
