"""Parallel links (issue 24, item 5): every message is striped evenly over the parallel links
between two switches, and over the ones still up when some are down (failover), on the DES and
the fast paths alike (docs/engine.md "Parallel links: ECMP and failover")."""

import numpy as np
import pytest

from transitsim.network.exchange import fabric_for, simulate_exchange
from transitsim.network.exchange_spec import Exchange
from transitsim.network.faults import LinkFault
from transitsim.network.spec import LinkSpec, NetworkSpec

ALGOS = ("ring_allreduce", "ring_allgather", "hierarchical", "tree", "double_binary_tree")


def _network(wan_links: int, workers: int = 4, datacentres: int = 2, wan_bps=10e9) -> NetworkSpec:
    """Hosts at 100 Gb/s, a 10 Gb/s WAN of 100 km: the WAN is the bottleneck."""
    return NetworkSpec(
        "par",
        "datacentres",
        workers,
        LinkSpec(100e9),
        datacentres=datacentres,
        wan_link=LinkSpec(wan_bps, length_m=1e5),
        wan_links=wan_links,
    )


def _down(network: NetworkSpec, k: int, begin: float, end: float) -> list[LinkFault]:
    """Parallel link k of every pair of datacentres down, both directions."""
    names = [n for n in fabric_for(network).links if n.endswith(f"#{k}")]
    return [LinkFault(name, begin, end) for name in names]


RING = Exchange("ring_allreduce", 10_000_000)


@pytest.mark.parametrize("method", ["des", "fast"])
def test_one_of_two_links_down_sends_everything_over_the_survivor(method):
    """(a) One of two WAN links down for 100 ms from the start: the exchange runs on the other,
    as on a network of one WAN link (12.49 ms), not 100 ms later (112.49 ms before failover)."""
    faults = _down(_network(2), 1, 0.0, 0.1)
    failed = simulate_exchange(_network(2), RING, faults=faults, method=method)
    single = simulate_exchange(_network(1), RING, method=method)
    assert failed.method == method
    assert failed.time_s == pytest.approx(single.time_s, rel=1e-9)
    assert failed.time_s < 0.05
    stats = failed.link_stats.set_index("link")["bytes"]
    assert stats["dc0->dc1#1"] == 0.0 and stats["dc1->dc0#1"] == 0.0
    assert stats["dc0->dc1#0"] == pytest.approx(2 * 3 / 4 * RING.payload_bytes)


@pytest.mark.parametrize("algo", ALGOS)
def test_failover_on_every_collective(algo):
    """(a) for each collective: DES and "auto" agree, and match one WAN link fewer."""
    exchange = Exchange(algo, 4_000_000)
    network = _network(2, workers=4)
    faults = _down(network, 0, -1.0, 10.0)
    des = simulate_exchange(network, exchange, faults=faults, method="des")
    auto = simulate_exchange(network, exchange, faults=faults)
    single = simulate_exchange(_network(1, workers=4), exchange, method="des")
    if algo != "double_binary_tree":  # its chunk spacing is planned with every link up
        assert des.time_s == pytest.approx(single.time_s, rel=1e-9)
    assert auto.time_s == pytest.approx(des.time_s, rel=1e-9)


@pytest.mark.parametrize("method", ["des", "fast"])
def test_both_links_up_share_the_load(method):
    """(b) Both up: each link carries half of every message, and the exchange (WAN-bound) is
    faster than on one link."""
    both = simulate_exchange(_network(2), RING, method=method)
    single = simulate_exchange(_network(1), RING, method=method)
    stats = both.link_stats.set_index("link")["bytes"]
    message = RING.payload_bytes / 4  # one ring chunk
    for a, b in (("dc0", "dc1"), ("dc1", "dc0")):
        assert abs(stats[f"{a}->{b}#0"] - stats[f"{a}->{b}#1"]) < message / 2
        assert stats[f"{a}->{b}#0"] > 0
    assert both.time_s < 0.6 * single.time_s


def _random_case(rng: np.random.Generator):
    wan_links = int(rng.integers(2, 4))
    datacentres = int(rng.choice([2, 2, 3]))
    workers = datacentres * int(rng.integers(1, 3))
    network = _network(wan_links, workers, datacentres, float(rng.choice([10e9, 40e9])))
    algo = str(rng.choice(ALGOS))
    if algo == "hierarchical" and workers % datacentres:
        algo = "ring_allreduce"
    exchange = Exchange(algo, int(rng.choice([100_000, 1_000_000, 3_000_000])))
    start = rng.exponential(1e-4, workers) if rng.random() < 0.5 else None
    return network, exchange, start


def _random_faults(rng, network, start, time_s: float) -> list[LinkFault]:
    """1-3 outages on WAN links: one parallel link, one direction, or a whole pair."""
    links = sorted(n for n in fabric_for(network).links if "#" in n)
    t0 = 0.0 if start is None else float(np.min(start))
    span = max(time_s, 1e-9)
    faults = []
    for _ in range(int(rng.integers(1, 4))):
        name = links[int(rng.integers(len(links)))]
        if rng.random() < 0.2:
            name = name.split("#")[0].replace("->", "<->")  # every parallel link, both ways
        if rng.random() < 0.3:  # down for the whole exchange
            begin, end = t0 - 1.0, t0 + 10.0
        else:
            begin = t0 + float(rng.uniform(-0.2, 1.0)) * span
            end = begin + float(rng.uniform(0.05, 0.8)) * span
        faults.append(LinkFault(name, begin, end))
    return faults


