"""Background traffic: other traffic on a link, as the share of its capacity it holds over time.

A link's `LinkSpec.background` is a piecewise-constant series of shares on the replay clock:
each row's share holds from its time until the next row's (the first row's also before it, the
last's for ever). A constant share is a series of one row.

What the share means (the *reserved* form): other traffic holds that share of the link's payload
capacity whatever the training flows do, so max-min sharing among the training flows runs on
what is left, `payload_bps * (1 - share)`. That is a competing flow of fixed rate share x
capacity which always gets its demand: what a measured "available capacity" series says, and
what a rate-limited or prioritised tenant (a reserved share, a QoS class) does. A link that
carries nothing is a fault (faults[]).

`greedy_flows` is the other form: k competing flows that always have data, in the max-min
sharing with the training flows (on what the reserved share leaves). With N training flows on
the link each of them gets 1/(N + k) of it, a share that changes with how many training flows
cross the link at each instant, so only the DES carries it: the fast paths and linear forms
defer to it on a network with greedy background flows.

How each engine honours it:
- a constant share is a lower capacity: the Fabric builds the link's resource at the available
  rate, so the DES, every fast path (rings, hierarchical, switch sum) and the max-plus linear
  forms of replay carry it exactly;
- a share that changes in time is a capacity change at each row, like a fault (a fault is a
  zero-capacity period). `simulate_exchange` first times the exchange on the network frozen at
  its start (`frozen_network`: constant shares, so the fast paths apply); if a change falls
  inside the exchange's window it defers to the DES, which applies every change at its time
  (`capacity_schedule`). The linear forms are never used on a varying network.
- store-and-forward switches still hold one packet at the full line rate: background traffic
  slows a flow's share, not the serialisation of the packets it does send.
"""

import array
import bisect
import csv
import functools
import hashlib
import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transitsim.base.errors import TransitsimError
from transitsim.base.reading import read_regular_file

MAX_ROWS = 100_000  # a day at one row a second is 86,400
MAX_CSV_BYTES = 16 << 20
VALUE_COLUMNS = ("background_share", "available_share", "available_rate")


def check_share(share: object, what: str) -> float:
    if not isinstance(share, int | float) or isinstance(share, bool) or not math.isfinite(share):
        raise TransitsimError(f"{what} must be a number in [0, 1), got {share!r}")
    if share < 0:
        raise TransitsimError(f"{what} must be >= 0, got {share!r}")
    if share >= 1:
        raise TransitsimError(
            f"{what} must be < 1, got {share!r} (a link with no capacity left is a fault: "
            "use faults[])"
        )
    return float(share)


MAX_GREEDY_FLOWS = 1024
REPR_ROWS = 8


