"""Replay speed: reusing identical steps against simulating every step with the per-transfer DES.

Three synthetic 3,000-step, 8-worker traces with the experiment's byte counts (A dense BF16
all-reduce 31,666,944 B; B top-k values+positions all-gather 3,957,960 B; C low band all-gather
1,979,184 B) are replayed on an 8 x 200 Gb/s single-switch network:

- reuse: replay as shipped (identical steps simulated once, method "auto");
- naive: every step simulated on its own with method "des" (the per-transfer SimPy reference).
  It runs on the first --naive-steps steps and is extrapolated per step to the whole run
  (--naive-steps 3000 runs it in full); its timeline must equal reuse's on those steps;
- every-step fast: every step simulated on its own with method "auto" (the ring recurrence):
  what a run with random stragglers costs, where no two steps can share a simulation
  (measured and extrapolated like naive).

    .venv/bin/python benchmarks/bench_replay.py [--steps 3000] [--naive-steps 150]
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from common import first_steps, one_switch, synthetic_trace, timed

from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest

WORKERS = 8
RUNS = (
    ("A", 31_666_944, "all_reduce"),
    ("B", 3_957_960, "all_gather"),
    ("C", 1_979_184, "all_gather"),
)
NETWORK = one_switch(WORKERS, name="8x200g-switch")


def simulated_events(detail: pd.DataFrame) -> int:
    return int(detail.loc[~detail["reused"], "events"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--naive-steps", type=int, default=150)
    args = parser.parse_args()
    naive_steps = min(args.naive_steps, args.steps)
    print(
        f"{args.steps} steps, {WORKERS} workers, network {NETWORK.name}; naive DES on "
        f"{naive_steps} steps" + (", extrapolated per step" if naive_steps < args.steps else "")
    )
    header = (
        f"{'run':<4} {'payload B':>11} {'reuse s':>8} {'sims':>5} {'naive s':>9} "
        f"{'naive ev/s':>11} {'fast s':>7} {'reuse steps/s':>14} {'ratio':>8} "
        f"{'max rel diff':>13}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as folder:
        for variant, payload, collective in RUNS:
            trace = synthetic_trace(
                Path(folder), variant, payload, collective, args.steps, variant != "B"
            )
            fast, fast_s = timed(lambda trace=trace: replay(trace, ReplayRequest(NETWORK)))
            short = first_steps(trace, naive_steps)
            naive, naive_s = timed(
                lambda short=short: replay(short, ReplayRequest(NETWORK, reuse=False, method="des"))
            )
            naive_total_s = naive_s * args.steps / naive_steps
            _, each_s = timed(
                lambda short=short: replay(short, ReplayRequest(NETWORK, reuse=False))
            )
            each_total_s = each_s * args.steps / naive_steps
            same = fast.timeline.iloc[:naive_steps].reset_index(drop=True)
            columns = ["step_s", "time_s", "wire_s", "wait_s", "wire_bytes"]
            diff = np.max(
                np.abs(naive.timeline[columns].to_numpy() - same[columns].to_numpy())
                / np.maximum(np.abs(same[columns].to_numpy()), 1e-300)
            )
            sims = int((~fast.step_detail["reused"]).sum())
            print(
                f"{variant:<4} {payload:>11,} {fast_s:>8.3f} {sims:>5} {naive_total_s:>9.2f} "
                f"{simulated_events(naive.step_detail) / naive_s:>11,.0f} {each_total_s:>7.2f} "
                f"{args.steps / fast_s:>14,.0f} {naive_total_s / fast_s:>7.0f}x {diff:>13.1e}"
            )
    print(
        "reuse s: wall seconds of the whole replay; sims: exchanges it simulated; naive s: wall "
        "seconds to simulate every step with the DES (extrapolated when run on fewer steps); "
        "naive ev/s: its SimPy events per second; fast s: every step with the ring recurrence "
        "(extrapolated the same way); ratio: naive / reuse; max rel diff: largest relative "
        "difference between the naive and reuse timelines."
    )


if __name__ == "__main__":
    main()
