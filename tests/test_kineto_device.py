"""GPU Kineto traces timed as the device ran them (issue 42, item 3), on a small trace whose
figures are worked by hand (tests/kineto_gpu_fixtures.py): communication kernels on several
streams unioned before they are compared with compute, a GPU that runs behind the host, RCCL's
`ncclDevKernel_Generic` and kernels known only by the op that launched them, ac2g arrows in
place of correlations, zero-length and duplicate ProfilerStep spans; then what the import
makes of the payload (--params, --dtype) and of the optimiser (--optimizer, the label)."""

import json
from pathlib import Path

import pytest
from cli_run import assert_refused, run_cli
from kineto_gpu_fixtures import RCCL, make_gpu_profile

from transitsim.base.tables import variant_label
from transitsim.calibrate.profile_table import fit_profile, profile_rows
from transitsim.network import Exchange, simulate_exchange
from transitsim.scenario.networks import network_from_dict
from transitsim.traces.format import read_trace
from transitsim.traces.kineto import kernel_dtype_bytes, read_rank_profile
from transitsim.traces.profile_import import ImportOptions, build_trace

US = 1e-6


def write(tmp_path: Path, document: dict, name: str = "gpu.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def figures_us(step) -> dict[str, float]:
    keys = ("wall_s", "compute_s", "update_s", "comm_s", "exposed_s", "hidden_s", "device_s")
    return {key: round(getattr(step, key) / US, 3) for key in keys}


@pytest.mark.parametrize(
    "quirk",
    [
        {},
        {"comm_kernel": RCCL},  # RCCL: no collective in the kernel's name
        {"comm_kernel": "fused_copy_kernel"},  # communication only by its launching op
        {"flows": True},  # kernels tied to their launches by ac2g arrows only
        {"gpu_marks": "full"},  # the GPU's own ProfilerStep annotations
        {"lag": 25_000.0},  # the GPU runs two and a half steps behind the host
    ],
    ids=["nccl", "rccl", "by-op", "flows", "gpu-marks", "lagging"],
)
def test_streams_are_unioned_and_each_step_timed_on_the_device(tmp_path, quirk) -> None:
    rank = read_rank_profile(write(tmp_path, make_gpu_profile(**quirk)))
    assert rank.gpu and [s.number for s in rank.steps] == [1, 2, 3]
    for step in rank.steps:
        # kernels 3000 + 2500 us on two streams, overlapping for 1000: 4500 of communication;
        # compute [0, 6000) and [9000, 9500): 2000 of it hidden, 2500 exposed
        assert figures_us(step) | {"device_s": 0} == {
            "wall_s": 10_000, "compute_s": 7000, "update_s": 500, "comm_s": 4500,
            "exposed_s": 2500, "hidden_s": 2000, "device_s": 0,
        }  # fmt: skip
        assert step.gpu_compute_s == pytest.approx(6500 * US)
        assert step.backward_start_s == pytest.approx(2000 * US)
        assert step.backward_end_s == pytest.approx(6000 * US)
        assert step.bucket_ready_s() == pytest.approx([4000 * US, 6000 * US])
    walls = [round(s.device_s / US) for s in rank.steps]
    assert walls == ([10_100] * 3 if quirk.get("gpu_marks") else [10_100, 10_100, 9500])
    assert not rank.warnings
    by_op = [n for n in rank.notes if "by its launching op" in n]
    assert bool(by_op) == (quirk.get("comm_kernel") == "fused_copy_kernel")


def test_a_gpu_behind_the_host_keeps_the_host_step_and_says_so(tmp_path) -> None:
    """The host launches a step in 7.9 ms, the GPU runs it in 10.1: the step keeps the host's
    measured wall, its communication the device's, and one line says the GPU set the pace."""
    document = make_gpu_profile(host_period=8000, lag=5000)
    rank = read_rank_profile(write(tmp_path, document))
    step = rank.steps[0]
    assert figures_us(step) == {
        "wall_s": 7900, "compute_s": 4900, "update_s": 500, "comm_s": 4500,
        "exposed_s": 2500, "hidden_s": 2000, "device_s": 10_100,
    }  # fmt: skip
    (warning,) = rank.warnings
    assert "the GPU's steps (mean 9.9 ms) are 25% longer than the host's (7.9 ms)" in warning


def test_exposed_time_longer_than_the_step_is_clamped_with_a_warning(tmp_path) -> None:
    rank = read_rank_profile(write(tmp_path, make_gpu_profile(host_period=3000)))
    for step in rank.steps:
        assert step.exposed_s + step.update_s == pytest.approx(step.wall_s)
        assert step.compute_s == 0 and step.exposed_s + step.hidden_s == pytest.approx(step.comm_s)
    assert any("clamped to it, compute 0 there" in w for w in rank.warnings)


def test_duplicate_zero_length_and_gpu_sliver_step_spans_are_dropped_with_notes(tmp_path) -> None:
    rank = read_rank_profile(write(tmp_path, make_gpu_profile(gpu_marks="short", sliver=True)))
    assert [s.number for s in rank.steps] == [1, 2, 3]
    assert [round(s.wall_s / US) for s in rank.steps] == [10_000] * 3
    notes = " | ".join(rank.notes)
    assert "3 zero-length ProfilerStep span(s) dropped" in notes
    assert "3 ProfilerStep span(s) of 0.02 ms beside their step's full span dropped" in notes
    assert "3 GPU ProfilerStep annotation(s) of 0.018 ms do not cover their steps' kernels" in notes
    assert rank.steps[0].comm_s == pytest.approx(4500 * US)


def test_gpu_import_writes_the_device_figures_and_readiness(tmp_path) -> None:
    result = build_trace([write(tmp_path, make_gpu_profile())], None, ImportOptions(name="g"))
    meta = result.trace.meta
    first = meta["profile"]["steps"][0]
    assert first["device_s"] == pytest.approx(0.0101) and first["gpu_compute_s"] == 0.0065
    assert [c["ready_s"] for c in first["collectives"]] == [0.004, 0.006]
    backward = meta["backward_profile"]
    # backward [2000, 6000): 4000 us of the step's compute (all of it but the wait on the
    # exchange and the update), so replay ends the backward where the compute ends
    assert backward["backward_share"] == pytest.approx(4000e-6 / first["compute_s"])
    assert [t["ready"] for t in reversed(backward["tensors"])] == pytest.approx([0.5, 1.0])
    assert meta["payload_bytes_per_step"] == 1500 * 4


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 4),
        ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclDevComm*)", 2),
        ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bf16", 2),
        ("ncclKernel_AllReduce_TREE_LL_Sum_int64_t(ncclDevComm*)", 8),
        (RCCL, None),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", 1),
    ],
)
def test_element_size_from_an_nccl_kernel_name(name: str, size: int | None) -> None:
    assert kernel_dtype_bytes(name) == size


