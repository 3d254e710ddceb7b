"""The trees' compiled event pass (fast/trees/kernel.py) against the Python pass it replaces.

Both walk the same schedule: the compiled one must give every message's ready, sent and arrival
time, the resource that set its rate, each link's busy time and the event count equal bit for
bit, on random networks where the halves share links (with transforms, latencies, overheads,
store-and-forward and stragglers). Against the DES the fast path is held in
tests/test_network_fast_vs_des.py, which now runs through the compiled pass.
"""

import numpy as np
import pytest

from transitsim.network import (
    Exchange,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
    simulate_exchange,
)
from transitsim.network.exchange import fabric_for, transform_weights, tree_dag
from transitsim.network.fast import NotExact
from transitsim.network.fast.trees.compiled import TIMED_BY
from transitsim.network.fast.trees.split import run_split_tree

FIELDS = ("ready_s", "free_s", "arrive_s", "stall_s", "stall0_s", "shared_by", "busy_s", "bytes")


def _case(seed: int, algo: str):
    rng = np.random.default_rng([seed, len(algo)])
    link = LinkSpec(
        float(rng.choice([25e9, 100e9, 200e9])),
        latency_s=float(rng.choice([0.0, 1e-6, 5e-6])),
        length_m=float(rng.choice([0.0, 3.0])),
        overhead_s=float(rng.choice([0.0, 2e-7])),
    )
    transform = rng.random() < 0.3
    pluggable = None
    if transform or rng.random() < 0.3:
        optics = TransformSpec(passes_per_s=float(rng.choice([1e8, 1e9]))) if transform else None
        pluggable = PluggableSpec(float(rng.choice([200e9, 800e9])), 400e9, optics)
    switch = SwitchSpec(
        forwarding_latency_s=float(rng.choice([0.0, 5e-7])),
        store_and_forward=bool(rng.random() < 0.3),
    )
    workers = int(rng.integers(3, 40))
    network = NetworkSpec("sw", "switch", workers, link, pluggable, switch)
    payload = int(rng.choice([777, 50_000, 300_001, 2_000_000]))
    if transform:
        exchange = Exchange(algo, payload, 16 * payload, "pluggable")
    else:
        exchange = Exchange(algo, payload)
    start = rng.exponential(float(rng.choice([1e-7, 1e-5, 1e-3])), workers)
    if rng.random() < 0.3:
        start = np.zeros(workers)
    return network, exchange, start


@pytest.mark.parametrize("algo", ["tree", "double_binary_tree"])
def test_the_compiled_pass_equals_the_python_pass_bit_for_bit(algo):
    compared = 0
    for seed in range(60):
        network, exchange, start = _case(seed, algo)
        fabric = fabric_for(network)
        weights = transform_weights(network, exchange)
        _, _, _, table, links = tree_dag(fabric, exchange, weights)
        if isinstance(links, NotExact) or not links.overlap:
            continue
        compared += 1
        python = run_split_tree(fabric, table, links, start, None, compiled=False)
        kernel = run_split_tree(fabric, table, links, start, None, compiled=True)
        for name in FIELDS:
            np.testing.assert_array_equal(
                getattr(kernel, name), getattr(python, name), err_msg=f"{seed} {name}"
            )
        assert kernel.events == python.events, seed
    assert compared >= 40, f"only {compared} of 60 cases had overlapping halves"


def test_a_step_through_the_compiled_pass_is_the_des_step():
    """One exchange end to end (simulate_exchange's fast path, now compiled) against the DES."""
    network = NetworkSpec("sw", "switch", 24, LinkSpec(100e9, latency_s=1e-6))
    exchange = Exchange("double_binary_tree", 1_000_000)
    start = np.random.default_rng(3).exponential(1e-5, 24)
    fast = simulate_exchange(network, exchange, start_s=start)
    des = simulate_exchange(network, exchange, start_s=start, method="des")
    assert fast.method == "fast"
    np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=0, atol=1e-9)


