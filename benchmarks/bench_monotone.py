"""Monotone physics (issue 44 item 1): the violation count over a larger sweep than the test's.

Every collective x axis (bytes around every boundary, latency, rate, one late rank) x seed, on
random networks of every fabric (tests/monotone_cases.py), each point timed on the DES and on
"auto" (the fast path where exact). A violation is a point that finishes sooner than the point
before it by more than 1e-9 relative where the same algorithm and protocol would not have; a
fall where NCCL mode changed its choice (NCCL's tuner: algorithm, protocol; NCCL's channel
floor: channels), and the earlier choice does not fall, is counted apart as a tuner switch
(NCCL's own times fall there too). Prints the counts per
collective, axis and method, each one found, and the wall time.

    .venv/bin/python benchmarks/bench_monotone.py --seeds 20
    .venv/bin/python benchmarks/bench_monotone.py --seeds 5 --small   # the test's sizes
    .venv/bin/python benchmarks/bench_monotone.py --dense   # fine walks on one switch
"""

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from monotone_cases import classify, dense_walks, sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="random networks per axis")
    parser.add_argument("--first", type=int, default=100, help="the first seed (the test: 0)")
    parser.add_argument("--small", action="store_true", help="the test's sizes (<= 128 KiB)")
    parser.add_argument(
        "--dense", action="store_true", help="fine latency and late-rank walks instead"
    )
    args = parser.parse_args()
    print(f"cpu count {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}")
    if args.dense:
        dense()
        return
    began = time.perf_counter()
    walks = points = 0
    found: collections.Counter = collections.Counter()
    switched: collections.Counter = collections.Counter()
    seeds = range(args.first, args.first + args.seeds)
    for algo, axis, seed, method, walk, bad, switches in sweep(seeds, small=args.small):
        walks += 1
        points += len(walk)
        for what, falls, counter in (
            ("violation", bad, found),
            ("tuner switch", switches, switched),
        ):
            for index, before, after in falls:
                counter[(algo, axis, method)] += 1
                network, exchange, start = walk[index]
                print(
                    f"   {what}: {algo} {axis} seed {seed} {method}: {before * 1e6:.4f} us -> "
                    f"{after * 1e6:.4f} us ({network.name}, {network.workers} workers, "
                    f"{exchange.payload_bytes} B, nccl {network.nccl is not None})"
                )
    print(
        f"{walks} walks, {points} points each on its method: {sum(found.values())} violations; "
        f"{sum(switched.values())} falls at NCCL's switches of algorithm, protocol or channels "
        "(not counted as violations)"
    )
    for (algo, axis, method), count in sorted(found.items()):
        print(f"   {algo:<19} {axis:<8} {method:<5} {count}")
    print(f"wall {time.perf_counter() - began:.1f} s; load average {os.getloadavg()[0]:.2f}")


def dense() -> None:
    """The fine walks (monotone_cases.dense_walks): each fall, then the count per collective,
    axis and method, and how many walks fell at all."""
    began = time.perf_counter()
    walks = points = 0
    found: collections.Counter = collections.Counter()
    fell: collections.Counter = collections.Counter()
    for algo, axis, label, walk in dense_walks():
        for method in ("auto", "des"):
            walks += 1
            points += len(walk)
            bad, _ = classify(walk, method)
            found[(algo, axis, method)] += len(bad)
            fell[(algo, axis, method)] += bool(bad)
            for index, before, after in bad:
                network, _, start = walk[index]
                print(
                    f"   violation: {algo} {axis} {method} ({label}): latency "
                    f"{network.host_link.latency_s * 1e6:.2f} us, last rank "
                    f"{start[-1] * 1e6:.0f} us late: {before * 1e6:.2f} -> {after * 1e6:.2f} us "
                    f"({after / before - 1:+.2%})"
                )
    print(f"{walks} dense walks, {points} points: {sum(found.values())} violations")
    for key in sorted(found):
        algo, axis, method = key
        print(f"   {algo:<19} {axis:<8} {method:<5} {found[key]:3d} in {fell[key]} walks")
    print(f"wall {time.perf_counter() - began:.1f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
