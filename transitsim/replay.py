"""Replay: one trace through one network, giving the simulated wall-clock of every step.

The trace says what each step computed and sent; the network floor says how long the exchange of
those bytes takes. A step is: every worker starts computing at the previous step's end, computes
(plus its straggler jitter), compresses, then joins the exchange at its own ready time; the step
ends when the exchange has finished for everyone, plus the optimiser update.

Steps that cannot differ (same bytes, same compute, no random stragglers, no link fault in their
window) are simulated once and reused: the exchange is simulated relative to its step's start, so
a reused result is the very same numbers a fresh simulation would give.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from transitsim.compute import ComputeModel, Stragglers
from transitsim.errors import TransitsimError
from transitsim.network import Exchange, LinkFault, simulate_exchange, validate_network
from transitsim.network.exchange import fabric_for, resolve_faults
from transitsim.network.spec import COLLECTIVE_ALGOS, NetworkSpec
from transitsim.trace import Trace

SUM_AT = ("receivers", "switch")
TRANSFORM_AT = ("pluggable", "switch")
# Variants whose payload is a fixed band of a chunked DCT, so an optical transform can make it.
TRANSFORM_VARIANTS = ("C", "D", "E", "E'", "F")
# Variants trained with the (emulated) optical transform: a network-wide placement applies to these.
OPTICAL_VARIANTS = ("E", "E'")
# Error feedback modes that subtract the sender's own optical output, so need it back.
LOOPBACK_FEEDBACK = ("sent", "loopback")

TIMELINE_COLUMNS = [
    "run",
    "config",
    "variant",
    "network",
    "step",
    "val_loss",
    "train_loss",
    "compute_s",
    "compress_s",
    "transform_s",
    "wire_s",
    "wait_s",
    "update_s",
    "step_s",
    "time_s",
    "wire_bytes",
    "payload_bytes",
    "interval_steps",
    "algo",
    "extrapolated",
]


@dataclass
class Replay:
    """A replayed run.

    timeline: one row per trace row (columns TIMELINE_COLUMNS; attrs["notes"] lists caveats such
    as extrapolation). link_stats: per link, bytes and busy seconds summed over the whole run.
    step_detail: one row per run of consecutive steps that shared one exchange result: the
    steps it stands for, what the exchange cost, and whether the result was reused (taken from
    an earlier simulation) or faulted (simulated with a link outage).
    """

    timeline: pd.DataFrame
    link_stats: pd.DataFrame
    step_detail: pd.DataFrame


@dataclass(frozen=True)
class _Outcome:
    """One simulated exchange, times relative to the start of its step."""

    finish_s: float  # when the last worker has the result
    transform_s: float
    wire_s: float
    wait_s: float
    wire_bytes: float  # bytes one worker sends on its line (mean over workers)
    events: int
    link_stats: pd.DataFrame
    faulted: bool


@dataclass
class _Segment:
    """`count` consecutive steps of one row that took the same times."""

    count: int
    step_s: float
    compute_s: float
    transform_s: float
    wire_s: float
    wait_s: float
    wire_bytes: float


@dataclass
class _Run:
    """What replay carries from step to step."""

    network: NetworkSpec
    faults: list[LinkFault]
    method: str | None
    reuse: bool
    cache: dict[Any, _Outcome] = field(default_factory=dict)
    # the exchange from its first worker's ready time on, by (exchange, relative ready times):
    # steps whose compute differs but not between workers share one simulation
    relative: dict[Any, _Outcome] = field(default_factory=dict)
    detail: list[dict[str, Any]] = field(default_factory=list)
    # id(outcome) -> (outcome, steps it stood for): link figures are summed once per outcome
    uses: dict[int, tuple[_Outcome, int]] = field(default_factory=dict)


def replay(
    trace: Trace,
    network: NetworkSpec,
    *,
    compute: ComputeModel | None = None,
    transform_at: str | None = None,
    sum_at: str = "receivers",
    collective: str | None = None,
    stragglers: Stragglers | None = None,
    faults: list[LinkFault] | None = None,
    scale_params: int | None = None,
    seed: int = 0,
    reuse: bool = True,
    method: str | None = None,
) -> Replay:
    """Replay `trace` through `network`: per-step simulated times, one timeline row per trace row.

    transform_at: None (the band is computed on the GPU: the trace's compress_s is charged),
    "pluggable" or "switch" (the host sends the dense delta and the module/switch transforms it;
    compress_s is not charged, the simulator charges the transform). sum_at "switch": reducible
    payloads are summed in an aggregating switch. collective: force one of COLLECTIVE_ALGOS.
    stragglers: seeded per-step, per-worker compute jitter (from `seed`). faults: link outages
    on the replay clock. scale_params: what-if model size (bytes and compute scaled, losses kept,
    rows marked extrapolated). The compute model maps each row's measured compute to modelled
    seconds and scales its compression and update by the same ratio (compute.ComputeModel).
    reuse False simulates every step (the reference for reuse);
    method is passed to the network floor's simulate_exchange.
    """
    compute = ComputeModel() if compute is None else compute
    faults = list(faults or [])
    _check_args(trace, network, compute, transform_at, sum_at, collective, stragglers, faults)
    _check_scale(scale_params, seed)
    notes: list[str] = []
    params = trace.meta["n_params"] if scale_params is None else scale_params
    ratio = params / trace.meta["n_params"]
    extrapolated = scale_params is not None and scale_params != trace.meta["n_params"]
    if extrapolated:
        notes.append(  # no run name: one note for every trace of the same size
            f"extrapolated: {trace.meta['n_params']:,}-parameter traces replayed as a "
            f"{params:,}-parameter model; bytes and compute scaled by {ratio:.6g}, "
            "loss per step kept from the trace"
        )
    if network.workers != trace.workers:
        extrapolated = True
        notes.append(
            f"extrapolated: traces trained with {trace.workers} workers replayed on "
            f"{network.workers}; loss per step kept from the trace"
        )

    plan = _plan(trace, network, compute, transform_at, sum_at, collective, params, notes)
    stragglers = stragglers or Stragglers(distribution="none")
    run = _Run(network=network, faults=faults, method=method, reuse=reuse)
    rows = _replay_rows(run, plan, stragglers, np.random.default_rng(seed))
    timeline = _timeline(rows, trace, network, extrapolated)
    timeline.attrs["notes"] = list(dict.fromkeys(notes))
    timeline.attrs["extrapolated"] = extrapolated
    link_stats = _link_stats(run.uses, trace, network, float(timeline["time_s"].iloc[-1]))
    step_detail = pd.DataFrame(run.detail)
    return Replay(timeline=timeline, link_stats=link_stats, step_detail=step_detail)


def placement_for(variant: str, transform_at: str | None) -> str | None:
    """A network-wide transform placement as it applies to one variant's trace.

    Only the optical variants (E, E') were trained through the transform; the others keep their
    band on the GPU unless replay is asked for them explicitly (C, D, F: a what-if).
    """
    return transform_at if variant in OPTICAL_VARIANTS else None


def needs_loopback(meta: dict[str, Any]) -> bool:
    """Whether each sender must get its own optical band back: error feedback of the band sent
    ("sent", E's fix) or over a loopback ("loopback", E') subtracts what the optics produced.

    The network floor charges it where it costs: nothing extra without a transform, a copy back
    over the host lanes when the pluggable made the band, twice the bytes down when the switch
    made and summed it.
    """
    return (meta.get("variant_params") or {}).get("feedback") in LOOPBACK_FEEDBACK


@dataclass
class _Plan:
    """Per trace row, what its steps do once scaling and placement are applied (plain lists)."""

    step: list[int]
    interval: list[int]  # optimiser steps the row stands for
    compute_s: list[float]  # one worker's compute, before stragglers
    compress_s: list[float]
    update_s: list[float]
    exchange: list[Exchange]


def _plan(
    trace: Trace,
    network: NetworkSpec,
    compute: ComputeModel,
    transform_at: str | None,
    sum_at: str,
    collective: str | None,
    params: int,
    notes: list[str],
) -> _Plan:
    steps = trace.steps
    ratio = params / trace.meta["n_params"]
    compute_s, compress_s, update_s = compute.step_times(
        steps["compute_s"].to_numpy(dtype=np.float64),
        steps["compress_s"].to_numpy(dtype=np.float64),
        (
            steps["update_s"].fillna(0.0).to_numpy(dtype=np.float64)
            if "update_s" in steps.columns
            else np.zeros(len(steps))
        ),
        trace.meta,
        params,
    )
    if transform_at is not None:
        compress_s = np.zeros_like(compress_s)  # the module transforms, not the GPU
    payload = np.rint(steps["payload_bytes"].to_numpy(dtype=np.float64) * ratio).astype(np.int64)
    dense_bytes = int(round(trace.meta["dense_bytes_per_step"] * ratio)) if transform_at else 0
    loopback = needs_loopback(trace.meta)
    kinds = list(zip(steps["collective"].astype(str), steps["reducible"].astype(bool), strict=True))
    algo_of = {
        kind: _choose_algo(kind[0], kind[1], network, collective, sum_at, notes)
        for kind in dict.fromkeys(kinds)
    }
    exchanges: dict[tuple[str, int], Exchange] = {}
    for kind, payload_bytes in zip(kinds, payload.tolist(), strict=True):
        key = (algo_of[kind], payload_bytes)
        if key not in exchanges:
            exchanges[key] = Exchange(
                algo=key[0],
                payload_bytes=payload_bytes,
                dense_bytes=dense_bytes,
                transform_at=transform_at,
                loopback=loopback,
            )
    return _Plan(
        step=steps["step"].astype(np.int64).tolist(),
        interval=_intervals(trace).tolist(),
        compute_s=compute_s.tolist(),
        compress_s=compress_s.tolist(),
        update_s=update_s.tolist(),
        exchange=[
            exchanges[(algo_of[kind], p)] for kind, p in zip(kinds, payload.tolist(), strict=True)
        ],
    )


def _replay_rows(
    run: _Run, plan: _Plan, stragglers: Stragglers, rng: np.random.Generator
) -> dict[str, list[Any]]:
    """Every row's steps in order on one clock; per-row figures as timeline columns."""
    workers = run.network.workers
    factors = stragglers.factors(workers)
    names = ("compute_s", "transform_s", "wire_s", "wait_s", "step_s")
    rows: dict[str, list[Any]] = {
        name: [] for name in ("step", *names, "time_s", "wire_bytes", "payload_bytes")
    }
    clock_s = time_s = wire_total = 0.0
    payload_total = 0
    for i, count in enumerate(plan.interval):
        exchange = plan.exchange[i]
        first_step = plan.step[i] - count + 1
        if stragglers.random:
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
    rows["compress_s"] = plan.compress_s
    rows["update_s"] = plan.update_s
    rows["interval_steps"] = plan.interval
    rows["algo"] = [exchange.algo for exchange in plan.exchange]
    return rows


def _check_args(
    trace: Any,
    network: Any,
    compute: Any,
    transform_at: str | None,
    sum_at: str,
    collective: str | None,
    stragglers: Any,
    faults: list[Any],
) -> None:
    """Raise TransitsimError for anything replay cannot honour, before any work starts."""
    if not isinstance(trace, Trace):
        raise TransitsimError(f"replay needs a Trace (transitsim.trace.read_trace), got {trace!r}")
    if not isinstance(network, NetworkSpec):
        raise TransitsimError(f"replay needs a NetworkSpec, got {type(network).__name__}")
    if not isinstance(compute, ComputeModel):
        raise TransitsimError(f"compute must be a ComputeModel, got {type(compute).__name__}")
    if stragglers is not None and not isinstance(stragglers, Stragglers):
        raise TransitsimError(f"stragglers must be a Stragglers, got {type(stragglers).__name__}")
    if sum_at not in SUM_AT:
        raise TransitsimError(f"sum_at {sum_at!r} is not one of {', '.join(SUM_AT)}")
    if sum_at == "switch" and not network.switch.aggregator:
        raise TransitsimError(
            f"sum_at 'switch' needs a switch that sums, and network {network.name!r} has none "
            "(switch.aggregator is off)"
        )
    if collective is not None and collective not in COLLECTIVE_ALGOS:
        raise TransitsimError(
            f"collective {collective!r} is not one of {', '.join(COLLECTIVE_ALGOS)}"
        )
    if transform_at is not None:
        if transform_at not in TRANSFORM_AT:
            raise TransitsimError(
                f"transform_at {transform_at!r} is not one of None, {', '.join(TRANSFORM_AT)}"
            )
        if trace.variant not in TRANSFORM_VARIANTS:
            raise TransitsimError(
                f"transform_at {transform_at!r}: variant {trace.variant} of {trace.name} does not "
                f"send a fixed band, so no transform can make it (only {TRANSFORM_VARIANTS})"
            )
        has_transform = (
            network.pluggable is not None and network.pluggable.transform is not None
            if transform_at == "pluggable"
            else network.switch.transform is not None
        )
        if not has_transform:
            raise TransitsimError(
                f"transform_at {transform_at!r}: network {network.name!r} has no optical "
                f"transform at the {transform_at}"
            )
    for fault in faults:
        if not isinstance(fault, LinkFault):
            raise TransitsimError(f"faults must be LinkFault objects, got {fault!r}")
    validate_network(network)
    resolve_faults(fabric_for(network), faults)  # unknown links, bad windows: fail before work


def _check_scale(scale_params: int | None, seed: int) -> None:
    if scale_params is not None and (
        not isinstance(scale_params, int | np.integer)
        or isinstance(scale_params, bool)
        or scale_params < 1
    ):
        raise TransitsimError(f"scale_params must be a positive integer, got {scale_params!r}")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise TransitsimError(f"seed must be a non-negative integer, got {seed!r}")


def _intervals(trace: Trace) -> np.ndarray:
    """How many optimiser steps each row stands for (imported logs: the steps since the last)."""
    step = trace.steps["step"].to_numpy(dtype=np.int64)
    if trace.meta["rows"] == "evaluated_steps":
        return np.diff(step, prepend=0)
    return np.ones(len(step), dtype=np.int64)


def _choose_algo(
    kind: str,
    reducible: bool,
    network: NetworkSpec,
    collective: str | None,
    sum_at: str,
    notes: list[str],
) -> str:
    """The network collective for one step: an explicit choice, the network's, else the trace's."""
    if collective is not None:
        return collective
    if network.collective is not None:
        return network.collective
    ring_sum = "hierarchical" if network.datacentres > 1 else "ring_allreduce"
    if kind == "reduce_at_switch":
        if network.switch.aggregator:
            return "switch_sum"
        notes.append(
            f"network {network.name!r} has no summing switch: in-network sums replayed as "
            f"{ring_sum}"
        )
        return ring_sum
    if reducible and sum_at == "switch":
        return "switch_sum"
    if kind == "all_reduce":
        return ring_sum
    return "ring_allgather"


def _simulate(
    run: _Run, exchange: Exchange, ready_s: np.ndarray, faults: list[LinkFault]
) -> _Outcome:
    """One exchange on the network floor, its workers joining at `ready_s` (step-relative).

    Simulated from the first worker's ready time on and shifted back, so that a cached relative
    simulation and a fresh one give the same numbers bit for bit.
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
    result = simulate_exchange(run.network, exchange, **kwargs)
    return _Outcome(
        finish_s=float(np.max(result.finish_s)) + offset_s,
        transform_s=float(result.transform_s),
        wire_s=float(result.wire_s),
        wait_s=float(result.wait_s),
        wire_bytes=float(np.mean(result.bytes_sent)),
        events=int(result.events),
        link_stats=result.link_stats,
        faulted=bool(faults),
    )


def _fault_free(run: _Run, exchange: Exchange, ready_s: np.ndarray, cacheable: bool) -> _Outcome:
    """The exchange without faults; simulated once per distinct input when reuse is on."""
    if not (cacheable and run.reuse):
        return _simulate(run, exchange, ready_s, [])
    offset_s = float(ready_s.min())
    relative_s = ready_s - offset_s
    key = (exchange, relative_s.tobytes(), offset_s)
    outcome = run.cache.get(key)
    if outcome is None:
        relative = run.relative.get(key[:2])
        if relative is None:
            relative = run.relative[key[:2]] = _simulate(run, exchange, relative_s, [])
        outcome = run.cache[key] = dataclasses.replace(
            relative, finish_s=relative.finish_s + offset_s
        )
    return outcome


def _hits_fault(run: _Run, clock_s: float, ready_min_s: float, finish_s: float) -> bool:
    """Whether a fault window meets this step's exchange window (the only time links are used).

    A fault after the fault-free finish, or before the first worker is ready, cannot change the
    exchange, so only then is the fault-free result kept.
    """
    return any(
        fault.down_from_s < clock_s + finish_s and fault.down_until_s > clock_s + ready_min_s
        for fault in run.faults
    )


def _shifted_faults(run: _Run, clock_s: float, ready_min_s: float) -> list[LinkFault]:
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
    run: _Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
    clock_s: float,
    step: int,
    cacheable: bool,
) -> _Segment:
    """One step starting at `clock_s`, with faults applied where they meet its exchange."""
    ready_s = compute_w_s + compress_s
    outcome = _fault_free(run, exchange, ready_s, cacheable)
    ready_min_s = float(ready_s.min())
    if run.faults and _hits_fault(run, clock_s, ready_min_s, outcome.finish_s):
        outcome = _simulate(run, exchange, ready_s, _shifted_faults(run, clock_s, ready_min_s))
    return _segment(run, 1, step, exchange, outcome, compute_w_s, ready_s, compress_s, update_s)


def _steady_steps(
    run: _Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
    clock_s: float,
    first_step: int,
    count: int,
) -> tuple[list[_Segment], float]:
    """`count` steps with no random input: one simulation for every run of fault-free steps."""
    ready_s = compute_w_s + compress_s
    segments: list[_Segment] = []
    done = 0
    while done < count:
        if run.reuse:
            clean = _fault_free(run, exchange, ready_s, cacheable=True)
            step_s = clean.finish_s + update_s
            ready_min_s = float(ready_s.min())
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
                        ready_s,
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
    run: _Run, clock_s: float, step_s: float, ready_min_s: float, clean: _Outcome, limit: int
) -> int:
    """How many steps from `clock_s` on (at most `limit`) no fault window meets."""
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


def _hits_fault_one(fault: LinkFault, start_s: float, ready_min_s: float, finish_s: float) -> bool:
    return fault.down_from_s < start_s + finish_s and fault.down_until_s > start_s + ready_min_s


def _segment(
    run: _Run,
    count: int,
    first_step: int,
    exchange: Exchange,
    outcome: _Outcome,
    compute_w_s: np.ndarray,
    ready_s: np.ndarray,
    compress_s: float,
    update_s: float,
) -> _Segment:
    """Per-step figures of `count` steps that share one outcome; records detail and link use.

    compute_s is the fastest worker's compute. wait_s is what is left of the step once that,
    the compression, the transform, the wire time and the update are taken out: waiting for
    stragglers, for busy links and for faulted ones. It equals the network floor's critical-path
    wait (to rounding), and the breakdown adds up to step_s.
    """
    step_s = outcome.finish_s + update_s
    compute_s = float(np.min(compute_w_s))
    wait_s = step_s - (compute_s + compress_s + outcome.transform_s + outcome.wire_s + update_s)
    if abs(wait_s) <= 1e-12 * step_s:
        wait_s = 0.0  # rounding left over from the subtraction, not waiting
    previous = run.uses.get(id(outcome))
    run.uses[id(outcome)] = (outcome, count + (previous[1] if previous else 0))
    run.detail.append(
        {
            "first_step": first_step,
            "steps": count,
            "algo": exchange.algo,
            "payload_bytes": exchange.payload_bytes,
            "dense_bytes": exchange.dense_bytes,
            "exchange_s": outcome.finish_s - float(np.min(ready_s)),
            "transform_s": outcome.transform_s,
            "wire_s": outcome.wire_s,
            "wait_s": outcome.wait_s,
            "events": outcome.events,
            "faulted": outcome.faulted,
            "reused": previous is not None,
        }
    )
    return _Segment(
        count=count,
        step_s=step_s,
        compute_s=compute_s,
        transform_s=outcome.transform_s,
        wire_s=outcome.wire_s,
        wait_s=wait_s,
        wire_bytes=outcome.wire_bytes,
    )


def _row_figures(segments: list[_Segment], count: int) -> dict[str, float]:
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
        name: mean(name) for name in ("step_s", "compute_s", "transform_s", "wire_s", "wait_s")
    }
    figures["row_s"] = math.fsum(s.count * s.step_s for s in segments)
    figures["wire_bytes_total"] = math.fsum(s.count * s.wire_bytes for s in segments)
    return figures


def _timeline(
    rows: dict[str, list[Any]], trace: Trace, network: NetworkSpec, extrapolated: bool
) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["val_loss"] = trace.steps["val_loss"].to_numpy(dtype=np.float64)
    frame["train_loss"] = trace.steps["train_loss"].to_numpy(dtype=np.float64)
    frame.insert(0, "run", trace.name)
    frame.insert(1, "config", trace.config_name)
    frame.insert(2, "variant", trace.variant)
    frame.insert(3, "network", network.name)
    frame["extrapolated"] = extrapolated
    frame["payload_bytes"] = frame["payload_bytes"].astype(np.int64)
    frame["interval_steps"] = frame["interval_steps"].astype(np.int64)
    return frame[TIMELINE_COLUMNS]


def _link_stats(
    uses: dict[int, tuple[_Outcome, int]], trace: Trace, network: NetworkSpec, total_s: float
) -> pd.DataFrame:
    """Per link (resource): bytes and busy seconds summed over the run.

    utilisation = bytes carried / (rate x run time), busy_share = busy_s / run time: over the
    whole run, compute included, as the exchange figures are over the exchange.
    """
    outcomes = list(uses.values())
    first = outcomes[0][0].link_stats
    links = first["link"].to_numpy()
    busy_s = np.zeros(len(first))
    carried = np.zeros(len(first))
    for outcome, count in outcomes:
        stats = outcome.link_stats
        if not np.array_equal(stats["link"].to_numpy(), links):  # one network: same resources
            stats = stats.set_index("link").reindex(links).reset_index()
        busy_s += count * stats["busy_s"].to_numpy(dtype=np.float64)
        carried += count * stats["bytes"].to_numpy(dtype=np.float64)
    totals = first[["link", "kind", "rate_bps"]].copy()
    totals["busy_s"] = busy_s
    totals["bytes"] = carried
    rate_bps = totals["rate_bps"].to_numpy(dtype=np.float64)
    finite = np.isfinite(rate_bps) & (total_s > 0)
    totals["utilisation"] = np.where(
        finite, totals["bytes"] * 8.0 / np.where(finite, rate_bps * total_s, 1.0), 0.0
    )
    totals["busy_share"] = totals["busy_s"] / total_s if total_s > 0 else 0.0
    totals.insert(0, "run", trace.name)
    totals.insert(1, "network", network.name)
    return totals