@pytest.mark.parametrize("algo", ["tree", "double_binary_tree"])
def test_max_min_across_a_wan_equals_the_des(algo):
    """Across datacentres the WAN carries several senders' transfers to several receivers and is
    slower than the hosts' links: the compiled pass shares each component by progressive
    filling, as the DES does over its links."""
    for seed, (sites, per) in enumerate([(2, 6), (2, 9), (3, 4)]):
        rng = np.random.default_rng(seed)
        network = NetworkSpec(
            "dc",
            "datacentres",
            sites * per,
            LinkSpec(100e9, latency_s=float(rng.choice([0.0, 1e-6]))),
            datacentres=sites,
            wan_link=LinkSpec(float(rng.choice([10e9, 40e9])), length_m=1e4),
        )
        exchange = Exchange(algo, int(rng.choice([300_001, 2_000_000])))
        start = rng.exponential(1e-5, network.workers)
        fast = simulate_exchange(network, exchange, start_s=start)
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        assert fast.method == "fast", seed
        np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=0, atol=1e-9, err_msg=seed)
        assert fast.bottleneck == des.bottleneck, seed
        np.testing.assert_allclose(
            fast.link_stats["busy_s"].to_numpy(), des.link_stats["busy_s"].to_numpy(), atol=1e-12
        )


def _two_sites(seed: int, algo: str):
    """Two or three sites far apart (where transfers often move alone) or close (where not)."""
    rng = np.random.default_rng([seed, len(algo), 7])
    sites = int(rng.choice([2, 3]))
    network = NetworkSpec(
        "dc",
        "datacentres",
        sites * int(rng.integers(2, 12)),
        LinkSpec(
            float(rng.choice([100e9, 200e9])), latency_s=float(rng.choice([0.0, 1e-6])), length_m=3
        ),
        switch=SwitchSpec(forwarding_latency_s=float(rng.choice([0.0, 5e-7]))),
        datacentres=sites,
        wan_link=LinkSpec(float(rng.choice([40e9, 400e9])), length_m=float(rng.choice([1e3, 1e6]))),
    )
    exchange = Exchange(algo, int(rng.choice([50_000, 2_000_000, 31_000_000])))
    start = rng.exponential(float(rng.choice([1e-5, 1e-3])), network.workers)
    return network, exchange, start


def _timed_by(fabric, table, links, start) -> tuple:
    """run_split_tree without faults, and how it was timed (tree_compiled.TIMED_BY): "alone"
    (one pass), "repaired" (fast/trees/repair.py: the few that met by the event pass, the
    rest by the one pass) or "event" (the whole event pass, the others having declined)."""
    before = TIMED_BY.copy()
    timing = run_split_tree(fabric, table, links, start, None)
    (how,) = (TIMED_BY - before).keys()
    return how, timing


def _equal_to_the_event_pass(fabric, table, links, start, label) -> str:
    """The step as the fast path times it equal to the whole event pass's; how it was timed."""
    how, one = _timed_by(fabric, table, links, start)
    events = run_split_tree(fabric, table, links, start, None, alone=False)
    for name in FIELDS:
        np.testing.assert_array_equal(
            getattr(one, name), getattr(events, name), err_msg=f"{label} {name}"
        )
    assert one.events == events.events, label
    return how


@pytest.mark.parametrize("algo", ["tree", "double_binary_tree"])
def test_the_lone_transfers_pass_equals_the_event_pass_bit_for_bit(algo):
    """fast/trees/alone.py claims the event pass's floats wherever no two transfers meet on a
    group, and says so only then: on one switch and across sites, both passes on every case,
    every field equal; the one pass must have held on some cases and been refused on others."""
    taken = []
    for seed in range(80):
        network, exchange, start = _case(seed, algo) if seed % 2 else _two_sites(seed, algo)
        fabric = fabric_for(network)
        weights = transform_weights(network, exchange)
        _, _, _, table, links = tree_dag(fabric, exchange, weights)
        if isinstance(links, NotExact) or not links.overlap:
            continue
        for again in range(2):  # the second time from the group orders the first one kept
            taken.append(_equal_to_the_event_pass(fabric, table, links, start * (1 + again), seed))
    assert taken.count("alone") >= 10, taken
    assert taken.count("repaired") + taken.count("event") >= 10, taken


