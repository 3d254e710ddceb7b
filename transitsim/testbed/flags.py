"""The testbed's flags, checked before anything is built: one TransitsimError line for a value
no run could use, rather than a traceback after the namespaces exist or after minutes of work.

The bounds are those of what the testbed can measure on one machine (one rank per host
namespace, float32 payloads, tbf on veth pairs), and they are the bounds `tables.py` holds a
measured table to, so a table `testbed run` writes is always one `testbed compare` reads.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from transitsim.analysis.metrics import check_target
from transitsim.base.errors import TransitsimError
from transitsim.base.units import parse_bytes, parse_rate_bps, parse_time_s
from transitsim.testbed import rate_label
from transitsim.testbed.measure import COLLECTIVES, Point, estimate_launch_s, plan_points
from transitsim.testbed.netns import MAX_HOSTS

T = TypeVar("T")

RATE_RANGE_BPS = (1e6, 10e9)  # below: every call takes minutes; above: veth and CPU, not tbf
WORKER_RANGE = (2, MAX_HOSTS)
ELEMENT_BYTES = 4  # the ranks exchange float32 tensors
SIZE_RANGE = (ELEMENT_BYTES, 256 << 20)
MAX_BUFFER_BYTES = 8 << 30  # every rank's tensors of one point together (an all-gather: P + 1)
MAX_CALL_S = 300.0  # the ranks' collective timeout
MAX_BUDGET_S = 3600.0
MAX_REPEATS = 10_000
MAX_WARMUP = 100
MAX_SEED = 2**32 - 1  # the trainer's seeds
MAX_SPREAD_TARGET = 1.0


def parse_list(text: str, parse: Callable[[str], T], what: str) -> list[T]:
    """A comma-separated flag: at least one value, each parsed, none given twice."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise TransitsimError(f"--{what} needs at least one value")
    values = [parse(t) for t in items]
    for k, value in enumerate(values):
        if value in values[:k]:
            raise TransitsimError(f"--{what}: {items[k]!r} is given twice")
    return values


def rate(text: str) -> float:
    """A tbf rate the testbed can shape: 1 Mb/s to 10 Gb/s."""
    value = parse_rate_bps(text)
    low, high = RATE_RANGE_BPS
    if not low <= value <= high:
        raise TransitsimError(
            f"--rates: {text!r} is outside {rate_label(low)} .. {rate_label(high)}"
        )
    return value


def workers(text: str) -> int:
    """A worker count: ASCII digits only (int() would take other scripts' digits), 2..16."""
    low, high = WORKER_RANGE
    if not re.fullmatch(r"[0-9]{1,3}", text) or not low <= int(text) <= high:
        raise TransitsimError(f"--workers: expected integers {low}..{high}, got {text!r}")
    return int(text)


def size(text: str, flag: str = "sizes") -> int:
    """A payload per worker: whole float32 elements, 4 B .. 256 MiB."""
    value = parse_bytes(text)
    low, high = SIZE_RANGE
    if not low <= value <= high or value % ELEMENT_BYTES:
        raise TransitsimError(
            f"--{flag}: {text!r} is not a whole number of float32 elements from {low} B to "
            f"{high >> 20} MiB"
        )
    return value


def collective(text: str) -> str:
    name = text.replace("-", "_")
    if name not in COLLECTIVES:
        raise TransitsimError(
            f"--collectives: expected all-reduce or all-gather, got {text!r} (with --sites 2 "
            "the hierarchical all-reduce is always measured too)"
        )
    return name


def target(text: str) -> float:
    try:
        return check_target(float(text))
    except ValueError:
        raise TransitsimError(f"--targets: expected loss values, got {text!r}") from None


def seconds(value: float, flag: str, high: float) -> float:
    """A positive, finite number of seconds up to `high` (NaN compares false to everything)."""
    if not (math.isfinite(value) and 0 < value <= high):
        raise TransitsimError(f"--{flag}: expected seconds in (0, {high:g}], got {value!r}")
    return float(value)


MAX_QUEUE_S = 1.0


def queue_seconds(text: str) -> float:
    """--wan-queue: tbf's `latency` (a time, e.g. "5 ms"), 1 ms to 1 s: whole milliseconds,
    as tc takes it."""
    try:
        value = parse_time_s(text)
    except (TransitsimError, ValueError) as exc:
        raise TransitsimError(f"--wan-queue: {exc}") from None
    if not (math.isfinite(value) and 1e-3 <= value <= MAX_QUEUE_S):
        raise TransitsimError(f"--wan-queue: expected 1 ms to 1 s, got {text!r}")
    return round(value * 1e3) / 1e3


