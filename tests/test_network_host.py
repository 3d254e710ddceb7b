"""The host endpoint (NetworkSpec.host, issue 25 item 2): by-hand cases, rings of ranks sharing a
host on the fast path against the DES, `host: None` unchanged, and refusals in YAML and on the
CLI (one line, exit 2)."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_hostile_inputs import one_line_exit_2
from test_hostile_networks import scenario
from test_network_fast_vs_des import _case
from test_run_cli import run_cli, write_test_trace

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    Exchange,
    LinkSpec,
    NetworkSpec,
    SwitchSpec,
    closed_form_time_s,
    simulate_exchange,
)
from transitsim.network.background import Background
from transitsim.network.forms import linear_exchange
from transitsim.network.spec import HostSpec
from transitsim.network.topology import worker_groups
from transitsim.scenario import network_from_dict

MB = 1_000_000


def switch(workers: int, host: HostSpec | None, rate: float = 10e9, **link) -> NetworkSpec:
    return NetworkSpec("sw", "switch", workers, LinkSpec(rate, **link), host=host)


@pytest.mark.parametrize("method", ["des", "auto"])
def test_four_ranks_on_one_host_share_its_rate_each_way(method):
    """4 ranks on one host of R = 1 Gb/s, 10 Gb/s links: in each of the ring's 2(P - 1) = 6
    phases the host sends 4 chunks of N / 4 and receives 4, each at R / 4, so a phase takes
    (N / 4) x 8 / (R / 4) = 8 N / R = 8 ms for N = 1 MB, and the all-reduce 48 ms (the links
    alone: 6 x 0.2 ms = 1.2 ms). One rank a host: each chunk at R, 6 x 2 ms = 12 ms."""
    shared = simulate_exchange(
        switch(4, HostSpec(rate_bps=1e9, ranks_per_host=4)),
        Exchange("ring_allreduce", MB),
        method=method,
    )
    assert shared.time_s == pytest.approx(6 * 8 * MB / 1e9, rel=1e-12)
    assert shared.bottleneck == "host"
    stats = shared.link_stats.set_index("link")
    assert list(stats.index[stats["kind"] == "host"]) == ["host0:send", "host0:receive"]
    assert stats.loc["host0:send", "bytes"] == pytest.approx(6 * 4 * MB / 4)
    assert stats.loc["host0:send", "busy_s"] == pytest.approx(shared.time_s)
    alone = simulate_exchange(
        switch(4, HostSpec(rate_bps=1e9)), Exchange("ring_allreduce", MB), method=method
    )
    assert alone.time_s == pytest.approx(6 * 2 * MB / 1e9, rel=1e-12)
    assert alone.method == "fast" or method == "des"
    links = simulate_exchange(switch(4, None), Exchange("ring_allreduce", MB), method=method)
    assert links.time_s == pytest.approx(6 * 2 * MB / 10e9, rel=1e-12)


def test_two_hosts_of_four_and_the_per_message_cost():
    """8 ranks, 2 hosts of 4: a host sends 4 chunks at once (ranks 0-3 to 1-4) and receives 4,
    each at R / 4; every message also pays 20 us at its sender: 14 phases of N / 8 bytes,
    14 x (N / 8 x 8 / (R / 4) + 20 us) = 14 x 4.02 ms = 56.28 ms (the command's figure)."""
    host = HostSpec(per_message_s=20e-6, rate_bps=1e9, ranks_per_host=4)
    result = simulate_exchange(switch(8, host), Exchange("ring_allreduce", MB))
    assert result.time_s == pytest.approx(14 * (MB / 8 * 8 / (1e9 / 4) + 20e-6), rel=1e-12)
    assert result.method == "fast"  # every phase in step: the shared rate is exact
    des = simulate_exchange(switch(8, host), Exchange("ring_allreduce", MB), method="des")
    assert result.time_s == pytest.approx(des.time_s, abs=1e-12)
    only_cost = simulate_exchange(
        switch(8, HostSpec(per_message_s=20e-6)), Exchange("ring_allreduce", MB)
    )
    assert only_cost.time_s == pytest.approx(14 * (MB / 8 * 8 / 10e9 + 20e-6), rel=1e-12)


def test_ranks_of_one_host_still_cross_their_own_links():
    """Two ranks of one host exchange over their links (each keeps its own), through the
    host's send and receive sides: the link, not the loopback, sets the pace here."""
    result = simulate_exchange(
        switch(2, HostSpec(rate_bps=100e9, ranks_per_host=2)), Exchange("ring_allgather", MB)
    )
    assert result.time_s == pytest.approx(8 * MB / 10e9, rel=1e-12)
    assert result.bottleneck == "link"
    stats = result.link_stats.set_index("link")
    assert stats.loc["h0->sw", "bytes"] == MB and stats.loc["host0:receive", "bytes"] == 2 * MB


@pytest.mark.parametrize(
    ("algo", "message"),
    [("ring_allreduce", "start a phase together"), ("switch_sum", "send a piece together")],
)
def test_a_straggler_sends_ranks_sharing_a_host_to_the_des(algo: str, message: str):
    network = switch(4, HostSpec(rate_bps=1e9, ranks_per_host=2))
    network = dataclasses.replace(network, switch=SwitchSpec(aggregator=True))
    exchange = Exchange(algo, MB)
    start = np.array([0.0, 1e-4, 0.0, 0.0])
    auto = simulate_exchange(network, exchange, start_s=start)
    assert auto.method == "des"
    with pytest.raises(TransitsimError, match=message):
        simulate_exchange(network, exchange, start_s=start, method="fast")
    assert linear_exchange(network, exchange) is None  # not max-plus linear: simulated per step
    one_each = dataclasses.replace(network, host=HostSpec(rate_bps=1e9))
    assert linear_exchange(one_each, exchange) is not None


@pytest.mark.parametrize("algos", [("ring_allreduce", "ring_allgather"), ("switch_sum",)])
def test_ranks_shain_step_in_step_equal_the_des(algos):
    """Random rings and switch sums (every topology, pluggables, transforms, slots, constant
    background) with several ranks a host, all starting together: wherever the fast path takes
    them (every phase or piece in step), every finish, the critical path and every resource's
    busy time and bytes equal the DES's."""
    fast = 0
    for seed in range(150):
        algo = algos[seed % len(algos)]
        network, exchange, _ = _case(algo, seed)
        rng = np.random.default_rng([seed, 7])
        size = math.gcd(*{len(g) for g in worker_groups(network)})
        if seed % 3 == 0:  # a host may hold ranks of two racks or datacentres
            size = network.workers
        per = [d for d in range(2, size + 1) if size % d == 0 and network.workers % d == 0]
        if not per:
            continue
        host = HostSpec(
            per_message_s=float(rng.choice([0.0, 1e-6])),
            rate_bps=float(rng.choice([10e9, 100e9, 1e12])),
            ranks_per_host=int(rng.choice(per)),
        )
        network = dataclasses.replace(network, host=host)
        if rng.random() < 0.3:
            link = dataclasses.replace(network.host_link, background=Background.constant(0.5))
            network = dataclasses.replace(network, host_link=link)
        auto = simulate_exchange(network, exchange)
        des = simulate_exchange(network, exchange, method="des")
        if auto.method == "fast":
            fast += 1
            np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=0, atol=1e-9)
            assert auto.bottleneck == des.bottleneck and auto.wait_s == pytest.approx(des.wait_s)
            for column in ("busy_s", "bytes"):
                np.testing.assert_allclose(
                    auto.link_stats[column], des.link_stats[column], rtol=1e-9, atol=1e-12
                )
    assert fast >= 30, fast


