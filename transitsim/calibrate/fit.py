"""Fit the flat network's link (calibrate/model.py) to measured tables of one collective.

The model, per size regime, is one α-β network of two fitted parameters: the link's payload
rate B and its latency L (the line rate, when given, only splits B into rate x efficiency):
transitsim's time for a row is c_L x L + c_B / B, with c_L and c_B read off transitsim runs.
Each regime is fitted on its rows by least squares on the relative error, then refined to the
smallest worst relative error (Lawson's iteration); L >= 0, B > 0.

One regime when it reproduces every fitted row within the tolerance (10 %); otherwise the rows,
in size order, are split into contiguous regimes (at most `max_regimes`, at least `min_rows`
rows each) at the cut that minimises the worst error. Real sweeps need this: NCCL switches
protocol (LL, LL128, Simple) and algorithm by size, and each switch starts a new line in the
time-size plane. A size between two regimes' rows belongs to the nearer one (geometric
midpoint). Rows below `min_size` (1 MiB) are predicted and printed but not fitted: there
latency and protocol effects that one link cannot hold dominate. Rows named in `holdout` are
left out of the fit and predicted from the regime their size falls in.
"""

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.model import TOPOLOGIES, Link, Shape, check_algo, coefficients, predict_s
from transitsim.calibrate.nccl_tests import Row, Table, busbw_factor

TOLERANCE = 0.10
MIN_SIZE_BYTES = 1 << 20
MAX_REGIMES = 3
MIN_ROWS = 3
PLACES = ("out", "in", "min")
_LAWSON_STEPS = 200


@dataclass(frozen=True)
class Point:
    """One measured row as the fit sees it."""

    table: int  # index into Calibration.tables
    row: Row
    ranks: int
    measured_s: float
    role: str  # "fit", "holdout", or "small" (below min_size: predicted only)


@dataclass(frozen=True)
class Regime:
    """Sizes first_bytes..last_bytes (the fitted rows'), one link."""

    first_bytes: int
    last_bytes: int
    link: Link
    rows: int
    worst: float  # worst |relative error| over its fitted rows


@dataclass
class Calibration:
    """The fitted regimes of one collective and every row's prediction."""

    collective: str
    algo: str
    shape: Shape
    tables: list[Table]
    points: list[Point]
    regimes: list[Regime]
    predicted_s: list[float] = field(default_factory=list)
    place: str = "out"
    min_size: int = MIN_SIZE_BYTES
    tolerance: float = TOLERANCE

    @property
    def ranks(self) -> int:
        return self.shape.ranks

    @property
    def parameters(self) -> int:
        return 2 * len(self.regimes)

    def regime_for(self, size_bytes: float) -> int:
        """The regime a size falls in (between two regimes: the nearer, geometrically)."""
        for index in range(len(self.regimes) - 1):
            here, there = self.regimes[index], self.regimes[index + 1]
            if size_bytes <= here.last_bytes:
                return index
            if size_bytes < there.first_bytes:
                middle = math.sqrt(max(here.last_bytes, 1) * max(there.first_bytes, 1))
                return index if size_bytes < middle else index + 1
        return len(self.regimes) - 1

    def errors(self) -> np.ndarray:
        measured = np.array([p.measured_s for p in self.points])
        return np.array(self.predicted_s) / measured - 1.0

    def worst(self, role: str) -> float | None:
        """Worst |relative error| over the points of one role (None without any)."""
        errors = [abs(e) for p, e in zip(self.points, self.errors(), strict=True) if p.role == role]
        return max(errors) if errors else None


def measured_time_s(row: Row, place: str, where: str) -> float:
    """The row's time: out-of-place (nccl-tests' first columns), in-place, or the smaller."""
    if place == "out":
        return row.time_s
    if math.isnan(row.in_time_s):
        if place == "in":
            raise TransitsimError(f"{where}:{row.line}: no in-place time (N/A); use --place out")
        return row.time_s
    return row.in_time_s if place == "in" else min(row.time_s, row.in_time_s)


