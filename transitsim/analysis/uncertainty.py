"""How sure a time-to-loss is: its spread over seeds and between evaluations, as an interval.

A configuration's seeds are its runs. Each seed's loss is evaluated every so many steps, so the
step (and time) it reaches a target is known only to the evaluation interval: it lies between
the last evaluation above the target (a) and the first at or below (b). metrics.py takes the
crossing x by linear interpolation of the loss between a and b. The summary keeps the mean of x
over seeds and adds, per (config, network, target):

- sd: the sample standard deviation of x over seeds (NaN with one seed);
- lo, hi and the interval's kind, from two sources joined:
    seeds      "t95" (three or more seeds): the 95 % Student t interval of the mean taken on
               log time, exp(mean log x -/+ t(0.975, n - 1) x sd(log x) / sqrt(n)). Times to a
               loss are positive and spread by factors (a seed that needs twice the steps takes
               twice the time), so the interval is a factor either side, and no bound is ever
               at or below 0 (the linear t interval of three seeds at steps 50, 100, 100 ran
               from 0 s). "range" (two seeds): the smallest and largest x (a t interval from
               two seeds is 12.7 sd wide, which says nothing). "one seed": x itself.
    evaluation the mean of the a's and the mean of the b's: wherever between its evaluations
               each seed crossed, the mean lies in there. lo is the lower of the two lows
               (ignored where it is 0: an evaluation at time 0), hi the higher of the highs.

So a run evaluated every 25 steps that crosses between two evaluations is never more certain
than those 25 steps, whatever its seeds say; and one seed has an interval (its evaluation's)
rather than a point. The t quantile is computed exactly (Abramowitz & Stegun 26.7.3-4 for whole
degrees of freedom, solved by bisection), so nothing beyond numpy is needed.
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


def seed_interval(
    values: Sequence[float] | np.ndarray,
    before: Sequence[float] | np.ndarray | None = None,
    after: Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float, float, str]:
    """(sd, lo, hi, kind) of one configuration's per-seed values (see the module docstring).

    before/after: each seed's last evaluation above the target and first at or below (the
    bracket its value lies in); None: the values are exact. NaN figures and kind "" when there
    are no values (no seed reached the target)."""
    array = np.asarray(values, dtype="float64")
    count = len(array)
    if count == 0:
        return math.nan, math.nan, math.nan, ""
    sd = float(np.std(array, ddof=1)) if count > 1 else math.nan
    if count == 1:
        lo = hi = float(array[0])
        kind = ONE_SEED
    elif count == 2:
        lo, hi, kind = float(array.min()), float(array.max()), RANGE
    elif (array > 0).all():
        logs = np.log(array)
        half = t_quantile_975(count - 1) * float(np.std(logs, ddof=1)) / math.sqrt(count)
        lo, hi, kind = math.exp(logs.mean() - half), math.exp(logs.mean() + half), T95
    else:  # a value of 0 has no log: what was seen
        lo, hi, kind = float(array.min()), float(array.max()), T95
    if before is not None and after is not None:
        low = float(np.mean(np.asarray(before, dtype="float64")))
        high = float(np.mean(np.asarray(after, dtype="float64")))
        lo = min(lo, low) if low > 0 else lo
        hi = max(hi, high)
    return sd, lo, hi, kind


def describe_interval(lo: float, hi: float, kind: str, seeds: int) -> str:
    """How a table cell says an interval: "95 % t 451.2-452.8, 3 seeds", "range ..., 2 seeds",
    "1 seed" (or "1 seed, 4.1-5.0 s" where its evaluations bracket it)."""
    shown = f"{human.seconds(lo)}-{human.seconds(hi)}"
    if kind == ONE_SEED or not kind:
        return f"1 seed, {shown}" if hi > lo else "1 seed"
    name = "95 % t" if kind == T95 else "range"
    return f"{name} {shown}, {seeds} seeds"


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two closed intervals share a point (NaN bounds never overlap)."""
    if any(math.isnan(x) for x in (*a, *b)):
        return False
    return a[0] <= b[1] and b[0] <= a[1]
