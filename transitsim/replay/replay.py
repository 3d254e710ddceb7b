"""Replay: one trace through one network, giving the simulated wall-clock of every step.

The trace says what each step computed and sent; the network floor says how long the exchange of
those bytes takes. The stepping lives in `steps.py` and `step.py`, the output frames in `frames.py`.
A step is: every worker starts computing at the previous step's end, computes
(plus its straggler jitter), compresses, then joins the exchange at its own ready time; the step
ends when the exchange has finished for everyone, plus the optimiser update.

Steps that cannot differ (same bytes, same compute, no random stragglers, no link fault in their
window) are simulated once and reused: the exchange is simulated relative to its step's start, so
a reused result is the very same numbers a fresh simulation would give.
"""

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from transitsim.network import Exchange, validate_exchange
from transitsim.network.exchange import fabric_for, resolve_faults
from transitsim.replay.compute import Stragglers
from transitsim.replay.frames import TIMELINE_COLUMNS, run_link_stats, timeline_frame
from transitsim.replay.keys import first_appearance_codes
from transitsim.replay.overlap import overlap_plan
from transitsim.replay.placement import needs_loopback
from transitsim.replay.request import ReplayRequest, check_request
from transitsim.replay.sites import SiteExchange, site_exchange
from transitsim.replay.step import Run, StepPlan
from transitsim.replay.step_events import last_step_events
from transitsim.replay.steps import replay_rows
from transitsim.replay.streaming import stream_exchanges
from transitsim.traces.format import Trace

__all__ = ["TIMELINE_COLUMNS", "Replay", "ReplayRequest", "check_replay", "replay"]


@dataclass
class Replay:
    """A replayed run.

    timeline: one row per trace row (columns TIMELINE_COLUMNS; attrs["notes"] lists caveats such
    as extrapolation). link_stats: per link, bytes and busy seconds summed over the whole run.
    step_detail: one row per run of consecutive steps that shared one exchange result: the
    steps it stands for, what the exchange cost, and whether the result was reused (taken from
    an earlier simulation) or faulted (simulated with a link outage). step_events: the last step
    as intervals (step_events.STEP_EVENT_COLUMNS) when the request asked to record it, else None.
    """

    timeline: pd.DataFrame
    link_stats: pd.DataFrame
    step_detail: pd.DataFrame
    step_events: pd.DataFrame | None = None


class ReplicaLayout(Protocol):
    """How a run's replicas sit on the network: it may change the plan before the stepping
    and adds what it timed on its own to the rows after it."""

    def prepare(self, plan: StepPlan, run: Run) -> StepPlan: ...

    def finish(self, rows: dict, run: Run, notes: list[str]) -> None: ...


@dataclass
class WorkerLayout:
    """A replica per worker, as the trace was trained: with overlap, the exchange is planned
    unit by unit as backward makes the gradients ready."""

    trace: Trace
    request: ReplayRequest
    ratio: float
    notes: list[str]

    def prepare(self, plan: StepPlan, run: Run) -> StepPlan:
        if self.request.overlap == "buckets":
            dense = int(round(self.trace.meta["dense_bytes_per_step"] * self.ratio))
            run.overlap = overlap_plan(
                self.trace,
                self.request.network,
                dense,
                self.trace.variant == "A",
                self.request.bucket_bytes,
                self.notes,
            )
        return plan

    def finish(self, rows: dict, run: Run, notes: list[str]) -> None:
        if run.overlap is not None:
            notes.extend(run.overlap.notes)