def test_without_shapes_the_import_is_refused_unless_params_give_the_size(tmp_path) -> None:
    profile = write(tmp_path, make_gpu_profile(shapes=False))
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "message sizes are not recoverable from this trace" in stderr
    assert "--params N" in stderr
    # --params: N x the element size the all-reduce kernel's name gives (float: 4 bytes)
    code, _, stderr = run_cli(argv + ["--params", "2500"])
    assert code == 0, stderr
    trace = read_trace(out / "gpu-s0.parquet")
    assert (trace.steps["payload_bytes"] == 2500 * 4).all()
    assert trace.meta["n_params"] == 2500 and trace.meta["dense_bytes_per_step"] == 10_000
    assert "payload = --params 2,500 x 4 bytes (the trace's element size)" in stderr
    # --dtype overrides it
    code, _, stderr = run_cli(argv + ["--params", "2500", "--dtype", "bf16", "--name", "b"])
    assert code == 0, stderr
    assert (read_trace(out / "b-s0.parquet").steps["payload_bytes"] == 5000).all()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--params", "0"], "--params must be at least 1"),
        (["--params", "10", "--dtype", "float7"], "is not an element type"),
        (["--optimizer", "\x01"], "is not an optimiser's name"),
    ],
)
def test_bad_payload_and_optimiser_options_are_one_line(tmp_path, extra, message) -> None:
    profile = write(tmp_path, make_gpu_profile(shapes=False))
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out), *extra]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert message in stderr


def test_a_measured_network_needs_two_workers_and_nothing_is_written(tmp_path) -> None:
    profile = write(tmp_path, make_gpu_profile())
    out, network = tmp_path / "out", tmp_path / "net.yaml"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out), "--workers", "1"]
    argv += ["--write-network", str(network)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "no measured network" in stderr and not network.exists()


def test_the_measured_network_is_fitted_to_the_kernel_times(tmp_path) -> None:
    """Item 4: each all-reduce's kernel time on the device is a row of a table fitted like
    nccl-tests'; the written network's ring all-reduce of each size takes that time. The two
    kernels ran at once on two streams ([4000, 7000) and [6000, 8500)): the 4500 us they covered
    together is shared by their bytes (1,000 and 500 floats: 3000 and 1500 us). The step waited
    2500 us after its backward ([6000, 8500)), so its compute is its wall less that and the
    update."""
    result = build_trace([write(tmp_path, make_gpu_profile())], None, ImportOptions(name="g"))
    meta = result.trace.meta
    assert profile_rows(meta) == ("all_reduce", [(4000, 0.003), (2000, 0.0015)] * 3)
    for step in meta["profile"]["steps"]:
        assert step["waited_s"] == pytest.approx(2500 * US)
        assert step["compute_s"] == pytest.approx(step["wall_s"] - 3000 * US)
    fit = fit_profile(meta)
    network = network_from_dict(fit.network)
    assert network.workers == 2 and fit.worst < 1e-9
    for size, seconds in [(4000, 3000 * US), (2000, 1500 * US)]:
        timed = simulate_exchange(network, Exchange("ring_allreduce", size)).time_s
        assert timed == pytest.approx(seconds, rel=1e-6)


def test_params_and_dtype_go_with_a_profile_only(tmp_path) -> None:
    argv = ["traces", "import", str(tmp_path / "x.jsonl"), "--params", "5", "-o", str(tmp_path)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
    assert "go with --profile" in stderr


def test_a_users_dense_run_is_a_dense_all_reduce_with_its_own_optimiser(tmp_path) -> None:
    profile = write(tmp_path, make_gpu_profile())
    out = tmp_path / "out"
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(out)])
    assert code == 0, stderr
    trace = read_trace(out / "gpu-s0.parquet")
    assert trace.meta["optimizer"] == "SGD"  # Optimizer.step#SGD.step
    assert variant_label(trace.meta) == "dense all-reduce (SGD)"
    code, stdout, _ = run_cli(["traces", "list", str(out), "--csv"])
    assert code == 0 and "dense all-reduce (SGD)" in stdout and "AdamW" not in stdout
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out), "--name", "mine"]
    code, _, stderr = run_cli(argv + ["--optimizer", "Adam"])
    assert code == 0, stderr
    assert variant_label(read_trace(out / "mine-s0.parquet").meta) == "dense all-reduce (Adam)"
    # the design's own A (no optimiser recorded: trainer and experiment logs) stays AdamW
    assert variant_label({"variant": "A"}) == "AdamW"
    assert variant_label({"variant": "A", "optimizer": ""}) == "dense all-reduce"
