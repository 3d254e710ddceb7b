"""Link efficiency: the payload share of a link's rate once framing and headers are paid."""

import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    Exchange,
    LinkSpec,
    NetworkSpec,
    closed_form_time_s,
    simulate_exchange,
    tcp_efficiency,
    validate_network,
)


def _net(efficiency: float) -> NetworkSpec:
    link = LinkSpec(1e9, latency_s=2e-6, overhead_s=1e-6, efficiency=efficiency)
    return NetworkSpec("eff", "switch", 4, link)


def test_tcp_efficiency_at_mtu_1500():
    assert tcp_efficiency(1500) == pytest.approx(1448 / 1514)
    assert tcp_efficiency(1500, wire_extra_bytes=24) == pytest.approx(1448 / 1538)
    assert tcp_efficiency(9000) > tcp_efficiency(1500) > tcp_efficiency(1500, ack_bytes=33)


@pytest.mark.parametrize("algo", ("ring_allreduce", "ring_allgather", "tree", "double_binary_tree"))
def test_efficiency_slows_only_serialisation(algo):
    """Halving the payload share is halving the rate: latency and overheads stay as they are."""
    size = 8_000_000
    full = simulate_exchange(_net(1.0), Exchange(algo, size), method="des")
    half = simulate_exchange(_net(0.5), Exchange(algo, size), method="des")
    slow = NetworkSpec("slow", "switch", 4, LinkSpec(0.5e9, latency_s=2e-6, overhead_s=1e-6))
    assert half.time_s == pytest.approx(simulate_exchange(slow, Exchange(algo, size)).time_s)
    if "tree" not in algo:  # rings are affine in the bandwidth term (a tree's chunking is not)
        # affine: time(b) = L + c b, so L = 2 time(b / 2) - time(b) (an exchange of 0 bytes sends
        # no message at all, so it cannot stand for L)
        halved = simulate_exchange(_net(1.0), Exchange(algo, size // 2), method="des")
        latency_s = 2 * halved.time_s - full.time_s
        assert latency_s > 0
        bandwidth = full.time_s - latency_s
        assert half.time_s == pytest.approx(latency_s + 2 * bandwidth, rel=1e-9)
        assert half.time_s == pytest.approx(closed_form_time_s(_net(0.5), Exchange(algo, size)))
    else:
        assert closed_form_time_s(_net(0.5), Exchange(algo, size)) <= half.time_s  # a lower bound
        assert full.time_s < half.time_s
    assert half.bytes_sent.sum() == full.bytes_sent.sum()


@pytest.mark.parametrize("bad", (0.0, -0.1, 1.5, float("nan")))
def test_efficiency_out_of_range_is_one_line_error(bad):
    with pytest.raises(TransitsimError, match="efficiency must be in"):
        validate_network(_net(bad))


def test_scenario_key_efficiency():
    from transitsim.scenario import network_from_dict

    raw = {
        "name": "tcp",
        "topology": "switch",
        "workers": 2,
        "host_link": {"rate": "50 Mb/s", "efficiency": 0.956},
    }
    assert network_from_dict(raw).host_link.efficiency == 0.956
    with pytest.raises(TransitsimError, match="efficiency"):
        network_from_dict({**raw, "host_link": {"rate": "50 Mb/s", "efficiency": 1.2}})
