"""Cluster fabrics (network/fabrics): rail-optimised and fat-tree nodes of G GPUs, NCCL-style
hierarchical all-reduce on them, in-network sums at the spine or core; hand-derived times."""

import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    Exchange,
    LinkSpec,
    NetworkSpec,
    SwitchSpec,
    closed_form_time_s,
    simulate_exchange,
)
from transitsim.network.exchange import fabric_for
from transitsim.network.topology import worker_groups
from transitsim.scenario import network_from_dict

NVLINK = LinkSpec(rate_bps=3.6e12, latency_s=1e-6, efficiency=370 / 450)
NIC = LinkSpec(rate_bps=400e9, latency_s=2e-6)


def rail(nodes=4, gpus=4, **kw):
    return NetworkSpec(
        "rail", "rail_optimised", nodes * gpus, NIC, gpus_per_node=gpus, nvlink=NVLINK, **kw
    )


def test_rail_routes_use_nvlink_inside_a_node_and_one_rail_between_nodes():
    fabric = fabric_for(rail())
    assert fabric.route("h0", "h1") == ["h0", "nvs0", "h1"]
    assert fabric.route("h3", "h4") == ["h3", "rail3", "h4"]  # snake: node 1 starts on rail 3
    assert fabric.route("h0", "h7") == ["h0", "rail0", "h7"]
    assert fabric.route("h0", "h4") == ["h0", "rail0", "spine", "rail3", "h4"]
    groups = worker_groups(rail())
    assert groups[0] == [0, 1, 2, 3] and groups[1] == [7, 6, 5, 4]  # columns are rails


def test_hierarchical_on_rails_is_nvlink_reduce_scatter_rail_rings_nvlink_all_gather():
    network = rail()
    payload = 100_000_000
    shard = payload / 4
    nv_hop = shard * 8 / (NVLINK.rate_bps * NVLINK.efficiency) + 2 * NVLINK.latency_s
    nic_hop = (shard / 4) * 8 / NIC.rate_bps + 2 * NIC.latency_s
    expected = 3 * nv_hop + 2 * 3 * nic_hop + 3 * nv_hop
    for method in ("auto", "des"):
        result = simulate_exchange(network, Exchange("hierarchical", payload), method=method)
        assert result.time_s == pytest.approx(expected, rel=1e-9)
    assert closed_form_time_s(network, Exchange("hierarchical", payload)) == pytest.approx(
        expected, rel=1e-9
    )
    flat = simulate_exchange(network, Exchange("ring_allreduce", payload)).time_s
    assert flat > expected  # the flat ring is held to NIC speed on every hop


def test_flat_ring_crosses_nodes_on_one_rail_so_its_fast_path_is_exact():
    network = rail()
    fast = simulate_exchange(network, Exchange("ring_allgather", 4_000_000), method="fast")
    des = simulate_exchange(network, Exchange("ring_allgather", 4_000_000), method="des")
    assert fast.time_s == pytest.approx(des.time_s, rel=1e-12)


def test_switch_sum_at_the_spine_goes_through_every_rail_leaf():
    network = rail(switch=SwitchSpec(aggregator=True), spine_link=LinkSpec(rate_bps=1.6e12))
    assert fabric_for(network).aggregation_switch() == "spine"
    payload = 10_000_000
    result = simulate_exchange(network, Exchange("switch_sum", payload))
    # 16 GPUs' 400 Gb/s NICs feed 4 rail leaves, each with a 1.6 Tb/s uplink: non-blocking
    assert result.time_s == pytest.approx(
        closed_form_time_s(network, Exchange("switch_sum", payload)), rel=1e-9
    )
    assert result.time_s >= payload * 8 / NIC.rate_bps


def test_fat_tree_oversubscription_slows_cross_pod_traffic():
    def tree(over):
        return NetworkSpec(
            "ft",
            "fat_tree",
            32,
            NIC,
            gpus_per_node=4,
            nvlink=NVLINK,
            hosts_per_rack=8,
            racks_per_pod=2,
            oversubscription=over,
        )

    fabric = fabric_for(tree(1.0))
    assert fabric.route("h0", "h1") == ["h0", "nvs0", "h1"]  # NVLink beats the leaf on a tie
    assert fabric.route("h0", "h4") == ["h0", "leaf0", "h4"]
    assert fabric.route("h0", "h31") == ["h0", "leaf0", "agg0", "core", "agg1", "leaf3", "h31"]
    links = fabric_for(tree(4.0)).edge_links
    assert links[("leaf0", "agg0")][0].spec.rate_bps == pytest.approx(8 * 400e9 / 4)
    assert links[("agg0", "core")][0].spec.rate_bps == pytest.approx(2 * 8 * 400e9 / 16)
    gather = Exchange("ring_allgather", 8_000_000)
    # a ring sends one flow up each leaf: it slows once the uplink is thinner than one NIC
    times = [simulate_exchange(tree(o), gather).time_s for o in (1.0, 4.0, 16.0)]
    assert times[0] == times[1] < times[2]


def test_cluster_fabrics_from_yaml_and_their_errors():
    spec = network_from_dict(
        {
            "topology": "rail_optimised",
            "workers": 16,
            "gpus_per_node": 8,
            "host_link": {"rate": "400 Gb/s"},
            "nvlink": {"rate": "450 GB/s", "efficiency": 0.8222},
        }
    )
    assert spec.gpus_per_node == 8 and spec.nvlink.rate_bps == 3.6e12
    with pytest.raises(TransitsimError, match="multiple of gpus_per_node"):
        network_from_dict(
            {"topology": "rail_optimised", "workers": 12, "gpus_per_node": 8,
             "host_link": {"rate": "400 Gb/s"}}
        )  # fmt: skip
    with pytest.raises(TransitsimError, match="gpus_per_node >= 1"):
        network_from_dict({"topology": "fat_tree", "workers": 8, "host_link": {"rate": "400 Gb/s"}})
