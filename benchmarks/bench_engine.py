"""The network engine at scale (issue 11's targets), each against the per-transfer DES measured
in the same run, with absolute times.

    .venv/bin/python benchmarks/bench_engine.py              # everything (several minutes)
    .venv/bin/python benchmarks/bench_engine.py --only replay --collectives hierarchical

1. replay: 1,024 workers in 2 datacentres, 3,000 steps, random stragglers (so no two steps share
   a simulation), for each collective (switch_sum on one switch: it needs one switch every host
   reaches). DES: one step of the same exchange with the same kind of stragglers, times 3,000.
   Target: <= 60 s each.
2. scale: 8,192 workers in one datacentre, 3,000 steps, random stragglers, ring all-reduce.
   DES: one step at 1,024 workers times (8,192 / 1,024)^2 (its events grow as N^2) times 3,000.
   Target: <= 600 s.
3. cli: `transitsim collective` for 1,024 workers as a whole cold process, against the same
   command with --method des. Target: <= 0.5 s.
4. sweep: 6 variants x 50 networks of 3,000-step traces, in this process (serial), and the
   same grid with the default executor. Target: <= 10 s; default never slower than serial.
Tree has no fast path: its replay is the DES's, measured on a few steps and extrapolated.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from transitsim.compute import Stragglers
from transitsim.network import Exchange, LinkSpec, NetworkSpec, SwitchSpec, simulate_exchange
from transitsim.replay import replay
from transitsim.sweep import ReplayJob, run_jobs
from transitsim.trace import read_trace, write_trace

DENSE = 31_666_944  # the dense BF16 delta of a 15.8 M parameter model
STEPS = 3000
JITTER = Stragglers(distribution="exponential", scale=0.05)  # 5% of compute, per worker and step
ALGOS = ("ring_allreduce", "ring_allgather", "hierarchical", "switch_sum", "tree")
VARIANTS = (  # (variant, payload bytes, collective, reducible)
    ("A", DENSE, "all_reduce", True),
    ("B", 3_957_960, "all_gather", False),
    ("C", 1_979_184, "all_gather", True),
    ("D", 1_979_184, "all_gather", True),
    ("E", 1_979_184, "all_gather", True),
    ("F", 1_979_184, "all_gather", True),
)


def two_datacentres(workers: int) -> NetworkSpec:
    return NetworkSpec(
        f"2dc-{workers}",
        "datacentres",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9),
        datacentres=2,
        wan_link=LinkSpec(400e9, length_m=1e6),
    )


def one_switch(workers: int) -> NetworkSpec:
    return NetworkSpec(
        f"sw-{workers}",
        "switch",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9, aggregator=True),
    )


def synthetic_trace(folder: Path, variant: str, payload: int, collective: str, reducible: bool):
    step = np.arange(1, STEPS + 1)
    loss = 3.0 + 2.0 * np.exp(-step / 800.0)
    frame = pd.DataFrame(
        {
            "step": step,
            "train_loss": loss,
            "val_loss": np.where(step % 100 == 0, loss + 0.02, np.nan),
            "lr": 1e-3,
            "payload_bytes": payload,
            "collective": collective,
            "reducible": reducible,
            "compute_s": 0.030,
            "compress_s": 0.0 if variant == "A" else 0.004,
        }
    )
    meta = {
        "name": f"{variant}-engine-s0",
        "variant": variant,
        "seed": 0,
        "workers": 8,
        "n_params": DENSE // 2,
        "dense_bytes_per_step": DENSE,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
    }
    return read_trace(write_trace(folder / f"{meta['name']}.parquet", frame, meta))


def first_steps(trace, count: int):
    return type(trace)(meta=trace.meta, steps=trace.steps.iloc[:count].reset_index(drop=True))


def timed(function):
    began = time.perf_counter()
    result = function()
    return result, time.perf_counter() - began


def des_step_s(network: NetworkSpec, exchange: Exchange) -> float:
    """One straggler-perturbed step of the exchange on the per-transfer DES (wall seconds)."""
    start = np.random.default_rng(1).exponential(0.05 * 0.030, network.workers)
    return timed(lambda: simulate_exchange(network, exchange, start_s=start, method="des"))[1]


def verdict(seconds: float, target: float) -> str:
    return f"met (<= {target:g} s)" if seconds <= target else f"NOT met (> {target:g} s)"


def bench_replay(folder: Path, algos: list[str], workers: int) -> None:
    print(f"1. replay: {workers} workers, {STEPS} steps, random stragglers (exponential 5%)")
    trace = synthetic_trace(folder, "A", DENSE, "all_reduce", True)
    gather = synthetic_trace(folder, "C", 1_979_184, "all_gather", True)
    for algo in algos:
        network = one_switch(workers) if algo == "switch_sum" else two_datacentres(workers)
        source = gather if algo == "ring_allgather" else trace
        payload = 1_979_184 if algo == "ring_allgather" else DENSE
        steps = 3 if algo == "tree" else STEPS  # the DES is tree's only path
        run = first_steps(source, steps)
        result, wall = timed(
            lambda run=run, network=network, algo=algo: replay(
                run, network, collective=algo, stragglers=JITTER, seed=0
            )
        )
        wall_total = wall * STEPS / steps
        des = des_step_s(network, Exchange(algo, payload)) * STEPS
        note = "" if steps == STEPS else f" (measured on {steps} steps, extrapolated)"
        print(
            f"   {algo:<15} {network.name:<9} fast {wall_total:9.2f} s{note}  "
            f"DES {des:11.0f} s (one step x {STEPS})  ratio {des / wall_total:9,.0f}x  "
            f"{verdict(wall_total, 60)}  simulated {result.timeline['time_s'].iloc[-1]:.2f} s"
        )


def bench_scale(folder: Path) -> None:
    workers = 8192
    print(f"2. scale: {workers} workers in one datacentre, {STEPS} steps, random stragglers")
    trace = synthetic_trace(folder, "A", DENSE, "all_reduce", True)
    network = one_switch(workers)
    _, wall = timed(lambda: replay(trace, network, stragglers=JITTER, seed=0))
    des_1024 = des_step_s(one_switch(1024), Exchange("ring_allreduce", DENSE))
    des = des_1024 * (workers / 1024) ** 2 * STEPS
    print(
        f"   ring_allreduce  fast {wall:9.2f} s  DES {des:11.0f} s (one step at 1,024 = "
        f"{des_1024:.1f} s, x 64 x {STEPS})  ratio {des / wall:9,.0f}x  {verdict(wall, 600)}"
    )


def bench_cli() -> None:
    print("3. cli: `transitsim collective` for 1,024 workers, whole cold process")
    exe = str(Path(sys.executable).with_name("transitsim"))
    base = [exe, "collective", "--algo", "ring-allreduce", "--workers", "1024"]
    base += ["--bytes", "32 MB", "--bandwidth", "200 Gb/s", "--json"]
    walls = []
    for _ in range(3):
        _, wall = timed(lambda: subprocess.run(base, check=True, capture_output=True))
        walls.append(wall)
    des_command = [*base, "--method", "des"]
    _, des = timed(lambda: subprocess.run(des_command, check=True, capture_output=True))
    best = min(walls)
    print(
        f"   fast {best:.3f} s (best of 3: {', '.join(f'{w:.3f}' for w in walls)})  "
        f"DES {des:.1f} s  ratio {des / best:,.0f}x  {verdict(best, 0.5)}"
    )


def bench_sweep(folder: Path) -> None:
    print("4. sweep: 6 variants x 50 networks x 3,000-step traces")
    traces = {}
    for variant, payload, collective, reducible in VARIANTS:
        trace = synthetic_trace(folder, variant, payload, collective, reducible)
        traces[trace.name] = trace
    rates = np.geomspace(10e9, 1.6e12, 50)
    jobs = []
    for rate in rates:
        network = NetworkSpec(
            f"8x{rate / 1e9:.0f}g", "switch", 8, LinkSpec(float(rate), length_m=3)
        )
        for name in traces:
            jobs.append(ReplayJob(len(jobs), name, network, {"rate_bps": float(rate)}))
    serial, serial_s = timed(lambda: run_jobs(traces, jobs, serial=True, quiet=True))
    default, default_s = timed(lambda: run_jobs(traces, jobs, quiet=True))
    same = all(
        a.ok and b.ok and a.timeline["time_s"].equals(b.timeline["time_s"])
        for a, b in zip(serial, default, strict=True)
    )
    print(
        f"   {len(jobs)} jobs: serial {serial_s:.2f} s ({verdict(serial_s, 10)}), default "
        f"executor {default_s:.2f} s ({'not slower' if default_s <= serial_s * 1.05 else 'SLOWER'}"
        f" than serial, ratio {serial_s / default_s:.2f}), identical results: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("replay", "scale", "cli", "sweep"), action="append")
    parser.add_argument("--collectives", nargs="*", default=list(ALGOS))
    parser.add_argument("--workers", type=int, default=1024)
    args = parser.parse_args()
    parts = args.only or ["replay", "scale", "cli", "sweep"]
    print(f"cpu count {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        if "replay" in parts:
            bench_replay(Path(folder), args.collectives, args.workers)
        if "scale" in parts:
            bench_scale(Path(folder))
        if "cli" in parts:
            bench_cli()
        if "sweep" in parts:
            bench_sweep(Path(folder))


if __name__ == "__main__":
    main()
