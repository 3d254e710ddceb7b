"""The NCCL mode (network/nccl.py) on made-up networks: the protocol chosen by size, each
protocol's efficiency and latency applied, channels, auto never slower than a fixed protocol,
DES and fast paths agreeing, and the mode off leaving every result as it was."""

import dataclasses

import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.network.spec import NcclSpec, ProtocolSpec
from transitsim.scenario import network_from_dict

BASE = NetworkSpec("t", "switch", 8, LinkSpec(400e9, latency_s=1e-6))
MODE = NcclSpec(channels=8)
NET = dataclasses.replace(BASE, nccl=MODE)
SIZES = (8, 1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 28)


def ring(size: int) -> Exchange:
    return Exchange("ring_allreduce", size)


def test_the_protocol_is_chosen_by_size_ll_small_simple_large() -> None:
    chosen = [simulate_exchange(NET, ring(s)).protocol for s in SIZES]
    assert chosen[0] == "ll" and chosen[-1] == "simple"
    order = {"ll": 0, "ll128": 1, "simple": 2}
    assert [order[p] for p in chosen] == sorted(order[p] for p in chosen)


@pytest.mark.parametrize("size", SIZES)
def test_auto_by_the_engine_is_never_slower_than_any_fixed_protocol(size: int) -> None:
    """tuner "engine" (what a calibration writes) takes the least engine time."""
    engine = dataclasses.replace(MODE, tuner="engine")
    auto = simulate_exchange(dataclasses.replace(NET, nccl=engine), ring(size)).time_s
    for protocol in ("ll", "ll128", "simple"):
        fixed = dataclasses.replace(NET, nccl=dataclasses.replace(engine, protocol=protocol))
        assert auto <= simulate_exchange(fixed, ring(size)).time_s * (1 + 1e-12)


def test_efficiency_and_latency_are_applied_to_the_links() -> None:
    """One channel, one protocol: the same as the links with its efficiency and latency (tuner
    "engine": no cap from NCCL's tables)."""
    proto = ProtocolSpec(efficiency=0.5, latency_s=3e-6)
    mode = NcclSpec(protocol="ll", ll=proto, tuner="engine")
    by_hand = dataclasses.replace(BASE, host_link=LinkSpec(400e9, latency_s=4e-6, efficiency=0.5))
    for size in (1 << 10, 1 << 24):
        got = simulate_exchange(dataclasses.replace(BASE, nccl=mode), ring(size))
        assert got.time_s == pytest.approx(simulate_exchange(by_hand, ring(size)).time_s)
        assert got.protocol == "ll" and got.channels == 1


def test_channels_split_the_payload_and_a_channel_rate_caps_each() -> None:
    """C channels of a capped rate move C times what one does; below C x channel_bytes fewer
    channels run, so the time stops falling with size."""
    capped = ProtocolSpec(efficiency=1.0, latency_s=0.0, channel_rate_bps=10e9, channel_bytes=0)
    size = 1 << 26
    times = {}
    for channels in (1, 4):
        mode = NcclSpec(protocol="simple", channels=channels, simple=capped)
        result = simulate_exchange(dataclasses.replace(BASE, nccl=mode), ring(size))
        times[channels] = result.time_s
        assert result.channels == channels
        assert result.bytes_sent.sum() == pytest.approx(
            simulate_exchange(BASE, ring(size)).bytes_sent.sum(), rel=1e-6
        )
    assert times[1] / times[4] == pytest.approx(4.0, rel=0.01)
    floor = dataclasses.replace(capped, channel_bytes=1 << 20)
    mode = NcclSpec(protocol="simple", channels=8, simple=floor)
    net = dataclasses.replace(BASE, nccl=mode)
    small, double = (simulate_exchange(net, ring(s)) for s in (2 << 20, 4 << 20))
    assert (small.channels, double.channels) == (2, 4)
    assert double.time_s == pytest.approx(small.time_s, rel=0.02)


@pytest.mark.parametrize("size", SIZES[1:])
@pytest.mark.parametrize("algo", ["ring_allreduce", "double_binary_tree", "ring_allgather"])
def test_des_and_fast_paths_agree(size: int, algo: str) -> None:
    exchange = Exchange(algo, size)
    fast = simulate_exchange(NET, exchange, method="fast")
    des = simulate_exchange(NET, exchange, method="des")
    assert (fast.method, des.method) == ("fast", "des")
    assert fast.protocol == des.protocol
    assert fast.time_s == pytest.approx(des.time_s, rel=1e-9)


