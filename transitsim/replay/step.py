"""One replayed step: the outcome of its exchange, simulated or reused, and its figures.

A step is: every worker starts computing at the previous step's end, computes (plus its straggler
jitter), compresses, then joins the exchange at its own ready time; the step ends when the
exchange has finished for everyone, plus the optimiser update.

Steps that cannot differ (same bytes, same compute, no random stragglers, no link fault in their
window) are simulated once and reused: the exchange is simulated relative to its step's start, so
a reused result is the very same numbers a fresh simulation would give. The stepping over rows
(`steps.py`) and the steady arrays (`steady.py`) both build on this module.
"""

import bisect
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from transitsim.network import Exchange, LinkFault, simulate_exchange
from transitsim.network.spec import NetworkSpec
from transitsim.network.varying import change_times, frozen_network

# per-step figures of the exchange and how much of it the backward hid (timeline columns)
OVERLAP_FIGURES = ("exchange_s", "exposed_s", "hidden_s")


@dataclass(frozen=True)
class Outcome:
    """One simulated exchange, times relative to the start of its step."""

    finish_s: float  # when the last worker has the result
    transform_s: float
    wire_s: float
    wait_s: float
    wire_bytes: float  # bytes one worker sends on its line (mean over workers)
    events: int
    link_stats: pd.DataFrame
    faulted: bool
    start_s: float  # when the first worker starts exchanging (step-relative)
    exchange_s: float  # the exchange's own time: finish - start, or with overlap the units' sum
    units: int = 1  # exchanges the step was split into (overlap)
    wan_bytes: float = 0.0  # of wire_bytes, those that crossed a WAN link (the rest: LAN)


@dataclass
class Segment:
    """`count` consecutive steps of one row that took the same times."""

    count: int
    step_s: float
    compute_s: float
    transform_s: float
    wire_s: float
    wait_s: float
    wire_bytes: float
    exchange_s: float
    exposed_s: float  # step - compute - compression - update: the exchange time not hidden
    hidden_s: float  # exchange_s - exposed_s (0 without overlap)
    wan_bytes: float = 0.0  # of wire_bytes, those that crossed a WAN link


