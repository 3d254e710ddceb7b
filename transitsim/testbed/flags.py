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
from transitsim.base.units import parse_bytes, parse_rate_bps
from transitsim.testbed import rate_label
from transitsim.testbed.measure import COLLECTIVES, Point, plan_points
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
        raise TransitsimError(f"--collectives: expected all-reduce or all-gather, got {text!r}")
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


def seed(value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise TransitsimError(f"--seed: expected 0..{MAX_SEED}, got {value}")
    return value


@dataclass(frozen=True)
class Grid:
    """Everything `testbed run` measures, checked."""

    rates_bps: list[float]
    workers: list[int]
    sizes: list[int]
    collectives: list[str]
    calibration_bytes: int
    call_limit_s: float
    budget_s: float
    repeats: tuple[int, int]
    warmup: int

    def points(self, rate_bps: float, workers: int) -> list[Point]:
        return plan_points(rate_bps, workers, self.sizes, self.collectives,
                           call_limit_s=self.call_limit_s, budget_s=self.budget_s,
                           repeats=self.repeats, warmup=self.warmup)  # fmt: skip


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
) -> Grid:
    """The run's grid, refused unless every rate has points to measure and its calibration
    point among them (alpha is fitted on it), and no point needs more memory than is sane."""
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
        size(calibrate, "calibrate"),
        seconds(call_limit, "call-limit", MAX_CALL_S),
        seconds(budget, "budget", MAX_BUDGET_S),
        (low, high),
        warmup,
    )
    if chosen.calibration_bytes not in chosen.sizes:
        raise TransitsimError(f"--calibrate {calibrate!r} must be one of --sizes")
    for rate_bps in chosen.rates_bps:
        planned = [(p, n) for n in chosen.workers for p in chosen.points(rate_bps, n)]
        if not planned:
            raise TransitsimError(
                f"at {rate_label(rate_bps)} no point fits in --call-limit {call_limit:g} s"
            )
        if not any(p.bytes == chosen.calibration_bytes for p, _ in planned):
            raise TransitsimError(
                f"at {rate_label(rate_bps)} the --calibrate point does not fit in --call-limit "
                f"{call_limit:g} s: alpha could not be fitted"
            )
        for point, n in planned:
            copies = n + 1 if point.collective == "all_gather" else 1
            if n * copies * point.bytes > MAX_BUFFER_BYTES:
                raise TransitsimError(
                    f"{point.collective} of {point.bytes} B on {n} workers needs more than "
                    f"{MAX_BUFFER_BYTES >> 30} GiB of tensors: use smaller --sizes"
                )
    return chosen
