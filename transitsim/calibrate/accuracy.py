"""What a calibration predicts, not only what it reproduces: the fit's error on the rows it saw
beside its error on rows it never saw, and the same two figures for a plain alpha-beta line.

A fit that reproduces every row may still say nothing of the sizes between them (enough
parameters reproduce anything). So `calibrate nccl-tests` fits twice: once on all rows, for the
network it writes, and once with every second size left out (the smallest and largest always
kept: the held-out rows lie between fitted ones, where a calibration is used), predicting those
from the network fitted without them. Both are reported over the rows of at least the model's
`min_size`, as the worst and the median |relative error|.

The alpha-beta line is the textbook model of the collective, two parameters fitted the same way
(least squares on the relative error; latency >= 0): time = a(n) x alpha + b(n) x size / beta,
with a(n), b(n) = 2(n-1), 2(n-1)/n for all_reduce; n-1, (n-1)/n for all_gather, reduce_scatter
and alltoall (nccl-tests' sizes: all_gather and reduce_scatter print the whole buffer); n-1, 1
for broadcast. What the calibrated model buys is the gap between the two.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transitsim.base.errors import TransitsimError

HELD_OUT_TOLERANCE = 0.15  # issue 42's targets for rows never fitted: worst 15 %, median 5 %
HELD_OUT_MEDIAN_TOLERANCE = 0.05


@dataclass(frozen=True)
class Errors:
    """|relative error| over some rows: how many, the worst, the median."""

    rows: int
    worst: float
    median: float

    @classmethod
    def of(cls, errors: list[float]) -> "Errors | None":
        if not errors:
            return None
        size = np.abs(np.array(errors, float))
        return cls(len(size), float(size.max()), float(np.median(size)))

    def within(self, worst: float, median: float) -> bool:
        return self.worst <= worst + 1e-12 and self.median <= median + 1e-12


@dataclass(frozen=True)
class Accuracy:
    """The fit's and alpha-beta's errors, fitted and held out, over rows >= min_size."""

    min_size: int
    parameters: int  # of the fit on all rows (the network written)
    fitted: Errors
    held_sizes: tuple[int, ...]  # the sizes left out of the second fit
    held_parameters: int | None
    held_out: Errors | None  # None: no second fit (too few sizes, or turned off)
    alpha_beta_fitted: Errors
    alpha_beta_held_out: Errors | None
    alpha_s: float
    beta_bps: float


def held_out_sizes(sizes: list[int]) -> list[int]:
    """Every second size, the smallest and the largest kept (none below four sizes: two fitted
    rows would leave nothing to fit a line with a bend)."""
    ordered = sorted(set(sizes))
    return ordered[1:-1:2] if len(ordered) >= 4 else []


def alpha_beta_terms(collective: str, ranks: int) -> tuple[float, float]:
    """(a, b) of time = a x alpha + b x size / beta (the module doc)."""
    n = ranks
    if collective == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return float(n - 1), (n - 1) / n
    if collective == "broadcast":
        return float(n - 1), 1.0
    raise TransitsimError(f"alpha-beta: unknown collective {collective!r}")


def fit_alpha_beta(collective: str, ranks: int, sizes, times) -> tuple[float, float]:
    """(alpha seconds, beta bytes per second): least squares on the relative error, alpha >= 0."""
    a, b = alpha_beta_terms(collective, ranks)
    sizes, times = np.asarray(sizes, float), np.asarray(times, float)
    design = np.stack([np.full(len(sizes), a), b * sizes], axis=1) / times[:, None]
    (alpha, inverse), *_ = np.linalg.lstsq(design, np.ones(len(sizes)), rcond=None)
    if alpha < 0 or inverse <= 0:
        column = design[:, 1]
        alpha, inverse = 0.0, float(column.sum() / (column @ column))
    return float(alpha), 1.0 / float(inverse)


def alpha_beta_s(collective: str, ranks: int, sizes, alpha: float, beta: float) -> np.ndarray:
    a, b = alpha_beta_terms(collective, ranks)
    return a * alpha + b * np.asarray(sizes, float) / beta


def _rows(calibration, min_size: int, sizes: set[int] | None, role: str) -> list[tuple]:
    """(size, measured, predicted) of the points of `role` at or above min_size (and, where
    `sizes` is given, of those sizes)."""
    return [
        (p.row.size_bytes, p.measured_s, predicted)
        for p, predicted in zip(calibration.points, calibration.predicted_s, strict=True)
        if p.role == role
        and p.row.size_bytes >= min_size
        and (sizes is None or p.row.size_bytes in sizes)
    ]


def accuracy(
    final,
    refit: Callable[[list[int]], object] | None,
    collective: str,
    ranks: int,
) -> Accuracy:
    """The Accuracy of `final` (the fit on all rows but those the user held out); `refit(sizes)`
    fits again without `sizes` (None: no second fit)."""
    min_size = final.min_size
    fitted_rows = _rows(final, min_size, None, "fit")
    fitted = Errors.of([predicted / measured - 1 for _, measured, predicted in fitted_rows])
    if fitted is None:
        raise TransitsimError(f"{collective}: no fitted row of at least {min_size:,} B")
    sizes = [size for size, _, _ in fitted_rows]
    times = [measured for _, measured, _ in fitted_rows]
    alpha, beta = fit_alpha_beta(collective, ranks, sizes, times)
    predicted = alpha_beta_s(collective, ranks, sizes, alpha, beta)
    ab_fitted = Errors.of(list(predicted / np.array(times) - 1))
    assert ab_fitted is not None
    held = held_out_sizes(sizes) if refit is not None else []
    held_fit = refit(held) if refit is not None and held else None
    held_out = ab_held = None
    if held_fit is not None:
        held_set = set(held)
        rows = _rows(held_fit, min_size, held_set, "holdout")
        held_out = Errors.of([p / m - 1 for _, m, p in rows])
        kept = [(s, m) for s, m in zip(sizes, times, strict=True) if s not in held_set]
        a2, b2 = fit_alpha_beta(collective, ranks, *zip(*kept, strict=True))
        held_rows = [(s, m) for s, m in zip(sizes, times, strict=True) if s in held_set]
        guess = alpha_beta_s(collective, ranks, [s for s, _ in held_rows], a2, b2)
        ab_held = Errors.of(list(guess / np.array([m for _, m in held_rows]) - 1))
    return Accuracy(
        min_size,
        final.parameters,
        fitted,
        tuple(held),
        None if held_fit is None else held_fit.parameters,
        held_out,
        ab_fitted,
        ab_held,
        alpha,
        beta,
    )
