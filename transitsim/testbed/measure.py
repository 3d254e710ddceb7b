"""Measure gloo collectives on a testbed: one torch.distributed process per host namespace.

For each link rate the testbed is (re)shaped, the kernel's round trip is measured (and, with two
sites, the round trip across the WAN), and for each worker count the ranks run every planned
(collective, size) point: warm-up calls, then adaptive repeats, each after a barrier (worker.py:
until the spread is under the target, or the repeat or time cap). One row per point: the median
and spread of the collective's time (max end - min start over ranks, one monotonic clock), the
repeats and why they stopped, the 1-minute load average at the point's start and end, the
ranks' start offsets, the payload share of the line that tbf's own byte counters saw, the
layout (1 site, 2 sites flat, 2 sites hierarchical) and the testbed's parameters.
"""

import importlib.metadata
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from transitsim.base.atomic import signals_raise
from transitsim.testbed import gloo_algos
from transitsim.testbed.model import LOAD_LIMIT  # above it, a run does not begin quiet
from transitsim.testbed.netns import Shaping, Testbed, TestbedError, cleanup_leftovers

COLLECTIVES = ("all_reduce", "all_gather")
TABLE_COLLECTIVES = (*COLLECTIVES, gloo_algos.HIERARCHICAL)
LAYOUTS = ("1 site", "2 sites flat", "2 sites hierarchical")
BASE_PORT = 29611
STARTUP_S = 90.0  # torch import and rendezvous on a loaded 2-core machine, per launch
# The planning estimate (call limit, deadlines, the printed duration), calibrated on the committed
# run of 1 Dec 2026 (a loaded machine: it predicts 8.1 min of calls where 8.9 were measured,
# and 13 min in all):
LAUNCH_S = 25.0  # one launch: torch import and rendezvous of every rank
SYNC_S = 0.01  # per timed call: barrier and the all-reduce that agrees on the times
MACHINE_BPS = 1e9  # payload this 2-core machine's kernels and gloo moved, all ranks together
TRANSFER_S = 1e-3  # per gloo transfer, beyond its bytes (the old per-rate alpha: 1.7-7 ms)


@dataclass(frozen=True)
class Point:
    collective: str
    bytes: int
    warmup: int
    repeats: int  # the least timed calls
    max_repeats: int = 0  # the most (0: exactly `repeats`)
    target_spread: float = 0.0  # stop once IQR / median is under this (0: never early)
    max_s: float = 3600.0  # stop once the point's timed calls have taken this long


def layout(collective: str, sites: int) -> str:
    """Which of LAYOUTS a measured point is."""
    if sites == 1:
        return LAYOUTS[0]
    return LAYOUTS[2] if collective == gloo_algos.HIERARCHICAL else LAYOUTS[1]


def estimate_s(
    collective: str, nbytes: int, workers: int, rate_bps: float, wan_bps: float | None = None
) -> float:
    """Rough wire time of one call (for planning only: 95 % payload share, no latency); with a
    WAN, its bytes per direction at its rate where that is slower."""
    sent = gloo_algos.bytes_sent_per_rank(collective, nbytes, workers)
    host = sent * 8 / (0.95 * rate_bps)
    if not wan_bps:
        return host
    wan = gloo_algos.wan_bytes_per_direction(collective, nbytes, workers) * 8 / (0.95 * wan_bps)
    if collective == gloo_algos.HIERARCHICAL:  # the stages are in series
        n = workers // gloo_algos.SITES
        intra = 2 * (n - 1) / n * nbytes * 8 / (0.95 * rate_bps)
        return intra + max(wan, nbytes / n * 8 / (0.95 * rate_bps))
    return max(host, wan)


