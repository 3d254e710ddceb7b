"""Issue 42, item 5: stragglers fitted from the ranks' files and replayed with them
(`replay --stragglers-from TRACE`, `stragglers: {from: TRACE}` in a scenario).

The fit reads when each rank started its step and when it reached the exchange, not how long its
step span was: a rank that starts late waits least and has the shortest span, though it computed
as long as the others. Made-up gloo profiles (worked by hand below) and the real 128-GPU job's
two ranks in ../shared/kineto/."""

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from cli_run import assert_refused, run_cli

from transitsim.replay.fitted import FittedStragglers, read_fitted
from transitsim.traces.profile_import import ImportOptions, build_trace

SHARED = Path(__file__).resolve().parents[2] / "shared" / "kineto"


def rank_profile(rank: int, late_us: float = 0.0, backward_us: float = 2000.0) -> dict[str, Any]:
    """A 2-rank gloo DDP job's rank, 4 steps of 8000 us from the exchange's end to the next.

    The rank starts its step `late_us` after the other (its forward, backward and launches
    move with it) and its backward takes `backward_us`; the exchange ends for both ranks at
    the same time (6550 us into rank 0's step: it waits for the later rank), the optimiser
    follows, and the step ends at 8000 us for both: a late rank's span is shorter."""
    events: list[dict[str, Any]] = []

    def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts,
                       "dur": dur, "args": args})  # fmt: skip

    for n in range(4):
        t = 1000.0 + n * 8100.0
        start = t + late_us
        op("aten::linear", start + 10, 3000)
        op("autograd::engine::evaluate_function: AddmmBackward0", start + 3100, backward_us)
        end_of_exchange = t + 6550 + max(late_us, backward_us - 2000)
        for i, numel in enumerate((1000, 500)):
            launch = start + 3500 + i * (backward_us - 500)
            dims = {"Input Dims": [[[numel]]], "Input type": ["TensorList"]}
            op("c10d::allreduce_", launch, 30, **dims)
            shape = {"Input Dims": [[numel]], "Input type": ["float"]}
            op("gloo:all_reduce", launch + 50, end_of_exchange - launch - 50, tid=10 + i,
               cat="user_annotation", **shape)  # fmt: skip
        op("Optimizer.step#SGD.step", end_of_exchange + 100, 500, cat="user_annotation")
        op(f"ProfilerStep#{n + 1}", start, t + 8000 - start, cat="user_annotation")
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2},
        "traceEvents": events,
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(document, handle)
    return path


def two_ranks(tmp_path: Path, **rank1: float) -> list[Path]:
    return [
        write(tmp_path / "r0.json.gz", rank_profile(0)),
        write(tmp_path / "r1.json.gz", rank_profile(1, **rank1)),
    ]


def test_a_rank_that_starts_late_is_not_fitted_as_fast(tmp_path) -> None:
    """Rank 1 starts 1500 us late and ends with rank 0: its span is 1500 us shorter (a span
    fit would call it 23 % faster), yet it reached the exchange 5100 us after it started,
    as rank 0 did: the same speed, factor 1 each, no jitter."""
    result = build_trace(two_ranks(tmp_path, late_us=1500), None, ImportOptions(name="late"))
    steps = result.trace.meta["profile"]["steps"]
    walls = {r: f["wall_s"] for r, f in steps[0]["per_rank"].items()}
    assert walls["1"] == pytest.approx(walls["0"] - 1500e-6)
    fitted = result.stragglers
    assert fitted is not None and fitted["worker_factors"] == [1.0, 1.0]
    assert fitted["scale"] == 0.0


def test_a_rank_with_a_longer_backward_is_the_slowest(tmp_path) -> None:
    """Rank 1's backward takes 3000 us (rank 0's 2000): it reaches the exchange 6100 us into
    its step, rank 0 at 5100: rank 0's factor is 5100 / 6100 of the slowest's."""
    result = build_trace(two_ranks(tmp_path, backward_us=3000), None, ImportOptions(name="slow"))
    fitted = result.stragglers
    assert fitted is not None
    assert fitted["worker_factors"] == pytest.approx([5100 / 6100, 1.0], abs=1e-6)


def test_the_factors_keep_the_measured_mean_and_fit_only_their_worker_count() -> None:
    """The trace's compute is each step's slowest rank's, its jitter in it: the factors are
    divided by the slowest rank's expected factor x (1 + X), so the profiled job's mean slowest
    compute is the trace's; on another worker count only the jitter applies, and a note says so."""
    fitted = FittedStragglers("job", "exponential", 0.1, "multiplicative", (0.9, 1.0), "2 x 5")
    stragglers, note = fitted.for_workers(2)
    assert note is None
    draws = stragglers.draw(np.random.default_rng(1), 200_000, 2)
    slowest = np.max(stragglers.apply(1.0, draws, 2), axis=1).mean()
    assert slowest == pytest.approx(1.0, rel=0.01)
    assert stragglers.worker_factors[0] / stragglers.worker_factors[1] == pytest.approx(0.9)
    stragglers, note = fitted.for_workers(8)
    assert note is not None and "do not fit 8 workers" in note
    assert len(set(stragglers.worker_factors)) == 1 and len(stragglers.worker_factors) == 8


