"""The fast paths against the per-transfer SimPy reference on many random small networks.

Each collective gets 200 seeded configurations (topology, rates, latencies, overheads,
store-and-forward, pluggables and transforms, stragglers), without and then with link outages;
wherever "auto" takes the fast path, every worker's finishing time must equal the DES's to
1e-9 s, and most configurations must take it (otherwise the test would prove nothing).
"""

import numpy as np
import pytest

from transitsim.network import (
    COLLECTIVE_ALGOS,
    Exchange,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
    simulate_exchange,
)
from transitsim.network.exchange import fabric_for
from transitsim.network.faults import LinkFault
from transitsim.network.forms import linear_exchange

CONFIGS = 200


def _link(rng: np.random.Generator) -> LinkSpec:
    return LinkSpec(
        float(rng.choice([25e9, 100e9, 200e9, 400e9])),
        latency_s=float(rng.choice([0.0, 1e-6, 5e-6])),
        length_m=float(rng.choice([0.0, 3.0, 100.0])),
        overhead_s=float(rng.choice([0.0, 0.0, 2e-7])),
    )


def _network(rng: np.random.Generator, algo: str, transform: bool) -> NetworkSpec:
    topology = {
        "hierarchical": "datacentres",
        "switch_sum": rng.choice(["switch", "switch", "leaf_spine"]),
        # the trees: fixed transfer times on one switch, processor sharing on a WAN or spine
        "tree": rng.choice(["switch", "switch", "switch", "leaf_spine", "datacentres"]),
        "double_binary_tree": rng.choice(
            ["switch", "switch", "switch", "leaf_spine", "datacentres"]
        ),
    }.get(algo, rng.choice(["switch", "leaf_spine", "datacentres"]))
    switch = SwitchSpec(
        forwarding_latency_s=float(rng.choice([0.0, 5e-7])),
        store_and_forward=bool(rng.random() < 0.3),
        mtu_bytes=int(rng.choice([1500, 4096, 9000])),
        aggregator=algo == "switch_sum",
        agg_slots=int(rng.choice([0, 0, 2, 4])) if algo == "switch_sum" else 0,
        agg_slot_bytes=int(rng.choice([0, 2048, 8192])) if algo == "switch_sum" else 0,
        agg_rate_bps=float(rng.choice([np.inf, 4e12])) if algo == "switch_sum" else np.inf,
        transform=TransformSpec(passes_per_s=1e9) if transform and algo == "switch_sum" else None,
    )
    pluggable = None
    if transform or rng.random() < 0.3:
        optics = TransformSpec(passes_per_s=float(rng.choice([1e8, 1e9]))) if transform else None
        pluggable = PluggableSpec(float(rng.choice([200e9, 800e9])), 400e9, optics)
    if topology == "datacentres":
        count = int(rng.integers(1 if algo != "hierarchical" else 2, 4))
        per = int(rng.integers(1, 4))
        return NetworkSpec(
            "dc",
            "datacentres",
            per * count,
            _link(rng),
            pluggable,
            switch,
            datacentres=count,
            wan_link=LinkSpec(
                float(rng.choice([10e9, 100e9])), length_m=float(rng.choice([1e3, 1e5]))
            ),
            wan_links=int(rng.choice([1, 1, 2])),
        )
    workers = int(rng.integers(1, 7))
    if topology == "leaf_spine":
        return NetworkSpec(
            "ls",
            "leaf_spine",
            workers,
            _link(rng),
            pluggable,
            switch,
            hosts_per_rack=int(rng.integers(1, 4)),
            spine_link=_link(rng),
        )
    return NetworkSpec("sw", "switch", workers, _link(rng), pluggable, switch)


def _exchange(rng: np.random.Generator, algo: str, network: NetworkSpec) -> Exchange:
    payload = int(rng.choice([1, 777, 50_000, 300_001]))
    if algo == "switch_sum":
        payload = int(rng.choice([1, 777, 20_000]))
    place = None
    if network.switch.transform is not None:
        place = "switch"
    elif network.pluggable is not None and network.pluggable.transform is not None:
        place = "pluggable"
    if place is None:
        return Exchange(algo, payload)
    dense = 16 * payload
    loopback = bool(rng.random() < 0.5)
    return Exchange(algo, payload, dense, place, loopback=loopback)