@dataclass
class Run:
    """What replay carries from step to step."""

    network: NetworkSpec
    faults: list[LinkFault]
    method: str | None
    reuse: bool
    cache: dict[Any, Outcome] = field(default_factory=dict)
    # the exchange from its first worker's ready time on, by (exchange, relative ready times):
    # steps whose compute differs but not between workers share one simulation
    relative: dict[Any, Outcome] = field(default_factory=dict)
    detail: list[dict[str, Any]] = field(default_factory=list)
    # the same as columns, where steady.py timed the whole run at once (None: see detail)
    detail_columns: dict[str, list[Any]] | None = None
    # id(outcome) -> (outcome, steps it stood for): link figures are summed once per outcome
    uses: dict[int, tuple[Outcome, int]] = field(default_factory=dict)
    # `overlap: buckets`: an overlap.OverlapPlan that times steps with overlap; None: none
    overlap: Any = None
    # when a link's background share changes (replay clock); the network frozen at the piece
    # the step being replayed starts in, and a key for that piece in every cache
    changes: list[float] = field(default_factory=list)
    current: Any = None
    piece: Any = None
    _pieces: dict[int, tuple[NetworkSpec, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # caveats the stepping found (the timeline's)

    def __post_init__(self) -> None:
        self.changes = change_times(self.network)
        self.current = self.network

    def count_use(self, outcome: Outcome, steps: int) -> None:
        """`outcome` stood for `steps` more steps (its link figures count that many times)."""
        previous = self.uses.get(id(outcome))
        self.uses[id(outcome)] = (outcome, steps + (previous[1] if previous else 0))

    def enter(self, clock_s: float) -> None:
        """Replay steps from `clock_s` on: the network as its backgrounds stand then."""
        if not self.changes:
            return
        index = bisect.bisect_right(self.changes, clock_s)
        if index not in self._pieces:
            network = frozen_network(self.network, clock_s)
            self._pieces[index] = (network, repr(network))
        self.current, self.piece = self._pieces[index]

    def meets_change(self, clock_s: float, finish_s: float) -> bool:
        """Whether a background change falls inside the step from clock_s to clock_s + finish_s."""
        index = bisect.bisect_right(self.changes, clock_s)
        return index < len(self.changes) and self.changes[index] < clock_s + finish_s

    def steady_until_s(self, clock_s: float) -> float:
        """The first background change after clock_s (inf: none)."""
        index = bisect.bisect_right(self.changes, clock_s)
        return self.changes[index] if index < len(self.changes) else math.inf


@dataclass
class StepPlan:
    """Per trace row, what its steps do once scaling and placement are applied (plain lists)."""

    step: list[int]
    interval: list[int]  # optimiser steps the row stands for
    compute_s: list[float]  # one worker's compute, before stragglers
    compress_s: list[float]
    update_s: list[float]
    exchange: list[Exchange]


def simulate_step(
    run: Run,
    exchange: Exchange,
    ready_s: np.ndarray,
    faults: list[LinkFault],
    clock_s: float | None = None,
) -> Outcome:
    """One exchange on the network floor, its workers joining at `ready_s` (step-relative).

    Simulated from the first worker's ready time on and shifted back, so that a cached relative
    simulation and a fresh one give the same numbers bit for bit. clock_s None: on the network
    of the current piece (`Run.enter`); else the step's start on the replay clock, for the
    backgrounds that change during it.
    """
    offset_s = float(ready_s.min())
    shifted = [
        dataclasses.replace(
            f, down_from_s=f.down_from_s - offset_s, down_until_s=f.down_until_s - offset_s
        )
        for f in faults
    ]
    kwargs: dict[str, Any] = {"start_s": ready_s - offset_s, "faults": shifted}
    if run.method is not None:
        kwargs["method"] = run.method
    network = run.current
    if clock_s is not None:
        network = run.network
        kwargs["clock_s"] = clock_s + offset_s
    result = simulate_exchange(network, exchange, **kwargs)
    wire_bytes = float(np.mean(result.bytes_sent))
    return Outcome(
        finish_s=float(np.max(result.finish_s)) + offset_s,
        transform_s=float(result.transform_s),
        wire_s=float(result.wire_s),
        wait_s=float(result.wait_s),
        wire_bytes=wire_bytes,
        events=int(result.events),
        link_stats=result.link_stats,
        faulted=bool(faults),
        start_s=offset_s,
        exchange_s=float(np.max(result.finish_s)),
        wan_bytes=wire_bytes * result.wan_share,
    )


def _fault_free(run: Run, exchange: Exchange, ready_s: np.ndarray, cacheable: bool) -> Outcome:
    """The exchange without faults; simulated once per distinct input when reuse is on."""
    if not (cacheable and run.reuse):
        return simulate_step(run, exchange, ready_s, [])
    offset_s = float(ready_s.min())
    relative_s = ready_s - offset_s
    key = (exchange, relative_s.tobytes(), run.piece, offset_s)
    outcome = run.cache.get(key)
    if outcome is None:
        relative = run.relative.get(key[:3])
        if relative is None:
            relative = run.relative[key[:3]] = simulate_step(run, exchange, relative_s, [])
        outcome = run.cache[key] = dataclasses.replace(
            relative, finish_s=relative.finish_s + offset_s, start_s=relative.start_s + offset_s
        )
    return outcome


def clean_outcome(
    run: Run, exchange: Exchange, compute_w_s: np.ndarray, compress_s: float, cacheable: bool
) -> Outcome:
    """The step's exchange without faults: after compute, or overlapped with it."""
    single = _fault_free(run, exchange, compute_w_s + compress_s, cacheable)
    if run.overlap is None:
        return single
    return run.overlap.outcome(run, exchange, compute_w_s, compress_s, single, [], cacheable)


def _faulted(
    run: Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    faults: list[LinkFault],
    clock_s: float,
) -> Outcome:
    """The step's exchange with the faults (step-relative) and background changes that meet it
    (the step starting at clock_s on the replay clock)."""
    clock = clock_s if run.changes else None
    single = simulate_step(run, exchange, compute_w_s + compress_s, faults, clock)
    if run.overlap is None:
        return single
    return run.overlap.outcome(
        run, exchange, compute_w_s, compress_s, single, faults, False, clock_s=clock
    )


def hits_fault(run: Run, clock_s: float, ready_min_s: float, finish_s: float) -> bool:
    """Whether a fault window meets this step's exchange window (the only time links are used).

    A fault after the fault-free finish, or before the first worker is ready, cannot change the
    exchange, so only then is the fault-free result kept.
    """
    return any(
        fault.down_from_s < clock_s + finish_s and fault.down_until_s > clock_s + ready_min_s
        for fault in run.faults
    )


def _shifted_faults(run: Run, clock_s: float, ready_min_s: float) -> list[LinkFault]:
    """The faults not over before the exchange begins, on the step-relative clock.

    Later faults are kept too: one outage may delay the exchange into the next.
    """
    return [
        dataclasses.replace(
            fault,
            down_from_s=fault.down_from_s - clock_s,
            down_until_s=fault.down_until_s - clock_s,
        )
        for fault in run.faults
        if fault.down_until_s > clock_s + ready_min_s
    ]


def one_step(
    run: Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
    clock_s: float,
    step: int,
    cacheable: bool,
) -> Segment:
    """One step starting at `clock_s`, with faults and background changes applied where they
    meet its exchange."""
    run.enter(clock_s)
    outcome = clean_outcome(run, exchange, compute_w_s, compress_s, cacheable)
    ready_min_s = outcome.start_s
    faulted = run.faults and hits_fault(run, clock_s, ready_min_s, outcome.finish_s)
    if faulted or run.meets_change(clock_s, outcome.finish_s):
        faults = _shifted_faults(run, clock_s, ready_min_s)
        outcome = _faulted(run, exchange, compute_w_s, compress_s, faults, clock_s)
    return make_segment(run, 1, step, exchange, outcome, compute_w_s, compress_s, update_s)


def hits_fault_one(fault: LinkFault, start_s: float, ready_min_s: float, finish_s: float) -> bool:
    return fault.down_from_s < start_s + finish_s and fault.down_until_s > start_s + ready_min_s


def make_segment(
    run: Run,
    count: int,
    first_step: int,
    exchange: Exchange,
    outcome: Outcome,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
) -> Segment:
    """`segment_figures` of `count` steps that share one outcome; records detail and link use."""
    reused = id(outcome) in run.uses
    run.count_use(outcome, count)
    run.detail.append(
        {
            "first_step": first_step,
            "steps": count,
            "algo": exchange.algo,
            "payload_bytes": exchange.payload_bytes,
            "dense_bytes": exchange.dense_bytes,
            "exchange_s": outcome.exchange_s,
            "units": outcome.units,
            "transform_s": outcome.transform_s,
            "wire_s": outcome.wire_s,
            "wait_s": outcome.wait_s,
            "events": outcome.events,
            "faulted": outcome.faulted,
            "reused": reused,
        }
    )
    return segment_figures(outcome, count, compute_w_s, compress_s, update_s)


def segment_figures(
    outcome: Outcome, count: int, compute_w_s: np.ndarray, compress_s: float, update_s: float
) -> Segment:
    """Per-step figures of `count` steps that share one outcome.

    compute_s is the fastest worker's compute. wait_s is what is left of the step once that,
    the compression, the transform, the wire time and the update are taken out: waiting for
    stragglers, for busy links and for faulted ones. It equals the network floor's critical-path
    wait (to rounding), and the breakdown adds up to step_s. exposed_s is the exchange time the
    step shows beyond its GPU work (transform + wire + wait); hidden_s what overlap hid of the
    exchange's own time.
    """
    step_s = outcome.finish_s + update_s
    compute_s = float(np.min(compute_w_s))
    wait_s = step_s - (compute_s + compress_s + outcome.transform_s + outcome.wire_s + update_s)
    if abs(wait_s) <= 1e-12 * step_s:
        wait_s = 0.0  # rounding left over from the subtraction, not waiting
    exposed_s = outcome.transform_s + outcome.wire_s + wait_s
    hidden_s = max(outcome.exchange_s - exposed_s, 0.0) if outcome.units > 1 else 0.0
    return Segment(
        count=count,
        step_s=step_s,
        compute_s=compute_s,
        transform_s=outcome.transform_s,
        wire_s=outcome.wire_s,
        wait_s=wait_s,
        wire_bytes=outcome.wire_bytes,
        exchange_s=outcome.exchange_s,
        exposed_s=exposed_s,
        hidden_s=hidden_s,
        wan_bytes=outcome.wan_bytes,
    )


def row_figures(segments: list[Segment], count: int) -> dict[str, float]:
    """Per-step means of one row and its totals, summed exactly (math.fsum).

    Equal segments give their common value unchanged, and fsum of n equal steps is the correctly
    rounded n * step, so reusing one simulation and simulating every step agree bit for bit.
    """

    def mean(name: str) -> float:
        values = [getattr(segment, name) for segment in segments]
        if all(value == values[0] for value in values):
            return values[0]
        return math.fsum(s.count * v for s, v in zip(segments, values, strict=True)) / count

    figures = {
        name: mean(name)
        for name in ("step_s", "compute_s", "transform_s", "wire_s", "wait_s", *OVERLAP_FIGURES)
    }
    figures["row_s"] = math.fsum(s.count * s.step_s for s in segments)
    figures["wire_bytes_total"] = math.fsum(s.count * s.wire_bytes for s in segments)
    figures["wan_bytes_total"] = math.fsum(s.count * s.wan_bytes for s in segments)
    return figures