@dataclass(frozen=True)
class Background:
    """Shares of a link's payload capacity other traffic holds, from each time on (seconds);
    and greedy_flows: competing flows that always have data and share what is left max-min
    with the training flows (each gets as much as one training flow on the link)."""

    times_s: tuple[float, ...]
    shares: tuple[float, ...]
    greedy_flows: int = 0

    def __post_init__(self) -> None:
        count = self.greedy_flows
        if (
            not isinstance(count, int)
            or isinstance(count, bool)
            or not 0 <= count <= MAX_GREEDY_FLOWS
        ):
            raise TransitsimError(
                f"background greedy_flows must be an integer in 0..{MAX_GREEDY_FLOWS}, "
                f"got {count!r}"
            )
        times = tuple(self.times_s)
        shares = tuple(self.shares)
        if not times or len(times) != len(shares):
            raise TransitsimError(
                f"background needs one share per time and at least one, got {len(times)} "
                f"times and {len(shares)} shares"
            )
        for i, t in enumerate(times):
            if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
                raise TransitsimError(f"background time {i} must be a finite number, got {t!r}")
            if i and t <= times[i - 1]:
                raise TransitsimError(
                    f"background times must increase, got {t!r} after {times[i - 1]!r}"
                )
        checked = tuple(check_share(s, f"background share {i}") for i, s in enumerate(shares))
        object.__setattr__(self, "times_s", tuple(float(t) for t in times))
        object.__setattr__(self, "shares", checked)

    def __repr__(self) -> str:
        """As dataclasses write it, up to REPR_ROWS rows; a longer series by its size, span and
        a digest of every row. repr(network) keys the caches of built fabrics and schedules,
        and a 100,000-row series written out in full cost every step more than timing it."""
        rows = len(self.times_s)
        if rows <= REPR_ROWS:
            return (
                f"Background(times_s={self.times_s!r}, shares={self.shares!r}, "
                f"greedy_flows={self.greedy_flows!r})"
            )
        return (
            f"Background(<{rows} rows, {self.times_s[0]!r} to {self.times_s[-1]!r} s, "
            f"blake2b {self._digest}>, greedy_flows={self.greedy_flows!r})"
        )

    @functools.cached_property
    def _digest(self) -> str:
        rows = array.array("d", self.times_s) + array.array("d", self.shares)
        return hashlib.blake2b(rows.tobytes(), digest_size=16).hexdigest()

    @classmethod
    def constant(cls, share: float) -> "Background":
        return cls((0.0,), (share,))

    @property
    def varies(self) -> bool:
        """Whether the share changes at some time (else a lower capacity is all it is)."""
        return len(set(self.shares)) > 1

    def share_at(self, time_s: float) -> float:
        """The share in force at `time_s` (a row's share holds from its time on)."""
        return self.shares[max(bisect.bisect_right(self.times_s, time_s) - 1, 0)]

    def next_change_s(self, time_s: float) -> float:
        """The first time after `time_s` at which the share changes (inf: never)."""
        i = bisect.bisect_right(self.times_s, time_s)
        current = self.share_at(time_s)
        while i < len(self.times_s):
            if self.shares[i] != current:
                return self.times_s[i]
            i += 1
        return math.inf

    def shifted(self, offset_s: float) -> "Background":
        """The same series on a clock whose 0 is `offset_s` on this one."""
        return Background(tuple(t - offset_s for t in self.times_s), self.shares, self.greedy_flows)


def capacity_schedule(
    capacity: list[float],
    faults: list[Any],
    backgrounds: dict[int, tuple[Background, float]],
    initial_s: float,
    clock_s: float = 0.0,
) -> tuple[list[float], Iterator[tuple[float, int, float]]]:
    """Each resource's capacity at `initial_s`, and every later change: (time, resource, rate),
    in time order (ties in resource order), produced as the caller asks for them.

    faults: ResourceFaults (capacity 0 from down_from_s until down_until_s). backgrounds: per
    resource, its varying series on the replay clock and its full payload rate; clock_s is the
    replay time at which the exchange's clock reads 0 (a series time t is t - clock_s here).
    Both on one clock, so a fault inside a background period restores that period's rate.

    Lazily, because a series may hold 100,000 rows while an exchange spans a few of them: the
    DES takes changes until its last message arrives, so an exchange costs what its own window
    holds (every row, shifted and scheduled, made each exchange cost a fraction of a second).
    """
    downs: dict[int, list[tuple[float, float]]] = {}
    for fault in faults:
        downs.setdefault(fault.resource, []).append((fault.down_from_s, fault.down_until_s))
    start = list(capacity)
    streams = []
    for r in sorted(set(downs) | set(backgrounds)):
        spans = downs.get(r, [])
        series = backgrounds.get(r)
        rate_at = _rate_function(capacity[r], spans, series, clock_s)
        start[r] = rate_at(initial_s)
        streams.append(_changes(r, start[r], rate_at, spans, series, initial_s, clock_s))
    return start, heapq.merge(*streams, key=lambda change: change[0])


def _rate_function(
    full: float,
    spans: list[tuple[float, float]],
    series: tuple[Background, float] | None,
    clock_s: float,
) -> Callable[[float], float]:
    """A resource's rate at exchange time t: 0 inside a fault, else what its background leaves."""
    if series is None:
        return lambda t: 0.0 if any(begin <= t < end for begin, end in spans) else full
    bg, full_bps = series
    times, shares = bg.times_s, bg.shares

    def rate_at(t: float) -> float:
        if any(begin <= t < end for begin, end in spans):
            return 0.0
        # the share in force at t on the shifted series (times - clock_s, as Background.shifted
        # would compute each of them), without building it
        index = bisect.bisect_right(times, t, key=lambda time_s: time_s - clock_s)
        return full_bps * (1.0 - shares[max(index - 1, 0)])

    return rate_at


