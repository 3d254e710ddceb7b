"""Time-to-loss measured on the testbed against transitsim's prediction, made apart from it.

Measured: rank 0's wall clock from the start of step 1 to the end of the first evaluated step
whose validation loss is at or below the target (`end_unix_s`, `wall_s`); and the exchange
alone, the sum of the measured `comm_s` up to that step.

Predicted: `transitsim.replay.plan` on the testbed as a NetworkSpec (`ttl_network`: one switch,
host links at the tbf rate, the payload share tbf's counters saw, latency = a quarter of the
kernel's round trip, and the endpoint fitted on the calibration collectives of the same
session). Each step's compute comes from the variant's compute run on the unshaped testbed
(`ttl_compute`), the run's small gathers' bytes are replayed at the rate, and every exchange is
simulated. Of the predicted run itself the prediction takes only its loss curve (which steps
were evaluated, the first at or below the target) and its bytes: none of its timing.

A folder without compute runs (written before they existed) is predicted the old way, each
step's compute being the run's own `wall_s - comm_s` plus gaps; those cells are marked not
independent (`independent` False), since there predicted - measured is just predicted exchange
- measured exchange, diluted.

The exchange is the collective the trainer's gloo backend calls: A's gradient and E′'s band
are all-reduced (ring; the testbed's Linux bridge cannot sum, so E′'s in-switch sum runs as
the ring all-reduce a switch-less cluster would use), B's and C's payloads all-gathered (ring),
each all-gather with gloo's rendezvous (`ttl_network.rendezvous_s`).
"""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.testbed import gloo_algos
from transitsim.testbed.ttl_compute import (
    Compute,
    check_same_training,
    independent_compute,
    measure_compute,
    outside_exchange_s,
)
from transitsim.testbed.ttl_network import (
    GLOO_COLLECTIVE,
    Calibrated,
    calibrate,
    network_for,
    rendezvous_s,
)
from transitsim.traces.format import Trace, read_trace

COLUMNS = [
    "variant",
    "rate_bps",
    "target",
    "step",
    "independent",
    "measured_s",
    "predicted_s",
    "error",
    "exchange_measured_s",
    "exchange_predicted_s",
    "exchange_error",
    "exchange_share",
    "compute_predicted_s",
    "gathers_predicted_s",
    "compute_extrapolated",
    "predicted_no_alpha_s",
    "net_efficiency",
    "net_latency_s",
    "net_alpha_s",
    "net_host_per_transfer_s",
    "net_host_rate_bps",
    "net_sites",
    "net_wan_rate_bps",
    "net_wan_latency_s",
]


def predict(trace: Trace, rate_bps: float, net: Calibrated, compute_s: np.ndarray,
            alpha: bool = True) -> pd.DataFrame:  # fmt: skip
    """transitsim's replay of `trace`'s exchanges with `compute_s` per step (timeline)."""
    collective = str(trace.steps["collective"].iloc[-1])
    payload = int(trace.steps["payload_bytes"].iloc[-1])
    network = network_for(net, int(trace.meta["workers"]), rate_bps, collective, payload,
                          alpha=alpha)  # fmt: skip
    steps = trace.steps.assign(compute_s=compute_s, compress_s=0.0, update_s=0.0)
    algo = gloo_algos.transitsim_algo(GLOO_COLLECTIVE[collective])
    timeline = replay(replace(trace, steps=steps), ReplayRequest(network, collective=algo)).timeline
    # gloo's all-gather rendezvous, which a replay starting every rank together leaves out;
    # the steps run one after another, so each exchange's wait delays every later step. A
    # legacy folder (alpha fitted without it, no host stage) is replayed as it was made.
    wait_s = rendezvous_s(network, collective, payload) if net.host is not None else 0.0
    extra = np.where(timeline["payload_bytes"].to_numpy() > 0, wait_s, 0.0)
    return timeline.assign(exchange_s=timeline["exchange_s"] + extra,
                           step_s=timeline["step_s"] + extra,
                           time_s=timeline["time_s"] + np.cumsum(extra))  # fmt: skip


