"""Train on the testbed: one gloo trainer rank per host namespace, and the network calibrated.

First, with the tbf removed (`Testbed.unshape`), each variant's compute run: the same variant,
seed and ranks for `compute_steps` steps, whose time outside the exchange is the compute every
prediction charges (`ttl_compute`). Then for each link rate the testbed is (re)shaped and
calibrated the way `transitsim testbed run` calibrates it (kernel round trip; the all-reduce and
all-gather of 64 KiB and 4 MiB among the training hosts, from which `ttl_network` fits the
endpoint, and the payload share tbf's counters saw), and each variant trains: `python -m
trainer --backend gloo` in every host namespace, one worker per rank, RANK/WORLD_SIZE/
MASTER_ADDR from the testbed. Rank 0 writes the trace, with each step's measured wall time and
exchange time. No run saves a checkpoint before its last step (`ckpt_every` past it):
checkpoint gathers are left out of both sides.

Every rank dies with its launcher and has a deadline; the testbed is torn down on exit, on
exceptions and on SIGTERM/SIGHUP (`atomic.signals_raise`), and leftovers of killed runs are
removed first.
"""

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from transitsim.base.atomic import signals_raise
from transitsim.testbed.measure import (
    Point,
    launch_in,
    measure_rtt,
    rank_env,
    run_counted,
    stop_all,
    summarise,
    wait_all,
)
from transitsim.testbed.model import CALIBRATION_SIZES  # the endpoint fit's (ttl_network)
from transitsim.testbed.netns import Shaping, Testbed, TestbedError, cleanup_leftovers

VARIANTS = ("A", "B", "C", "E'")
PRESET = "shakespeare-mini"
BASE_PORT = 29901


# A calibration point takes `calibration_repeats` calls, then more until their spread (IQR over
# median) is under 5 % (issue 25's hygiene bar), at most 4 times as many or 30 s of calls: the
# 10 fixed calls of the first sessions left spreads of 2-30 % at 4 MiB.
CALIBRATION_SPREAD = 0.05
CALIBRATION_MORE = 4
CALIBRATION_POINT_S = 30.0


@dataclass(frozen=True)
class Plan:
    """What to train on which network, and for how long."""

    rates_bps: list[float]
    variants: list[str]
    hosts: int = 4
    steps: int = 400
    seed: int = 0
    compute_steps: int = 100  # each variant's compute run on the unshaped testbed
    calibration_repeats: int = 10
    run_limit_s: float = 1800.0  # one training run, startup included
    sites: int = 1  # 2: the hosts split over two sites joined by one shaped WAN veth pair
    wan_rate_bps: float = 0.0  # the WAN's tbf rate (sites=2 only); the rates are the hosts'

    def wan_shaping(self) -> Shaping | None:
        """The WAN's tbf with two sites (testbed run's default 50 ms queue), else None."""
        return Shaping.for_rate(self.wan_rate_bps) if self.sites == 2 else None


def run_label(variant: str, rate_bps: float, wan_rate_bps: float = 0.0) -> str:
    """A folder name for one (variant, rate) run: `Ep-50Mbps`; across a WAN
    `Ep-400Mbps-wan50Mbps`."""
    wan = f"-wan{wan_rate_bps / 1e6:g}Mbps" if wan_rate_bps else ""
    return f"{variant.replace(chr(39), 'p')}-{rate_bps / 1e6:g}Mbps{wan}"


def compute_label(variant: str) -> str:
    """A folder name for a variant's compute run: `Ep-unshaped`."""
    return f"{variant.replace(chr(39), 'p')}-unshaped"


def trainer_argv(variant: str, plan: Plan, out: Path, steps: int | None = None) -> list[str]:
    """One rank's command: the preset, one worker per rank, values sent in bf16 as the trace
    accounts them (so the bytes on the wire are the trace's payload_bytes), no checkpoint
    before the last step."""
    steps = plan.steps if steps is None else steps
    return [
        sys.executable, "-m", "trainer", "--preset", PRESET, "--variant", variant,
        "--backend", "gloo", "--wire-dtype", "bfloat16", "--set", f"workers={plan.hosts}",
        "--set", f"ckpt_every={steps + 1}",
        "--steps", str(steps), "--seed", str(plan.seed), "--threads", "1",
        "--dist-timeout", "600", "--quiet", "--force", "-o", str(out),
    ]  # fmt: skip


def train_ranks(testbed: Testbed, argv: list[str], out: Path, port: int, limit_s: float) -> Path:
    """Run `argv` on hosts 0..P-1 as ranks of one job; returns the trace rank 0 wrote."""
    out.mkdir(parents=True, exist_ok=True)
    hosts = testbed.hosts
    logs = [out / f"rank{r}.log" for r in range(hosts)]
    procs = []
    try:
        for r in range(hosts):
            env = {**rank_env(testbed, r, hosts, port), "LOCAL_RANK": "0"}
            procs.append(launch_in(testbed, r, argv, env, logs[r]))
        wait_all(procs, time.monotonic() + limit_s, logs)
    finally:
        stop_all(procs)
    traces = sorted(out.glob("*.parquet"), key=os.path.getmtime)
    if not traces:
        raise TestbedError(f"testbed: rank 0 wrote no trace in {out} (see {logs[0]})")
    for log in logs:
        log.unlink(missing_ok=True)
    return traces[-1]


