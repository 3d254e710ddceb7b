"""Fit the NCCL-mode network (network/nccl.py) to measured tables: `calibrate nccl-tests` (the
default model; `--model regimes` is calibrate/fit.py's).

The network is the flat one of calibrate/model.py (a link per rank to one switch) with an
`nccl:` block of C channels (16 by default, given) and 1 to 3 protocols (LL, LL128, Simple, named
in size order), each with its fitted latency per link and channel rate (what one channel moves
per second) and, where it pays, its channel floor (channel_bytes: below C x it fewer channels
run, NCCL's threads x per-thread threshold rule). The protocol of a size is NCCL's choice as the
table shows it: the one of least time (`auto`, as NCCL's tuner takes its own fastest), or, where
the table bends the other way, by fitted thresholds (`nccl.thresholds`, NCCL_LL_THRESHOLD's
rule), each switch where the two protocols take the same time. calibrate/nccl_search.py finds
them (the fewest parameters, at most 7, that reproduce the rows of at least `min_size`, 64 KiB,
within 10 % worst and 3 % median); the predictions printed are the engine's on the network
written, not the search's affine shortcut.
"""

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.fit import PLACES, TOLERANCE, Point, fit_points
from transitsim.calibrate.fit import table_shape as _table_shape
from transitsim.calibrate.model import Link, Shape, check_algo, coefficients, exchange_for
from transitsim.calibrate.model import flat_network as _flat_network
from transitsim.calibrate.nccl_search import MAX_PARAMETERS, MEDIAN_TOLERANCE, search
from transitsim.calibrate.nccl_tests import Table
from transitsim.network import NetworkSpec, simulate_exchange
from transitsim.network.spec import NCCL_DEFAULTS, NcclSpec, ProtocolSpec

NCCL_MIN_SIZE_BYTES = 64 << 10
DEFAULT_CHANNELS = 16
PROTOCOL_SETS = {1: ("simple",), 2: ("ll", "simple"), 3: ("ll", "ll128", "simple")}
NCCL_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class ProtocolFit:
    """One protocol's fitted values and the fitted rows it times."""

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
    switch_bytes: tuple[float, ...] = ()  # table sizes where the protocol changes (thresholds)
    predicted_s: list[float] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)  # the protocol the engine took, per point
    place: str = "out"
    min_size: int = NCCL_MIN_SIZE_BYTES
    tolerance: float = TOLERANCE
    median_tolerance: float = MEDIAN_TOLERANCE

    @property
    def ranks(self) -> int:
        return self.shape.ranks

    @property
    def parameters(self) -> int:
        """Fitted: each protocol's latency and rate, and its floor where it has one (a threshold
        is where two protocols' lines meet: they fix it)."""
        return sum(f.parameters for f in self.fits)

    @property
    def family(self) -> str:
        return "thresholds" if self.switch_bytes else "fastest"

    @property
    def payload_bps(self) -> float:
        """The link's payload rate: the fastest protocol's channels together."""
        return max(f.channel_rate_bps for f in self.fits) * self.channels

    def thresholds(self) -> tuple[float, ...]:
        """The switch sizes as the engine compares them: the exchange's payload bytes."""
        return tuple(
            float(exchange_for(self.collective, self.algo, self.ranks, round(size)).payload_bytes)
            for size in self.switch_bytes
        )

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
            tuner="engine",  # the fitted protocols are the table's, not NCCL's defaults
            channels=self.channels,
            protocols=tuple(protocols),
            thresholds=self.thresholds(),
            **protocols,
        )
        return dataclasses.replace(_flat_network(self.shape, link, name), nccl=nccl)

    def errors(self) -> np.ndarray:
        measured = np.array([p.measured_s for p in self.points])
        return np.array(self.predicted_s) / measured - 1.0

    def worst(self, role: str) -> float | None:
        errors = [abs(e) for p, e in zip(self.points, self.errors(), strict=True) if p.role == role]
        return max(errors) if errors else None

    def median(self, role: str) -> float | None:
        errors = [abs(e) for p, e in zip(self.points, self.errors(), strict=True) if p.role == role]
        return float(np.median(errors)) if errors else None

    def protocol_at(self, index: int) -> str:
        return self.chosen[index]


def calibrate_nccl(
    tables: list[Table],
    *,
    algo: str | None = None,
    place: str = "out",
    min_size: int = NCCL_MIN_SIZE_BYTES,
    holdout: list[int] | None = None,
    max_protocols: int = 3,
    max_parameters: int = MAX_PARAMETERS,
    tolerance: float = TOLERANCE,
    median_tolerance: float = MEDIAN_TOLERANCE,
    line_bps: float | None = None,
    topology: str = "switch",
    channels: int = DEFAULT_CHANNELS,
    coefficient_cache: dict | None = None,
) -> NcclCalibration:
    """Fit the NCCL-mode network to tables of one collective on one rank count (module doc).
    Rows whose size is in `holdout` are left out of the fit and predicted."""
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
    cache = {} if coefficient_cache is None else coefficient_cache
    for size in {p.row.size_bytes for p in fitted}:
        if (collective, algo, shape, size) not in cache:
            cache[(collective, algo, shape, size)] = coefficients(collective, algo, shape, size)
    coeffs = [cache[(collective, algo, shape, p.row.size_bytes)] for p in fitted]
    sizes = np.array([float(p.row.size_bytes) for p in fitted])
    payloads = [exchange_for(collective, algo, shape.ranks, int(s)).payload_bytes for s in sizes]
    found = search(
        sizes,
        np.array([p.measured_s for p in fitted]),
        np.array([c[0] for c in coeffs]),
        np.array([c[1] for c in coeffs]),
        channels=channels,
        payloads=np.array(payloads, float),
        max_protocols=max_protocols,
        max_parameters=max_parameters,
        tolerance=tolerance,
        median_tolerance=median_tolerance,
    )
    names = PROTOCOL_SETS[len(found.lines)]
    fits = [
        ProtocolFit(name, 0, 0, 0, line.latency_s, 1.0 / line.inverse_rate, line.channel_bytes)
        for name, line in zip(names, found.lines, strict=True)
    ]
    if line_bps is not None and max(f.channel_rate_bps for f in fits) * channels > line_bps * (
        1 + 1e-9
    ):
        raise TransitsimError(
            f"{collective}: the fitted payload rate exceeds --line-rate "
            f"{line_bps / 1e9:,.4g} Gb/s; leave --line-rate out"
        )
    result = NcclCalibration(
        collective, algo, shape, tables, points, fits, channels, line_bps, found.switch_sizes,
        place=place, min_size=min_size, tolerance=tolerance, median_tolerance=median_tolerance,
    )  # fmt: skip
    network = result.network()
    for point in points:
        exchange = exchange_for(collective, algo, shape.ranks, point.row.size_bytes)
        outcome = simulate_exchange(network, exchange)
        result.predicted_s.append(outcome.time_s)
        result.chosen.append(outcome.protocol or "-")
    result.fits = [_covered(fit, points, result.chosen) for fit in fits]
    return result


def _covered(fit: ProtocolFit, points: list[Point], chosen: list[str]) -> ProtocolFit:
    """The fit with the fitted rows the engine times with it (first, last, how many)."""
    sizes = [p.row.size_bytes for p, c in zip(points, chosen, strict=True)
             if c == fit.protocol and p.role == "fit"]  # fmt: skip
    if not sizes:
        return fit
    return dataclasses.replace(fit, first_bytes=min(sizes), last_bytes=max(sizes), rows=len(sizes))