def _far_sites(seed: int, algo: str):
    """Two or three sites 100-1,000 km apart with stragglers: most transfers move alone, a
    few meet (the benchmark's 1b shape, small)."""
    rng = np.random.default_rng([seed, 11])
    sites = int(rng.choice([2, 3]))
    network = NetworkSpec(
        "dc",
        "datacentres",
        sites * int(rng.integers(3, 24)),
        LinkSpec(
            float(rng.choice([100e9, 200e9])), latency_s=float(rng.choice([0.0, 1e-6])), length_m=3
        ),
        switch=SwitchSpec(forwarding_latency_s=float(rng.choice([0.0, 5e-7]))),
        datacentres=sites,
        wan_link=LinkSpec(
            float(rng.choice([100e9, 400e9])), length_m=float(rng.choice([1e5, 1e6]))
        ),
    )
    exchange = Exchange(algo, int(rng.choice([2_000_000, 8_000_000, 31_000_000])))
    start = rng.exponential(float(rng.choice([3e-4, 1.5e-3])), network.workers)
    return network, exchange, start


def test_a_few_transfers_that_meet_are_repaired_bit_for_bit():
    """fast/trees/repair.py: where a few transfers meet, those few by the event pass and the
    rest by the one pass, until both agree, must be the whole event pass's floats (every
    field and the event count); it must have repaired some steps, and where it refuses (a tie
    whose order rests on the whole pass) the event pass runs. Against the DES too."""
    taken = []
    against_des = 0
    for seed in range(60):
        network, exchange, start = _far_sites(seed, "double_binary_tree")
        fabric = fabric_for(network)
        _, _, _, table, links = tree_dag(fabric, exchange, transform_weights(network, exchange))
        assert not isinstance(links, NotExact) and links.overlap
        taken.append(_equal_to_the_event_pass(fabric, table, links, start, seed))
        if taken[-1] == "repaired" and against_des < 3:
            against_des += 1
            fast = simulate_exchange(network, exchange, start_s=start)
            des = simulate_exchange(network, exchange, start_s=start, method="des")
            np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=0, atol=1e-9)
            assert fast.bottleneck == des.bottleneck, seed
    assert taken.count("repaired") >= 5 and against_des == 3, taken


def test_lone_transfers_across_a_long_wan_equal_the_des():
    """The benchmark's shape, small: two sites 1,000 km apart, where transfers move alone or
    a few meet (the one pass, repaired where they do, never the whole event pass) and the DES
    agrees."""
    taken = []
    for seed, workers in enumerate([8, 14, 22]):
        network = NetworkSpec(
            "dc",
            "datacentres",
            workers,
            LinkSpec(200e9, length_m=3),
            switch=SwitchSpec(forwarding_latency_s=500e-9),
            datacentres=2,
            wan_link=LinkSpec(400e9, length_m=1e6),
        )
        exchange = Exchange("double_binary_tree", 4_000_000)
        start = np.random.default_rng(seed).exponential(1.5e-3, workers)
        fabric = fabric_for(network)
        _, _, _, table, links = tree_dag(fabric, exchange, transform_weights(network, exchange))
        assert not isinstance(links, NotExact)
        how, timing = _timed_by(fabric, table, links, start)
        assert timing.events > 0
        taken.append(how)
        fast = simulate_exchange(network, exchange, start_s=start)
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        assert fast.method == "fast", seed
        np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=0, atol=1e-9, err_msg=seed)
        assert fast.bottleneck == des.bottleneck, seed
    assert taken and set(taken) <= {"alone", "repaired"}, taken
