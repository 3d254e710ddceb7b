"""The numeric search behind `calibrate nccl-tests` (calibrate/nccl_fit.py): which protocols, with
which latency, channel rate, channel floor and switch points, reproduce a table's rows.

Each row i of the table is a size S_i measured at T_i; transitsim's ring on the flat network
takes cl_i x L + cb_i / n x (1 / r) for a protocol of latency L per link and channel rate r on n
channels (cl and cb read off two engine runs: calibrate/model.py `coefficients`). Two families
of NCCL-mode networks are searched, each with 1 to 3 protocols:

- **fastest**: the protocol of least time at each size (NCCL's tuner, as `auto` chooses), each
  with its latency, its channel rate and, where it pays, its channel floor m (below C x m fewer
  channels run: n = clamp(S // m, 1, C)). Only concave bends (each protocol a line or a flat
  then a line), and corners where the lines cross.
- **thresholds**: the protocol chosen by size, switching at thresholds (NCCL_LL_THRESHOLD's
  rule), each protocol a line (latency, channel rate) and the switch where the two lines give
  the same time: a continuous broken line. This holds the convex bends NCCL's tuner makes
  when it keeps a protocol past where another would be faster, or where a resource saturates
  (the wire flat, then the step up to the rate of the next protocol).

Every fit is least squares on the relative error; candidates are scored by the larger of
worst |error| / `tolerance` and median |error| / `median_tolerance` (issue 42's targets, 10 %
and 3 %). The fewest fitted parameters whose score is at most 1 win (ties: the lower score);
where none holds the targets, the lowest score. At most `max_parameters` (7) are fitted.
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np

from transitsim.base.errors import TransitsimError

MAX_PARAMETERS = 7
MEDIAN_TOLERANCE = 0.03
_REFINED = 8  # the best splits of each fastest-family structure refined by reassignment
_STEPS_PER_OCTAVE = 4  # the channel floors and thresholds tried: quarter octaves
_MAX_CUTS = 40  # where a sweep has more sizes (nccl-tests -f 1.1), the cuts tried are spread


@dataclass(frozen=True)
class Line:
    """One protocol: its latency per link, 1 / its channel rate, its channel floor (0: none)."""

    latency_s: float
    inverse_rate: float  # seconds per bit of one channel: 1 / channel_rate_bps
    channel_bytes: int

    @property
    def parameters(self) -> int:
        return 2 + (self.channel_bytes > 0)


@dataclass(frozen=True)
class Found:
    """The search's answer: the family, the protocols in size order, where they switch (table
    sizes, thresholds family only), and the fit's errors over the rows it saw."""

    family: str  # "fastest" or "thresholds"
    lines: tuple[Line, ...]
    switch_sizes: tuple[float, ...]
    worst: float
    median: float

    @property
    def parameters(self) -> int:
        return sum(line.parameters for line in self.lines)


@dataclass
class _Rows:
    sizes: np.ndarray
    times: np.ndarray
    cl: np.ndarray
    cb: np.ndarray
    channels: int
    payloads: np.ndarray  # what the engine splits over channels: an all-gather's part

    def shares(self, floors: np.ndarray) -> np.ndarray:
        """Channels run per (floor, row): C, or clamp(payload // m, 1, C) for a floor m > 0."""
        safe = np.where(floors > 0, floors, 1.0)[:, None]
        counted = np.clip(np.floor(self.payloads[None, :] / safe), 1, self.channels)
        return np.where(floors[:, None] > 0, counted, float(self.channels))


def score(errors: np.ndarray, tolerance: float, median_tolerance: float) -> float:
    """The larger of worst |error| / tolerance and median |error| / median_tolerance."""
    size = np.abs(errors)
    return max(float(size.max()) / tolerance, float(np.median(size)) / median_tolerance)


def _solve(u: np.ndarray, columns: np.ndarray, weights: np.ndarray):
    """Per row of `columns`: least squares of u L + column x = 1 (weighted), L >= 0 (else L = 0
    and x alone); x <= 0 marks no fit. Vectorised over candidates."""
    a, d = np.sum(weights * u * u), np.sum(weights * u)
    b, c, e = columns @ (weights * u), (columns * columns) @ weights, columns @ weights
    with np.errstate(divide="ignore", invalid="ignore"):
        det = a * c - b * b
        latency, inverse = (c * d - b * e) / det, (a * e - b * d) / det
        alone = ~(np.isfinite(latency) & (latency >= 0) & (inverse > 0))
        latency = np.where(alone, 0.0, latency)
        inverse = np.where(alone, e / c, inverse)
    return latency, inverse


