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

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkFault, validate_exchange, validate_network
from transitsim.network.exchange import fabric_for, resolve_faults
from transitsim.network.spec import COLLECTIVE_ALGOS, NetworkSpec
from transitsim.overlap import DDP_BUCKET_BYTES, OVERLAP_MODES
from transitsim.replay.compute import ComputeModel, Stragglers
from transitsim.replay.frames import TIMELINE_COLUMNS, run_link_stats, timeline_frame
from transitsim.replay.keys import first_appearance_codes
from transitsim.replay.overlap import overlap_plan
from transitsim.replay.sites import REPLICAS, check_site_layout, site_exchange
from transitsim.replay.step import Run, StepPlan
from transitsim.replay.steps import replay_rows
from transitsim.replay.streaming import stream_exchanges
from transitsim.traces.format import Trace

__all__ = ["TIMELINE_COLUMNS", "Replay", "needs_loopback", "placement_for", "replay"]

# Where reducible payloads (A's dense gradient, the fixed bands of C/D/E/F) are summed:
# "receivers" all-gathers them (each worker sums what it received; A is all-reduced anyway),
# "switch" sums them in an aggregating switch, "ring" all-reduces them on a ring
# (hierarchical across datacentres): a fair comparison of the band with A's all-reduce.
SUM_AT = ("receivers", "switch", "ring")
TRANSFORM_AT = ("pluggable", "switch")
# Variants whose payload is a fixed band of a chunked DCT, so an optical transform can make it.
TRANSFORM_VARIANTS = ("C", "D", "E", "E'", "F", "G")
# Variants trained with the (emulated) optical transform: a network-wide placement applies to these.
OPTICAL_VARIANTS = ("E", "E'")
# Error feedback modes that subtract the sender's own optical output, so need it back.
LOOPBACK_FEEDBACK = ("sent", "loopback")


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
    overlap: str = "none",
    bucket_bytes: int = DDP_BUCKET_BYTES,
    replicas: str = "worker",
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
    overlap "buckets": each step's exchange starts unit by unit as backward makes its gradients
    ready (DDP buckets of `bucket_bytes` for A, one unit per tensor for DeMo; see
    transitsim/replay/overlap.py); "none": after compute, as one exchange.
    replicas "site": a local-SGD trace with one replica per datacentre, each site a
    data-parallel group that all-reduces every step over its LAN (transitsim/replay/sites.py);
    "worker": a replica per worker, as the trace was trained.
    """
    compute = ComputeModel() if compute is None else compute
    faults = list(faults or [])
    _check_args(trace, network, compute, transform_at, sum_at, collective, stragglers, faults)
    _check_scale(scale_params, seed)
    _check_overlap(overlap, bucket_bytes)
    _check_replicas(replicas, trace, network)
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
    if network.workers != trace.workers and replicas == "worker":
        extrapolated = True
        notes.append(
            f"extrapolated: traces trained with {trace.workers} workers replayed on "
            f"{network.workers}; loss per step kept from the trace"
        )

    plan = _plan(trace, network, compute, transform_at, sum_at, collective, params, notes)
    stragglers = stragglers or Stragglers(distribution="none")
    run = Run(network=network, faults=faults, method=method, reuse=reuse)
    site = None
    if replicas == "site":
        # each site's workers split its replica's batch and all-reduce every step; that
        # exchange rides in compress_s so every stepping path puts it before the outer sync
        site = site_exchange(
            trace, network, ratio, collective, method, overlap, bucket_bytes, bool(faults), notes
        )
        compress_s = plan.compress_s
        plan.compute_s = [seconds / site.per_site for seconds in plan.compute_s]
        exposed = site.exposed_per_row(plan.compute_s, plan.interval)
        plan.compress_s = [c + e for c, e in zip(compress_s, exposed, strict=True)]
    elif overlap == "buckets":
        dense = int(round(trace.meta["dense_bytes_per_step"] * ratio))
        run.overlap = overlap_plan(trace, network, dense, trace.variant == "A", bucket_bytes, notes)
    rows = replay_rows(run, plan, stragglers, np.random.default_rng(seed))
    stream_exchanges(rows, trace, notes)  # H-s: exchanges overlap the next inner steps
    if site is not None:
        site.add_to_rows(rows, compress_s)
        site.add_link_uses(run.uses)
        notes.extend(site.overlap_notes())
    rows["overlap"] = [overlap] * len(rows["step"])
    if run.overlap is not None:
        notes.extend(run.overlap.notes)
    timeline = timeline_frame(rows, trace, network, extrapolated)
    timeline.attrs["notes"] = list(dict.fromkeys(notes))
    timeline.attrs["extrapolated"] = extrapolated
    link_stats = run_link_stats(run.uses, trace, network, float(timeline["time_s"].iloc[-1]))
    step_detail = pd.DataFrame(run.detail if run.detail_columns is None else run.detail_columns)
    return Replay(timeline=timeline, link_stats=link_stats, step_detail=step_detail)


def check_replay(
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
    overlap: str = "none",
    bucket_bytes: int = DDP_BUCKET_BYTES,
    replicas: str = "worker",
) -> None:
    """Raise what `replay` would, without simulating a step: the arguments, the step plan, and
    each distinct exchange against the built network (so `transitsim validate` catches a switch
    sum on a fabric with no switch every host reaches before 27 jobs fail at run time)."""
    compute = ComputeModel() if compute is None else compute
    faults = list(faults or [])
    _check_args(trace, network, compute, transform_at, sum_at, collective, stragglers, faults)
    _check_scale(scale_params, seed)
    _check_overlap(overlap, bucket_bytes)
    _check_replicas(replicas, trace, network)
    params = trace.meta["n_params"] if scale_params is None else scale_params
    plan = _plan(trace, network, compute, transform_at, sum_at, collective, params, [])
    fabric = fabric_for(network)
    resolve_faults(fabric, faults)
    for exchange in dict.fromkeys(plan.exchange):
        validate_exchange(network, exchange)
        if exchange.algo == "switch_sum":
            fabric.aggregation_switch()


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


def _plan(
    trace: Trace,
    network: NetworkSpec,
    compute: ComputeModel,
    transform_at: str | None,
    sum_at: str,
    collective: str | None,
    params: int,
    notes: list[str],
) -> StepPlan:
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
            algo_of[kind] = _choose_algo(*kind, network, collective, sum_at, notes)
        algo = algo_of[kind]
        key = (algo, int(payload_bytes))
        if key not in exchanges:
            exchanges[key] = Exchange(
                algo=algo,
                payload_bytes=key[1],
                dense_bytes=dense_bytes,
                transform_at=transform_at,
                loopback=loopback,
            )
        of_kind.append(exchanges[key])
    return StepPlan(
        step=steps["step"].astype(np.int64).tolist(),
        interval=_intervals(trace).tolist(),
        compute_s=compute_s.tolist(),
        compress_s=compress_s.tolist(),
        update_s=update_s.tolist(),
        exchange=[of_kind[code] for code in codes.tolist()],
    )


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
        raise TransitsimError(
            f"replay needs a Trace (transitsim.traces.format.read_trace), got {trace!r}"
        )
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


def _check_overlap(overlap: str, bucket_bytes: int) -> None:
    if overlap not in OVERLAP_MODES:
        raise TransitsimError(f"overlap {overlap!r} is not one of {', '.join(OVERLAP_MODES)}")
    if (
        not isinstance(bucket_bytes, int | np.integer)
        or isinstance(bucket_bytes, bool)
        or bucket_bytes < 1
    ):
        raise TransitsimError(f"bucket_bytes must be a positive integer, got {bucket_bytes!r}")


def _check_replicas(replicas: str, trace: Trace, network: NetworkSpec) -> None:
    if replicas not in REPLICAS:
        raise TransitsimError(f"replicas {replicas!r} is not one of {', '.join(REPLICAS)}")
    if replicas == "site":
        check_site_layout(trace, network)


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
