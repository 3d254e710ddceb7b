"""Variant G: band selections that move without per-step comparisons (issue 14, deck slide 12).

Every G selection sends k values per chunk, at the same positions (or the same transform rows)
on every worker, so the band stays reducible (summable at a switch) and computable by a fixed
linear transform (the optics). They differ in how the band moves:

* `recal`: the calibrated band (D) re-chosen every R steps. Between choices the chooser (worker
  0) adds up the squares of its delta's DCT coefficients per position (multiply-accumulate only);
  once per R steps its host takes the k positions of largest energy (the only comparisons, off
  the per-step path) and broadcasts them: k positions per tensor.
* `rotating`: a pseudo-random set of k positions per chunk that every worker computes from the
  shared seed and the epoch step // R: p_j = (a * j + b) mod m with a a unit mod m, so the k
  positions are distinct. Integer multiply, add and modulo only; nothing is ever sent.
* `subspace`: the band's rows are an orthonormal k-dimensional subspace of the chunk, tracked by
  warm-started subspace iteration (the power step of PowerSGD, Vogels et al. 2019) on the
  chooser's accumulated chunk covariance: a Karhunen-Loeve band, which the DCT's low band
  approximates for smooth signals. Accumulation is multiply-accumulate; the orthonormalisation
  runs on the host once per R steps and the k x m rows are broadcast (2 bytes a value).
"""

import math

import numpy as np
import torch

SELECTIONS = ("recal", "rotating", "subspace")
CHOOSING = ("recal", "subspace")  # those with a host choice and a broadcast every R steps
SUBSPACE_MAX_M = 1024  # the chunk covariance is m x m per tensor
SUBSPACE_ITERATIONS = 2  # power steps per choice, warm-started from the current band

_MASK64 = (1 << 64) - 1


def is_choice_step(step: int, every: int, steps: int) -> bool:
    """Whether the 0-based step closes an R-step window (and is not the run's last step, whose
    choice nothing would use)."""
    return (step + 1) % every == 0 and step + 1 < steps


def epoch_of(step: int, every: int) -> int:
    """The rotating set's epoch: it changes every `every` steps, at steps 0, R, 2R, ..."""
    return step // every


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 words: a counter-based hash (adds, shifts, xors and
    multiplies), so every worker derives the same numbers from (seed, epoch, row) alone."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def units_mod(m: int) -> np.ndarray:
    """The multipliers a in [1, m) with gcd(a, m) = 1 (a table built once per chunk size), so
    j -> (a j + b) mod m is a bijection; [1] for m = 1."""
    if m == 1:
        return np.array([1], dtype=np.uint64)
    return np.array([a for a in range(1, m) if math.gcd(a, m) == 1], dtype=np.uint64)


def rotating_positions(
    m: int, k: int, seed: int, epoch: int, first_row: int, rows: int, stream: int = 0
) -> torch.Tensor:
    """(rows, k) positions for chunk rows first_row .. first_row + rows - 1 of one chunk shape.

    Row r of epoch e draws two hashed words from (seed, stream, e, r): b uniform in [0, m) and a
    uniform among the units mod m; its positions are (a j + b) mod m for j = 0 .. k-1, which are
    distinct. Every position is equally likely to be in a row's set (b is uniform).
    """
    if not 1 <= k <= m:
        raise ValueError(f"k must lie in [1, {m}], got {k}")
    units = units_mod(m)
    key = (
        (int(seed) & 0xFFFFFFFF) << 32 ^ (int(stream) & 0xFFFF) << 16 ^ (int(epoch) & 0xFFFF)
    ) & _MASK64
    base = _splitmix64(np.array([key], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        counters = base + np.arange(first_row, first_row + rows, dtype=np.uint64) * np.uint64(2)
    h_a = _splitmix64(counters)
    h_b = _splitmix64(counters + np.uint64(1))
    a = units[(h_a % np.uint64(len(units))).astype(np.int64)]
    b = h_b % np.uint64(m)
    j = np.arange(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        positions = (a[:, None] * j[None, :] + b[:, None]) % np.uint64(m)
    return torch.from_numpy(positions.astype(np.int64))


def orthonormal_rows(basis: torch.Tensor) -> torch.Tensor:
    """Rows of `basis` (k, m) made orthonormal by Gram-Schmidt via a reduced QR (host side),
    signs fixed so each row's diagonal factor is positive (the same rows on every host)."""
    q, r = torch.linalg.qr(basis.double().T)
    signs = torch.where(torch.diagonal(r) < 0, -1.0, 1.0).to(q.dtype)
    return (q * signs).T.contiguous()


def subspace_step(
    cov: torch.Tensor, rows: torch.Tensor, iterations: int = SUBSPACE_ITERATIONS
) -> torch.Tensor:
    """Warm-started subspace iteration: rows (k, m) -> orthonormal rows spanning cov^i rows^T.

    cov: (m, m) accumulated sum of x x^T over the chooser's chunks. With cov = 0 the rows are
    kept (nothing was learned)."""
    if float(cov.abs().sum()) == 0.0:
        return rows.clone()
    cov = cov.double()
    basis = rows.double()
    for _ in range(iterations):
        basis = orthonormal_rows(basis @ cov)
    return basis.to(rows.dtype)
