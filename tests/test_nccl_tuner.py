"""Issue 44 item 2: in NCCL mode NCCL's own tuner (network/nccl_tuner.py, tuning.cc of NCCL
2.30.7) picks algorithm and protocol; channels leave a multi-GPU node through their own NIC;
the in-switch sum keeps the switch's buffer; the CLI shows no closed form in NCCL mode."""

import dataclasses

import pytest
from cli_run import run_cli

from transitsim.network import Exchange, simulate_exchange
from transitsim.network.nccl_tuner import TunerInputs, choose, latency_us, time_us, tuner_inputs
from transitsim.network.spec import NcclSpec
from transitsim.scenario import network_preset

SIZES = [8 << (2 * i) for i in range(15)]  # 8 B .. 2 GiB, every fourth power of two
ORDER = {"ll": 0, "ll128": 1, "simple": 2}


def busbw_gbps(network, size: int) -> float:
    n = network.workers
    result = simulate_exchange(network, Exchange("ring_allreduce", size))
    return size / result.time_s * 2 * (n - 1) / n / 1e9


def test_tuning_cc_latencies_by_hand() -> None:
    """Lines of ncclTopoTuneModel, computed by hand for two networks."""
    one_node = TunerInputs(ranks=8, nodes=1, channels=16, bw_intra=23.0, bw_inter=23.0)
    # ring LL on one NVLink node: baseLat 6.6 + 2 (8 - 1) steps x hwLat NVLINK ring LL 0.6
    assert latency_us(one_node, "all_reduce", "ring", "ll") == pytest.approx(6.6 + 14 * 0.6)
    two = TunerInputs(ranks=16, nodes=2, channels=16, bw_intra=12.0, bw_inter=12.0, gpu="ampere")
    # ring Simple on 2 nodes: 28 steps inside at max(NVLINK 3.4, 3 x net overhead 1.0), 2 across
    # at NET ring Simple 14.0, on top of baseLat 8.4
    assert latency_us(two, "all_reduce", "ring", "simple") == pytest.approx(8.4 + 28 * 3.4 + 28)
    # the ring's plateau: x1.4 from Ampere on once nBytes / (channels x ranks) >= 64; bandwidth:
    # 16 channels x 12 GB/s, x 16 / 30 (ranks / steps) as algorithm bandwidth
    big = 1 << 30
    expected = (8.4 + 28 * 3.4 + 28) * 1.4 + big / (1000 * 16 * 12.0 * 16 / 30)
    assert time_us(two, "all_reduce", "ring", "simple", big) == pytest.approx(expected)


@pytest.mark.parametrize("preset", ["dgx-a100", "dgx-h100", "p5"])
def test_on_one_node_the_tuner_never_picks_a_tree(preset: str) -> None:
    network = network_preset(preset)
    algos = {simulate_exchange(network, Exchange("ring_allreduce", s)).algo for s in SIZES}
    assert not algos & {"tree", "double_binary_tree"}, algos


@pytest.mark.parametrize("preset", ["dgx-a100", "dgx-a100x2", "dgx-h100x2", "p5", "p5x2"])
def test_protocols_switch_once_each_as_size_grows(preset: str) -> None:
    network = network_preset(preset)
    chosen = [simulate_exchange(network, Exchange("ring_allreduce", s)).protocol for s in SIZES]
    ranks = [ORDER[p] for p in chosen]
    assert ranks == sorted(ranks), chosen
    assert chosen[0] == "ll" and chosen[-1] == "simple"


def test_the_mode_runs_what_the_tuner_predicts_fastest() -> None:
    network = network_preset("dgx-a100x2")
    inputs = tuner_inputs(network)
    names = {"ring_allreduce": "ring", "double_binary_tree": "tree"}
    for size in SIZES:
        result = simulate_exchange(network, Exchange("ring_allreduce", size))
        algo, proto, _ = choose(inputs, "all_reduce", size, ("ring", "tree"), tuple(ORDER))
        assert (names[result.algo], result.protocol) == (algo, proto)


def test_two_dgx_a100_reach_their_nics_aggregate() -> None:
    """8 x 200 Gb/s NICs a node: 16 channels, two per rail's NIC, carry 200 GB/s busbw (the real
    table: 188.5 GB/s at 4 GiB; before, every channel shared one NIC: 45.8 GB/s)."""
    network = network_preset("dgx-a100x2")
    assert busbw_gbps(network, 4 << 30) >= 0.9 * 200


def test_channels_use_every_nic_only_when_there_are_enough() -> None:
    """One channel crosses on one NIC: a quarter of eight channels' rate, as NCCL's would."""
    network = network_preset("dgx-a100x2")
    fixed = dataclasses.replace(network.nccl, protocol="simple", algorithm=None)
    one, eight = (
        busbw_gbps(
            dataclasses.replace(network, nccl=dataclasses.replace(fixed, channels=c)), 1 << 30
        )
        for c in (1, 8)
    )
    assert one <= 25.0 * 1.001 and eight >= 7 * one


def test_the_in_switch_sum_is_not_slowed_by_the_mode() -> None:
    """NVLS in NCCL mode keeps the switch's 4 MiB slots (before: each channel's part was summed
    in a slot of its own, 1.7x slower at 64 MiB)."""
    plain = network_preset("8xh100-nvls")
    mode = dataclasses.replace(plain, nccl=NcclSpec(protocol="simple", channels=16))
    exchange = Exchange("switch_sum", 64 << 20)
    bare = simulate_exchange(plain, exchange).time_s
    nccl = simulate_exchange(mode, exchange)
    base = mode.nccl.simple.base_latency_s
    assert nccl.time_s <= (bare + base + 30e-6) * 1.02  # + NCCL's NVLS latency (25 us)
    assert nccl.time_s < 1.2 * bare


def test_the_cli_shows_no_closed_form_in_nccl_mode() -> None:
    code, out, _ = run_cli(
        ["collective", "-n", "p5", "--algo", "ring-allreduce", "--bytes", "1 GiB"]
    )
    assert code == 0
    assert "not shown in NCCL mode" in out and "closed form" in out
    code, out, _ = run_cli(
        ["collective", "-n", "p5", "--algo", "ring-allreduce", "--bytes", "1 GiB", "--json"]
    )
    assert code == 0 and '"closed_form_s": null' in out
