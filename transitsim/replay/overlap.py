"""Replay with overlap: each step's exchange split into units started as backward makes them ready.

The stepping (step.py) asks this module for a step's outcome when `overlap: buckets`. The units
come from transitsim/overlap (DDP buckets for A, tensors for DeMo, from the trace's backward
profile or the uniform-backward assumption); each unit is timed on the network floor with its
workers' own start times, and the step's outcome carries the exchange's own time (`exchange_s`,
the sum over units) beside its finish, so the timeline can say how much of it the backward hid.

A tuned data-parallel job never overlaps to its loss: where splitting the exchange into units
costs more in per-message latency than the backward hides (tiny models on slow links, DeMo's
many small tensors), it uses one bucket (a DDP bucket cap at least the gradient's size), which
is the exchange without overlap. Replay does the same, per step, and says so in the notes; so
overlap never makes a replay slower. Except where the trace holds the job's own buckets (a
profiled run, `traces import --profile`): those are what the job ran, and replay keeps them.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from transitsim.network import Exchange, LinkFault, simulate_exchange
from transitsim.network.spec import NetworkSpec
from transitsim.overlap import (
    BackwardProfile,
    Unit,
    UnitTiming,
    backward_profile,
    overlapped_step,
    plan_units,
)
from transitsim.overlap.plan import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, describe
from transitsim.traces.format import Trace


@dataclass
class OverlapPlan:
    """How one run's steps overlap: its profile, bytes and bucket sizes, and its caches."""

    profile: BackwardProfile
    dense_bytes: int  # the step's dense gradient bytes (scaled to the replayed model)
    dense: bool  # the payload is the dense gradient (A): DDP buckets; else one unit per tensor
    bucket_bytes: int = DDP_BUCKET_BYTES
    first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES
    run_name: str = ""
    network_name: str = ""
    notes: list[str] = field(default_factory=list)
    _units: dict[Exchange, list[Unit]] = field(default_factory=dict)
    _unit_cache: dict[Any, UnitTiming] = field(default_factory=dict)
    _steps: dict[Any, Any] = field(default_factory=dict)

    def units(self, exchange: Exchange) -> list[Unit]:
        units = self._units.get(exchange)
        if units is None:
            units = self._units[exchange] = plan_units(
                self.profile,
                self.dense_bytes,
                exchange.payload_bytes,
                dense=self.dense,
                bucket_bytes=self.bucket_bytes,
                first_bucket_bytes=self.first_bucket_bytes,
            )
        return units

    def outcome(
        self,
        run: Any,
        exchange: Exchange,
        compute_w_s: np.ndarray,
        compress_s: float,
        single: Any,
        faults: list[LinkFault],
        cacheable: bool,
        clock_s: float | None = None,
    ) -> Any:
        """The step's Outcome with overlap, or `single` (no overlap) where that is not slower.

        clock_s: the step's start on the replay clock, where a background change meets it
        (None: on the network of the run's current piece, `Run.enter`)."""
        key = (exchange, compute_w_s.tobytes(), compress_s, run.piece)
        if cacheable and not faults and key in self._steps:
            chosen = self._steps[key]
            return single if chosen is None else chosen
        units = self.units(exchange)
        chosen = None
        if len(units) > 1:
            step = overlapped_step(
                units,
                compute_w_s,
                compress_s,
                self.profile.backward_share,
                lambda unit, start_s: self._unit(
                    run, exchange, unit, start_s, faults, cacheable, clock_s
                ),
            )
            if step.finish_s <= single.finish_s or self.profile.buckets:
                chosen = _as_outcome(single, step, compute_w_s, compress_s, bool(faults))
            else:
                note = (
                    f"overlap: {self.run_name} on {self.network_name}: {describe(units)} took "
                    "longer than one exchange after backward (per-message costs), so those "
                    "steps were replayed as one bucket, as a DDP bucket cap >= the gradient would"
                )
                if note not in self.notes:
                    self.notes.append(note)
        if cacheable and not faults:
            self._steps[key] = chosen
        return single if chosen is None else chosen

    def _unit(
        self,
        run: Any,
        exchange: Exchange,
        unit: Unit,
        start_s: np.ndarray,
        faults: list[LinkFault],
        cacheable: bool,
        clock_s: float | None = None,
    ) -> UnitTiming:
        """One unit on the network floor from its workers' start times (step-relative)."""
        part = dataclasses.replace(
            exchange,
            payload_bytes=unit.payload_bytes,
            dense_bytes=unit.dense_bytes if exchange.dense_bytes else 0,
        )
        offset_s = float(start_s.min())
        relative_s = start_s - offset_s
        key = (part, relative_s.tobytes(), run.piece)
        timing = self._unit_cache.get(key) if cacheable and not faults else None
        if timing is None:
            shifted = [
                dataclasses.replace(
                    f,
                    down_from_s=f.down_from_s - offset_s,
                    down_until_s=f.down_until_s - offset_s,
                )
                for f in faults
            ]
            kwargs: dict[str, Any] = {"start_s": relative_s, "faults": shifted}
            if run.method is not None:
                kwargs["method"] = run.method
            network = run.current
            if clock_s is not None:
                network = run.network
                kwargs["clock_s"] = clock_s + offset_s
            result = simulate_exchange(network, part, **kwargs)
            timing = UnitTiming(
                finish_s=np.asarray(result.finish_s, dtype=np.float64),
                transform_s=float(result.transform_s),
                wire_s=float(result.wire_s),
                wait_s=float(result.wait_s),
                wire_bytes=float(np.mean(result.bytes_sent)),
                events=int(result.events),
                link_stats=result.link_stats,
                wan_bytes=float(np.mean(result.bytes_sent)) * result.wan_share,
            )
            if cacheable and not faults:
                self._unit_cache[key] = timing
        return dataclasses.replace(timing, finish_s=timing.finish_s + offset_s)