def test_replay_stragglers_from_a_trace_and_from_a_scenario(tmp_path) -> None:
    out = tmp_path / "t"
    argv = ["traces", "import", "-o", str(out), "--name", "job", "-q"]
    for path in two_ranks(tmp_path, backward_us=3000):
        argv += ["--profile", str(path)]
    code, _, stderr = run_cli(argv)
    assert code == 0, stderr
    assert read_fitted(out).worker_factors == pytest.approx((5100 / 6100, 1.0), abs=1e-6)
    network = str(out / "measured.yaml")
    replay = ["replay", str(out), "-n", network, "--overlap", "buckets", "--json", "-q"]
    code, plain, stderr = run_cli(replay)
    assert code == 0, stderr
    code, fitted, stderr = run_cli([*replay, "--stragglers-from", str(out)])
    assert code == 0, stderr
    # rank 0 computes 5100/6100 of rank 1's time: the exchange still waits for rank 1 (no
    # jitter fitted: the same step), and the time is the measured one within 5 %
    (plain_row,), (fitted_row,) = json.loads(plain), json.loads(fitted)
    assert fitted_row["step_s"] == pytest.approx(plain_row["step_s"], rel=1e-9)
    scenario = tmp_path / "s.yaml"
    document = {
        "traces": [{"path": str(out / "job-s0.parquet")}],
        "networks": [yaml.safe_load((out / "measured.yaml").read_text())],
        "targets": [1.0],
        "stragglers": {"from": str(out), "seed": 3},
    }
    scenario.write_text(yaml.safe_dump(document))
    code, _, stderr = run_cli(["validate", str(scenario)])
    assert code == 0, stderr
    document["stragglers"]["scale"] = 0.1
    scenario.write_text(yaml.safe_dump(document))
    code, _, stderr = run_cli(["validate", str(scenario)])
    assert code == 2 and "stragglers" in stderr and "replace scale" in stderr, stderr
    document["stragglers"] = {"from": str(tmp_path / "nothing")}
    scenario.write_text(yaml.safe_dump(document))
    code, _, stderr = run_cli(["validate", str(scenario)])
    assert code == 2 and "stragglers.from" in stderr and "no such file" in stderr, stderr


def test_a_trace_without_fitted_stragglers_is_refused(tmp_path) -> None:
    out = tmp_path / "t"
    profile = write(tmp_path / "r0.json.gz", rank_profile(0))
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(out), "-q"])
    assert code == 0, stderr
    argv = ["replay", str(out), "-n", "8x200g-switch", "--stragglers-from", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
    assert "no fitted stragglers" in stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no {SHARED} beside the checkout")
def test_two_ranks_of_the_128_gpu_job_give_jitter_for_all_128(tmp_path) -> None:
    """Two of 128 ranks profiled: their factors fit no 128-worker network, their jitter does;
    the slowest of 128 draws is slower than the slowest of the 2 profiled, so the replay with
    stragglers is slower than without, by no more than the jitter's spread."""
    out = tmp_path / "t"
    argv = ["traces", "import", "-o", str(out), "-q", "--name", "job"]
    for rank in (0, 1):
        argv += ["--profile", str(SHARED / f"hta-nccl-128gpu-rank{rank}.json.gz")]
    code, _, stderr = run_cli(argv)
    assert code == 0, stderr
    fitted = read_fitted(out)
    assert len(fitted.worker_factors) == 2 and max(fitted.worker_factors) == 1.0
    replay = ["replay", str(out), "-n", str(out / "measured.yaml"), "--overlap", "buckets"]
    code, plain, stderr = run_cli([*replay, "--json", "-q"])
    assert code == 0, stderr
    code, jittered, stderr = run_cli([*replay, "--json", "--stragglers-from", str(out)])
    assert code == 0, stderr
    assert "2 ranks' factors do not fit 128 workers" in stderr
    slower = json.loads(jittered)[0]["step_s"] / json.loads(plain)[0]["step_s"]
    assert 1.0 < slower < 1.0 + 10 * fitted.scale


def test_buckets_that_ran_at_once_share_their_stretch_by_bytes(tmp_path) -> None:
    """Item 4 on a CPU trace: gloo runs the step's two buckets on two threads, at once (here
    3550..6550 and 5050..6550 us): the 3000 us they covered together is shared 2:1 by their
    bytes (1000 and 500 floats), as they shared the link, not counted twice."""
    result = build_trace(two_ranks(tmp_path), None, ImportOptions(name="gloo"))
    for step in result.trace.meta["profile"]["steps"]:
        runs = [c["run_s"] for c in step["collectives"]]
        assert runs == pytest.approx([2000e-6, 1000e-6])