class _Fastest:
    """The fastest family: contiguous groups, one protocol each, then reassigned to the
    protocol of least time and refitted until nothing moves."""

    def __init__(self, rows: _Rows) -> None:
        self.rows = rows
        low, high = rows.payloads.min() / rows.channels / 2, rows.payloads.max()
        steps = math.ceil(math.log2(high / low) * _STEPS_PER_OCTAVE) + 1
        floors = [float(int(low * 2 ** (i / _STEPS_PER_OCTAVE))) for i in range(steps)]
        self.floors = np.array([0.0, *floors])
        self.per_channel = rows.cb[None, :] / rows.shares(self.floors)
        self.cache: dict[tuple[int, int, bool], tuple[float, float, int] | None] = {}
        cuts = [i for i in range(1, len(rows.sizes)) if rows.sizes[i - 1] < rows.sizes[i]]
        if len(cuts) > _MAX_CUTS:
            cuts = [cuts[round(k * (len(cuts) - 1) / (_MAX_CUTS - 1))] for k in range(_MAX_CUTS)]
        self.cuts = cuts

    def span(self, a: int, b: int, floor: bool) -> tuple[float, float, int] | None:
        """group() of the rows a..b, cached: many splits share a group."""
        if (a, b, floor) not in self.cache:
            self.cache[(a, b, floor)] = self.group(np.arange(a, b), floor)
        return self.cache[(a, b, floor)]

    def group(self, index: np.ndarray, floor: bool) -> tuple[float, float, int] | None:
        """(L, 1/r, floor index) of the rows `index`, the floor of least squared log error."""
        rows = self.rows
        times = rows.times[index]
        columns = self.per_channel[: len(self.floors) if floor else 1, index] / times
        latency, inverse = _solve(rows.cl[index] / times, columns, np.ones(len(index)))
        with np.errstate(divide="ignore", invalid="ignore"):
            predicted = rows.cl[index] * latency[:, None] + columns * times * inverse[:, None]
            misfit = np.sum(np.log(predicted / times) ** 2, axis=1)
        misfit[~(inverse > 0)] = np.inf
        best = int(np.argmin(misfit))
        return None if not np.isfinite(misfit[best]) else (latency[best], inverse[best], best)

    def curves(self, lines: list[tuple[float, float, int]]) -> np.ndarray:
        return np.array([self.rows.cl * L + self.per_channel[k] * x for L, x, k in lines])

    def refine(self, lines: list, floors: tuple[bool, ...]) -> list:
        for _ in range(20):
            chosen = np.argmin(self.curves(lines), axis=0)
            new = []
            for p, floor in enumerate(floors):
                index = np.nonzero(chosen == p)[0]
                fitted = self.group(index, floor) if len(index) >= 2 else None
                new.append(fitted or lines[p])
            if new == lines:
                break
            lines = new
        return lines

    def structure(self, floors: tuple[bool, ...], tol: tuple[float, float]) -> list | None:
        n, scored = len(self.rows.sizes), []
        for cuts in itertools.combinations(self.cuts, len(floors) - 1):
            edges = (0, *cuts, n)
            spans = list(itertools.pairwise(edges))
            if any(b - a < 2 + f for (a, b), f in zip(spans, floors, strict=True)):
                continue
            lines = [self.span(a, b, f) for (a, b), f in zip(spans, floors, strict=True)]
            if any(line is None for line in lines):
                continue
            errors = self.curves(lines).min(axis=0) / self.rows.times - 1
            scored.append((score(errors, *tol), lines))
        scored.sort(key=lambda s: s[0])
        best = None
        for _, lines in scored[:_REFINED]:
            lines = self.refine(lines, floors)
            errors = self.curves(lines).min(axis=0) / self.rows.times - 1
            if best is None or score(errors, *tol) < best[0]:
                best = (score(errors, *tol), lines)
        return None if best is None else best[1]

    def found(self, lines: list) -> Found:
        """The protocols that win somewhere, in the order they first win."""
        curves = self.curves(lines)
        chosen = np.argmin(curves, axis=0)
        order = list(dict.fromkeys(int(c) for c in chosen))
        errors = curves.min(axis=0) / self.rows.times - 1
        kept = tuple(
            Line(float(lines[p][0]), float(lines[p][1]), int(self.floors[lines[p][2]]))
            for p in order
        )
        size = np.abs(errors)
        return Found("fastest", kept, (), float(size.max()), float(np.median(size)))