def fit_points(tables: list[Table], place: str, min_size: int, holdout: list[int]) -> list[Point]:
    sizes = {row.size_bytes for table in tables for row in table.rows}
    for size in holdout:
        if size not in sizes:
            shown = ", ".join(f"{s:,}" for s in sorted(sizes))
            raise TransitsimError(f"--holdout {size:,} B: no row of that size (sizes: {shown})")
    points = []
    for index, table in enumerate(tables):
        for row in table.rows:
            if row.size_bytes == 0:
                continue  # nccl-tests' 0-byte rows time an empty launch: nothing crosses
            role = "holdout" if row.size_bytes in holdout else "fit"
            if role == "fit" and row.size_bytes < min_size:
                role = "small"
            measured = measured_time_s(row, place, table.source)
            points.append(Point(index, row, table.ranks, measured, role))
    return sorted(points, key=lambda p: (p.row.size_bytes, p.table))


def _solve(design: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """Weighted least squares of design @ [L, 1/B] = 1 with L >= 0 and 1/B > 0 (None: no
    positive rate fits)."""
    target = np.ones(len(design))
    scaled = design * weights[:, None]
    normal = scaled.T @ design
    if abs(np.linalg.det(normal)) > 1e-300:
        x = np.linalg.solve(normal, scaled.T @ target)
        if x[0] >= 0 and x[1] > 0:
            return x
    column = design[:, 1]
    inverse_rate = float(np.dot(weights * column, target) / np.dot(weights * column, column))
    return np.array([0.0, inverse_rate]) if inverse_rate > 0 else None


def fit_group(design: np.ndarray, minimax: bool) -> tuple[np.ndarray, float] | None:
    """(L, 1/B) and the worst |relative error|: least squares, then Lawson's iteration."""
    weights = np.full(len(design), 1.0 / len(design))
    best = _solve(design, weights)
    if best is None:
        return None
    worst = float(np.abs(design @ best - 1).max())
    x = best
    for _ in range(_LAWSON_STEPS if minimax else 0):
        weights = weights * np.abs(design @ x - 1)
        total = weights.sum()
        if total <= 0:
            break
        weights /= total
        solved = _solve(design, weights)
        if solved is None:
            break
        x = solved
        error = float(np.abs(design @ x - 1).max())
        if error < worst:
            best, worst = x, error
    return best, worst


def _splits(sizes: list[int], regimes: int, min_rows: int) -> list[tuple[int, ...]]:
    """Cut positions (between distinct sizes) into `regimes` groups of >= min_rows points."""
    cuts = [i for i in range(1, len(sizes)) if sizes[i - 1] < sizes[i]]
    out = []
    for chosen in itertools.combinations(cuts, regimes - 1):
        edges = (0, *chosen, len(sizes))
        if all(b - a >= min_rows for a, b in itertools.pairwise(edges)):
            out.append(chosen)
    return out


def _best_split(design: np.ndarray, sizes: list[int], max_regimes: int, min_rows: int, tol: float):
    """The fewest regimes within tol (the lowest worst error among their splits), else the
    lowest worst error of all."""
    cache: dict[tuple[int, int], tuple[np.ndarray, float] | None] = {}

    def group(a: int, b: int):
        if (a, b) not in cache:
            cache[(a, b)] = fit_group(design[a:b], minimax=False)
        return cache[(a, b)]

    overall = None
    for regimes in range(1, max_regimes + 1):
        best = None
        least = min(min_rows, len(sizes)) if regimes == 1 else min_rows
        for chosen in _splits(sizes, regimes, least):
            edges = (0, *chosen, len(sizes))
            fits = [group(a, b) for a, b in itertools.pairwise(edges)]
            if any(f is None for f in fits):
                continue
            worst = max(f[1] for f in fits)  # type: ignore[index]
            if best is None or worst < best[0]:
                best = (worst, edges)
        if best is None:
            continue
        if overall is None or best[0] < overall[0] - 1e-12:
            overall = best
        if best[0] <= tol:
            return best[1]
    if overall is None:
        raise TransitsimError("no positive link rate fits these rows (times fall with size?)")
    return overall[1]


def calibrate(
    tables: list[Table],
    *,
    algo: str | None = None,
    place: str = "out",
    min_size: int = MIN_SIZE_BYTES,
    holdout: list[int] | None = None,
    max_regimes: int = 2,
    min_rows: int = MIN_ROWS,
    tolerance: float = TOLERANCE,
    line_bps: float | None = None,
    topology: str = "switch",
) -> Calibration:
    """Fit the flat network to tables of one collective on one rank count (the module doc)."""
    collectives = {t.collective for t in tables}
    if len(collectives) != 1:
        raise TransitsimError(f"one collective per fit, got {', '.join(sorted(collectives))}")
    collective = collectives.pop()
    if place not in PLACES:
        raise TransitsimError(f"--place must be one of {', '.join(PLACES)}, got {place!r}")
    if not 1 <= max_regimes <= MAX_REGIMES:
        raise TransitsimError(f"--max-regimes must lie in 1..{MAX_REGIMES}, got {max_regimes}")
    if not 0 < tolerance < 1:
        raise TransitsimError(f"the tolerance must lie in (0, 1), got {tolerance:g}")
    shape = table_shape(tables, topology)
    algo = check_algo(collective, algo)
    points = fit_points(tables, place, min_size, holdout or [])
    fitted = [p for p in points if p.role == "fit"]
    if len(fitted) < 2:
        raise TransitsimError(
            f"{collective}: {len(fitted)} row(s) of at least {min_size:,} B to fit (2 needed; "
            "a lower --min-size fits smaller rows)"
        )
    coeffs = {
        size: coefficients(collective, algo, shape, size)
        for size in {p.row.size_bytes for p in fitted}
    }
    design = np.array([np.array(coeffs[p.row.size_bytes]) / p.measured_s for p in fitted])
    sizes = [p.row.size_bytes for p in fitted]
    edges = _best_split(design, sizes, max_regimes, min_rows, tolerance)
    regimes = []
    for a, b in itertools.pairwise(edges):
        solved = fit_group(design[a:b], minimax=True)
        assert solved is not None  # the split search kept only groups with a positive rate
        (latency, inverse_rate), worst = solved
        payload = 1.0 / inverse_rate
        if line_bps is not None and payload > line_bps * (1 + 1e-9):
            raise TransitsimError(
                f"{collective}: the fitted payload rate {payload / 1e9:,.4g} Gb/s exceeds "
                f"--line-rate {line_bps / 1e9:,.4g} Gb/s: in the flat network a rank's link "
                "stands for all it sends over (NVLink and NICs); leave --line-rate out"
            )
        link = Link(float(payload), float(latency), line_bps)
        regimes.append(Regime(sizes[a], sizes[b - 1], link, b - a, float(worst)))
    result = Calibration(collective, algo, shape, tables, points, regimes, place=place,
                         min_size=min_size, tolerance=tolerance)  # fmt: skip
    result.predicted_s = [
        predict_s(
            collective,
            algo,
            shape,
            p.row.size_bytes,
            regimes[result.regime_for(p.row.size_bytes)].link,
        )  # fmt: skip
        for p in points
    ]
    return result


def table_shape(tables: list[Table], topology: str) -> Shape:
    """Where the tables' ranks sit in the calibrated network (calibrate/model.py)."""
    if topology not in TOPOLOGIES:
        known = ", ".join(t.replace("_", "-") for t in TOPOLOGIES)
        raise TransitsimError(f"--topology {topology.replace('_', '-')}: expected one of {known}")
    ranks = {t.ranks for t in tables}
    if len(ranks) != 1:
        raise TransitsimError(f"one rank count per fit, got {', '.join(map(str, sorted(ranks)))}")
    count = ranks.pop()
    if count < 2:
        raise TransitsimError(f"{tables[0].source}: one rank: nothing crosses a network")
    if topology == "switch":
        return Shape("switch", count, count)
    per_host = {n for t in tables for n in t.ranks_per_host.values()}
    hosts = max(t.hosts for t in tables)
    if len(per_host) != 1 or hosts < 2:
        raise TransitsimError(
            f"--topology leaf-spine needs the ranks on 2 or more hosts, as many on each (the "
            f"Rank lines give {hosts} host(s), {', '.join(map(str, sorted(per_host))) or '?'} "
            "ranks each)"
        )
    return Shape("leaf_spine", count, per_host.pop())


def busbw_gbps(collective: str, ranks: int, size_bytes: int, time_s: float) -> float:
    """nccl-tests' bus bandwidth, GB/s, of a size done in time_s."""
    return size_bytes / time_s / 1e9 * busbw_factor(collective, ranks) if time_s > 0 else 0.0