def test_algorithm_auto_picks_the_faster_of_ring_and_tree() -> None:
    mode = dataclasses.replace(MODE, algorithm="auto")
    net = dataclasses.replace(BASE, workers=16, nccl=mode)
    for size in (1 << 10, 1 << 28):
        auto = simulate_exchange(net, ring(size))
        assert auto.algo in ("ring_allreduce", "double_binary_tree")
        for algo in ("ring_allreduce", "double_binary_tree"):
            one = dataclasses.replace(net, nccl=MODE)
            assert auto.time_s <= simulate_exchange(one, Exchange(algo, size)).time_s * (1 + 1e-12)
    assert simulate_exchange(net, ring(1 << 10)).algo == "double_binary_tree"  # log steps


def test_the_yaml_block_reaches_the_engine_and_absent_changes_nothing() -> None:
    raw = {"topology": "switch", "workers": 8, "host_link": {"rate": "400 Gb/s"}}
    plain = network_from_dict(raw)
    assert plain.nccl is None
    before = simulate_exchange(plain, ring(1 << 20))
    assert before.protocol is None and before.channels == 1
    mode = network_from_dict({**raw, "nccl": {"protocol": "ll", "ll": {"latency": "2 us"}}})
    assert mode.nccl.protocol == "ll" and mode.nccl.ll.latency_s == pytest.approx(2e-6)
    assert mode.nccl.ll.efficiency == 0.5  # NCCL's default kept
    after = simulate_exchange(mode, ring(1 << 20))
    assert after.protocol == "ll" and after.time_s > before.time_s


def test_thresholds_choose_the_protocol_by_size_even_where_another_is_faster() -> None:
    """NCCL's switch points as a table shows them: below 64 KiB LL, below 16 MiB LL128, Simple
    above, whatever the least time would say; the YAML block carries them; bad ones refused."""
    mode = dataclasses.replace(MODE, thresholds=(64 << 10, 16 << 20))
    net = dataclasses.replace(BASE, nccl=mode)
    expected = {8: "ll", 1 << 16: "ll128", 1 << 20: "ll128", 1 << 24: "simple", 1 << 28: "simple"}
    for size, protocol in expected.items():
        result = simulate_exchange(net, ring(size))
        fixed = dataclasses.replace(BASE, nccl=dataclasses.replace(MODE, protocol=protocol))
        assert result.protocol == protocol
        assert result.time_s == pytest.approx(simulate_exchange(fixed, ring(size)).time_s)
    by_time = simulate_exchange(NET, ring(1 << 28))  # least time: not LL128 at 256 MiB
    late = dataclasses.replace(BASE, nccl=dataclasses.replace(MODE, thresholds=(8, 1 << 30)))
    slower = simulate_exchange(late, ring(1 << 28))
    assert slower.protocol == "ll128" and slower.time_s > by_time.time_s
    raw = {"topology": "switch", "workers": 8, "host_link": {"rate": "400 Gb/s"}}
    block = {"protocols": ["ll", "simple"], "thresholds": ["1 MiB"]}
    spec = network_from_dict({**raw, "nccl": block})
    assert spec.nccl.thresholds == (float(1 << 20),)
    assert simulate_exchange(spec, ring(1 << 19)).protocol == "ll"
    assert simulate_exchange(spec, ring(1 << 21)).protocol == "simple"
    for thresholds, message in (((1 << 20,), "one size fewer"), ((2, 1), "increasing")):
        bad = dataclasses.replace(BASE, nccl=dataclasses.replace(MODE, thresholds=thresholds))
        with pytest.raises(TransitsimError, match=message):
            simulate_exchange(bad, ring(1 << 20))
    fixed = dataclasses.replace(BASE, nccl=NcclSpec(protocol="ll", thresholds=(1.0, 2.0)))
    with pytest.raises(TransitsimError, match="protocol auto"):
        simulate_exchange(fixed, ring(1 << 20))


def test_a_protocol_asked_for_overrides_the_thresholds() -> None:
    """`collective --protocol simple` on a network with thresholds runs Simple at every size."""
    from transitsim.commands.collective_cmd import with_nccl

    net = dataclasses.replace(BASE, nccl=dataclasses.replace(MODE, thresholds=(8, 1 << 30)))
    fixed = with_nccl(net, "simple", None)
    assert fixed.nccl.thresholds == () and fixed.nccl.protocol == "simple"
    assert simulate_exchange(fixed, ring(1 << 20)).protocol == "simple"
    assert with_nccl(net, "auto", None).nccl.thresholds == (8, 1 << 30)
