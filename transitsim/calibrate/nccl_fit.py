"""Fit the NCCL-mode network (network/nccl.py) to measured tables: `calibrate nccl-tests
--model nccl`.

The network is the flat one of calibrate/model.py (a link per rank to one switch) with an
`nccl:` block of C channels (16 by default) and up to three protocols, chosen by size by the
engine's own `auto` (the least time, as NCCL's tuner chooses by its own model). Each protocol
has, fitted:

- its latency per link (the link's latency is the least of them; each protocol adds the rest);
- its channel rate r: what one channel moves per second (LL's and LL128's throughput is bounded
  per channel by the GPU threads that write and poll their flags, far below the wire); Simple's
  C x r is the link's payload rate;
- where it improves the fit, its channel_bytes m: below C x m NCCL runs fewer channels (its
  threads x per-thread threshold rule), so the time stays flat while channels are added.

With n = clamp(size // m, 1, C) channels, a row's time is c_L x L + c_B(size) / n x (1 / r), with
c_L and c_B read off two transitsim runs (calibrate/model.py `coefficients`): affine in (L, 1/r)
for each m. The rows (at least `min_size`, 64 KiB) are cut, in size order, into contiguous
groups, one per protocol (1: Simple; 2: LL, Simple; 3: LL, LL128, Simple), each group fitted by
least squares then Lawson's minimax (calibrate/fit.py), with m = 0 or a candidate at each of
its rows' sizes / C (and sqrt 2 beyond). The split and the m's kept are those whose lower
envelope (the time `auto` predicts) has the smallest worst relative error over every fitted row;
the fewest protocols that hold the tolerance win. Printed predictions are the engine's on the
final network, not the affine shortcut.
"""

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.fit import MIN_ROWS, PLACES, TOLERANCE, Point, fit_group, fit_points
from transitsim.calibrate.fit import table_shape as _table_shape
from transitsim.calibrate.model import Link, Shape, check_algo, coefficients, exchange_for
from transitsim.calibrate.model import flat_network as _flat_network
from transitsim.calibrate.nccl_tests import Table
from transitsim.network import NetworkSpec, simulate_exchange
from transitsim.network.spec import NCCL_DEFAULTS, NcclSpec, ProtocolSpec

NCCL_MIN_SIZE_BYTES = 64 << 10
DEFAULT_CHANNELS = 16
PROTOCOL_SETS = {1: ("simple",), 2: ("ll", "simple"), 3: ("ll", "ll128", "simple")}
NCCL_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class ProtocolFit:
    """One protocol's fitted values and the rows it was fitted on."""

    protocol: str
    first_bytes: int
    last_bytes: int
    rows: int
    latency_s: float  # per link, in all (the link's own plus the protocol's)
    channel_rate_bps: float  # payload one channel moves per second
    channel_bytes: int  # 0: every channel always

    @property
    def parameters(self) -> int:
        return 2 + (self.channel_bytes > 0)


@dataclass
class NcclCalibration:
    """The fitted NCCL-mode network of one collective and every row's prediction."""

    collective: str
    algo: str
    shape: Shape
    tables: list[Table]
    points: list[Point]
    fits: list[ProtocolFit]
    channels: int
    line_bps: float | None = None
    predicted_s: list[float] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)  # the protocol auto took, per point
    place: str = "out"
    min_size: int = NCCL_MIN_SIZE_BYTES
    tolerance: float = TOLERANCE

    @property
    def ranks(self) -> int:
        return self.shape.ranks

    @property
    def parameters(self) -> int:
        return sum(f.parameters for f in self.fits)

    @property
    def payload_bps(self) -> float:
        """The link's payload rate: Simple's channels together."""
        return self.fits[-1].channel_rate_bps * self.channels

    def network(self, name: str = "calibrated") -> NetworkSpec:
        """The calibrated network: flat, with the fitted `nccl:` block."""
        latency = min(f.latency_s for f in self.fits)
        link = Link(self.payload_bps, latency, self.line_bps)
        protocols = {}
        for fit in self.fits:
            default = NCCL_DEFAULTS[fit.protocol]
            per_link = fit.channel_rate_bps * self.channels / self.payload_bps
            protocols[fit.protocol] = ProtocolSpec(
                efficiency=min(1.0, max(default.efficiency, per_link)),
                latency_s=fit.latency_s - latency,
                channel_rate_bps=fit.channel_rate_bps,
                channel_bytes=fit.channel_bytes,
            )
        nccl = NcclSpec(
            protocol="auto",
            channels=self.channels,
            protocols=tuple(protocols),
            **protocols,
        )
        return dataclasses.replace(_flat_network(self.shape, link, name), nccl=nccl)

    def errors(self) -> np.ndarray:
        measured = np.array([p.measured_s for p in self.points])
        return np.array(self.predicted_s) / measured - 1.0

    def worst(self, role: str) -> float | None:
        errors = [abs(e) for p, e in zip(self.points, self.errors(), strict=True) if p.role == role]
        return max(errors) if errors else None

    def protocol_at(self, index: int) -> str:
        return self.chosen[index]


def _channels(sizes: np.ndarray, m: int, channels: int) -> np.ndarray:
    if m <= 0:
        return np.full(len(sizes), float(channels))
    return np.clip(np.floor(sizes / m), 1, channels)