def calibrate(testbed: Testbed, rate_bps: float, repeats: int, port: int) -> pd.DataFrame:
    """The all-reduce and all-gather of each calibration size among all hosts, as `testbed run`
    measures them (with two sites: the flat rings across the WAN, and its round trip)."""
    rtt = measure_rtt(testbed, port)
    two = testbed.sites == 2 and testbed.wan_shaping is not None
    rtt_wan = measure_rtt(testbed, port + 1, far=testbed.hosts // 2) if two else 0.0
    points = [
        Point(
            c,
            nbytes,
            2,
            repeats,
            CALIBRATION_MORE * repeats,
            CALIBRATION_SPREAD,
            CALIBRATION_POINT_S,
        )  # fmt: skip
        for nbytes in CALIBRATION_SIZES
        for c in ("all_reduce", "all_gather")
    ]
    merged, efficiency = run_counted(testbed, testbed.hosts, points, port + 2)
    rows = [
        {
            "rate_bps": rate_bps,
            **summarise(m, testbed.hosts),
            "rtt_s": rtt,
            "qdisc_efficiency": efficiency,
            "tbf_burst_bytes": testbed.shaping.burst_bytes,
            "sites": testbed.sites,
            "wan_rate_bps": testbed.wan_shaping.rate_bps if two else 0.0,
            "rtt_wan_s": rtt_wan,
        }
        for m in merged
    ]
    return pd.DataFrame(rows)


def compute_runs(testbed: Testbed, plan: Plan, out: Path, port: int,
                 log: Callable[[str], None]) -> dict[str, str]:  # fmt: skip
    """Each variant's compute run on the unshaped testbed: {variant: its trace under `out`}."""
    testbed.unshape()
    traces = {}
    for variant in plan.variants:
        port += 1
        started = time.monotonic()
        folder = out / "traces" / compute_label(variant)
        argv = trainer_argv(variant, plan, folder, plan.compute_steps)
        trace = train_ranks(testbed, argv, folder, port, plan.run_limit_s)
        log(f"  {variant} compute run (unshaped): {plan.compute_steps} steps in "
            f"{time.monotonic() - started:.0f} s")  # fmt: skip
        traces[variant] = str(trace.relative_to(out))
    return traces


def measure(
    plan: Plan, out: Path, log: Callable[[str], None] = print
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compute runs, then calibrate and train every (rate, variant): (one row per run with its
    trace's and its compute run's paths under `out`, the calibration points)."""
    cleanup_leftovers()
    runs, calibrations = [], []
    port = BASE_PORT
    wan_bps = plan.wan_rate_bps if plan.sites == 2 else 0.0
    testbed = Testbed(plan.hosts, Shaping.for_rate(plan.rates_bps[0]), sites=plan.sites,
                      wan_shaping=plan.wan_shaping())  # fmt: skip
    with signals_raise(), testbed:
        computes = compute_runs(testbed, plan, out, port, log)
        port += len(plan.variants) + 1
        for rate in plan.rates_bps:
            testbed.shape(Shaping.for_rate(rate))
            port += 3
            calib = calibrate(testbed, rate, plan.calibration_repeats, port)
            calibrations.append(calib)
            calibrated = ", ".join(
                f"{row.collective} {int(row.bytes) >> 10} KiB {row.median_s:.4f} s"
                for row in calib.itertuples()
            )
            wan = ""
            if plan.sites == 2:
                wan = (f", WAN {plan.wan_rate_bps / 1e6:g} Mb/s (rtt across it "
                       f"{calib['rtt_wan_s'].iloc[0] * 1e6:.0f} us)")  # fmt: skip
            log(
                f"{rate / 1e6:g} Mb/s{wan}: rtt {calib['rtt_s'].iloc[0] * 1e6:.0f} us, payload "
                f"share {calib['qdisc_efficiency'].iloc[0]:.4f}; {calibrated}"
            )
            for variant in plan.variants:
                port += 1
                started = time.monotonic()
                folder = out / "traces" / run_label(variant, rate, wan_bps)
                argv = trainer_argv(variant, plan, folder)
                trace = train_ranks(testbed, argv, folder, port, plan.run_limit_s)
                log(f"  {variant}: {plan.steps} steps in {time.monotonic() - started:.0f} s")
                runs.append(
                    {
                        "variant": variant,
                        "rate_bps": rate,
                        "hosts": plan.hosts,
                        "sites": plan.sites,
                        "wan_rate_bps": wan_bps,
                        "trace": str(trace.relative_to(out)),
                        "compute_trace": computes[variant],
                        "loadavg_1m": round(os.getloadavg()[0], 2),
                    }
                )
    calibration = pd.concat(calibrations, ignore_index=True)
    calibration["start_offsets_s"] = calibration["start_offsets_s"].astype(str)
    return pd.DataFrame(runs), calibration
