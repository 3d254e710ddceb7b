"""Each step's compute for a `testbed ttl` prediction, measured apart from the run it predicts.

The compute run: the same variant, seed, preset and ranks, trained on the same testbed with
the tbf removed (`Testbed.unshape`), for a few dozen steps. Its rank 0 measured, per step, the
time outside the exchange: `wall_s - comm_s` (forward, backward, compression, update, the
loss gather and, on evaluated steps, the evaluation) plus the gap before the step (the loop's
overhead: the runs save no checkpoint before their last step). `Compute` keeps three figures
of it: step 1 (the warm-up), the mean of the other steps without evaluation, and the mean of
the evaluated steps. A prediction charges step k of the predicted run the first, the second or
the third by whether the predicted run evaluated at step k; it takes nothing else from the
predicted run but its loss curve and its bytes.

Why this and not a profile: the trainer's profile (trainer/loop/profile.py) times forward and
backward only, and `traces import-profile` needs a Kineto file; the testbed's step also pays
compression, the update, the evaluation and the loss gather, and on 2 shared cores the four
ranks' contention for them, which only a run of the same ranks on the same machine measures.
On an unshaped veth every exchange still costs its fixed part (the kernel, gloo's handshakes)
but the bytes move at memory speed, so the compute run's time outside the exchange holds no
link time. It costs a fraction of a shaped run (`--compute-steps`, 50 by default).

The run's own gathers (the rule the table's notes state):
- the loss gather of every step (each rank's losses and compute seconds, float64, all-gathered)
  and E'/optics' clip counts (two int64, all-reduced): their fixed costs are in the compute run's
  measured compute; their bytes are replayed at the shaped rate (`gather_bytes_s`);
- checkpoints (a gather of every rank's whole state) are left out of both sides: the ttl runs
  train with `ckpt_every` past their last step, and a run that saved one inside is refused.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.testbed.flags import WORKER_RANGE
from transitsim.testbed.ttl_network import GLOO_COLLECTIVE, Calibrated, simulate_bytes
from transitsim.traces.format import Trace

NEEDED = ("wall_s", "comm_s", "end_unix_s", "exchange_bytes")
LOSS_GATHER_ITEM_BYTES = 8  # float64: each worker's loss and the rank's compute seconds
CLIP_COUNTS_BYTES = 16  # two int64, all-reduced by optics variants once their optics runs
NOT_COMPUTE = ("steps", "ckpt_every", "threads")  # config fields a compute run may differ in


@dataclass(frozen=True)
class Compute:
    """Seconds of compute per step, measured in a compute run."""

    first_s: float  # step 1: the warm-up (allocators, gloo's first connections)
    step_s: float  # mean over the steps after the first without evaluation
    eval_s: float  # mean over the evaluated steps (rank 0's evaluation included)
    steps: int  # how many steps the compute run trained
    source: str  # the compute run's trace

    def per_step(self, steps: np.ndarray, evaluated: np.ndarray) -> np.ndarray:
        """Each step's compute, by its number and whether the predicted run evaluated it."""
        out = np.where(evaluated, self.eval_s, self.step_s)
        return np.where(steps == 1, self.first_s, out)


def check_gloo(trace: Trace) -> None:
    """One line unless the trace's clocks can be read: a torch.distributed trace, every step's
    wall and exchange times finite, 0 < wall, 0 <= exchange <= wall (the exchange is part of
    the step), end times finite and never going back, 2..16 workers and a collective gloo
    runs."""
    steps, where = trace.steps, f"{trace.path}"
    missing = [c for c in NEEDED if c not in steps.columns]
    if missing or trace.meta.get("backend") in (None, "simulated"):
        raise TransitsimError(f"{where}: not a torch.distributed trace (needs {', '.join(NEEDED)})")
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


def outside_exchange_s(trace: Trace) -> np.ndarray:
    """Rank 0's measured time outside the exchange, step by step: wall - comm + the gap before."""
    check_gloo(trace)
    steps = trace.steps
    wall = steps["wall_s"].to_numpy(dtype=float)
    end = steps["end_unix_s"].to_numpy(dtype=float)
    gaps = np.diff(end, prepend=end[0] - wall[0]) - wall
    return wall - steps["comm_s"].to_numpy(dtype=float) + np.maximum(gaps, 0.0)