def planning_s(
    collective: str, nbytes: int, workers: int, rate_bps: float, wan_bps: float | None = None
) -> float:
    """What one call is expected to take here: the wire time or the machine's throughput for
    every rank's bytes, whichever is slower, plus a cost per gloo transfer (two in flight)."""
    wire = estimate_s(collective, nbytes, workers, rate_bps, wan_bps)
    sent = gloo_algos.bytes_sent_per_rank(collective, nbytes, workers)
    if collective == "all_reduce":
        messages = 2 * (workers - 1)
    elif collective == gloo_algos.HIERARCHICAL:
        messages = 2 * (workers // gloo_algos.SITES - 1) + 2 * (gloo_algos.SITES - 1)
    else:
        messages = workers - 1
    transfers = messages * gloo_algos.segments_per_message(collective, nbytes, workers) / 2
    return max(wire, workers * sent * 8 / MACHINE_BPS) + transfers * TRANSFER_S


def planned_calls(point: Point, est_s: float) -> int:
    """The most timed calls a point can take: its repeat cap, or as many as its time cap allows
    (at least its minimum)."""
    cap = max(point.repeats, point.max_repeats)
    by_time = math.ceil(point.max_s / max(est_s + SYNC_S, 1e-6))
    return min(cap, max(point.repeats, by_time))


def estimate_launch_s(points: list[Point], workers: int, rate_bps: float, wan_bps=None) -> float:
    """Worst case of one launch: startup, then every point to its cap."""
    total = LAUNCH_S
    for p in points:
        est = planning_s(p.collective, p.bytes, workers, rate_bps, wan_bps)
        total += (p.warmup + planned_calls(p, est)) * (est + SYNC_S)
    return total


def plan_points(
    rate_bps: float,
    workers: int,
    sizes: list[int],
    collectives: list[str],
    *,
    call_limit_s: float,
    budget_s: float,
    repeats: tuple[int, int],
    warmup: int,
    target_spread: float = 0.05,
    wan_bps: float | None = None,
) -> list[Point]:
    """Every (collective, size) whose call fits in call_limit_s; at least repeats[0] timed
    calls, then more until the spread is under target_spread, at most repeats[1] or budget_s
    of calls. With a WAN (two sites) the hierarchical all-reduce is measured beside the flat
    collectives."""
    if wan_bps and gloo_algos.HIERARCHICAL not in collectives:
        collectives = [*collectives, gloo_algos.HIERARCHICAL]
    points = []
    for collective in collectives:
        for nbytes in sizes:
            est = planning_s(collective, nbytes, workers, rate_bps, wan_bps)
            if est > call_limit_s:
                continue
            points.append(Point(collective, nbytes, warmup, repeats[0], repeats[1],
                                target_spread, budget_s))  # fmt: skip
    return points


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def launch_in(testbed: Testbed, i: int, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    """argv in host i's namespace, in a session of its own, recorded as the testbed's."""
    with log.open("w") as stream:
        proc = subprocess.Popen(
            testbed.exec_argv(i, argv),
            env=env,
            stdout=stream,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        testbed.started(proc.pid)
    except BaseException:
        stop_all([proc])
        raise
    return proc


def wait_all(procs: list[subprocess.Popen], deadline: float, logs: list[Path]) -> None:
    """Wait (bounded) for every process; TestbedError with the first failure's last line."""
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        failed = [k for k, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            lines = logs[failed[0]].read_text(errors="replace").strip().splitlines()
            raise TestbedError(
                f"testbed: rank {failed[0]} failed: {lines[-1] if lines else codes[failed[0]]}"
            )
        if all(c == 0 for c in codes):
            return
        time.sleep(0.05)
    raise TestbedError("testbed: ranks did not finish before the deadline")


def rank_env(testbed: Testbed, rank: int, world: int, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR=testbed.address(0),
        MASTER_PORT=str(port),
        GLOO_SOCKET_IFNAME="eth0",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
    )
    return env


def measure_rtt(testbed: Testbed, port: int, count: int = 400, far: int = 1) -> float:
    """Median TCP round trip h0 <-> h<far> (1-byte ping-pong), seconds."""
    if testbed.hosts < 2:
        return 0.0
    with tempfile.TemporaryDirectory(prefix="tsb-probe-") as tmp:
        logs = [Path(tmp) / "serve.log", Path(tmp) / "ping.log"]
        module = [sys.executable, "-m", "transitsim.testbed.probe"]
        env = rank_env(testbed, 0, 1, port)
        addr = testbed.address(far)
        procs = [
            launch_in(testbed, far, [*module, "serve", addr, str(port), str(count)], env, logs[0])
        ]
        try:
            procs.append(launch_in(testbed, 0, [*module, "ping", addr, str(port), str(count)], env,
                                 logs[1]))  # fmt: skip
            wait_all(procs, time.monotonic() + 60.0, logs)
        finally:
            stop_all(procs)
        return float(logs[1].read_text().split()[-1])


def run_ranks(testbed: Testbed, workers: int, points: list[Point], port: int) -> list[dict]:
    """Run the plan on hosts 0..workers-1; one dict per point with every rank's times."""
    wan = testbed.wan_shaping.rate_bps if testbed.sites == 2 and testbed.wan_shaping else None
    budget = 0.0
    for p in points:
        est = planning_s(p.collective, p.bytes, workers, testbed.shaping.rate_bps, wan)
        budget += (p.warmup + planned_calls(p, est)) * (est * 8 + 0.1)
    plan = {"points": [asdict(p) for p in points], "deadline_s": budget + 60, "timeout_s": 300,
            "sites": testbed.sites}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tsb-run-") as tmp:
        plan_path = Path(tmp) / "plan.json"
        plan_path.write_text(json.dumps(plan))
        outs = [Path(tmp) / f"rank{r}.json" for r in range(workers)]
        logs = [Path(tmp) / f"rank{r}.log" for r in range(workers)]
        argv = [sys.executable, "-m", "transitsim.testbed.worker", str(plan_path)]
        procs = []
        try:
            for r in range(workers):
                env = rank_env(testbed, r, workers, port)
                host = testbed.rank_host(r, workers)
                procs.append(launch_in(testbed, host, [*argv, str(outs[r])], env, logs[r]))
            wait_all(procs, time.monotonic() + STARTUP_S + budget + 60, logs)
        finally:
            stop_all(procs)
        ranks = [json.loads(o.read_text()) for o in outs]
    merged = []
    for k, point in enumerate(points):
        if any(len(rank["points"]) <= k for rank in ranks):
            break  # a rank's deadline cut the plan short
        starts = np.array([rank["points"][k]["starts"] for rank in ranks])  # (ranks, repeats)
        ends = np.array([rank["points"][k]["ends"] for rank in ranks])
        first = ranks[0]["points"][k]
        merged.append({
            **asdict(point), "repeats": starts.shape[1], "min_repeats": point.repeats,
            "starts": starts, "ends": ends, "stop": first["stop"],
            "load_start": first["load_start"], "load_end": first["load_end"],
            "foreign_running": first.get("foreign_running", math.nan),
        })  # fmt: skip
    return merged


def run_counted(
    testbed: Testbed, workers: int, points: list[Point], port: int
) -> tuple[list[dict], float]:
    """run_ranks, and the payload share of the bytes tbf counted on those ranks' uplinks."""
    before = testbed.qdisc_bytes()
    merged = run_ranks(testbed, workers, points, port)
    after = testbed.qdisc_bytes()
    hosts = [testbed.host(testbed.rank_host(r, workers)) for r in range(workers)]
    wire = sum(after[h][0] - before[h][0] for h in hosts)
    return merged, (_payload_sent(merged, workers) / wire if wire else float("nan"))


def summarise(merged: dict, workers: int) -> dict:
    """Median and spread of one point's time; the ranks' median start offsets."""
    starts, ends = merged["starts"], merged["ends"]
    times = ends.max(axis=0) - starts.min(axis=0)
    offsets = np.median(starts - starts.min(axis=0), axis=1)
    q25, q75 = np.percentile(times, [25, 75])
    return {
        "collective": merged["collective"],
        "workers": workers,
        "bytes": merged["bytes"],
        "warmup": merged["warmup"],
        "repeats": len(times),
        "repeat_stop": merged.get("stop", "max repeats"),
        "target_spread": float(merged.get("target_spread", 0.0)),
        "load_start": float(merged.get("load_start", math.nan)),
        "load_end": float(merged.get("load_end", math.nan)),
        "foreign_running": float(merged.get("foreign_running", math.nan)),
        "median_s": float(np.median(times)),
        "min_s": float(times.min()),
        "max_s": float(times.max()),
        "iqr_s": float(q75 - q25),
        "spread": float((q75 - q25) / np.median(times)),
        "start_skew_s": float(np.median(starts.max(axis=0) - starts.min(axis=0))),
        "start_offsets_s": json.dumps([round(float(x), 9) for x in offsets]),
        "gloo_algorithm": gloo_algos.describe(merged["collective"], merged["bytes"], workers),
    }


def _payload_sent(merged: list[dict], workers: int) -> float:
    """Payload bytes the ranks' host uplinks carried (collective calls only, all ranks)."""
    return sum(
        (m["warmup"] + m["repeats"]) * workers
        * gloo_algos.bytes_sent_per_rank(m["collective"], m["bytes"], workers)
        for m in merged
    )  # fmt: skip


def point_rows(
    testbed: Testbed,
    merged: list[dict],
    workers: int,
    efficiency: float,
    rtt: float,
    rtt_wan: float = 0.0,
) -> list[dict]:
    """One table row per measured point of one launch on `testbed` (as it is shaped now)."""
    wan = testbed.wan_shaping.rate_bps if testbed.sites == 2 and testbed.wan_shaping else 0.0
    return [
        {
            "rate_bps": testbed.shaping.rate_bps,
            **summarise(m, workers),
            "rtt_s": rtt,
            "qdisc_efficiency": efficiency,
            "sites": testbed.sites,
            "layout": layout(m["collective"], testbed.sites),
            "wan_rate_bps": wan,
            "rtt_wan_s": rtt_wan,
            "tbf_burst_bytes": testbed.shaping.burst_bytes,
            "tbf_latency_s": testbed.shaping.queue_latency_s,
            "wan_tbf_latency_s": testbed.wan_shaping.queue_latency_s if wan else 0.0,
            "mtu": 1500,
        }
        for m in merged
    ]


def warn_if_loaded(log=None) -> float:
    """The 1-minute load average now; a warning on stderr when it is above LOAD_LIMIT."""
    load = os.getloadavg()[0]
    if load > LOAD_LIMIT:
        print(
            f"warning: 1-minute load average {load:.2f} > {LOAD_LIMIT} before the run starts: "
            "the machine is not quiet, and every point will record it (load_start, load_end)",
            file=sys.stderr,
            flush=True,
        )
    return load


def measure_grid(
    rates_bps: list[float],
    workers_list: list[int],
    sizes: list[int],
    collectives: list[str],
    *,
    call_limit_s: float = 2.0,
    budget_s: float = 3.0,
    repeats: tuple[int, int] = (5, 30),
    warmup: int = 2,
    target_spread: float = 0.05,
    sites: int = 1,
    wan_rate_bps: float | None = None,
    wan_queue_s: float = 0.05,
    log=print,
) -> pd.DataFrame:
    """Build one testbed (max workers hosts, split over `sites`), measure every point, tear it
    down."""
    cleanup_leftovers()
    rows = []
    hosts = max(max(workers_list), 2)
    port = BASE_PORT
    load = warn_if_loaded()
    wan = None
    if sites == 2 and wan_rate_bps:
        wan = Shaping(wan_rate_bps, Shaping.for_rate(wan_rate_bps).burst_bytes, wan_queue_s)
    wan_bps = wan.rate_bps if wan else None
    testbed = Testbed(hosts, Shaping.for_rate(rates_bps[0]), sites=sites, wan_shaping=wan)
    with signals_raise(), testbed:
        for rate in rates_bps:
            shaping = Shaping.for_rate(rate)
            testbed.shape(shaping)
            port += 1
            rtt = measure_rtt(testbed, port)
            rtt_wan = 0.0
            if sites == 2:
                port += 1
                rtt_wan = measure_rtt(testbed, port, far=hosts // 2)
            burst = shaping.burst_bytes
            log(f"rate {rate / 1e6:g} Mb/s: tbf burst {burst} B, rtt {rtt * 1e6:.0f} us"
                + (f", across the WAN {rtt_wan * 1e6:.0f} us" if sites == 2 else ""))  # fmt: skip
            for workers in workers_list:
                points = plan_points(rate, workers, sizes, collectives, call_limit_s=call_limit_s,
                                     budget_s=budget_s, repeats=repeats, warmup=warmup,
                                     target_spread=target_spread, wan_bps=wan_bps)  # fmt: skip
                if not points:
                    continue
                port += 1
                t0 = time.monotonic()
                merged, efficiency = run_counted(testbed, workers, points, port)
                log(f"  {workers} workers: {len(merged)} points in {time.monotonic() - t0:.0f} s, "
                    f"payload share of tbf bytes {efficiency:.4f}")  # fmt: skip
                rows += point_rows(testbed, merged, workers, efficiency, rtt, rtt_wan)
    frame = pd.DataFrame(rows)
    frame["kernel"] = platform.release()
    frame["cpus"] = os.cpu_count()
    frame["loadavg_1m_at_start"] = round(load, 2)
    frame["torch"] = _torch_version()
    return frame


def _torch_version() -> str:
    """The installed torch's version, from its metadata (importing it costs seconds here)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def median_abs(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values) if values else float("nan")