def test_des_and_fast_paths_agree_on_random_failovers():
    """(c) Random small networks of 2-3 parallel WAN links with random outages: where "auto"
    stays fast it equals the DES (finish times, each link's bytes); where it cannot follow a
    failover it says so and runs the DES."""
    fast = des_only = 0
    for seed in range(60):
        rng = np.random.default_rng([seed, 24])
        network, exchange, start = _random_case(rng)
        clean = simulate_exchange(network, exchange, start_s=start)
        faults = _random_faults(rng, network, start, clean.time_s)
        auto = simulate_exchange(network, exchange, start_s=start, faults=faults)
        des = simulate_exchange(network, exchange, start_s=start, faults=faults, method="des")
        np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-9, err_msg=seed)
        np.testing.assert_allclose(
            auto.link_stats["bytes"], des.link_stats["bytes"], rtol=1e-9, atol=1e-6
        )
        if auto.method == "fast":
            fast += 1
        else:
            des_only += 1
    assert fast >= 10 and des_only >= 10, (fast, des_only)


def test_one_link_down_throughout_is_one_link_fewer_on_random_cases():
    """(c) Link k of every bundle down for the whole exchange: the time of a network with one
    parallel link fewer, on the DES and on "auto" (before failover: held up or wrong)."""
    for seed in range(20):
        rng = np.random.default_rng([seed, 25])
        network, exchange, start = _random_case(rng)
        k = int(rng.integers(network.wan_links))
        faults = _down(network, k, -1.0, 10.0)
        if exchange.algo == "double_binary_tree":  # its spacing is planned with every link up
            continue
        fewer = NetworkSpec(**{**network.__dict__, "wan_links": network.wan_links - 1})
        expected = simulate_exchange(fewer, exchange, start_s=start, method="des").time_s
        for method in ("des", "auto"):
            got = simulate_exchange(network, exchange, start_s=start, faults=faults, method=method)
            assert got.time_s == pytest.approx(expected, rel=1e-9), (seed, method)


def test_fast_path_names_failover_it_cannot_follow():
    """A link going down mid-exchange while its sibling stays up: "fast" refuses, saying why."""
    network = _network(2)
    faults = [LinkFault("dc0->dc1#0", 0.002, 0.2)]
    with pytest.raises(Exception, match="failover"):
        simulate_exchange(network, RING, faults=faults, method="fast")
    auto = simulate_exchange(network, RING, faults=faults)
    assert auto.method == "des"


def _random_parallel(rng: np.random.Generator, algo: str):
    """A random 2-3 datacentre network with 2-3 parallel WAN links, stragglers, no fault."""
    count = 2 if algo == "hierarchical" else int(rng.integers(2, 4))
    per = int(rng.integers(1, 4)) if algo != "hierarchical" else int(rng.integers(2, 4))
    network = NetworkSpec(
        "par",
        "datacentres",
        count * per,
        LinkSpec(
            float(rng.choice([25e9, 100e9])),
            latency_s=float(rng.choice([0.0, 1e-6])),
            overhead_s=float(rng.choice([0.0, 2e-7])),
        ),
        datacentres=count,
        wan_link=LinkSpec(
            float(rng.choice([10e9, 40e9, 100e9])), length_m=float(rng.choice([0, 1e5]))
        ),
        wan_links=int(rng.integers(2, 4)),
    )
    payload = int(rng.choice([777, 50_000, 300_001, 1_100_001]))
    start = rng.exponential(float(rng.choice([1e-6, 1e-4])), network.workers)
    return network, Exchange(algo, payload), start


@pytest.mark.parametrize("algo", ["hierarchical", "tree", "double_binary_tree"])
def test_trees_and_hierarchical_keep_their_fast_paths_on_parallel_links(algo):
    """Issue 44 item 5: with k parallel WAN links and no fault, the trees and hierarchical take
    their fast paths (they went to the DES, "weighted (transformed) bytes"), equal to the DES in
    every finish, the bottleneck, and each link's busy seconds and bytes."""
    for seed in range(12):
        network, exchange, start = _random_parallel(np.random.default_rng([seed, 44]), algo)
        fast = simulate_exchange(network, exchange, start_s=start, method="fast")
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        assert fast.method == "fast"
        np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=1e-9, atol=1e-15)
        assert fast.bottleneck == des.bottleneck
        for column in ("busy_s", "bytes"):
            np.testing.assert_allclose(
                fast.link_stats[column].to_numpy(),
                des.link_stats[column].to_numpy(),
                rtol=1e-9,
                atol=1e-9,
            )


@pytest.mark.parametrize("algo", ["hierarchical", "tree", "double_binary_tree"])
def test_the_refusal_names_failover_not_weighted_bytes(algo):
    """Where a parallel-link case still goes to the DES (a link down mid-exchange while its
    sibling carries on), "fast" names why (failover, or the trees' max-min across the WAN with a
    link fault), not "weighted (transformed) bytes" as it did for every tree and hierarchical
    exchange on parallel links."""
    network = _network(2)
    exchange = Exchange(algo, 10_000_000)
    with pytest.raises(Exception, match="failover|with link faults") as refused:
        simulate_exchange(
            network, exchange, faults=[LinkFault("dc0->dc1#0", 0.002, 0.2)], method="fast"
        )
    assert "weighted" not in str(refused.value)