@dataclass
class SiteLayout:
    """A local-SGD replica per datacentre: each site's workers split the replica's batch and
    all-reduce every step over their LAN. That exchange rides in compress_s while the rows are
    stepped, so every stepping path puts it before the outer sync, and moves to the exchange's
    own columns afterwards (sites.SiteExchange)."""

    site: SiteExchange
    compress_s: list[float] | None = None  # the plan's own compression, before the site's

    def prepare(self, plan: StepPlan, run: Run) -> StepPlan:
        self.compress_s = plan.compress_s
        compute_s = [seconds / self.site.per_site for seconds in plan.compute_s]
        exposed = self.site.exposed_per_row(compute_s, plan.interval)
        compress_s = [c + e for c, e in zip(plan.compress_s, exposed, strict=True)]
        return dataclasses.replace(plan, compute_s=compute_s, compress_s=compress_s)

    def finish(self, rows: dict, run: Run, notes: list[str]) -> None:
        assert self.compress_s is not None, "prepare() runs first"
        self.site.add_to_rows(rows, self.compress_s)
        self.site.add_link_uses(run.uses)
        notes.extend(self.site.overlap_notes())


def replay(trace: Trace, request: ReplayRequest) -> Replay:
    """Replay `trace` as `request` asks: per-step simulated times, one timeline row per trace row.

    Every option is the request's (transitsim.replay.request.ReplayRequest); replay decides what
    depends on the trace: which variants a transform placement applies to, the loopback of a
    sender's own band, and how the replicas sit on the network (a layout chosen once).
    """
    check_request(trace, request)
    network = request.network
    notes: list[str] = []
    params = trace.meta["n_params"] if request.scale_params is None else request.scale_params
    ratio = params / trace.meta["n_params"]
    extrapolated = (
        request.scale_params is not None and request.scale_params != trace.meta["n_params"]
    )
    if extrapolated:
        notes.append(  # no run name: one note for every trace of the same size
            f"extrapolated: {trace.meta['n_params']:,}-parameter traces replayed as a "
            f"{params:,}-parameter model; bytes and compute scaled by {ratio:.6g}, "
            "loss per step kept from the trace"
        )
    if network.workers != trace.workers and request.replicas == "worker":
        extrapolated = True
        notes.append(
            f"extrapolated: traces trained with {trace.workers} workers replayed on "
            f"{network.workers}; loss per step kept from the trace"
        )

    plan = _plan(trace, request, params, notes)
    stragglers = request.stragglers or Stragglers(distribution="none")
    run = Run(
        network=network, faults=list(request.faults), method=request.method, reuse=request.reuse
    )
    layout = _layout(trace, request, ratio, notes)
    plan = layout.prepare(plan, run)
    rows = replay_rows(run, plan, stragglers, np.random.default_rng(request.seed))
    notes.extend(run.notes)
    stream_exchanges(rows, trace, notes)  # H-s: exchanges overlap the next inner steps
    layout.finish(rows, run, notes)
    rows["overlap"] = [request.overlap] * len(rows["step"])
    timeline = timeline_frame(rows, trace, network, extrapolated)
    timeline.attrs["notes"] = list(dict.fromkeys(notes))
    timeline.attrs["extrapolated"] = extrapolated
    link_stats = run_link_stats(run.uses, trace, network, float(timeline["time_s"].iloc[-1]))
    step_detail = pd.DataFrame(run.detail if run.detail_columns is None else run.detail_columns)
    step_events = None
    if request.record_step:
        exchange = _exchange(
            str(step_detail["algo"].iloc[-1]),
            int(step_detail["payload_bytes"].iloc[-1]),
            int(step_detail["dense_bytes"].iloc[-1]),
            trace,
            request,
        )
        step_events = last_step_events(request, exchange, timeline)
    return Replay(
        timeline=timeline, link_stats=link_stats, step_detail=step_detail, step_events=step_events
    )


def check_replay(trace: Trace, request: ReplayRequest) -> None:
    """Raise what `replay` would, without simulating a step: the request, the step plan, and
    each distinct exchange against the built network (so `transitsim validate` catches a switch
    sum on a fabric with no switch every host reaches before 27 jobs fail at run time)."""
    check_request(trace, request)
    params = trace.meta["n_params"] if request.scale_params is None else request.scale_params
    plan = _plan(trace, request, params, [])
    fabric = fabric_for(request.network)
    resolve_faults(fabric, list(request.faults))
    for exchange in dict.fromkeys(plan.exchange):
        validate_exchange(request.network, exchange)
        if exchange.algo == "switch_sum":
            fabric.aggregation_switch()