def cells(trace: Trace, rate_bps: float, net: Calibrated, targets: list[float],
          compute: Compute | None = None) -> list[dict]:  # fmt: skip
    """One row per target: measured and predicted seconds to it, and the exchange alone.

    compute None: the run's own time outside the exchange (not independent)."""
    if compute is None:
        charged, gathers = outside_exchange_s(trace), np.zeros(len(trace.steps))
    else:
        charged, gathers = independent_compute(trace, compute, net, rate_bps)
    steps = trace.steps.reset_index(drop=True)
    start = float(steps["end_unix_s"].iloc[0] - steps["wall_s"].iloc[0])
    timeline = predict(trace, rate_bps, net, charged + gathers).reset_index(drop=True)
    bare = predict(trace, rate_bps, net, charged + gathers, alpha=False).reset_index(drop=True)
    rows = []
    for target in targets:
        hit = steps.index[steps["val_loss"].le(target).fillna(False)]
        row = {"variant": trace.variant, "rate_bps": rate_bps, "target": target,
               "independent": compute is not None}  # fmt: skip
        if len(hit) == 0:
            rows.append({**row, "step": math.nan})
            continue
        k = int(hit[0])
        measured = float(steps["end_unix_s"].iloc[k]) - start
        predicted = float(timeline["time_s"].iloc[k])
        if not (math.isfinite(predicted) and predicted > 0):
            raise TransitsimError(f"{trace.path}: the replay gave {predicted!r} s to {target:g}")
        comm = float(steps["comm_s"].iloc[: k + 1].sum())
        exchange = float(timeline["exchange_s"].iloc[: k + 1].sum())
        rows.append(
            {
                **row,
                "step": int(steps["step"].iloc[k]),
                "measured_s": measured,
                "predicted_s": predicted,
                "error": (predicted - measured) / measured,
                "exchange_measured_s": comm,
                "exchange_predicted_s": exchange,
                "exchange_error": (exchange - comm) / comm if comm > 0 else math.nan,
                "exchange_share": comm / measured,
                "compute_predicted_s": float(charged[: k + 1].sum()),
                "gathers_predicted_s": float(gathers[: k + 1].sum()),
                "compute_extrapolated": compute is not None
                and int(steps["step"].iloc[k]) > compute.steps,
                "predicted_no_alpha_s": float(bare["time_s"].iloc[k]),
            }
        )
    return rows


def compute_runs(folder: Path, runs: pd.DataFrame) -> dict[str, tuple[Trace, Compute]]:
    """Every compute run `runs` names, read and measured once."""
    out: dict[str, tuple[Trace, Compute]] = {}
    for path in runs.get("compute_trace", pd.Series(dtype=object)).dropna().unique():
        trace = read_trace(folder / path)
        out[str(path)] = (trace, measure_compute(trace))
    return out


def compare(folder: Path, runs: pd.DataFrame, calibration: pd.DataFrame,
            targets: list[float]) -> pd.DataFrame:  # fmt: skip
    """The table: every (variant, rate, target) cell of the runs recorded under `folder`
    (`runs` and `calibration` as tables.check_runs and check_measured return them). Runs with
    a `compute_trace` are predicted from it; runs without, from their own compute (marked)."""
    nets = calibrate(calibration)
    computes = compute_runs(folder, runs)
    rows = []
    for run in runs.to_dict("records"):
        rate = float(run["rate_bps"])
        if rate not in nets:
            raise TransitsimError(f"no calibration at {rate:g} b/s for the {run['variant']} run")
        trace = read_trace(folder / run["trace"])
        compute = None
        if isinstance(run.get("compute_trace"), str):
            compute_trace, compute = computes[run["compute_trace"]]
            check_same_training(trace, compute_trace)
        for cell in cells(trace, rate, nets[rate], targets, compute):
            rows.append({**cell, **nets[rate].columns()})
    return pd.DataFrame(rows).reindex(columns=COLUMNS)  # every column, also if none reached
