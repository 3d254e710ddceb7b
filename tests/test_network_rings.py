"""Rings: DES and fast path against the closed forms, and the fast path against the DES."""

import numpy as np
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    Exchange,
    LinkFault,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
    closed_form_time_s,
    simulate_exchange,
)
from transitsim.network.exchange import fabric_for

RING_ALGOS = ("ring_allreduce", "ring_allgather")
SIZES = (1, 1_000, 1_000_003, 1_000_000_000)


def _switch(workers: int, latency_s: float, **switch) -> NetworkSpec:
    return NetworkSpec(
        "ring",
        "switch",
        workers,
        LinkSpec(200e9, latency_s=latency_s, overhead_s=latency_s / 4),
        switch=SwitchSpec(forwarding_latency_s=latency_s / 2, **switch),
    )


@pytest.mark.parametrize("algo", RING_ALGOS)
@pytest.mark.parametrize("workers", (2, 3, 8, 64))
@pytest.mark.parametrize("latency_s", (0.0, 5e-6))
def test_ring_matches_its_closed_form(algo, workers, latency_s):
    network = _switch(workers, latency_s)
    for size in SIZES:
        exchange = Exchange(algo, size)
        method = "des" if workers <= 8 else "fast"
        result = simulate_exchange(network, exchange, method=method)
        expected = closed_form_time_s(network, exchange)
        phases = 2 * (workers - 1) if algo == "ring_allreduce" else workers - 1
        chunk = size / workers if algo == "ring_allreduce" else size
        by_hand = phases * (chunk * 8 / 200e9 + 2.5 * latency_s + 0.5 * latency_s)
        assert result.time_s == pytest.approx(expected, rel=1e-9)
        assert expected == pytest.approx(by_hand, rel=1e-9)
        assert result.bytes_sent == pytest.approx(np.full(workers, phases * chunk), rel=1e-12)
        assert result.bytes_received == pytest.approx(result.bytes_sent, rel=1e-12)


def test_ring_of_64_by_des_equals_the_fast_path_and_the_closed_form():
    network = _switch(64, 5e-6)
    exchange = Exchange("ring_allreduce", 1_000_003)
    des = simulate_exchange(network, exchange, method="des")
    fast = simulate_exchange(network, exchange, method="fast")
    assert np.array_equal(des.finish_s, fast.finish_s)
    assert des.time_s == pytest.approx(closed_form_time_s(network, exchange), rel=1e-9)
    assert des.events > 20 * fast.events


PLUGGABLE = PluggableSpec(200e9, 200e9, TransformSpec(latency_s=2e-7))
NETWORKS = {
    "cut-through": _switch(8, 1e-6),
    "store-and-forward": _switch(8, 1e-6, store_and_forward=True),
    "leaf-spine": NetworkSpec(
        "ls",
        "leaf_spine",
        12,
        LinkSpec(400e9, length_m=3),
        hosts_per_rack=4,
        spine_link=LinkSpec(100e9, length_m=50),
    ),
    "datacentres": NetworkSpec(
        "dc",
        "datacentres",
        12,
        LinkSpec(200e9, length_m=3),
        datacentres=3,
        wan_link=LinkSpec(100e9, length_m=1e6),
    ),
    "pluggable": NetworkSpec("p", "switch", 8, LinkSpec(200e9, latency_s=1e-6), PLUGGABLE),
}


