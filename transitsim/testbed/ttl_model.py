"""Time-to-loss measured on the testbed against transitsim's prediction from the same run.

Measured: rank 0's wall clock from the start of step 1 to the end of the first evaluated step
whose validation loss is at or below the target (`end_unix_s`, `wall_s`).

Predicted: `transitsim.replay.plan` of that run's trace on the testbed as a NetworkSpec. The
network is the one `testbed run` validates (one switch, host links at the tbf rate, the payload
share tbf's counters saw, latency = a quarter of the kernel's round trip, and one alpha per gloo
transfer fitted on the 1 MiB calibration collectives of the same session; `model.py`). The
compute is the trace's own: everything rank 0 measured outside the exchange, i.e. each step's
`wall_s - comm_s` (forward, backward, compression, update, the loss gather, evaluation) plus
the gaps between steps (checkpoints), replayed as the step's compute. No FLOP model, and the
measured exchange time `comm_s` is never used: transitsim simulates every exchange.

The exchange is the collective the trainer's gloo backend calls: A's gradient and E′'s band
are all-reduced (ring; the testbed's Linux bridge cannot sum, so E′'s in-switch sum runs as
the ring all-reduce a switch-less cluster would use), B's and C's payloads all-gathered (ring).
"""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.replay.plan import replay
from transitsim.testbed import gloo_algos
from transitsim.testbed.flags import WORKER_RANGE
from transitsim.testbed.model import fit_alpha, testbed_network
from transitsim.traces.format import Trace, read_trace

GLOO_COLLECTIVE = {"all_reduce": "all_reduce", "reduce_at_switch": "all_reduce",
                   "all_gather": "all_gather"}  # fmt: skip
NEEDED = ("wall_s", "comm_s", "end_unix_s", "exchange_bytes")
COLUMNS = [
    "variant",
    "rate_bps",
    "target",
    "step",
    "measured_s",
    "predicted_s",
    "error",
    "exchange_measured_s",
    "exchange_predicted_s",
    "exchange_share",
    "predicted_no_alpha_s",
    "net_efficiency",
    "net_latency_s",
    "net_alpha_s",
]


def network_parameters(calibration: pd.DataFrame) -> dict[float, dict[str, float]]:
    """Per rate: efficiency, latency and alpha (fitted on that rate's calibration points)."""
    out = {}
    for rate, group in calibration.groupby("rate_bps", sort=True):
        out[float(rate)] = {
            "efficiency": float(group["qdisc_efficiency"].mean()),
            "latency_s": float(group["rtt_s"].iloc[0]) / 4,
            "alpha_s": fit_alpha(group),
        }
    return out


def check_timing(trace: Trace) -> None:
    """One line unless the trace's clocks can be replayed: every step's wall and exchange times
    finite, 0 < wall, 0 <= exchange <= wall (the exchange is part of the step), end times
    finite and never going back, 2..16 workers and a collective gloo runs."""
    steps, where = trace.steps, f"{trace.path}"
    wall, comm, end = (steps[c].to_numpy(dtype=float, na_value=np.nan) for c in NEEDED[:3])
    problems = {
        "wall_s": ~np.isfinite(wall) | (wall <= 0),
        "comm_s": ~np.isfinite(comm) | (comm < 0) | (comm > wall),
        "end_unix_s": ~np.isfinite(end) | np.append(False, np.diff(end) < 0),
    }
    for name, bad in problems.items():
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise TransitsimError(
                f"{where}: step {int(steps['step'].iloc[k])}: {name} = "
                f"{steps[name].iloc[k]!r} cannot be replayed (wall {wall[k]!r} s, "
                f"exchange {comm[k]!r} s)"
            )
    workers = trace.meta.get("workers")
    low, high = WORKER_RANGE
    if not isinstance(workers, int) or not low <= workers <= high:
        raise TransitsimError(f"{where}: {workers!r} workers: the testbed runs {low}..{high}")
    last = steps.iloc[-1]
    if str(last["collective"]) not in GLOO_COLLECTIVE or not last["payload_bytes"] > 0:
        raise TransitsimError(
            f"{where}: its last step sends {last['payload_bytes']!r} B by "
            f"{last['collective']!r}: not an exchange gloo runs"
        )


