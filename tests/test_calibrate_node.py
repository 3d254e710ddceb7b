"""Issue 44 item 3: `calibrate node` fits the node (NIC and NVLink rates and latencies), so the
network it writes scales: fitted on 2 nodes, `--set workers=N` predicts the same cluster on
more. Checked on tables the engine itself wrote for a known node (the real tables' figures are
docs/calibration.md's, from benchmarks/bench_node_calibration.py)."""

import math
from pathlib import Path

import pytest
import yaml
from cli_run import run_cli
from nccl_fixtures import nccl_fixture

from transitsim.calibrate.model import exchange_for
from transitsim.calibrate.nccl_tests import Row, Table
from transitsim.calibrate.node_fit import calibrate_node, gpu_generation, node_network
from transitsim.network import simulate_exchange
from transitsim.scenario import network_from_dict

TRUE = {"nic_bps": 200e9, "nic_latency_s": 3e-6, "nvlink_bps": 2400e9, "nvlink_latency_s": 0.5e-6}
SIZES = [1 << k for k in range(16, 29, 2)]  # 64 KiB .. 256 MiB, every fourth power


def engine_table(workers: int, gpus_per_node: int) -> Table:
    """An nccl-tests all_reduce table as the engine times the TRUE node."""
    network = node_network(workers, gpus_per_node, TRUE, "hopper", "intel")
    rows = []
    for line, size in enumerate(SIZES, 1):
        time_s = simulate_exchange(network, exchange_for("all_reduce", "ring_allreduce",
                                                         workers, size)).time_s  # fmt: skip
        algbw = size / time_s / 1e9
        busbw = algbw * 2 * (workers - 1) / workers
        rows.append(Row(line, size, size // 4, "float", time_s, algbw, busbw, math.nan,
                        math.nan, math.nan))  # fmt: skip
    hosts = {f"node{i}": gpus_per_node for i in range(workers // gpus_per_node)}
    return Table("engine", "all_reduce", workers, rows, ranks_per_host=hosts)


def test_the_node_fitted_on_two_nodes_predicts_four() -> None:
    """The fit is a local search on a surface NCCL's tuner breaks (its choices switch with the
    rates); started with the NVLink at twice the bus bandwidth it finds the true node of this
    table (a start too fast to bind, 10 x, stopped 7 % off, the NVLink at 6 Tb/s), and the
    4-node network is the true node's (docs/calibration.md)."""
    fit = calibrate_node(engine_table(8, 4))
    assert fit.gpus_per_node == 4 and fit.nodes == 2  # read off the Rank lines' hosts
    assert fit.worst("fit") < 0.01
    for key, value in TRUE.items():
        assert fit.values[key] == pytest.approx(value, rel=0.01), key
    bigger = fit.network(workers=16)
    truth = node_network(16, 4, TRUE, "hopper", "intel")
    for size in (1 << 20, 1 << 24, 1 << 28):
        exchange = exchange_for("all_reduce", "ring_allreduce", 16, size)
        predicted = simulate_exchange(bigger, exchange).time_s
        assert predicted == pytest.approx(simulate_exchange(truth, exchange).time_s, rel=0.01)


def test_the_cli_writes_a_node_that_scales_with_set_workers(tmp_path: Path) -> None:
    table = engine_table(8, 4)
    text = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    for r in table.rows:
        text += (
            f"{r.size_bytes:>12} {r.count:>12} float sum -1 {r.time_s * 1e6:>9.2f} "
            f"{r.algbw_gbps:>7.2f} {r.busbw_gbps:>7.2f} 0\n"
        )
    path = tmp_path / "engine.txt"
    path.write_text(text)
    out = tmp_path / "node.yaml"
    code, stdout, stderr = run_cli(
        ["calibrate", "node", str(path), "-o", str(out), "--ranks", "8", "--gpus-per-node", "4"]
    )
    assert code == 0, stderr
    assert "held out" in stdout and "alpha-beta" in stdout
    written = yaml.safe_load(out.read_text())
    assert written["topology"] == "rail_optimised" and written["gpus_per_node"] == 4
    network = network_from_dict({**written, "workers": 32})
    assert network.workers == 32 and network.nccl is not None and network.nccl.tuner == "nccl"
    code, stdout, _ = run_cli(
        ["collective", "-n", str(out), "--set", "workers=32", "--algo", "ring-allreduce",
         "--bytes", "64 MiB"]
    )  # fmt: skip
    assert code == 0 and "32 workers" in stdout
    code, stdout, _ = run_cli(
        ["collective", "-n", str(out), "--set", "nodes=8", "--algo", "ring-allreduce",
         "--bytes", "64 MiB"]
    )  # fmt: skip
    assert code == 0 and "32 workers" in stdout  # 8 nodes of 4


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_text("#  size count type redop root time algbw busbw #wrong\n")
    code, _, stderr = run_cli(
        ["calibrate", "node", str(table), "-o", str(tmp_path / "o.yaml"), "--gpu", "pascal"]
    )
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "--gpu" in stderr


def test_a_table_whose_rank_lines_do_not_say_the_gpus_a_node_is_told_so(tmp_path: Path) -> None:
    """Without Rank lines the node is taken to hold one GPU and to be a Hopper, which a
    cluster of 8-GPU A100 nodes would get silently wrong: the command says so. The real 2 x 1
    Alps table names its two hosts and their GH200s (no notes; the generation read off
    them); the same table with its Rank lines cut gets both notes."""
    real = nccl_fixture("alps-2x1-gh200-all_reduce.txt")
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(x for x in real.read_text().splitlines(True) if "Rank" not in x))
    notes, outputs = [], []
    for path in (real, cut):
        out = tmp_path / f"{path.stem}.yaml"
        code, stdout, stderr = run_cli(
            ["calibrate", "node", str(path), "-o", str(out), "--no-holdout"]
        )
        assert code == 0, stderr
        notes.append(("--gpus-per-node" in stdout, "took hopper (--gpu)" in stdout))
        outputs.append(stdout)
    assert notes == [(False, False), (True, True)]
    assert "gpu: hopper, from the Rank lines (NVIDIA GH200 120GB)" in outputs[0]


@pytest.mark.parametrize(
    "name, generation",
    [
        ("NVIDIA A100-SXM4-80GB", "ampere"),
        ("NVIDIA A10G", "ampere"),
        ("NVIDIA L40S", "ampere"),
        ("NVIDIA H100 80GB HBM3", "hopper"),
        ("NVIDIA GH200 120GB", "hopper"),
        ("NVIDIA H800", "hopper"),
        ("Tesla V100-SXM2-32GB", "volta"),
        ("Tesla T4", "volta"),
        ("NVIDIA B200", "blackwell"),
        ("NVIDIA GB200", "blackwell"),
        ("Some Other Accelerator", None),
    ],
)
def test_nccls_gpu_generation_is_read_off_the_gpus_name(name: str, generation: str | None) -> None:
    assert gpu_generation({name}) == generation
    assert gpu_generation({name, "NVIDIA H100 80GB HBM3"}) == (
        "hopper" if generation == "hopper" else None
    )
