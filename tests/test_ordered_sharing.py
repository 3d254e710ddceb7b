"""The fixed-order sharing rule measured by benchmarks/bench_ordered_sharing.py (issue 44 item 1,
a proposal, not the engine's rule): it must time a schedule with one transfer a link exactly as
the DES does, and not fall where the engine's max-min sharing does (docs/engine.md "Monotone
physics")."""

import numpy as np
from bench_scripts import load_bench

from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange

bench = load_bench("bench_ordered_sharing")


def test_a_ring_with_one_transfer_a_link_is_timed_as_the_des_times_it():
    network = NetworkSpec("sw", "switch", 6, LinkSpec(100e9, latency_s=5e-6))
    start = np.array([0.0, 3e-6, 0.0, 2e-5, 0.0, 1e-6])
    for algo in ("ring_allreduce", "ring_allgather"):
        exchange = Exchange(algo, 3_000_001)
        des = simulate_exchange(network, exchange, start_s=start, method="des").finish_s.max()
        assert bench.ordered_time(network, exchange, start) == des


def test_the_issues_late_root_falls_under_max_min_and_not_under_the_fixed_order():
    """One tree of 8 ranks, 1 MiB, 100 Gb/s, 1 us: the root 100 us late ends sooner than 20 us
    late under max-min (the engine today); the fixed order grows with the lateness."""
    network = NetworkSpec("sw", "switch", 8, LinkSpec(100e9, latency_s=1e-6))
    exchange = Exchange("tree", 1 << 20)
    max_min, ordered = [], []
    for late in (0.0, 2e-5, 1e-4):
        start = np.zeros(8)
        start[0] = late
        max_min.append(simulate_exchange(network, exchange, start_s=start).finish_s.max())
        ordered.append(bench.ordered_time(network, exchange, start))
    assert max_min[2] < max_min[1]
    assert ordered[0] <= ordered[1] <= ordered[2]