def _thresholds(rows: _Rows, count: int, tol: tuple[float, float]) -> Found | None:
    """The continuous broken line of `count` pieces (2 x count parameters) of the lowest score,
    its corners on the quarter-octave grid, at least two rows a piece, every latency >= 0 and
    every rate > 0."""
    sizes, times = rows.sizes, rows.times
    per_channel = rows.cb / rows.channels  # all channels: no floor in this family
    ratio = float(np.median(per_channel / sizes))
    low, high = math.log2(sizes.min()), math.log2(sizes.max())
    steps = int((high - low) * _STEPS_PER_OCTAVE)
    grid = [2 ** (low + i / _STEPS_PER_OCTAVE) for i in range(1, steps)]
    latency_unit = float(np.median(rows.cl))
    best = None
    for corners in itertools.combinations(grid, count - 1):
        edges = [-math.inf, *corners, math.inf]
        if any(((sizes >= a) & (sizes < b)).sum() < 2 for a, b in itertools.pairwise(edges)):
            continue
        columns = [rows.cl, per_channel]
        columns += [np.maximum(0.0, per_channel - ratio * c) for c in corners]
        design = np.stack(columns, axis=1) / times[:, None]
        coef, *_ = np.linalg.lstsq(design, np.ones(len(sizes)), rcond=None)
        latencies = [coef[0]]
        inverses = [coef[1]]
        for k, corner in enumerate(corners):
            inverses.append(inverses[-1] + coef[2 + k])
            latencies.append(latencies[-1] - coef[2 + k] * ratio * corner / latency_unit)
        if min(latencies) < 0 or min(inverses) <= 0:
            continue
        errors = design @ coef - 1
        value = score(errors, *tol)
        if best is None or value < best[0]:
            lines = tuple(
                Line(float(L), float(x), 0) for L, x in zip(latencies, inverses, strict=True)
            )
            size = np.abs(errors)
            found = Found(
                "thresholds", lines, tuple(corners), float(size.max()), float(np.median(size))
            )
            best = (value, found)
    return None if best is None else best[1]


FASTEST_STRUCTURES = [
    floors for count in (1, 2, 3) for floors in itertools.product((False, True), repeat=count)
]


def search(
    sizes: np.ndarray,
    times: np.ndarray,
    cl: np.ndarray,
    cb: np.ndarray,
    *,
    channels: int,
    max_protocols: int = 3,
    max_parameters: int = MAX_PARAMETERS,
    tolerance: float = 0.10,
    median_tolerance: float = MEDIAN_TOLERANCE,
    payloads: np.ndarray | None = None,
) -> Found:
    """The NCCL-mode network of the module doc for these rows (sorted by size); `payloads`: each
    row's exchange payload where it is not the size (channel floors compare with it)."""
    sizes = np.asarray(sizes, float)
    payloads = sizes if payloads is None else np.asarray(payloads, float)
    rows = _Rows(sizes, np.asarray(times, float), np.asarray(cl, float), np.asarray(cb, float),
                 channels, payloads)  # fmt: skip
    tol = (tolerance, median_tolerance)
    candidates: list[Found] = []
    fastest = _Fastest(rows)
    for floors in FASTEST_STRUCTURES:
        if len(floors) > max_protocols or 2 * len(floors) + sum(floors) > max_parameters:
            continue
        lines = fastest.structure(floors, tol)
        if lines is not None:
            candidates.append(fastest.found(lines))
    for count in range(2, max_protocols + 1):
        if 2 * count <= max_parameters:
            found = _thresholds(rows, count, tol)
            if found is not None:
                candidates.append(found)
    if not candidates:
        raise TransitsimError("no positive channel rate fits these rows (times fall with size?)")

    def value(found: Found) -> float:
        return max(found.worst / tolerance, found.median / median_tolerance)

    held = [f for f in candidates if value(f) <= 1.0]
    if held:
        return min(held, key=lambda f: (f.parameters, value(f)))
    return min(candidates, key=value)
