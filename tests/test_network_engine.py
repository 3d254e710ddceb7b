"""The fluid engine: fair sharing of a link, max-min fairness, faults, rounding at handovers."""

import numpy as np
import pytest

from transitsim.network import (
    Exchange,
    LinkFault,
    LinkSpec,
    NetworkSpec,
    simulate_exchange,
)
from transitsim.network.des.fluid import ExactEnvironment, FluidEngine, fair_rates

RATE_BPS = 100e9
BITS = 8e6


def _run_flows(starts_s: list[float], bits: float = BITS) -> list[float]:
    """Flows of `bits` on one link starting at the given times; their finish times."""
    env = ExactEnvironment()
    engine = FluidEngine(env, np.array([RATE_BPS]))
    finished: list[float] = [np.nan] * len(starts_s)
    for i, start in enumerate(starts_s):

        def begin(_event, i=i):
            engine.start((0,), (1.0,), bits, lambda t, *_, i=i: finished.__setitem__(i, t))

        env.at(start, begin)
    env.run()
    return finished


def test_two_flows_on_one_link_each_get_half():
    alone = BITS / RATE_BPS
    assert _run_flows([0.0]) == [alone]
    assert _run_flows([0.0, 0.0]) == pytest.approx([2 * alone, 2 * alone], rel=1e-12)


def test_rates_are_recomputed_when_a_flow_joins_and_leaves():
    alone = BITS / RATE_BPS
    # A sends half alone; both at half rate until A ends (1.5); B's last half alone (2.0).
    first, second = _run_flows([0.0, alone / 2])
    assert first == pytest.approx(1.5 * alone, rel=1e-12)
    assert second == pytest.approx(2.0 * alone, rel=1e-12)


def test_max_min_fairness_gives_the_spare_capacity_to_the_unconstrained_flow():
    # Flow 0 crosses links 0 (10) and 1 (2); flow 1 only link 0: rates 2 and 8, not 5 and 5.
    rates = fair_rates([10.0, 2.0], [((0, 1), (1.0, 1.0)), ((0,), (1.0,))])
    assert rates == pytest.approx([2.0, 8.0])
    # A weighted flow (4 resource bits per payload bit) alone gets capacity / weight.
    assert fair_rates([8.0], [((0,), (4.0,))]) == [2.0]


def test_link_fault_delays_the_exchange_but_it_finishes():
    network = NetworkSpec("f", "switch", 4, LinkSpec(RATE_BPS, latency_s=1e-6))
    exchange = Exchange("ring_allreduce", 4_000_000)
    healthy = simulate_exchange(network, exchange)
    down_s = 200e-6
    fault = LinkFault("h1->sw", 10e-6, 10e-6 + down_s)
    faulted = simulate_exchange(network, exchange, faults=[fault])
    assert faulted.method == "fast"  # a ring's transfers wait out the outage on the fast path
    reference = simulate_exchange(network, exchange, faults=[fault], method="des")
    assert faulted.time_s == pytest.approx(reference.time_s, abs=1e-12)
    assert np.all(np.isfinite(faulted.finish_s))
    delay = faulted.time_s - healthy.time_s
    assert 0 < delay <= down_s * (1 + 1e-9)
    assert faulted.wait_s == pytest.approx(delay, rel=1e-6)
    assert faulted.wait_s > 0 and healthy.wait_s == pytest.approx(0.0, abs=1e-15)
    # Both directions named at once, and a fault that ends before anything moves changes nothing.
    both = simulate_exchange(network, exchange, faults=[LinkFault("h1<->sw", 10e-6, 20e-6)])
    assert both.time_s > healthy.time_s
    early = simulate_exchange(network, exchange, faults=[LinkFault("h1->sw", -5.0, -1.0)])
    assert early.time_s == healthy.time_s


def test_faults_that_overlap_are_merged():
    network = NetworkSpec("f", "switch", 2, LinkSpec(RATE_BPS))
    exchange = Exchange("ring_allgather", 1_000_000)
    merged = simulate_exchange(network, exchange, faults=[LinkFault("h0->sw", 0.0, 3e-5)])
    pieces = simulate_exchange(
        network,
        exchange,
        faults=[LinkFault("h0->sw", 0.0, 2e-5), LinkFault("h0->sw", 1e-5, 3e-5)],
    )
    assert pieces.time_s == merged.time_s == pytest.approx(3e-5 + 8e6 / RATE_BPS, rel=1e-12)


def test_back_to_back_transfers_do_not_become_contention():
    # The next transfer starts a rounding step before the last one's projected end.
    env = ExactEnvironment()
    engine = FluidEngine(env, np.array([RATE_BPS]))
    ends: list[float] = []
    first_end = BITS / RATE_BPS

    def second(_event):
        engine.start((0,), (1.0,), BITS, lambda t, *_: ends.append(t), np.nextafter(first_end, 0))

    engine.start((0,), (1.0,), BITS, lambda t, *_: ends.append(t))
    env.at(np.nextafter(first_end, 0), second)
    env.run()
    assert ends[0] == first_end
    assert ends[1] == np.nextafter(first_end, 0) + BITS / RATE_BPS
