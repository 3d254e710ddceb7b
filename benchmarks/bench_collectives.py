"""One ring all-reduce step of N workers in 2 datacentres: the fast recurrence against the naive
per-transfer SimPy loop, measured in the same run on the same inputs (stragglers included).

    .venv/bin/python benchmarks/bench_collectives.py            # N = 1024 both ways, and 256
    .venv/bin/python benchmarks/bench_collectives.py --quick    # the naive loop at 256 only

Prints wall seconds, SimPy events and events/s of each, whether the two agree bit for bit, and
the speed-up of the fast path over the naive loop at each N.
"""

import argparse

import numpy as np
from common import DENSE, timed, two_datacentres

from transitsim.network import Exchange, NetworkSpec, simulate_exchange

WAN_BPS = 100e9


def step(network: NetworkSpec, start_s: np.ndarray, method: str):
    """One ring all-reduce of the dense delta, and its wall seconds."""
    exchange = Exchange("ring_allreduce", DENSE)
    return timed(lambda: simulate_exchange(network, exchange, start_s=start_s, method=method))


def compare(workers: int, repeats: int) -> None:
    network = two_datacentres(workers, WAN_BPS)
    start_s = np.random.default_rng(0).exponential(20e-6, workers)  # stragglers
    fast, cold_wall = step(network, start_s, "fast")  # includes building the network once
    fast_wall = min(step(network, start_s, "fast")[1] for _ in range(max(repeats - 1, 1)))
    naive, naive_wall = step(network, start_s, "des")
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
        network = two_datacentres(1024, WAN_BPS)
        start_s = np.random.default_rng(0).exponential(20e-6, 1024)
        result, wall = step(network, start_s, "fast")
        print(f"N = 1024 fast only: {wall:.3f} s wall, {result.events:,} events")


if __name__ == "__main__":
    main()