def _changes(
    r: int,
    current: float,
    rate_at: Callable[[float], float],
    spans: list[tuple[float, float]],
    series: tuple[Background, float] | None,
    initial_s: float,
    clock_s: float,
) -> Iterator[tuple[float, int, float]]:
    """One resource's rate changes after initial_s: at each fault edge and series time."""
    edges = sorted({t for span in spans for t in span if t > initial_s})
    points: Iterator[float] = iter(edges)
    if series is not None:
        times = series[0].times_s
        first = bisect.bisect_right(times, initial_s, key=lambda time_s: time_s - clock_s)
        shifted = (times[i] - clock_s for i in range(first, len(times)))
        points = heapq.merge(edges, shifted)
    previous = math.nan
    for t in points:
        if t == previous:  # a fault edge on a series time, or two times equal once shifted
            continue
        previous = t
        rate = rate_at(t)
        if rate != current:
            yield (t, r, rate)
            current = rate


# --- CSV ----------------------------------------------------------------------------------------


def read_background_csv(path: Path | str, rate_bps: float) -> Background:
    """A background series from a CSV: a `time_s` column and one value column.

    Value columns: `background_share` (the share other traffic holds, in [0, 1)),
    `available_share` (the share left to training, in (0, 1]) or `available_rate` (the rate left
    to training, with units, e.g. "5 Gb/s", at most the link's `rate_bps`). Times in seconds on
    the replay clock, increasing. Every problem is one TransitsimError line naming file and line.
    """
    from transitsim.base.units import parse_rate_bps

    path = Path(path)
    raw = read_regular_file(path, MAX_CSV_BYTES, "background CSV")  # never a FIFO or /dev/zero
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TransitsimError(f"{path}: cannot read background CSV: {exc}") from None
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise TransitsimError(f"{path}: not a CSV: {exc}") from None
    rows = [(line, row) for line, row in enumerate(rows, 1) if any(c.strip() for c in row)]
    if not rows:
        raise TransitsimError(f"{path}: background CSV is empty (needs time_s and a value column)")
    header_line, header = rows[0]
    names = [c.strip() for c in header]
    values = [c for c in names if c in VALUE_COLUMNS]
    if "time_s" not in names or len(values) != 1:
        raise TransitsimError(
            f"{path}:{header_line}: header must have time_s and one of {', '.join(VALUE_COLUMNS)}, "
            f"got {','.join(names)}"
        )
    if len(rows) - 1 > MAX_ROWS:
        raise TransitsimError(f"{path}: {len(rows) - 1:,} rows is too many (at most {MAX_ROWS:,})")
    if len(rows) < 2:
        raise TransitsimError(f"{path}: background CSV has a header but no rows")
    kind = values[0]
    t_col, v_col = names.index("time_s"), names.index(kind)
    times: list[float] = []
    shares: list[float] = []
    for line, row in rows[1:]:
        if len(row) != len(names):
            raise TransitsimError(
                f"{path}:{line}: expected {len(names)} fields like the header, got {len(row)}"
            )
        where = f"{path}:{line}"
        t = _number(row[t_col], f"{where}: time_s")
        if t < 0:
            raise TransitsimError(f"{where}: time_s must be >= 0, got {row[t_col].strip()}")
        if times and t <= times[-1]:
            raise TransitsimError(
                f"{where}: time_s must increase, got {row[t_col].strip()} after {times[-1]:g}"
            )
        cell = row[v_col].strip()
        if kind == "available_rate":
            try:
                available = parse_rate_bps(cell)
            except TransitsimError as exc:
                raise TransitsimError(f"{where}: available_rate: {exc}") from None
            if available > rate_bps * (1 + 1e-12):
                raise TransitsimError(
                    f"{where}: available_rate {cell} is more than the link's rate "
                    f"({rate_bps / 1e9:g} Gb/s)"
                )
            share = max(1.0 - available / rate_bps, 0.0)
        else:
            value = _number(cell, f"{where}: {kind}")
            share = value if kind == "background_share" else 1.0 - value
            if kind == "available_share" and not 0 < value <= 1:
                raise TransitsimError(f"{where}: available_share must be in (0, 1], got {cell}")
        try:
            shares.append(check_share(share, f"{where}: {kind}"))
        except TransitsimError as exc:
            raise TransitsimError(f"{exc}".replace(f"got {share!r}", f"got {cell}")) from None
        times.append(t)
    return Background(tuple(times), tuple(shares))


def _number(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise TransitsimError(f"{what} must be a number, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise TransitsimError(f"{what} must be finite, got {text.strip()!r}")
    return value