@pytest.mark.parametrize("name", list(NETWORKS))
@pytest.mark.parametrize("algo", RING_ALGOS)
def test_fast_path_equals_the_per_transfer_des_exactly(name, algo):
    network = NETWORKS[name]
    rng = np.random.default_rng(7)
    transform = (
        {"dense_bytes": 4_000_016, "transform_at": "pluggable"} if name == "pluggable" else {}
    )
    exchange = Exchange(algo, 250_001, **transform)
    for jitter_s in (0.0, 1e-5, 1e-3):
        start = rng.exponential(jitter_s, network.workers) if jitter_s else None
        auto = simulate_exchange(network, exchange, start_s=start, record_utilisation=True)
        if auto.method != "fast":  # only where exact: a pre-stage meeting stragglers
            assert name == "pluggable" and algo == "ring_allreduce" and jitter_s > 0
            continue
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        assert np.array_equal(auto.finish_s, des.finish_s)
        assert (auto.time_s, auto.transform_s, auto.wire_s, auto.wait_s) == (
            des.time_s,
            des.transform_s,
            des.wire_s,
            des.wait_s,
        )
        assert auto.bytes_sent == pytest.approx(des.bytes_sent, rel=1e-12)
        assert auto.bytes_received == pytest.approx(des.bytes_received, rel=1e-12)
        assert auto.bottleneck == des.bottleneck
        assert auto.link_stats["bytes"].to_numpy() == pytest.approx(
            des.link_stats["bytes"].to_numpy(), rel=1e-12
        )
        assert auto.link_stats["busy_s"].to_numpy() == pytest.approx(
            des.link_stats["busy_s"].to_numpy(), rel=1e-9, abs=1e-15
        )
        assert auto.events < des.events


def test_stragglers_add_wait_not_wire():
    network = NETWORKS["cut-through"]
    exchange = Exchange("ring_allreduce", 1_000_000)
    together = simulate_exchange(network, exchange)
    late = np.zeros(8)
    late[3] = 1e-3
    straggling = simulate_exchange(network, exchange, start_s=late)
    assert straggling.time_s > together.time_s + 0.9e-3
    assert straggling.wire_s == pytest.approx(together.wire_s, rel=1e-9)
    assert straggling.wait_s == pytest.approx(straggling.time_s - together.time_s, rel=1e-9)
    assert together.wire_s + together.transform_s + together.wait_s == pytest.approx(
        together.time_s, rel=1e-12
    )


def test_heterogeneous_ring_across_datacentres_matches_its_closed_form():
    network = NETWORKS["datacentres"]
    for algo in RING_ALGOS:
        exchange = Exchange(algo, 3_000_000)
        result = simulate_exchange(network, exchange, method="des")
        assert result.time_s == pytest.approx(closed_form_time_s(network, exchange), rel=1e-9)
        assert result.bottleneck == "latency"  # 1000 km of fibre per WAN crossing


def test_fast_is_refused_where_it_would_not_be_exact():
    network = NETWORKS["cut-through"]
    with pytest.raises(TransitsimError, match="fast"):
        simulate_exchange(
            network,
            Exchange("ring_allreduce", 1000),
            faults=[LinkFault("h0->sw", 0.0, 1e-6)],
            method="fast",
            record_utilisation=True,  # rates over time through an outage: the DES records them
        )
    leaf_spine = NetworkSpec(  # racks of 2: tree flows of several senders meet on spine links
        "ls", "leaf_spine", 8, LinkSpec(100e9), hosts_per_rack=2, spine_link=LinkSpec(100e9)
    )
    outage = [LinkFault(sorted(fabric_for(leaf_spine).links)[0], 0.0, 1e-6)]
    with pytest.raises(TransitsimError, match="max-min across a WAN or spine, with link faults"):
        simulate_exchange(
            leaf_spine, Exchange("double_binary_tree", 1000), faults=outage, method="fast"
        )
    looped = Exchange("ring_allgather", 1000, 16_000, "pluggable", loopback=True)
    result = simulate_exchange(NETWORKS["pluggable"], looped)  # own lanes shared: contention
    assert result.method == "des"


def test_link_figures_add_up():
    network = NETWORKS["cut-through"]
    result = simulate_exchange(
        network, Exchange("ring_allgather", 1_000_000), record_utilisation=True
    )
    stats = result.link_stats.set_index("link")
    assert stats.loc["h0->sw", "bytes"] == pytest.approx(result.bytes_sent[0])
    assert stats.loc["sw->h0", "bytes"] == pytest.approx(result.bytes_received[0])
    assert ((stats["utilisation"] >= 0) & (stats["utilisation"] <= 1 + 1e-12)).all()
    frame = result.utilisation
    area = ((frame["t1_s"] - frame["t0_s"]) * frame["utilisation"]).groupby(frame["link"]).sum()
    for link, seconds in area.items():
        assert seconds == pytest.approx(stats.loc[link, "bytes"] * 8 / stats.loc[link, "rate_bps"])