def _case(algo: str, seed: int):
    rng = np.random.default_rng([seed, len(algo)])
    transform = algo != "hierarchical" and rng.random() < 0.3 or rng.random() < 0.15
    network = _network(rng, algo, transform)
    exchange = _exchange(rng, algo, network)
    start = None
    if rng.random() < 0.7:
        scale = float(rng.choice([1e-7, 1e-5, 1e-3]))
        start = rng.exponential(scale, network.workers)
    return network, exchange, start


def assert_engines_agree(auto, des, seed) -> None:
    """The fast path's result is the DES's: every finish, the wait, the bottleneck, and each
    link's busy time and bytes."""
    np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-9, err_msg=seed)
    assert auto.wait_s == pytest.approx(des.wait_s, abs=1e-9), seed
    assert auto.bottleneck == des.bottleneck, seed
    for column in ("busy_s", "bytes"):
        np.testing.assert_allclose(
            auto.link_stats[column].to_numpy(),
            des.link_stats[column].to_numpy(),
            rtol=1e-9,
            atol=1e-12,
            err_msg=f"{seed} {column}",
        )


@pytest.mark.parametrize("algo", COLLECTIVE_ALGOS)  # every collective, new ones included
def test_fast_paths_equal_the_des_on_random_small_networks(algo):
    fast_count = 0
    for seed in range(CONFIGS):
        network, exchange, start = _case(algo, seed)
        auto = simulate_exchange(network, exchange, start_s=start)
        if auto.method != "fast":
            continue
        fast_count += 1
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-9, err_msg=seed)
        assert auto.time_s == pytest.approx(des.time_s, abs=1e-9)
        assert auto.bytes_sent == pytest.approx(des.bytes_sent, rel=1e-9)
        assert auto.link_stats["bytes"].to_numpy() == pytest.approx(
            des.link_stats["bytes"].to_numpy(), rel=1e-9
        )
        form = linear_exchange(network, exchange) if "tree" in algo else None
        if form is not None:  # and the max-plus linear form replay uses (none on a shared WAN)
            starts = np.zeros(network.workers) if start is None else start
            assert form.finish_s(starts)[0] == pytest.approx(des.finish_s.max(), abs=1e-9)
    assert fast_count >= 0.6 * CONFIGS, f"only {fast_count} of {CONFIGS} took the fast path"


def _faults(rng: np.random.Generator, network: NetworkSpec, start, time_s: float) -> list:
    """1-3 outages over the exchange's span; half the time on links between switches only (the
    WAN, a spine), which the hierarchical exchange's flows share."""
    names = sorted(fabric_for(network).links)
    between = [n for n in names if not any(end.startswith("h") for end in n.split("->"))]
    if between and rng.random() < 0.5:
        names = between
    t0 = 0.0 if start is None else float(np.min(start))
    span = max(time_s, 1e-9)
    faults = []
    for _ in range(int(rng.integers(1, 4))):
        begin = t0 + float(rng.uniform(-0.1, 1.1)) * span
        name = names[int(rng.integers(len(names)))]
        faults.append(LinkFault(name, begin, begin + float(rng.uniform(0.02, 0.6)) * span))
    return faults


