"""Pieces keep their order on store-and-forward routes (issue 24 item 2).

A store-and-forward switch holds each packet before sending it on, so a short last piece is
held for less time than the full piece before it; without order on the link it overtook it
(100,000 B took 8.791 us, 98,304 B 8.847 us on a leaf-spine; the DES gave 80.937 us for 1 MB
where a FIFO link gives 80.983 us). Both engines now deliver a piece no sooner than the one
before it on its route, plus its own bits on the last link after that one's."""

import itertools

import numpy as np
import pytest

from transitsim.network import Exchange, LinkSpec, NetworkSpec, SwitchSpec, simulate_exchange
from transitsim.network.des.engine import assign_paths, run_des
from transitsim.network.exchange import (
    build_schedule,
    fabric_for,
    switch_plan,
    transform_weights,
)
from transitsim.network.fast.switch_sum.recurrence import run_fast_switch, switch_paths
from transitsim.network.forms import linear_exchange

RATE_BPS = 100e9


def _leaf_spine(workers: int = 2, per_rack: int = 1, **switch) -> NetworkSpec:
    """Racks of `per_rack` hosts, 100 Gb/s everywhere: each leaf holds each packet."""
    return NetworkSpec(
        "ls",
        "leaf_spine",
        workers,
        LinkSpec(RATE_BPS, latency_s=switch.pop("latency_s", 0.0)),
        switch=SwitchSpec(store_and_forward=True, aggregator=True, **switch),
        hosts_per_rack=per_rack,
        spine_link=LinkSpec(RATE_BPS),
    )


def _rail() -> NetworkSpec:
    """One node of 4 GPUs, each NIC on its own rail leaf, summed at the spine."""
    return NetworkSpec(
        "rail",
        "rail_optimised",
        4,
        LinkSpec(RATE_BPS, latency_s=1e-6),
        switch=SwitchSpec(store_and_forward=True, aggregator=True),
        gpus_per_node=4,
        nvlink=LinkSpec(4 * RATE_BPS),
        spine_link=LinkSpec(RATE_BPS),
    )


def test_the_issue_cases_are_monotone_and_the_des_holds_the_short_piece_behind():
    network = NetworkSpec(  # the issue's: 100 Gb/s everywhere
        "ls",
        "leaf_spine",
        2,
        LinkSpec(RATE_BPS),
        switch=SwitchSpec(store_and_forward=True, aggregator=True),
        hosts_per_rack=1,
        spine_link=LinkSpec(RATE_BPS),
    )
    times = {}
    for payload in (98_304, 100_000, 1_000_000):
        fast = simulate_exchange(network, Exchange("switch_sum", payload))
        des = simulate_exchange(network, Exchange("switch_sum", payload), method="des")
        assert fast.method == "fast"
        assert fast.time_s == des.time_s
        times[payload] = des.time_s
    assert times[98_304] == pytest.approx(8.84736e-6, rel=1e-12)
    # 24 full pieces and one of 1,696 B: that piece's bits once more on the last link
    assert times[100_000] == pytest.approx(8.84736e-6 + 1_696 * 8 / RATE_BPS, rel=1e-12)
    assert times[1_000_000] == pytest.approx(80.98304e-6, rel=1e-12)  # the issue's FIFO link


def _arrivals(network: NetworkSpec, payload: int, start: np.ndarray, fast: bool):
    """Per piece and worker: when the upload reached the aggregator, when the result came back."""
    fabric = fabric_for(network)
    exchange = Exchange("switch_sum", payload)
    plan = switch_plan(fabric, exchange)
    weights = transform_weights(network, exchange)
    if fast:
        timing = run_fast_switch(fabric, plan, switch_paths(fabric, plan, weights), start)
    else:
        schedule = build_schedule(fabric, exchange)
        path_ids, paths = assign_paths(fabric, schedule, weights)
        timing = run_des(fabric, schedule, path_ids, paths, start, [])
    pieces = len(plan.sizes)
    ups = np.array(
        [[timing.arrive_s[plan.up(j, i)] for i in range(plan.workers)] for j in range(pieces)]
    )
    downs = np.array(
        [[timing.arrive_s[plan.down(j, i)] for i in range(plan.workers)] for j in range(pieces)]
    )
    return ups, downs


@pytest.mark.parametrize("fast", (False, True), ids=("des", "fast"))
def test_a_later_piece_never_arrives_before_an_earlier_one_on_its_route(fast):
    network = _leaf_spine(4, latency_s=1e-6)
    fabric = fabric_for(network)
    exchange = Exchange("switch_sum", 100_000)
    plan = switch_plan(fabric, exchange)
    paths = switch_paths(fabric, plan, transform_weights(network, exchange))
    full, short = plan.sizes[-2] * 8, plan.sizes[-1] * 8
    for hop in (paths.ups[0].hops[0], paths.downs[0].hops[0]):
        # the last piece leaves short / rate after the full one, and its hold ends sooner by
        # more than that: it would overtake
        assert short / hop.rate_bps < hop.post_for(full) - hop.post_for(short)
    rng = np.random.default_rng(5)
    for payload in (20_000, 100_000, 4_096 * 7 + 1):
        start = rng.exponential(1e-6, 4)
        ups, downs = _arrivals(network, payload, start, fast)
        assert np.all(np.diff(ups, axis=0) > 0), payload
        assert np.all(np.diff(downs, axis=0) > 0), payload


def test_switch_sum_fast_path_and_linear_form_equal_the_des_off_the_piece_grid():
    """Multi-hop store-and-forward routes, payloads that are not a multiple of the piece,
    stragglers: the per-piece recurrence and the max-plus form replay uses equal the DES."""
    rng = np.random.default_rng(1)
    for slots, payload in itertools.product((0, 2), (1, 777, 20_000, 98_305, 100_000)):
        network = _leaf_spine(3, latency_s=1e-6, agg_slots=slots, forwarding_latency_s=5e-7)
        exchange = Exchange("switch_sum", payload)
        form = linear_exchange(network, exchange)
        assert form is not None
        for _ in range(2):
            start = rng.exponential(2e-6, 3)
            fast = simulate_exchange(network, exchange, start_s=start, method="fast")
            des = simulate_exchange(network, exchange, start_s=start, method="des")
            np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=0, atol=1e-15)
            assert form.finish_s(start)[0] == pytest.approx(des.finish_s.max(), abs=1e-15)
            assert fast.wait_s == pytest.approx(des.wait_s, abs=1e-15)
            assert fast.bottleneck == des.bottleneck


@pytest.mark.parametrize("name", ("leaf-spine", "rail"))
def test_switch_sum_time_never_falls_as_the_payload_grows(name):
    """A fine grid of payloads across piece boundaries (4 KiB pieces, 4 KiB packets), on the
    fast path, which equals the DES there."""
    network = _leaf_spine(3) if name == "leaf-spine" else _rail()
    grid = list(range(90_000, 110_001, 373))
    results = [simulate_exchange(network, Exchange("switch_sum", b)) for b in grid]
    assert {r.method for r in results} == {"fast"}
    times = np.array([r.time_s for r in results])
    falls = [b for b, step in zip(grid, np.diff(times), strict=False) if step < 0]
    assert not falls
    for b, t in list(zip(grid, times, strict=True))[::9]:
        des = simulate_exchange(network, Exchange("switch_sum", b), method="des")
        assert des.time_s == pytest.approx(t, rel=1e-12), b