def _as_outcome(
    single: Any, step: Any, compute_w_s: np.ndarray, compress_s: float, faulted: bool
) -> Any:
    """An overlapped step as step.py's Outcome: the exposed time split like the exchange's.

    exposed = finish - fastest compute - compression: what the exchange adds to the GPU's work.
    It is shared out between transform, wire and wait in the proportions of the units' own
    critical paths, so the timeline's breakdown still adds up to the step.
    """
    exposed = max(step.finish_s - float(np.min(compute_w_s)) - compress_s, 0.0)
    parts = step.transform_s + step.wire_s + step.wait_s
    share_t = step.transform_s / parts if parts > 0 else 0.0
    share_w = step.wire_s / parts if parts > 0 else 0.0
    links = step.link_stats if step.link_stats is not None else single.link_stats
    return dataclasses.replace(
        single,
        finish_s=step.finish_s,
        transform_s=exposed * share_t,
        wire_s=exposed * share_w,
        wait_s=exposed * (1.0 - share_t - share_w),
        wire_bytes=step.wire_bytes,
        wan_bytes=step.wan_bytes,
        events=step.events,
        link_stats=links,
        faulted=faulted,
        start_s=step.start_s[0],
        exchange_s=step.exchange_s,
        units=step.units,
    )


def overlap_plan(
    trace: Trace,
    network: NetworkSpec,
    dense_bytes: int,
    dense: bool,
    bucket_bytes: int,
    notes: list[str],
) -> OverlapPlan:
    """An exchange's overlap with `trace`'s backward: its profile (or the uniform assumption,
    said in the notes), DDP buckets of `dense_bytes` where `dense` (A's all-reduce, or a site's
    intra-site one), else one unit per tensor."""
    profile = backward_profile(trace.meta)
    if not profile.measured:
        notes.append(
            f"overlap: {trace.name} has no backward profile; assumed uniform backward (gradient "
            "bytes ready evenly over a backward of 2/3 of compute)"
        )
    return OverlapPlan(
        profile=profile,
        dense_bytes=dense_bytes,
        dense=dense,
        bucket_bytes=bucket_bytes,
        run_name=trace.name,
        network_name=network.name,
    )
