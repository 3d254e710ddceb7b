"""Topologies from a NetworkSpec, and one-line errors for what cannot be simulated."""

import dataclasses

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
    build_topology,
    closed_form_time_s,
    simulate_exchange,
)

HOST = LinkSpec(100e9)
BASE = NetworkSpec("base", "switch", 4, HOST)


def test_switch_topology_has_a_directed_link_each_way():
    graph = build_topology(BASE)
    assert sorted(graph.nodes) == ["h0", "h1", "h2", "h3", "sw"]
    assert graph.number_of_edges() == 8
    assert graph.edges["h0", "sw"]["links"][0][0] == "h0->sw"


def test_leaf_spine_and_datacentres_topologies():
    leaf = build_topology(
        NetworkSpec("ls", "leaf_spine", 10, HOST, hosts_per_rack=4, spine_link=LinkSpec(400e9))
    )
    assert {n for n in leaf if n.startswith("leaf")} == {"leaf0", "leaf1", "leaf2"}
    assert leaf.edges["leaf2", "spine"]["links"][0][1].rate_bps == 400e9
    wan = LinkSpec(50e9, length_m=2e6)
    dcs = build_topology(
        NetworkSpec("dc", "datacentres", 9, HOST, datacentres=3, wan_link=wan, wan_links=2)
    )
    names = [name for name, _ in dcs.edges["dc0", "dc2"]["links"]]
    assert names == ["dc0->dc2#0", "dc0->dc2#1"]
    assert dcs.edges["dc1", "dc0"]["links"][1][1].propagation_s == pytest.approx(2e6 * 4.9e-9)
    assert sorted(dcs.successors("dc1")) == ["dc0", "dc2", "h3", "h4", "h5"]


def test_link_overrides_and_pluggable_line_rate():
    slow = LinkSpec(10e9)
    network = dataclasses.replace(BASE, link_overrides={"h1->sw": slow, "h2<->sw": LinkSpec(20e9)})
    graph = build_topology(network)
    assert graph.edges["h1", "sw"]["links"][0][1].rate_bps == 10e9
    assert graph.edges["sw", "h1"]["links"][0][1].rate_bps == 100e9
    assert graph.edges["sw", "h2"]["links"][0][1].rate_bps == 20e9
    capped = dataclasses.replace(BASE, pluggable=PluggableSpec(400e9, 50e9))
    assert build_topology(capped).edges["h0", "sw"]["links"][0][1].rate_bps == 50e9
    # A slow uplink slows the ring by the ratio of the rates (the slowest edge sets the pace).
    exchange = Exchange("ring_allgather", 1_000_000)
    assert simulate_exchange(network, exchange).time_s == pytest.approx(
        closed_form_time_s(network, exchange), rel=1e-9
    )


BAD_NETWORKS = {
    "rate_bps": dataclasses.replace(BASE, host_link=LinkSpec(-1.0)),
    "workers": dataclasses.replace(BASE, workers=0),
    "unknown topology": dataclasses.replace(BASE, topology="torus"),
    "hosts_per_rack": dataclasses.replace(BASE, topology="leaf_spine"),
    "wan_link": dataclasses.replace(BASE, topology="datacentres", datacentres=2),
    "5 datacentres": dataclasses.replace(BASE, topology="datacentres", datacentres=5),
    "power of 2": dataclasses.replace(
        BASE, pluggable=PluggableSpec(1e9, 1e9, TransformSpec(size=100))
    ),
    "latency_s": dataclasses.replace(BASE, host_link=LinkSpec(1e9, latency_s=-1e-6)),
    "unknown collective": dataclasses.replace(BASE, collective="butterfly"),
    "unknown link": dataclasses.replace(BASE, link_overrides={"h9->sw": HOST}),
    "agg_rate_bps": dataclasses.replace(BASE, switch=SwitchSpec(agg_rate_bps=0.0)),
}


@pytest.mark.parametrize("expected", list(BAD_NETWORKS))
def test_bad_networks_give_one_line_errors(expected):
    with pytest.raises(TransitsimError, match=expected) as info:
        simulate_exchange(BAD_NETWORKS[expected], Exchange("ring_allreduce", 1000))
    assert "\n" not in str(info.value)


BAD_EXCHANGES = {
    "unknown collective": Exchange("allreduce", 1000),
    "payload_bytes": Exchange("ring_allreduce", -5),
    "transform_at must be": Exchange("ring_allreduce", 1000, 16000, "nic"),
    "no pluggable transform": Exchange("ring_allgather", 1000, 16000, "pluggable"),
    "switch_sum only": Exchange("ring_allgather", 1000, 16000, "switch"),
    "aggregator off": Exchange("switch_sum", 1000),
    "dense_bytes > 0": Exchange("ring_allgather", 1000, 0, "pluggable"),
}


@pytest.mark.parametrize("expected", list(BAD_EXCHANGES))
def test_bad_exchanges_give_one_line_errors(expected):
    with pytest.raises(TransitsimError, match=expected):
        simulate_exchange(BASE, BAD_EXCHANGES[expected])
    with pytest.raises(TransitsimError, match=expected):
        closed_form_time_s(BASE, BAD_EXCHANGES[expected])


def test_bad_run_options_give_one_line_errors():
    exchange = Exchange("ring_allreduce", 1000)
    with pytest.raises(TransitsimError, match="one time per worker"):
        simulate_exchange(BASE, exchange, start_s=np.zeros(3))
    with pytest.raises(TransitsimError, match="finite"):
        simulate_exchange(BASE, exchange, start_s=np.array([0, np.nan, 0, 0]))
    with pytest.raises(TransitsimError, match="unknown link"):
        simulate_exchange(BASE, exchange, faults=[LinkFault("h7->sw", 0, 1)])
    with pytest.raises(TransitsimError, match="down_from_s < down_until_s"):
        simulate_exchange(BASE, exchange, faults=[LinkFault("h0->sw", 1, 0)])
    with pytest.raises(TransitsimError, match="method"):
        simulate_exchange(BASE, exchange, method="quick")
    uneven = NetworkSpec("u", "datacentres", 5, HOST, datacentres=2, wan_link=HOST)
    with pytest.raises(TransitsimError, match="equal groups"):
        simulate_exchange(uneven, Exchange("hierarchical", 1000))
    two_sites = dataclasses.replace(uneven, workers=4, switch=SwitchSpec(aggregator=True))
    with pytest.raises(TransitsimError, match="one switch every host reaches"):
        simulate_exchange(two_sites, Exchange("switch_sum", 1000))


def test_degenerate_sizes_run():
    single = dataclasses.replace(BASE, workers=1)
    for algo in ("ring_allreduce", "ring_allgather", "tree", "hierarchical"):
        result = simulate_exchange(single, Exchange(algo, 1000))
        assert result.time_s == 0.0 and result.bytes_sent[0] == 0.0
    empty = simulate_exchange(BASE, Exchange("ring_allreduce", 0))
    assert empty.time_s == 0.0
