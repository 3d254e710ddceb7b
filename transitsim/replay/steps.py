"""Replay's stepping: every row's steps in order on one clock, each exchange simulated (or reused).

A step is: every worker starts computing at the previous step's end, computes (plus its straggler
jitter), compresses, then joins the exchange at its own ready time; the step ends when the
exchange has finished for everyone, plus the optimiser update.

Steps that cannot differ (same bytes, same compute, no random stragglers, no link fault in their
window) are simulated once and reused: the exchange is simulated relative to its step's start, so
a reused result is the very same numbers a fresh simulation would give.

Background traffic that changes in time takes the faults' route: between two changes the network
is the one frozen at that piece's shares (`Run.enter`), reused like any other; a step whose window
holds a change is simulated on its own, on the replay clock (`clock_s`), as a faulted step is.
"""

import bisect
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from transitsim.network import Exchange, LinkFault, simulate_exchange
from transitsim.network.background import change_times, frozen_network
from transitsim.network.spec import NetworkSpec
from transitsim.replay.compute import Stragglers
from transitsim.replay.maxplus import linear_block

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
    # the same as columns, where replay_steady timed the whole run at once (None: see detail)
    detail_columns: dict[str, list[Any]] | None = None
    # id(outcome) -> (outcome, steps it stood for): link figures are summed once per outcome
    uses: dict[int, tuple[Outcome, int]] = field(default_factory=dict)
    # `overlap: buckets`: a replay_overlap.OverlapPlan that times steps with overlap; None: none
    overlap: Any = None
    # when a link's background share changes (replay clock); the network frozen at the piece
    # the step being replayed starts in, and a key for that piece in every cache
    changes: list[float] = field(default_factory=list)
    current: Any = None
    piece: Any = None
    _pieces: dict[int, tuple[NetworkSpec, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.changes = change_times(self.network)
        self.current = self.network

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


def replay_rows(
    run: Run, plan: StepPlan, stragglers: Stragglers, rng: np.random.Generator
) -> dict[str, list[Any]]:
    """Every row's steps in order on one clock; per-row figures as timeline columns."""
    workers = run.network.workers
    factors = stragglers.factors(workers)
    if not stragglers.random:
        from transitsim.replay.steady import steady_rows  # it builds on this module

        steady = steady_rows(run, plan, factors)
        if steady is not None:
            return _with_plan_columns(steady, plan)
    names = ("compute_s", "transform_s", "wire_s", "wait_s", "step_s", *OVERLAP_FIGURES)
    rows: dict[str, list[Any]] = {
        name: [] for name in ("step", *names, "time_s", "wire_bytes", "payload_bytes")
    }
    clock_s = time_s = wire_total = 0.0
    payload_total = 0
    linear: dict[int, list[Segment]] = {}  # rows replayed at once by their linear exchange
    for i, count in enumerate(plan.interval):
        exchange = plan.exchange[i]
        first_step = plan.step[i] - count + 1
        if stragglers.random and i not in linear:
            linear.update(_linear_rows(run, plan, i, stragglers, rng, clock_s))
        if i in linear:
            segments = linear.pop(i)
        elif stragglers.random:
            jitter = stragglers.draw(rng, count, workers)
            segments = []
            for j in range(count):
                compute_w = stragglers.apply(plan.compute_s[i], jitter[j], workers)
                segment = _one_step(
                    run,
                    exchange,
                    compute_w,
                    plan.compress_s[i],
                    plan.update_s[i],
                    clock_s,
                    first_step + j,
                    cacheable=False,
                )
                segments.append(segment)
                clock_s += segment.step_s
        else:
            segments, clock_s = _steady_steps(
                run,
                exchange,
                plan.compute_s[i] * factors,
                plan.compress_s[i],
                plan.update_s[i],
                clock_s,
                first_step,
                count,
            )
        figures = _row_figures(segments, count)
        time_s += figures["row_s"]
        clock_s = time_s  # one clock: the timeline's
        wire_total += figures["wire_bytes_total"]
        payload_total += exchange.payload_bytes * count
        rows["step"].append(plan.step[i])
        for name in names:
            rows[name].append(figures[name])
        rows["time_s"].append(time_s)
        rows["wire_bytes"].append(wire_total)
        rows["payload_bytes"].append(payload_total)
    return _with_plan_columns(rows, plan)


def _with_plan_columns(rows: dict[str, list[Any]], plan: StepPlan) -> dict[str, list[Any]]:
    rows["compress_s"] = plan.compress_s
    rows["update_s"] = plan.update_s
    rows["interval_steps"] = plan.interval
    rows["algo"] = [exchange.algo for exchange in plan.exchange]
    return rows


def _linear_rows(
    run: Run,
    plan: StepPlan,
    first: int,
    stragglers: Stragglers,
    rng: np.random.Generator,
    clock_s: float = 0.0,
) -> dict[int, list[Segment]]:
    """Rows first.. at once where their exchange is max-plus linear (replay_linear); {} else.

    The transform / wire split of each step is the unperturbed exchange's, scaled to the
    critical worker's path; link bytes and busy seconds are the unperturbed exchange's (exact
    for every resource but a summing aggregator, whose busy time stragglers spread). With link
    faults, the block ends before the row of the first step whose exchange a fault meets (the
    row starting at clock_s on the replay clock); those rows are stepped, with the same draws.
    """
    if run.changes or run.method == "des" or not run.reuse or run.overlap is not None:
        return {}
    columns = {
        "step": plan.step,
        "interval": plan.interval,
        "compute_s": plan.compute_s,
        "compress_s": plan.compress_s,
        "update_s": plan.update_s,
    }
    state = rng.bit_generator.state
    block = linear_block(run.network, plan.exchange, first, columns, stragglers, rng)
    if block is None:
        return {}
    if run.faults:
        end = _first_faulted_row(run, block, clock_s)
        if end is not None:  # draw again, for the rows before it only
            rng.bit_generator.state = state
            if end == first:
                return {}
            block = linear_block(run.network, plan.exchange, first, columns, stragglers, rng, end)
            assert block is not None
    exchange = plan.exchange[first]
    reference = simulate_step(run, exchange, np.zeros(run.network.workers), [])
    moving = reference.transform_s + reference.wire_s
    share = reference.transform_s / moving if moving > 0 else 0.0
    exchange_s = block.finish_s - block.ready_min_s
    path_s = block.moving_s if block.moving_s is not None else np.minimum(moving, exchange_s)
    transform = path_s * share
    wire = path_s - transform
    step_s = block.finish_s + block.update_s
    wait = step_s - (block.compute_s + block.compress_s + transform + wire + block.update_s)
    wait = np.where(np.abs(wait) <= 1e-12 * step_s, 0.0, wait)
    run.uses[id(reference)] = (reference, len(block.row_of))
    segments: dict[int, list[Segment]] = {int(r): [] for r in block.rows}
    values = zip(
        block.row_of.tolist(),
        block.steps.tolist(),
        step_s.tolist(),
        block.compute_s.tolist(),
        transform.tolist(),
        wire.tolist(),
        wait.tolist(),
        exchange_s.tolist(),
        strict=True,
    )
    for row, step, total, compute, tr, wi, wa, ex in values:
        exposed = tr + wi + wa
        segments[row].append(
            Segment(1, total, compute, tr, wi, wa, reference.wire_bytes, ex, exposed, 0.0)
        )
        run.detail.append(
            {
                "first_step": step,
                "steps": 1,
                "algo": exchange.algo,
                "payload_bytes": exchange.payload_bytes,
                "dense_bytes": exchange.dense_bytes,
                "exchange_s": ex,
                "units": 1,
                "transform_s": tr,
                "wire_s": wi,
                "wait_s": ex - tr - wi,
                "events": 0,
                "faulted": False,
                "reused": False,
            }
        )
    return segments


def _first_faulted_row(run: Run, block: Any, clock_s: float) -> int | None:
    """The row of the block's first step whose exchange a fault meets (None: no step's)."""
    step_s = block.finish_s + block.update_s
    began = clock_s + np.concatenate(([0.0], np.cumsum(step_s)[:-1]))
    hit = np.zeros(len(step_s), dtype=bool)
    for fault in run.faults:
        hit |= (fault.down_from_s < began + block.finish_s) & (
            fault.down_until_s > began + block.ready_min_s
        )
    where = np.flatnonzero(hit)
    return int(block.row_of[where[0]]) if len(where) else None


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
    return Outcome(
        finish_s=float(np.max(result.finish_s)) + offset_s,
        transform_s=float(result.transform_s),
        wire_s=float(result.wire_s),
        wait_s=float(result.wait_s),
        wire_bytes=float(np.mean(result.bytes_sent)),
        events=int(result.events),
        link_stats=result.link_stats,
        faulted=bool(faults),
        start_s=offset_s,
        exchange_s=float(np.max(result.finish_s)),
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


def _hits_fault(run: Run, clock_s: float, ready_min_s: float, finish_s: float) -> bool:
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


def _one_step(
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
    faulted = run.faults and _hits_fault(run, clock_s, ready_min_s, outcome.finish_s)
    if faulted or run.meets_change(clock_s, outcome.finish_s):
        faults = _shifted_faults(run, clock_s, ready_min_s)
        outcome = _faulted(run, exchange, compute_w_s, compress_s, faults, clock_s)
    return _segment(run, 1, step, exchange, outcome, compute_w_s, compress_s, update_s)


def _steady_steps(
    run: Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
    clock_s: float,
    first_step: int,
    count: int,
) -> tuple[list[Segment], float]:
    """`count` steps with no random input: one simulation for every run of fault-free steps."""
    segments: list[Segment] = []
    done = 0
    while done < count:
        run.enter(clock_s)
        if run.reuse:
            clean = clean_outcome(run, exchange, compute_w_s, compress_s, cacheable=True)
            step_s = clean.finish_s + update_s
            ready_min_s = clean.start_s
            free = _fault_free_steps(run, clock_s, step_s, ready_min_s, clean, count - done)
            if free:
                segments.append(
                    _segment(
                        run,
                        free,
                        first_step + done,
                        exchange,
                        clean,
                        compute_w_s,
                        compress_s,
                        update_s,
                    )
                )
                clock_s += free * step_s
                done += free
            if done == count:
                break
        segment = _one_step(
            run,
            exchange,
            compute_w_s,
            compress_s,
            update_s,
            clock_s,
            first_step + done,
            cacheable=True,
        )
        segments.append(segment)
        clock_s += segment.step_s
        done += 1
    return segments, clock_s


def _fault_free_steps(
    run: Run, clock_s: float, step_s: float, ready_min_s: float, clean: Outcome, limit: int
) -> int:
    """How many steps from `clock_s` on (at most `limit`) no fault window or background change
    meets (the steps are over, exchange and all, before the next change)."""
    limit = min(limit, _steps_before_change(run, clock_s, step_s, clean.finish_s, limit))
    if not run.faults:
        return limit
    if step_s <= 0:
        return 0 if _hits_fault(run, clock_s, ready_min_s, clean.finish_s) else limit
    first_hit = limit
    for fault in run.faults:
        # step j meets it when clock + j*step + finish > from and clock + j*step + ready < until
        guess = math.floor((fault.down_from_s - clock_s - clean.finish_s) / step_s) + 1
        first = max(guess - 1, 0)  # an outage that began earlier may still be on: step 0
        for j in (first, first + 1, first + 2):
            if 0 <= j < first_hit and _hits_fault_one(
                fault, clock_s + j * step_s, ready_min_s, clean.finish_s
            ):
                first_hit = j
                break
    return first_hit


def _steps_before_change(
    run: Run, clock_s: float, step_s: float, finish_s: float, limit: int
) -> int:
    """How many steps j = 0.. (at most limit) end their exchange by the next background change:
    clock_s + j * step_s + finish_s <= that change."""
    change_s = run.steady_until_s(clock_s)
    if not math.isfinite(change_s):
        return limit
    if step_s <= 0:
        return limit if clock_s + finish_s <= change_s else 0
    room = change_s - clock_s - finish_s
    count = min(max(math.floor(room / step_s) + 1, 0), limit) if room >= 0 else 0
    while count > 0 and clock_s + (count - 1) * step_s + finish_s > change_s:
        count -= 1  # rounding: the products as the stepping computes them decide
    while count < limit and clock_s + count * step_s + finish_s <= change_s:
        count += 1
    return count


def _hits_fault_one(fault: LinkFault, start_s: float, ready_min_s: float, finish_s: float) -> bool:
    return fault.down_from_s < start_s + finish_s and fault.down_until_s > start_s + ready_min_s


def _segment(
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
    previous = run.uses.get(id(outcome))
    run.uses[id(outcome)] = (outcome, count + (previous[1] if previous else 0))
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
            "reused": previous is not None,
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
    )


def _row_figures(segments: list[Segment], count: int) -> dict[str, float]:
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
    return figures