def _group_options(cl, cb, times, sizes, a, b, channels) -> list[tuple[int, float, float]]:
    """(m, L, 1/r) fits of rows a..b, one per channel_bytes candidate."""
    candidates = {0}
    for size in sizes[a:b]:
        for factor in (1.0, math.sqrt(2.0)):
            candidates.add(int(round(size * factor / channels)))
    out = []
    for m in sorted(candidates):
        share = _channels(sizes[a:b], m, channels)
        design = np.stack([cl[a:b] / times[a:b], cb[a:b] / share / times[a:b]], axis=1)
        solved = fit_group(design, minimax=True)
        if solved is not None:
            (latency, inverse_rate), _ = solved
            out.append((m, float(latency), float(inverse_rate)))
    return out


def _search(cl, cb, times, sizes, channels, max_protocols, min_rows, tolerance):
    """The split and per-group (m, L, 1/r) whose envelope has the smallest worst error; the
    fewest protocols that hold `tolerance` win."""
    n = len(sizes)
    cache: dict[tuple[int, int], list] = {}
    overall = None
    for count in range(1, max_protocols + 1):
        best = None
        for cuts in itertools.combinations(range(1, n), count - 1):
            edges = (0, *cuts, n)
            if any(y - x < min(min_rows, n) for x, y in itertools.pairwise(edges)):
                continue
            options = []
            for x, y in itertools.pairwise(edges):
                if (x, y) not in cache:
                    cache[(x, y)] = _group_options(cl, cb, times, sizes, x, y, channels)
                options.append(cache[(x, y)])
            for chosen in itertools.product(*options):
                simple_inverse = chosen[-1][2]
                if any(inv < simple_inverse * (1 - 1e-12) for _, _, inv in chosen[:-1]):
                    continue  # a protocol faster than Simple's link: efficiency above 1
                preds = [
                    cl * latency + cb / _channels(sizes, m, channels) * inverse
                    for m, latency, inverse in chosen
                ]
                worst = float(np.abs(np.min(preds, axis=0) / times - 1).max())
                if best is None or worst < best[0]:
                    best = (worst, edges, chosen)
        if best is None:
            continue
        if overall is None or best[0] < overall[0] - 1e-12:
            overall = best
        if best[0] <= tolerance:
            return best
    if overall is None:
        raise TransitsimError("no positive channel rate fits these rows (times fall with size?)")
    return overall


def calibrate_nccl(
    tables: list[Table],
    *,
    algo: str | None = None,
    place: str = "out",
    min_size: int = NCCL_MIN_SIZE_BYTES,
    holdout: list[int] | None = None,
    max_protocols: int = 3,
    min_rows: int = MIN_ROWS,
    tolerance: float = TOLERANCE,
    line_bps: float | None = None,
    topology: str = "switch",
    channels: int = DEFAULT_CHANNELS,
) -> NcclCalibration:
    """Fit the NCCL-mode network to tables of one collective on one rank count (module doc)."""
    collectives = {t.collective for t in tables}
    if len(collectives) != 1:
        raise TransitsimError(f"one collective per fit, got {', '.join(sorted(collectives))}")
    collective = collectives.pop()
    if collective not in NCCL_COLLECTIVES:
        raise TransitsimError(
            f"--model nccl: {collective} is not timed by a transitsim schedule (only "
            f"{', '.join(NCCL_COLLECTIVES)}); use --model regimes"
        )
    if place not in PLACES:
        raise TransitsimError(f"--place must be one of {', '.join(PLACES)}, got {place!r}")
    if not 1 <= max_protocols <= 3:
        raise TransitsimError(f"--max-protocols must lie in 1..3, got {max_protocols}")
    if not 1 <= channels <= 64:
        raise TransitsimError(f"--channels must lie in 1..64, got {channels}")
    shape = _table_shape(tables, topology)
    algo = check_algo(collective, algo)
    points = fit_points(tables, place, min_size, holdout or [])
    fitted = [p for p in points if p.role == "fit"]
    if len(fitted) < 2:
        raise TransitsimError(
            f"{collective}: {len(fitted)} row(s) of at least {min_size:,} B to fit (2 needed)"
        )
    coeffs = {
        size: coefficients(collective, algo, shape, size)
        for size in {p.row.size_bytes for p in fitted}
    }
    sizes = np.array([float(p.row.size_bytes) for p in fitted])
    times = np.array([p.measured_s for p in fitted])
    cl = np.array([coeffs[p.row.size_bytes][0] for p in fitted])
    cb = np.array([coeffs[p.row.size_bytes][1] for p in fitted])
    _, edges, chosen = _search(cl, cb, times, sizes, channels, max_protocols, min_rows, tolerance)
    names = PROTOCOL_SETS[len(chosen)]
    fits = [
        ProtocolFit(name, int(sizes[x]), int(sizes[y - 1]), y - x, latency, 1.0 / inverse, m)
        for name, (x, y), (m, latency, inverse) in zip(
            names, itertools.pairwise(edges), chosen, strict=True
        )
    ]
    if line_bps is not None and fits[-1].channel_rate_bps * channels > line_bps * (1 + 1e-9):
        raise TransitsimError(
            f"{collective}: the fitted payload rate exceeds --line-rate "
            f"{line_bps / 1e9:,.4g} Gb/s; leave --line-rate out"
        )
    result = NcclCalibration(
        collective, algo, shape, tables, points, fits, channels, line_bps, place=place,
        min_size=min_size, tolerance=tolerance,
    )  # fmt: skip
    network = result.network()
    for point in points:
        exchange = exchange_for(collective, algo, shape.ranks, point.row.size_bytes)
        outcome = simulate_exchange(network, exchange)
        result.predicted_s.append(outcome.time_s)
        result.chosen.append(outcome.protocol or "-")
    return result