def seed(value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise TransitsimError(f"--seed: expected 0..{MAX_SEED}, got {value}")
    return value


def calibration_sizes(text: str, most: int = 2) -> tuple[int, ...]:
    """--calibrate: one or two sizes the endpoint (or the legacy alpha: one) is fitted on."""
    values = parse_list(text, lambda t: size(t, "calibrate"), "calibrate")
    if len(values) > most:
        raise TransitsimError(f"--calibrate takes at most {most} sizes, got {len(values)}")
    return tuple(values)


@dataclass(frozen=True)
class Grid:
    """Everything `testbed run` measures, checked."""

    rates_bps: list[float]
    workers: list[int]
    sizes: list[int]
    collectives: list[str]
    calibration_sizes: tuple[int, ...]
    call_limit_s: float
    budget_s: float
    repeats: tuple[int, int]
    warmup: int
    target_spread: float = 0.05
    sites: int = 1
    wan_rate_bps: float | None = None
    wan_queue_s: float = 0.05  # the WAN tbf's `latency`: how long a packet may wait there

    def points(self, rate_bps: float, workers: int) -> list[Point]:
        return plan_points(rate_bps, workers, self.sizes, self.collectives,
                           call_limit_s=self.call_limit_s, budget_s=self.budget_s,
                           repeats=self.repeats, warmup=self.warmup,
                           target_spread=self.target_spread,
                           wan_bps=self.wan_rate_bps if self.sites == 2 else None)  # fmt: skip

    def estimate_s(self) -> float:
        """Worst case of the whole run (every point to its repeat or time cap), from the
        points' wire times: one launch per (rate, workers), round-trip probes per rate."""
        total = 0.0
        wan = self.wan_rate_bps if self.sites == 2 else None
        for rate_bps in self.rates_bps:
            total += 5.0 * self.sites  # the round-trip probes (two with two sites)
            for n in self.workers:
                points = self.points(rate_bps, n)
                if points:
                    total += estimate_launch_s(points, n, rate_bps, wan)
        return total


def grid(
    rates: str,
    workers_text: str,
    sizes: str,
    collectives: str,
    calibrate: str,
    call_limit: float,
    budget: float,
    repeats: tuple[int, int],
    warmup: int,
    target_spread: float = 0.05,
    sites: int = 1,
    wan_rate: str | None = None,
    wan_queue: str | None = None,
) -> Grid:
    """The run's grid, refused unless every rate has points to measure and its calibration
    sizes among them (the endpoint is fitted on them), and no point needs more memory than is
    sane. Two sites need a WAN rate below every host rate and even worker counts."""
    if sites not in (1, 2):
        raise TransitsimError(f"--sites: expected 1 or 2, got {sites}")
    if not (math.isfinite(target_spread) and 0 <= target_spread <= MAX_SPREAD_TARGET):
        raise TransitsimError(
            f"--target-spread: expected 0 to {MAX_SPREAD_TARGET:g}, got {target_spread!r}"
        )
    wan_bps = None
    if sites == 2:
        if wan_rate is None:
            raise TransitsimError("--sites 2 needs --wan-rate (below the host links' rates)")
        wan_bps = rate(wan_rate)
    elif wan_rate is not None:
        raise TransitsimError("--wan-rate needs --sites 2")
    wan_queue_s = 0.05
    if wan_queue is not None:
        if sites != 2:
            raise TransitsimError("--wan-queue needs --sites 2")
        wan_queue_s = queue_seconds(wan_queue)
    low, high = repeats
    if not 1 <= low <= high <= MAX_REPEATS or not 0 <= warmup <= MAX_WARMUP:
        raise TransitsimError(
            f"need 1 <= --min-repeats <= --max-repeats <= {MAX_REPEATS} and "
            f"0 <= --warmup <= {MAX_WARMUP}"
        )
    chosen = Grid(
        parse_list(rates, rate, "rates"),
        parse_list(workers_text, workers, "workers"),
        parse_list(sizes, size, "sizes"),
        parse_list(collectives, collective, "collectives"),
        calibration_sizes(calibrate),
        seconds(call_limit, "call-limit", MAX_CALL_S),
        seconds(budget, "budget", MAX_BUDGET_S),
        (low, high),
        warmup,
        float(target_spread),
        sites,
        wan_bps,
        wan_queue_s,
    )
    if any(b not in chosen.sizes for b in chosen.calibration_sizes):
        raise TransitsimError(f"--calibrate {calibrate!r}: every size must be one of --sizes")
    if sites == 2:
        if odd := [n for n in chosen.workers if n % 2]:
            raise TransitsimError(f"--sites 2: worker counts must be even, got {odd[0]}")
        if any(wan_bps >= r for r in chosen.rates_bps):
            raise TransitsimError("--wan-rate must be below every host link rate (--rates)")
    for rate_bps in chosen.rates_bps:
        planned = [(p, n) for n in chosen.workers for p in chosen.points(rate_bps, n)]
        if not planned:
            raise TransitsimError(
                f"at {rate_label(rate_bps)} no point fits in --call-limit {call_limit:g} s"
            )
        fits = {p.bytes for p, _ in planned}
        if any(b not in fits for b in chosen.calibration_sizes):
            raise TransitsimError(
                f"at {rate_label(rate_bps)} a --calibrate size has no point that fits in "
                f"--call-limit {call_limit:g} s: the endpoint could not be fitted"
            )
        for point, n in planned:
            copies = n + 1 if point.collective == "all_gather" else 1
            if n * copies * point.bytes > MAX_BUFFER_BYTES:
                raise TransitsimError(
                    f"{point.collective} of {point.bytes} B on {n} workers needs more than "
                    f"{MAX_BUFFER_BYTES >> 30} GiB of tensors: use smaller --sizes"
                )
    return chosen


def ttl_sites(sites: int, wan_rate: str | None, hosts: int, rates_bps: list[float]) -> float:
    """`testbed ttl --sites/--wan-rate`: the WAN's rate (0.0 with one site), or one line. Two
    sites need an even number of hosts (half a site) and a WAN below every host rate."""
    if sites not in (1, 2):
        raise TransitsimError(f"--sites: expected 1 or 2, got {sites}")
    if sites == 1:
        if wan_rate is not None:
            raise TransitsimError("--wan-rate needs --sites 2")
        return 0.0
    if wan_rate is None:
        raise TransitsimError("--sites 2 needs --wan-rate (below the host links' rates)")
    wan_bps = rate(wan_rate)
    if hosts % 2:
        raise TransitsimError(f"--sites 2: --hosts must be even (half a site each), got {hosts}")
    if any(wan_bps >= r for r in rates_bps):
        raise TransitsimError("--wan-rate must be below every host link rate (--rates)")
    return wan_bps
