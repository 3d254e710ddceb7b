"""In-network sums, trees, hierarchies, pluggable transforms and the worked 8-worker scenario."""

import numpy as np
import pytest

from transitsim.network import (
    Exchange,
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
DENSE = 31_666_944  # BF16 delta of a 15.8 M parameter model
TOPK = 3_957_960  # DeMo top-k values + positions
BAND = 1_979_184  # fixed band: DENSE / 16


def _summing(workers: int = 8, latency_s: float = 0.0, **switch) -> NetworkSpec:
    return NetworkSpec(
        "sum",
        "switch",
        workers,
        LinkSpec(RATE_BPS, latency_s=latency_s),
        switch=SwitchSpec(aggregator=True, **switch),
    )


def test_switch_sum_sends_each_payload_up_once_and_the_sum_down_once():
    for switch in ({}, {"agg_slot_bytes": 4096}, {"agg_slot_bytes": 4096, "agg_slots": 16}):
        network = _summing(**switch)
        result = simulate_exchange(network, Exchange("switch_sum", BAND))
        assert result.bytes_sent == pytest.approx(np.full(8, BAND))
        assert result.bytes_received == pytest.approx(np.full(8, BAND))
        stats = result.link_stats.set_index("link")["bytes"]
        for w in range(8):
            assert stats[f"h{w}->sw"] == pytest.approx(BAND)
            assert stats[f"sw->h{w}"] == pytest.approx(BAND)
        expected = closed_form_time_s(network, Exchange("switch_sum", BAND))
        assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_switch_sum_with_slots_and_a_summing_rate_matches_its_closed_form():
    cases = [
        {"agg_slot_bytes": 16384},
        {"agg_slot_bytes": 16384, "agg_slots": 2},  # 2 slots cannot cover a round trip
        {"agg_slot_bytes": 16384, "agg_rate_bps": 800e9},  # summing shared by 8 uplinks
    ]
    times = []
    for switch in cases:
        network = _summing(latency_s=1e-6, forwarding_latency_s=5e-7, **switch)
        exchange = Exchange("switch_sum", BAND)
        result = simulate_exchange(network, exchange)
        assert result.time_s == pytest.approx(closed_form_time_s(network, exchange), rel=1e-9)
        times.append(result.time_s)
    assert times[1] > 2 * times[0]  # the window, not the links, sets the pace
    assert times[2] > 1.9 * times[0]  # 800 Gb/s of summing for 1.6 Tb/s of uplinks
    slow_sum = simulate_exchange(_summing(agg_rate_bps=200e9), Exchange("switch_sum", BAND))
    assert slow_sum.bottleneck == "aggregator"


@pytest.mark.parametrize("slot_bytes", (0, BAND))
def test_switch_transform_with_loopback_doubles_the_bytes_down(slot_bytes):
    transform = TransformSpec(size=256, planes=8, passes_per_s=1e9)
    network = NetworkSpec(
        "e-prime",
        "switch",
        8,
        LinkSpec(RATE_BPS),
        switch=SwitchSpec(aggregator=True, transform=transform, agg_slot_bytes=slot_bytes),
    )
    plain = simulate_exchange(network, Exchange("switch_sum", BAND, DENSE, "switch"))
    looped = simulate_exchange(
        network, Exchange("switch_sum", BAND, DENSE, "switch", loopback=True)
    )
    assert plain.bytes_sent == pytest.approx(np.full(8, DENSE))  # dense on the uplink
    assert plain.bytes_received == pytest.approx(np.full(8, BAND))
    assert looped.bytes_received == pytest.approx(np.full(8, 2 * BAND))
    # Whole message: the doubled result adds a band's time. In packets (the default piece),
    # results stream back under the dense uploads: only the last piece's copy shows.
    extra_bytes = BAND if slot_bytes else BAND % AGG_PIECE_BYTES
    assert looped.time_s - plain.time_s == pytest.approx(extra_bytes * 8 / RATE_BPS, rel=1e-6)
    for result, exchange in (
        (plain, Exchange("switch_sum", BAND, DENSE, "switch")),
        (looped, Exchange("switch_sum", BAND, DENSE, "switch", loopback=True)),
    ):
        assert result.time_s == pytest.approx(closed_form_time_s(network, exchange), rel=1e-9)


def test_pluggable_transform_before_the_switch_sum_puts_dense_on_the_lanes_only():
    plug = PluggableSpec(800e9, RATE_BPS, TransformSpec())
    network = NetworkSpec(
        "e-prime-p", "switch", 8, LinkSpec(RATE_BPS), plug, SwitchSpec(aggregator=True)
    )
    result = simulate_exchange(network, Exchange("switch_sum", BAND, DENSE, "pluggable"))
    stats = result.link_stats.set_index("link")["bytes"]
    assert stats["h0:lanes_out"] == pytest.approx(DENSE)
    assert stats["h0->sw"] == pytest.approx(BAND)
    assert result.bytes_sent == pytest.approx(np.full(8, BAND))


def _datacentres(per_dc: int, count: int, km: float) -> NetworkSpec:
    return NetworkSpec(
        "dc",
        "datacentres",
        per_dc * count,
        LinkSpec(RATE_BPS, length_m=3),
        datacentres=count,
        wan_link=LinkSpec(100e9, length_m=km * 1e3),
    )


def test_hierarchical_matches_its_closed_form_and_beats_the_flat_ring_over_a_wan():
    for per_dc, count in ((4, 2), (3, 3), (2, 4)):
        network = _datacentres(per_dc, count, 1000)
        exchange = Exchange("hierarchical", DENSE)
        hier = simulate_exchange(network, exchange)
        assert hier.time_s == pytest.approx(closed_form_time_s(network, exchange), rel=1e-9)
        flat = simulate_exchange(network, Exchange("ring_allreduce", DENSE))
        assert hier.time_s < flat.time_s
    single = _datacentres(8, 1, 0)
    assert simulate_exchange(single, Exchange("hierarchical", DENSE)).time_s == pytest.approx(
        simulate_exchange(single, Exchange("ring_allreduce", DENSE)).time_s, rel=1e-12
    )


def test_shards_sharing_one_wan_link_share_its_bandwidth():
    # 4 shard rings cross the same WAN link: each at a quarter of 100 Gb/s.
    network = _datacentres(4, 2, 0)
    exchange = Exchange("hierarchical", 8_000_000)
    result = simulate_exchange(network, exchange)
    intra = 2 * 3 * (8e6 / 4) * 8 / RATE_BPS
    across = 2 * (8e6 / 8) * 8 / 25e9
    latency = result.time_s - intra - across
    assert 0 <= latency < 1e-6  # only metres of fibre left
    assert result.bottleneck == "link"


def _pluggable_network(lane_bps: float, passes_per_s: float) -> NetworkSpec:
    plug = PluggableSpec(lane_bps, RATE_BPS, TransformSpec(256, 8, passes_per_s))
    return NetworkSpec("e", "switch", 8, LinkSpec(RATE_BPS), plug)


def test_variant_e_on_lanes_at_line_rate_is_ingest_bound_by_the_dense_to_band_ratio():
    network = _pluggable_network(RATE_BPS, 1e9)  # transform: 512 Gb/s of dense input
    e_result = simulate_exchange(network, Exchange("ring_allgather", BAND, DENSE, "pluggable"))
    c_result = simulate_exchange(network, Exchange("ring_allgather", BAND))
    line_s = BAND * 8 / RATE_BPS
    assert DENSE / BAND == 16.0
    # The first phase pushes the dense delta through the lanes: 16x a band phase.
    assert e_result.transform_s == pytest.approx(16 * line_s, rel=1e-9)
    assert e_result.time_s - c_result.time_s == pytest.approx(15 * line_s, rel=1e-9)
    assert e_result.time_s / c_result.time_s == pytest.approx((16 + 6) / 7, rel=1e-9)
    assert e_result.bottleneck == "lanes"
    assert e_result.wire_s == pytest.approx(6 * line_s, rel=1e-9)
    assert e_result.time_s == pytest.approx(
        closed_form_time_s(network, Exchange("ring_allgather", BAND, DENSE, "pluggable")), rel=1e-9
    )


def test_a_slow_transform_rather_than_the_lanes_or_the_wire_can_bind():
    network = _pluggable_network(800e9, 1e8)  # 51.2 Gb/s of dense input through the optics
    result = simulate_exchange(network, Exchange("ring_allgather", BAND, DENSE, "pluggable"))
    assert result.bottleneck == "transform"
    chunks = np.ceil(DENSE / 512)
    assert result.transform_s == pytest.approx(chunks * 8 / 1e8, rel=1e-9)


def test_worked_scenario_eight_workers_at_200_gbps():
    network = _summing(8)
    dense = simulate_exchange(network, Exchange("ring_allreduce", DENSE))
    topk = simulate_exchange(network, Exchange("ring_allgather", TOPK))
    band = simulate_exchange(network, Exchange("ring_allgather", BAND))
    # Wire bytes per worker: 2 (N-1)/N x dense against (N-1) x payload.
    assert dense.bytes_sent[0] == pytest.approx(55_417_152)
    assert topk.bytes_sent[0] == pytest.approx(27_705_720)
    assert band.bytes_sent[0] == pytest.approx(13_854_288)
    assert dense.time_s == pytest.approx(14 * (DENSE / 8) * 8 / RATE_BPS, rel=1e-12)
    # 2 x dense/8 / payload: 2.000206 for top-k (not quite 2), exactly 4 for the band.
    assert dense.wire_s / topk.wire_s == pytest.approx(7_916_736 / 3_957_960, rel=1e-12)
    assert dense.wire_s / topk.wire_s == pytest.approx(2.000206, abs=1e-6)
    assert dense.wire_s / band.wire_s == pytest.approx(4.0, rel=1e-12)
    # Summed as one whole message: up once, then down once, against N-1 ring phases: 3.5x.
    whole = _summing(8, agg_slot_bytes=BAND)
    summed = simulate_exchange(whole, Exchange("switch_sum", BAND))
    predicted = closed_form_time_s(whole, Exchange("ring_allgather", BAND)) / closed_form_time_s(
        whole, Exchange("switch_sum", BAND)
    )
    assert band.time_s / summed.time_s == pytest.approx(predicted, rel=1e-9)
    assert predicted == pytest.approx(3.5, rel=1e-12)
    # In packets (the default), the sum streams down while the uploads go on: nearly N-1 = 7x.
    streamed = simulate_exchange(network, Exchange("switch_sum", BAND))
    assert 6.9 < band.time_s / streamed.time_s < 7
    # Against a ring all-reduce of the same band, the sum needs pipelining over slots to win.
    sliced = _summing(8, agg_slot_bytes=4096)
    ring = simulate_exchange(sliced, Exchange("ring_allreduce", BAND))
    piped = simulate_exchange(sliced, Exchange("switch_sum", BAND))
    factor = closed_form_time_s(sliced, Exchange("ring_allreduce", BAND)) / closed_form_time_s(
        sliced, Exchange("switch_sum", BAND)
    )
    assert ring.time_s / piped.time_s == pytest.approx(factor, rel=1e-9)
    assert 1.7 < factor < 1.75  # 2 (N-1)/N = 1.75 against 1 + one slot's worth
    assert ring.time_s / summed.time_s == pytest.approx(0.875, rel=1e-9)  # unpipelined: loses


SWITCH_CASES = {
    "whole payload": {},
    "pieces, store-and-forward": {
        "agg_slot_bytes": 4096,
        "store_and_forward": True,
        "forwarding_latency_s": 5e-7,
    },
    "bounded slots, fast summing": {
        "agg_slot_bytes": 16384,
        "agg_slots": 2,
        "agg_rate_bps": 3.2e12,
    },
}


@pytest.mark.parametrize("name", list(SWITCH_CASES))
def test_switch_sum_fast_path_equals_the_per_transfer_des_exactly(name):
    network = _summing(8, latency_s=1e-6, **SWITCH_CASES[name])
    exchange = Exchange("switch_sum", BAND)
    rng = np.random.default_rng(11)
    for jitter_s in (0.0, 1e-5):
        start = rng.exponential(jitter_s, 8) if jitter_s else None
        fast = simulate_exchange(network, exchange, start_s=start, method="fast")
        des = simulate_exchange(network, exchange, start_s=start, method="des")
        assert np.array_equal(fast.finish_s, des.finish_s)
        assert (fast.transform_s, fast.wire_s, fast.wait_s, fast.bottleneck) == (
            des.transform_s,
            des.wire_s,
            des.wait_s,
            des.bottleneck,
        )
        for column in ("bytes", "busy_s"):
            assert fast.link_stats[column].to_numpy() == pytest.approx(
                des.link_stats[column].to_numpy(), rel=1e-9, abs=1e-15
            )
        assert fast.events < des.events


def test_switch_sum_where_summing_binds_runs_the_des():
    network = _summing(8, agg_slot_bytes=16384, agg_rate_bps=800e9)
    assert simulate_exchange(network, Exchange("switch_sum", BAND)).method == "des"