def outside_exchange(trace: Trace) -> Trace:
    """The trace with each step's compute = rank 0's measured time outside the exchange."""
    steps = trace.steps
    missing = [c for c in NEEDED if c not in steps.columns]
    if missing or trace.meta.get("backend") in (None, "simulated"):
        raise TransitsimError(
            f"{trace.path}: not a torch.distributed trace (needs {', '.join(NEEDED)})"
        )
    check_timing(trace)
    wall = steps["wall_s"].to_numpy(dtype=float)
    end = steps["end_unix_s"].to_numpy(dtype=float)
    gaps = np.diff(end, prepend=end[0] - wall[0]) - wall
    own = wall - steps["comm_s"].to_numpy(dtype=float) + np.maximum(gaps, 0.0)
    derived = steps.assign(compute_s=own, compress_s=0.0, update_s=0.0)
    return replace(trace, steps=derived)


def predict(trace: Trace, rate_bps: float, params: dict[str, float], alpha: bool = True):
    """transitsim's replay of the run on the testbed network (timeline per step)."""
    collective = GLOO_COLLECTIVE[str(trace.steps["collective"].iloc[-1])]
    payload = int(trace.steps["payload_bytes"].iloc[-1])
    workers = int(trace.meta["workers"])
    per_message = (params["alpha_s"] if alpha else 0.0) * gloo_algos.segments_per_message(
        collective, payload, workers
    )
    network = testbed_network(
        workers, rate_bps, params["efficiency"], params["latency_s"], per_message / 2
    )
    algo = gloo_algos.transitsim_algo(collective)
    return replay(outside_exchange(trace), network, collective=algo).timeline


def cells(
    trace: Trace, rate_bps: float, params: dict[str, float], targets: list[float]
) -> list[dict]:
    """One row per target: measured and predicted seconds to it, and the exchange's share."""
    steps = trace.steps.reset_index(drop=True)
    start = float(steps["end_unix_s"].iloc[0] - steps["wall_s"].iloc[0])
    timeline = predict(trace, rate_bps, params).reset_index(drop=True)
    bare = predict(trace, rate_bps, params, alpha=False).reset_index(drop=True)
    rows = []
    for target in targets:
        hit = steps.index[steps["val_loss"].le(target).fillna(False)]
        row = {"variant": trace.variant, "rate_bps": rate_bps, "target": target}
        if len(hit) == 0:
            rows.append({**row, "step": math.nan})
            continue
        k = int(hit[0])
        measured = float(steps["end_unix_s"].iloc[k]) - start
        predicted = float(timeline["time_s"].iloc[k])
        if not (math.isfinite(predicted) and predicted > 0):
            raise TransitsimError(f"{trace.path}: the replay gave {predicted!r} s to {target:g}")
        comm = float(steps["comm_s"].iloc[: k + 1].sum())
        rows.append(
            {
                **row,
                "step": int(steps["step"].iloc[k]),
                "measured_s": measured,
                "predicted_s": predicted,
                "error": (predicted - measured) / measured,
                "exchange_measured_s": comm,
                "exchange_predicted_s": float(timeline["exchange_s"].iloc[: k + 1].sum()),
                "exchange_share": comm / measured,
                "predicted_no_alpha_s": float(bare["time_s"].iloc[k]),
            }
        )
    return rows


def compare(folder: Path, runs: pd.DataFrame, calibration: pd.DataFrame,
            targets: list[float]) -> pd.DataFrame:  # fmt: skip
    """The table: every (variant, rate, target) cell of the runs recorded under `folder`
    (`runs` and `calibration` as tables.check_runs and check_measured return them)."""
    params = network_parameters(calibration)
    rows = []
    for run in runs.itertuples():
        rate = float(run.rate_bps)
        if rate not in params:
            raise TransitsimError(f"no calibration at {rate:g} b/s for the {run.variant} run")
        trace = read_trace(folder / run.trace)
        for cell in cells(trace, rate, params[rate], targets):
            rows.append({**cell, **{f"net_{k}": v for k, v in params[rate].items()}})
    return pd.DataFrame(rows).reindex(columns=COLUMNS)  # every column, also if none reached