def test_no_host_and_a_free_host_change_nothing():
    """host None, and a host of defaults (free: no rate, no cost, one rank each), give the
    links-only figures bit for bit, with no host rows in the link table."""
    for seed in range(40):
        algo = ("ring_allreduce", "switch_sum", "tree", "hierarchical")[seed % 4]
        network, exchange, start = _case(algo, seed)
        plain = simulate_exchange(network, exchange, start_s=start)
        free = simulate_exchange(
            dataclasses.replace(network, host=HostSpec()), exchange, start_s=start
        )
        assert np.array_equal(plain.finish_s, free.finish_s) and plain.method == free.method
        assert plain.link_stats.equals(free.link_stats)


BAD_HOSTS = [
    ({"per_message": "20 parsecs"}, "host.per_message"),
    ({"rate": "0 Gb/s"}, "host.rate"),
    ({"rate": "-1 Gb/s"}, "host.rate"),
    ({"per_message": "-2 us"}, "host.per_message"),
    ({"ranks_per_host": 3}, "must divide workers"),
    ({"ranks_per_host": 0}, "host.ranks_per_host"),
    ({"rate": "1 Gb/s", "speed": 2}, "host.speed"),
]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("host")
    write_test_trace(folder / "traces", "A", 0)
    return folder


@pytest.mark.parametrize(("host", "message"), BAD_HOSTS)
def test_validate_refuses_a_bad_host_block(work: Path, capsys, host: dict, message: str):
    network = {"preset": "8x200g-switch", "host": host}
    one_line_exit_2(["validate", scenario(work, "bad-host.yaml", network)], capsys, message)


def test_one_host_may_hold_both_datacentres(work: Path, capsys):
    """The testbed's two sites are namespaces of one machine: one host of all 16 ranks across
    2dc-wan's two datacentres validates and shares its rate among them (here it binds)."""
    network = {"preset": "2dc-wan", "host": {"rate": "1 Gb/s", "ranks_per_host": 16}}
    code, _, stderr = run_cli(["validate", scenario(work, "one-machine.yaml", network)], capsys)
    assert code == 0, stderr
    spec = network_from_dict(network)
    result = simulate_exchange(spec, Exchange("hierarchical", MB))
    assert result.method == "des" and result.bottleneck == "host"
    des = simulate_exchange(spec, Exchange("hierarchical", MB), method="des")
    assert result.time_s == des.time_s