@pytest.mark.parametrize("algo", COLLECTIVE_ALGOS)
def test_fast_paths_equal_the_des_with_link_faults(algo):
    """Outages on random links: where "auto" stays fast, every finish, the critical path's
    wait and bottleneck, and each link's busy time and bytes equal the DES's."""
    fast_count = held_up = failover = 0
    for seed in range(CONFIGS):
        network, exchange, start = _case(algo, seed)
        clean = simulate_exchange(network, exchange, start_s=start)
        faults = _faults(np.random.default_rng([seed, 99]), network, start, clean.time_s)
        auto = simulate_exchange(network, exchange, start_s=start, faults=faults)
        failover += any("#" in f.link for f in faults)  # one of parallel links: often the DES
        if auto.method != "fast":
            continue
        fast_count += 1
        held_up += bool(np.max(auto.finish_s - clean.finish_s) > 1e-12)
        des = simulate_exchange(network, exchange, start_s=start, faults=faults, method="des")
        assert_engines_agree(auto, des, seed)
    eligible = CONFIGS - failover  # tests/test_parallel_links.py times failover
    assert fast_count >= 0.5 * eligible, f"only {fast_count} of {eligible} took the fast path"
    assert held_up >= 0.25 * fast_count, f"faults held up only {held_up} of {fast_count}"


def test_ring_per_worker_finish_with_an_inline_transform_that_has_latency():
    """Every worker's finish, not only the last one's: with a pluggable transform that has
    latency, a ring's first (transformed) chunk can land after a later plain one, so a worker's
    finish is its latest arrival of any phase (issue 24: worker 2 finished before its
    neighbour's chunk could arrive). Seeds 90 and 109 failed before the fix."""
    fast = 0
    for seed in range(120):
        rng = np.random.default_rng(seed)
        workers = int(rng.integers(2, 7))
        link = LinkSpec(float(rng.choice([25e9, 100e9])), latency_s=float(rng.choice([0, 1e-6])))
        optics = TransformSpec(
            passes_per_s=float(rng.choice([1e8, 1e9])),
            latency_s=float(rng.choice([1e-6, 5e-6, 2e-5])),
        )
        pluggable = PluggableSpec(float(rng.choice([200e9, 800e9])), 400e9, optics)
        network = NetworkSpec("sw", "switch", workers, link, pluggable, SwitchSpec())
        payload = int(rng.choice([777, 50_000, 300_001]))
        algo = str(rng.choice(["ring_allgather", "ring_allreduce"]))
        exchange = Exchange(algo, payload, 16 * payload, "pluggable", loopback=rng.random() < 0.5)
        start = rng.exponential(1e-6, workers) if rng.random() < 0.5 else None
        auto = simulate_exchange(network, exchange, start_s=start)
        if auto.method != "fast":
            continue
        fast += 1
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-12, err_msg=seed)
        assert auto.wait_s == pytest.approx(des.wait_s, abs=1e-12), seed
    assert fast >= 60, fast


def test_switch_sum_off_the_piece_grid_on_store_and_forward_routes():
    """Issue 24 item 2: multi-hop store-and-forward routes (a rack per host, so the fast path
    holds) and payloads that are not a multiple of the piece, whose short last piece is held
    for less than the full one before it: every finish equals the DES's, and so does the
    max-plus form replay uses."""
    fast = 0
    for seed in range(60):
        rng = np.random.default_rng([seed, 24])
        workers = int(rng.integers(2, 6))
        switch = SwitchSpec(
            forwarding_latency_s=float(rng.choice([0.0, 5e-7])),
            store_and_forward=True,
            mtu_bytes=int(rng.choice([1500, 4096, 9000])),
            aggregator=True,
            agg_slots=int(rng.choice([0, 0, 2, 4])),
            agg_slot_bytes=int(rng.choice([0, 2048, 8192])),
        )
        network = NetworkSpec(
            "ls",
            "leaf_spine",
            workers,
            _link(rng),
            None,
            switch,
            hosts_per_rack=1,
            spine_link=_link(rng),
        )
        piece = switch.piece_bytes
        exchange = Exchange(
            "switch_sum", int(rng.integers(1, 12)) * piece + int(rng.integers(1, piece))
        )
        start = rng.exponential(1e-6, workers) if rng.random() < 0.7 else None
        auto = simulate_exchange(network, exchange, start_s=start)
        assert auto.method == "fast", seed
        fast += 1
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-12, err_msg=seed)
        starts = np.zeros(workers) if start is None else start
        form = linear_exchange(network, exchange)
        assert form.finish_s(starts)[0] == pytest.approx(des.finish_s.max(), abs=1e-12), seed
    assert fast == 60
