"""One ring all-reduce step of N workers in 2 datacentres: the fast recurrence against the naive
per-transfer SimPy loop, measured in the same run on the same inputs (stragglers included).

    .venv/bin/python benchmarks/bench_collectives.py            # N = 1024 both ways, and 256
    .venv/bin/python benchmarks/bench_collectives.py --quick    # the naive loop at 256 only

Prints wall seconds, SimPy events and events/s of each, whether the two agree bit for bit, and
the speed-up of the fast path over the naive loop at each N.
"""

import argparse
import time

import numpy as np

from transitsim.network import Exchange, LinkSpec, NetworkSpec, SwitchSpec, simulate_exchange

PAYLOAD_BYTES = 31_666_944  # the dense BF16 delta of the worked 15.8 M parameter model


def two_datacentres(workers: int) -> NetworkSpec:
    return NetworkSpec(
        f"2dc-{workers}",
        "datacentres",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9),
        datacentres=2,
        wan_link=LinkSpec(100e9, length_m=1e6),
    )


def timed(network: NetworkSpec, start_s: np.ndarray, method: str):
    began = time.perf_counter()
    result = simulate_exchange(
        network, Exchange("ring_allreduce", PAYLOAD_BYTES), start_s=start_s, method=method
    )
    return result, time.perf_counter() - began


def compare(workers: int, repeats: int) -> None:
    network = two_datacentres(workers)
    start_s = np.random.default_rng(0).exponential(20e-6, workers)  # stragglers
    fast, cold_wall = timed(network, start_s, "fast")  # includes building the network once
    fast_wall = min(timed(network, start_s, "fast")[1] for _ in range(max(repeats - 1, 1)))
    naive, naive_wall = timed(network, start_s, "des")
    same = np.array_equal(fast.finish_s, naive.finish_s)
    transfers = 2 * (workers - 1) * workers
    print(f"N = {workers}: {transfers:,} transfers, simulated step {fast.time_s * 1e3:.6f} ms")
    rows = (
        ("fast (first call)", fast, cold_wall),
        ("fast (warm, best)", fast, fast_wall),
        ("naive per-transfer", naive, naive_wall),
    )
    for name, result, wall in rows:
        print(
            f"  {name:19s} {wall:9.3f} s wall  {result.events:>10,} events  "
            f"{result.events / wall:>11,.0f} events/s  {transfers / wall:>13,.0f} transfers/s"
        )
    print(
        f"  identical finish times: {same};  speed-up: {naive_wall / fast_wall:,.0f}x warm, "
        f"{naive_wall / cold_wall:,.0f}x first call"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the naive loop at N = 1024")
    parser.add_argument("--repeats", type=int, default=3, help="fast-path repeats (best kept)")
    args = parser.parse_args()
    for workers in (256,) if args.quick else (256, 1024):
        compare(workers, args.repeats)
    if args.quick:
        network = two_datacentres(1024)
        start_s = np.random.default_rng(0).exponential(20e-6, 1024)
        result, wall = timed(network, start_s, "fast")
        print(f"N = 1024 fast only: {wall:.3f} s wall, {result.events:,} events")


if __name__ == "__main__":
    main()