def test_a_good_host_block_validates_and_runs(work: Path, capsys):
    network = {
        "preset": "8x200g-switch",
        "host": {"per_message": "20 us", "rate": "1 Gb/s", "ranks_per_host": 4},
    }
    code, _, stderr = run_cli(["validate", scenario(work, "good-host.yaml", network)], capsys)
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--host-rate", "0 Gb/s"], "--host-rate"),
        (["--host-rate", "fast"], "--host-rate"),
        (["--host-overhead", "-1 us"], "--host-overhead"),
        (["--ranks-per-host", "3"], "--ranks-per-host"),
        (["--ranks-per-host", "0"], "--ranks-per-host"),
    ],
)
def test_collective_refuses_bad_host_options(capsys, extra: list[str], message: str):
    argv = ["collective", "--algo", "ring-allreduce", "--workers", "4", "--bytes", "1MB"]
    one_line_exit_2([*argv, "--bandwidth", "10 Gb/s", *extra], capsys, message)


def test_collective_takes_the_host_options(capsys):
    argv = ["collective", "--algo", "ring-allreduce", "--workers", "8", "--bytes", "1MB"]
    argv += ["--bandwidth", "10 Gb/s", "--host-rate", "1 Gb/s", "--host-overhead", "20 us"]
    code, stdout, stderr = run_cli([*argv, "--ranks-per-host", "4", "--json"], capsys)
    assert code == 0, stderr
    row = json.loads(stdout)
    assert row["time_s"] == pytest.approx(0.05628, rel=1e-12)
    assert row["closed_form_s"] == pytest.approx(row["time_s"], rel=1e-12)
    assert row["bottleneck"] == "host" and row["method"] == "fast"
    code, stdout, _ = run_cli(
        [
            "collective",
            "--algo",
            "ring-allreduce",
            "--network",
            "8x200g-switch",
            "--bytes",
            "1MB",
            "--host-rate",
            "1 Gb/s",
            "--json",
        ],
        capsys,
    )
    assert code == 0 and json.loads(stdout)["bottleneck"] == "host"


@pytest.mark.parametrize("per", [1, 2, 4])
@pytest.mark.parametrize(
    "algo",
    [
        "ring_allreduce",
        "ring_allgather",
        "switch_sum",
        "hierarchical",
        "tree",
        "double_binary_tree",
    ],
)
def test_the_closed_forms_carry_the_host_term(algo: str, per: int):
    """Symmetric networks: the ring, switch-sum and hierarchical closed forms equal the DES with
    a host endpoint (its cost and its shared rate); the trees' bound stays below it and, with
    ranks sharing a host, counts the host's sends together (above the links-only bound)."""
    host = HostSpec(per_message_s=20e-6, rate_bps=1e9, ranks_per_host=per)
    if algo == "hierarchical":
        network = NetworkSpec(
            "dc", "datacentres", 8, LinkSpec(10e9), datacentres=2,
            wan_link=LinkSpec(5e9, length_m=1e5), host=host,
        )  # fmt: skip
    else:
        network = switch(8, host)
        if algo == "switch_sum":
            network = dataclasses.replace(network, switch=SwitchSpec(aggregator=True))
    exchange = Exchange(algo, MB)
    des = simulate_exchange(network, exchange, method="des").time_s
    closed = closed_form_time_s(network, exchange)
    if "tree" not in algo:
        assert closed == pytest.approx(des, rel=1e-9)
        return
    assert closed <= des * (1 + 1e-12)
    links_only = closed_form_time_s(dataclasses.replace(network, host=None), exchange)
    own = dataclasses.replace(host, ranks_per_host=1)
    one_each = closed_form_time_s(dataclasses.replace(network, host=own), exchange)
    assert closed > links_only and (per == 1 or closed > 1.2 * one_each)


@pytest.mark.parametrize(
    ("host", "message"),
    [
        (HostSpec(rate_bps=0.0), "host.rate_bps must be a positive number"),
        (HostSpec(rate_bps=-1e9), "host.rate_bps must be a positive number"),
        (HostSpec(per_message_s=-1e-6), "host.per_message_s must be a finite number >= 0"),
        (HostSpec(per_message_s=math.nan), "host.per_message_s must be a finite number >= 0"),
        (HostSpec(ranks_per_host=0), "host.ranks_per_host must be an integer >= 1"),
        (HostSpec(ranks_per_host=3), r"host.ranks_per_host \(3\) must divide workers \(4\)"),
    ],
)
def test_the_api_refuses_a_bad_host_spec(host: HostSpec, message: str):
    with pytest.raises(TransitsimError, match=message):
        simulate_exchange(switch(4, host), Exchange("ring_allreduce", MB))
