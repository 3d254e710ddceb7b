"""Bring your own run, calibration: the loopback link the example ran on, measured and fitted.

With the example's own gloo group (2 processes on this machine), time `all_reduce` of float32
tensors at a few sizes (median of repeats), then fit transitsim's ring all-reduce on a 2-host
switch to it. For P hosts the ring sends 2(P-1) messages of S/P bytes one after another, so

    T(S) = 2(P-1) * overhead + 2(P-1)/P * S * 8 / rate

a straight line in S: its slope gives the host link's rate, its intercept the per-message
overhead (two physical parameters, a Theil-Sen line: robust to one slowed point). The network
YAML is what `transitsim replay --network` takes; its comment block holds the measured points
beside the fitted line.
"""

import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist

SIZES = [2**k for k in range(16, 24)]  # 64 KiB .. 8 MiB
REPEATS = 15


def measure(sizes: list[int] = SIZES, repeats: int = REPEATS) -> list[tuple[int, float]]:
    """(bytes, median seconds) of one all-reduce per size, every rank in step (a barrier first)."""
    points = []
    for size in sizes:
        tensor = torch.ones(size // 4, dtype=torch.float32)
        times = []
        for _ in range(repeats + 1):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            times.append(time.perf_counter() - start)
        points.append((size, statistics.median(times[1:])))
    return points


def fit(points: list[tuple[int, float]], workers: int) -> tuple[float, float]:
    """(rate in bits/s, per-message overhead in s) of the line through the points: Theil-Sen
    (the median of the pairwise slopes, then the median intercept), so that one size slowed by
    another user's burst on a shared machine does not tilt the line."""
    slopes = [
        (t2 - t1) / (s2 - s1)
        for i, (s1, t1) in enumerate(points)
        for s2, t2 in points[i + 1 :]
        if s2 != s1
    ]
    slope = statistics.median(slopes)
    intercept = statistics.median(t - slope * s for s, t in points)
    messages = 2 * (workers - 1)
    rate = messages / workers * 8.0 / slope
    return rate, max(intercept, 0.0) / messages


def network_yaml(points: list[tuple[int, float]], workers: int) -> str:
    rate, overhead = fit(points, workers)
    messages = 2 * (workers - 1)

    def line(size: int) -> float:
        return messages * overhead + messages / workers * size * 8.0 / rate

    lines = [
        "# The loopback link of examples/byo_run, calibrated by examples/byo_run/calibrate.py:",
        f"# gloo all_reduce on {workers} processes of this machine, median of {REPEATS} each.",
        "# bytes, measured seconds, the fitted line's seconds, its error:",
        *[
            f"#   {size}, {seconds:.6f}, {line(size):.6f}, {(line(size) - seconds) / seconds:+.1%}"
            for size, seconds in points
        ],
        "name: loopback-gloo",
        "topology: switch",
        f"workers: {workers}",
        "collective: ring_allreduce",
        "host_link:",
        f'  rate: "{rate / 1e9:.6g} Gb/s"',
        f'  overhead: "{overhead * 1e6:.6g} us"',
        'switch: {forwarding_latency: "0 s"}',
    ]
    return "\n".join(lines) + "\n"


def calibrate(rank: int, workers: int, path: Path) -> None:
    """Measure on every rank; rank 0 writes the fitted network YAML (atomically)."""
    points = measure()
    if rank != 0:
        return
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(network_yaml(points, workers), encoding="utf-8")
    tmp.replace(path)
    print(f"calibrated loopback: {path}")
