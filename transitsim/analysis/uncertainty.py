"""How sure a time-to-loss is: its spread over seeds, and an interval a verdict can compare.

A configuration's seeds are its runs; each reaches a target at its own time. The summary keeps
their mean (as it always did) and adds, per (config, network, target):

- sd: the sample standard deviation over seeds (n - 1 in the denominator; NaN with one seed);
- lo, hi and the interval's kind:
    "t95"      three or more seeds: mean -/+ t(0.975, n - 1) x sd / sqrt(n), the two-sided 95 %
               Student t interval of the mean (seeds taken as independent draws of one normal);
               lo is never below 0 (no time is negative);
    "range"    two seeds: the smallest and largest seed (a t interval from two seeds is 12.7 sd
               wide, which says nothing; the range says what was seen, and is called a range);
    "one seed" one seed: lo = hi = its time, no spread known.

The t quantile is computed exactly (Abramowitz & Stegun 26.7.3-4 for whole degrees of freedom,
solved by bisection), so nothing beyond numpy is needed.
"""

import math
from collections.abc import Sequence

import numpy as np

from transitsim.base import human

T95 = "t95"
RANGE = "range"
ONE_SEED = "one seed"
INTERVAL_KINDS = (T95, RANGE, ONE_SEED)


def _t_two_sided(t: float, dof: int) -> float:
    """P(|T| < t) for Student's t with `dof` (a whole number >= 1) degrees of freedom."""
    theta = math.atan(t / math.sqrt(dof))
    sin, cos = math.sin(theta), math.cos(theta)
    if dof % 2:  # odd
        term, total = cos, 0.0
        for k in range(1, (dof - 1) // 2 + 1):
            total += term
            term *= cos * cos * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + sin * total) if dof > 1 else 2 * theta / math.pi
    term, total = 1.0, 0.0
    for k in range(1, dof // 2 + 1):
        total += term
        term *= cos * cos * (2 * k - 1) / (2 * k)
    return sin * total


def t_quantile_975(dof: int) -> float:
    """The 0.975 quantile of Student's t (so that mean -/+ it x sd/sqrt(n) holds 95 %)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {dof}")
    low, high = 0.0, 64.0  # t(0.975, 1) = 12.706
    for _ in range(200):
        middle = (low + high) / 2
        if _t_two_sided(middle, dof) < 0.95:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def seed_interval(values: Sequence[float] | np.ndarray) -> tuple[float, float, float, str]:
    """(sd, lo, hi, kind) of one configuration's per-seed values (see the module docstring).

    NaN figures and kind "" when there are no values (no seed reached the target)."""
    array = np.asarray(values, dtype="float64")
    count = len(array)
    if count == 0:
        return math.nan, math.nan, math.nan, ""
    if count == 1:
        value = float(array[0])
        return math.nan, value, value, ONE_SEED
    sd = float(np.std(array, ddof=1))
    if count == 2:
        return sd, float(array.min()), float(array.max()), RANGE
    mean = float(array.mean())
    half = t_quantile_975(count - 1) * sd / math.sqrt(count)
    return sd, max(mean - half, 0.0), mean + half, T95


def describe_interval(lo: float, hi: float, kind: str, seeds: int) -> str:
    """How a table cell says an interval: "95 % t 451.2-452.8, 3 seeds", "range ..., 2 seeds"."""
    if kind == ONE_SEED or not kind:
        return "1 seed"
    shown = f"{human.seconds(lo)}-{human.seconds(hi)}"
    name = "95 % t" if kind == T95 else "range"
    return f"{name} {shown}, {seeds} seeds"


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two closed intervals share a point (NaN bounds never overlap)."""
    if any(math.isnan(x) for x in (*a, *b)):
        return False
    return a[0] <= b[1] and b[0] <= a[1]