def outside_exchange(trace: Trace) -> Trace:
    """The trace with each step's compute = its own time outside the exchange (the old,
    not independent prediction, kept for folders without compute runs)."""
    own = outside_exchange_s(trace)
    return replace(trace, steps=trace.steps.assign(compute_s=own, compress_s=0.0, update_s=0.0))


def check_no_checkpoints(trace: Trace) -> None:
    """Checkpoints are left out of both sides: one line if the run saved one before its end."""
    config = trace.meta.get("config") or {}
    every, steps = config.get("ckpt_every"), config.get("steps")
    if isinstance(every, int) and isinstance(steps, int) and every < steps:
        raise TransitsimError(
            f"{trace.path}: saves a checkpoint every {every} steps of {steps}: its checkpoint "
            "gathers would be measured but not predicted (train with --set ckpt_every past "
            "the last step, as `testbed ttl` does)"
        )


def measure_compute(trace: Trace) -> Compute:
    """A compute run's three figures (see the module's docstring)."""
    outside = outside_exchange_s(trace)
    check_no_checkpoints(trace)
    steps = trace.steps["step"].to_numpy(dtype=int)
    evaluated = trace.steps["val_loss"].notna().to_numpy()
    plain = (steps > 1) & ~evaluated
    if steps[0] != 1 or not plain.any() or not evaluated.any():
        raise TransitsimError(
            f"{trace.path}: a compute run needs step 1, a later step without evaluation and "
            f"an evaluated step ({len(steps)} steps: train it for at least 3)"
        )
    return Compute(
        first_s=float(outside[0]),
        step_s=float(outside[plain].mean()),
        eval_s=float(outside[evaluated].mean()),
        steps=len(steps),
        source=str(trace.path),
    )


def check_same_training(run: Trace, compute: Trace) -> None:
    """One line unless `compute` trained what `run` trained (steps, checkpoints, threads
    aside) on as many ranks with the same wire dtype."""
    a, b = run.meta.get("config") or {}, compute.meta.get("config") or {}
    differs = sorted(k for k in set(a) | set(b) if k not in NOT_COMPUTE and a.get(k) != b.get(k))
    mine, theirs = run.meta.get("distributed") or {}, compute.meta.get("distributed") or {}
    for key in ("world_size", "wire_dtype", "workers_per_process"):
        if mine.get(key) != theirs.get(key):
            differs.append(key)
    if differs:
        shown = ", ".join(f"{k} {b.get(k, theirs.get(k))!r}" for k in differs[:3])
        raise TransitsimError(
            f"{compute.path}: not a compute run of {run.path.name} ({shown} differ)"
        )


def gather_bytes_s(trace: Trace, net: Calibrated, rate_bps: float) -> np.ndarray:
    """Per step, the seconds the run's own small gathers' bytes take at `rate_bps`: the loss
    gather every step, and the clip counts on the steps an optics variant reports a clip rate."""
    workers = int(trace.meta["workers"])
    per_process = int((trace.meta.get("distributed") or {}).get("workers_per_process", 1))
    loss = simulate_bytes(
        net, workers, rate_bps, "all_gather", (per_process + 1) * LOSS_GATHER_ITEM_BYTES
    )
    out = np.full(len(trace.steps), loss)
    if "clip_rate" in trace.steps.columns:
        clip = simulate_bytes(net, workers, rate_bps, "all_reduce", CLIP_COUNTS_BYTES)
        out = out + np.where(trace.steps["clip_rate"].notna().to_numpy(), clip, 0.0)
    if not np.isfinite(out).all():
        raise TransitsimError(f"{trace.path}: the gathers' bytes gave {out[0]!r} s")
    return out


def independent_compute(run: Trace, compute: Compute, net: Calibrated,
                        rate_bps: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per step of `run`: (compute from the compute run, the gathers' bytes at the rate)."""
    check_gloo(run)
    check_no_checkpoints(run)
    steps = run.steps["step"].to_numpy(dtype=int)
    charged = compute.per_step(steps, run.steps["val_loss"].notna().to_numpy())
    if not (np.isfinite(charged).all() and math.isfinite(compute.first_s)):
        raise TransitsimError(f"{compute.source}: its compute is not finite")
    return charged, gather_bytes_s(run, net, rate_bps)
