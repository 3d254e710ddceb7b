"""Regression tests for the network engine's bugs found by an independent check (issue 11)."""

import re
from pathlib import Path

import numpy as np
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    FIBRE_S_PER_M,
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
from transitsim.network.spec import AGG_PIECE_BYTES

RATE_BPS = 200e9
BAND = 1_979_184


def _datacentres(per_dc: int = 2, count: int = 2) -> NetworkSpec:
    return NetworkSpec(
        "dc",
        "datacentres",
        per_dc * count,
        LinkSpec(RATE_BPS, length_m=3),
        datacentres=count,
        wan_link=LinkSpec(100e9, length_m=1e5),
    )


def _summing(workers: int = 8, topology: str = "switch", **switch) -> NetworkSpec:
    return NetworkSpec(
        "sum",
        topology,
        workers,
        LinkSpec(RATE_BPS),
        switch=SwitchSpec(aggregator=True, **switch),
        hosts_per_rack=4 if topology == "leaf_spine" else 0,
    )


FAULTED = {
    "hierarchical, WAN down": (_datacentres(), Exchange("hierarchical", 1_000_000), "dc0->dc1"),
    "leaf-spine switch sum": (
        _summing(8, "leaf_spine"),
        Exchange("switch_sum", 100_000),
        "spine->leaf0",
    ),
    "tree into a shared downlink": (
        NetworkSpec("t", "switch", 7, LinkSpec(RATE_BPS)),
        Exchange("tree", 100_000),
        "sw->h0",
    ),
}


@pytest.mark.parametrize("name", list(FAULTED))
def test_a_fault_on_a_link_that_flows_share_delays_and_does_not_break(name):
    network, exchange, link = FAULTED[name]
    clean = simulate_exchange(network, exchange)
    outage_s = 5 * clean.time_s
    faulted = simulate_exchange(network, exchange, faults=[LinkFault(link, 0.0, outage_s)])
    assert np.isfinite(faulted.time_s)
    assert outage_s < faulted.time_s <= outage_s + clean.time_s * (1 + 1e-9)
    assert faulted.wait_s > 0.8 * outage_s  # the outage is waiting, not wire
    assert faulted.bottleneck == "wait"


def test_a_summing_switch_without_a_slot_size_streams_packets():
    network = _summing(8)
    result = simulate_exchange(network, Exchange("switch_sum", BAND))
    line_s = BAND * 8 / RATE_BPS
    # Stored whole it took 2 B / R; in packets the result streams down behind the uploads.
    assert result.time_s == pytest.approx(line_s + AGG_PIECE_BYTES * 8 / RATE_BPS, rel=1e-9)
    whole = simulate_exchange(_summing(8, agg_slot_bytes=BAND), Exchange("switch_sum", BAND))
    assert whole.time_s == pytest.approx(2 * line_s, rel=1e-9)


def test_one_worker_has_nothing_to_sum():
    result = simulate_exchange(_summing(1), Exchange("switch_sum", BAND))
    assert result.time_s == 0.0
    assert closed_form_time_s(_summing(1), Exchange("switch_sum", BAND)) == 0.0


def test_store_and_forward_holds_packets_not_whole_messages():
    def ring(saf: bool) -> NetworkSpec:
        return NetworkSpec(
            "r",
            "switch",
            8,
            LinkSpec(RATE_BPS),
            switch=SwitchSpec(store_and_forward=saf, mtu_bytes=9000),
        )

    exchange = Exchange("ring_allgather", 1_000_000)
    cut = simulate_exchange(ring(False), exchange)
    stored = simulate_exchange(ring(True), exchange)
    # 7 phases, each through one switch that holds a 9 kB packet (not the 1 MB message).
    assert stored.time_s - cut.time_s == pytest.approx(7 * 9000 * 8 / RATE_BPS, rel=1e-9)
    assert stored.time_s == pytest.approx(closed_form_time_s(ring(True), exchange), rel=1e-9)
    small = Exchange("ring_allgather", 1000)  # smaller than a packet: held whole
    gap = simulate_exchange(ring(True), small).time_s - simulate_exchange(ring(False), small).time_s
    assert gap == pytest.approx(7 * 1000 * 8 / RATE_BPS, rel=1e-9)


@pytest.mark.parametrize(
    "switch",
    (
        {"agg_rate_bps": 100e9},  # summing at half a link for 8 uploads
        {"agg_rate_bps": 200e9},  # summing at one link's rate: a tie when a flow is alone
        {"agg_rate_bps": 200e9, "agg_slot_bytes": 16384},
    ),
)
def test_an_aggregator_bound_sum_is_labelled_aggregator(switch):
    result = simulate_exchange(_summing(8, **switch), Exchange("switch_sum", BAND))
    assert result.bottleneck == "aggregator"


def test_host_lanes_without_a_transform_are_wire_time_labelled_lanes():
    plug = PluggableSpec(50e9, RATE_BPS)  # slow electrical lanes, no optics
    network = NetworkSpec("slow-lanes", "switch", 4, LinkSpec(RATE_BPS), plug)
    result = simulate_exchange(network, Exchange("ring_allgather", 1_000_000))
    assert result.bottleneck == "lanes"
    assert result.transform_s == 0.0
    assert result.wire_s == pytest.approx(result.time_s, rel=1e-12)


def test_a_transform_cannot_send_more_than_it_keeps():
    plug = PluggableSpec(800e9, RATE_BPS, TransformSpec(keep=1 / 32))
    network = NetworkSpec("e", "switch", 4, LinkSpec(RATE_BPS), plug)
    with pytest.raises(TransitsimError, match="keeps"):
        simulate_exchange(network, Exchange("ring_allgather", 1000, 16_384, "pluggable"))
    fits = simulate_exchange(network, Exchange("ring_allgather", 512, 16_384, "pluggable"))
    assert fits.time_s > 0


def test_the_two_datacentre_scenario_states_the_fibre_delay_the_code_uses():
    text = (Path(__file__).parents[1] / "scenarios" / "two-datacentres.yaml").read_text()
    stated = [float(x) for x in re.findall(r"([\d.]+) us per km", text)]
    assert stated == [pytest.approx(FIBRE_S_PER_M * 1e9)]