def _layout(trace: Trace, request: ReplayRequest, ratio: float, notes: list[str]) -> ReplicaLayout:
    """The replicas' layout the request asks for (checked: check_request)."""
    if request.replicas == "site":
        site = site_exchange(
            trace,
            request.network,
            ratio,
            request.collective,
            request.method,
            request.overlap,
            request.bucket_bytes,
            bool(request.faults),
            notes,
        )
        return SiteLayout(site=site)
    return WorkerLayout(trace=trace, request=request, ratio=ratio, notes=notes)


def _exchange(
    algo: str, payload_bytes: int, dense_bytes: int, trace: Trace, request: ReplayRequest
) -> Exchange:
    """One step's exchange as replay decides it: placement and loopback from the trace."""
    return Exchange(
        algo=algo,
        payload_bytes=payload_bytes,
        dense_bytes=dense_bytes,
        transform_at=request.transform_for(trace),
        loopback=needs_loopback(trace.meta),
    )


def _plan(trace: Trace, request: ReplayRequest, params: int, notes: list[str]) -> StepPlan:
    """Per trace row, what its steps do once scaling and placement are applied."""
    steps = trace.steps
    ratio = params / trace.meta["n_params"]
    transform_at = request.transform_for(trace)
    compute_s, compress_s, update_s = request.compute.step_times(
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
    # one Exchange per distinct (collective, reducible, payload), in order of first appearance
    columns = (steps["collective"].astype(str), steps["reducible"].astype(bool), payload)
    codes, firsts = first_appearance_codes(columns)
    collectives, reducibles = columns[0].to_numpy()[firsts], columns[1].to_numpy()[firsts]
    algo_of: dict[tuple[str, bool], str] = {}
    exchanges: dict[tuple[str, int], Exchange] = {}
    of_kind = []
    for collective_kind, reducible, payload_bytes in zip(
        collectives, reducibles, payload[firsts].tolist(), strict=True
    ):
        kind = (str(collective_kind), bool(reducible))
        if kind not in algo_of:
            algo_of[kind] = _choose_algo(*kind, request, notes)
        algo = algo_of[kind]
        key = (algo, int(payload_bytes))
        if key not in exchanges:
            exchanges[key] = _exchange(algo, key[1], dense_bytes, trace, request)
        of_kind.append(exchanges[key])
    return StepPlan(
        step=steps["step"].astype(np.int64).tolist(),
        interval=_intervals(trace).tolist(),
        compute_s=compute_s.tolist(),
        compress_s=compress_s.tolist(),
        update_s=update_s.tolist(),
        exchange=[of_kind[code] for code in codes.tolist()],
    )


def _intervals(trace: Trace) -> np.ndarray:
    """How many optimiser steps each row stands for (imported logs: the steps since the last)."""
    step = trace.steps["step"].to_numpy(dtype=np.int64)
    if trace.meta["rows"] == "evaluated_steps":
        return np.diff(step, prepend=0)
    return np.ones(len(step), dtype=np.int64)


def _choose_algo(kind: str, reducible: bool, request: ReplayRequest, notes: list[str]) -> str:
    """The network collective for one step: an explicit choice, the network's, else the trace's."""
    network, collective, sum_at = request.network, request.collective, request.sum_at
    if collective is not None:
        return collective
    if network.collective is not None:
        return network.collective
    multi_gpu_nodes = network.gpus_per_node > 1 and network.workers > network.gpus_per_node
    ring_sum = "hierarchical" if network.datacentres > 1 or multi_gpu_nodes else "ring_allreduce"
    if kind == "reduce_at_switch":
        if sum_at == "ring":
            return ring_sum
        if network.switch.aggregator:
            return "switch_sum"
        notes.append(
            f"network {network.name!r} has no summing switch: in-network sums replayed as "
            f"{ring_sum}"
        )
        return ring_sum
    if reducible and sum_at == "switch":
        return "switch_sum"
    if reducible and sum_at == "ring":
        return ring_sum
    if kind == "all_reduce":
        return ring_sum
    return "ring_allgather"
