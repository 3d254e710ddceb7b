"""`transitsim traces import --profile ... [--loss ...]` (issue 23, items 1, 2 and 6): the trace
it writes, what it prints, and every malformed profile or loss log refused with one line on
stderr, exit 2, nothing written. `make_profile` (a small CPU gloo trace as torch.profiler writes
one) is shared with tests/test_hostile_byo.py."""

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_run import assert_refused, run_cli

from transitsim.traces.format import read_trace


def make_profile(
    steps: int = 3, buckets: tuple[int, ...] = (1000, 500), rank: int = 0, world: int = 2
) -> dict[str, Any]:
    """A CPU-only DDP step as torch 2.x's profiler records it on gloo: per ProfilerStep, the
    forward, autograd ops, a c10d::allreduce_ per bucket on the training thread, the gloo op on
    a worker thread, then Optimizer.step. Times in microseconds."""
    events: list[dict[str, Any]] = []
    t = 1000.0
    for n in range(steps):
        start = t

        def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args):
            events.append(
                {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur,
                 "args": args}
            )  # fmt: skip

        op("aten::linear", t + 10, 3000)
        op("autograd::engine::evaluate_function: AddmmBackward0", t + 3100, 2000)
        launch = t + 3500
        for i, numel in enumerate(buckets):
            op("c10d::allreduce_", launch, 30, **{"Input Dims": [[[numel]]], "Input type":
               ["TensorList"]})  # fmt: skip
            op("gloo:all_reduce", launch + 50, 1500, tid=10 + i, cat="user_annotation",
               **{"Input Dims": [[numel]], "Input type": ["float"]})  # fmt: skip
            launch += 1500
        op("autograd::engine::evaluate_function: AddmmBackward0", t + 5200, 300)
        op("Optimizer.step#SGD.step", t + 7000, 500, cat="user_annotation")
        op(f"ProfilerStep#{n + 5}", start, 8000, cat="user_annotation")
        t += 8100
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world},
        "traceEvents": events,
    }


def write_profile(path: Path, document: Any) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(document, handle)
    return path


def test_profile_and_loss_log_become_one_trace_that_replays(tmp_path) -> None:
    profile = write_profile(tmp_path / "rank0.json.gz", make_profile())
    loss = tmp_path / "losses.csv"
    rows = [f"{s},{3 - s / 100},{'' if s % 10 else 3.1 - s / 100}\n" for s in range(1, 41)]
    loss.write_text("step,train_loss,val_loss\n" + "".join(rows))
    out = tmp_path / "traces"
    argv = ["traces", "import", "--profile", str(profile), "--loss", str(loss), "-o", str(out)]
    code, stdout, stderr = run_cli(argv + ["--name", "mine"])
    assert code == 0, stderr
    assert "step wall (s)" in stdout and "0.008" in stdout
    assert "n_params = the 1,500 elements" in stderr  # what was assumed, one line each
    trace = read_trace(out / "mine-s0.parquet")
    steps = trace.steps
    assert steps["step"].tolist() == list(range(1, 41)) and trace.meta["rows"] == "every_step"
    assert steps["val_loss"].notna().sum() == 4
    assert (steps["payload_bytes"] == 1500 * 4).all()
    assert steps["wall_s"].iloc[0] == pytest.approx(0.008)
    assert steps["update_s"].iloc[0] == pytest.approx(0.0005)
    # the gloo ops run 3550..6550 us into the step, the backward ops 3100..5100 and 5200..5500:
    # 1550 + 300 us hidden, 1150 exposed
    assert steps["comm_s"].iloc[0] == pytest.approx(0.003)
    template = trace.meta["profile"]["template"]
    assert template["hidden_s"] == pytest.approx(0.00185)
    assert template["exposed_s"] == pytest.approx(0.00115)
    # the step waited on the exchange from the backward's end (5500) to the last op's (6550)
    assert template["waited_s"] == pytest.approx(0.00105)
    assert steps["compute_s"].iloc[0] == pytest.approx(0.008 - 0.00105 - 0.0005)
    backward = trace.meta["backward_profile"]
    assert [t["numel"] for t in backward["tensors"]] == [500, 1000]  # last launched first
    # launched 3500 and 5000 us in; backward from 3100 to its end (5500): 2400 us of the
    # step's 6450 us of compute
    assert [t["ready"] for t in backward["tensors"]] == pytest.approx([1900 / 2400, 400 / 2400])
    assert backward["backward_share"] == pytest.approx(2400 / 6450)
    assert trace.workers == 2 and trace.variant == "A" and trace.meta["origin"] == "import"
    code, stdout, stderr = run_cli(
        ["replay", str(out), "-n", "8x200g-switch", "--set", "workers=2", "--json", "-q"]
    )
    assert code == 0, stderr
    (row,) = json.loads(stdout)
    assert row["steps"] == 40 and row["step_s"] >= steps["compute_s"].iloc[0]
    code, _, stderr = run_cli(["traces", "show", str(out / "mine-s0.parquet")])
    assert code == 0, stderr


def test_without_a_loss_log_the_rows_are_the_profiled_steps(tmp_path) -> None:
    profile = write_profile(tmp_path / "p.json.gz", make_profile(steps=2))
    out = tmp_path / "t"
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(out)])
    assert code == 0, stderr
    trace = read_trace(out / "p-s0.parquet")
    assert trace.steps["step"].tolist() == [5, 6]  # ProfilerStep#5, #6
    assert trace.steps["train_loss"].map(math.isinf).all()
    assert any("no loss log" in note for note in trace.meta["notes"])


def test_two_ranks_print_the_fitted_stragglers(tmp_path) -> None:
    paths = [write_profile(tmp_path / f"r{r}.json.gz", make_profile(rank=r)) for r in (0, 1)]
    argv = ["traces", "import", "-o", str(tmp_path / "t")]
    for path in paths:
        argv += ["--profile", str(path)]
    code, stdout, stderr = run_cli(argv)
    assert code == 0, stderr
    assert "stragglers fitted from 2 ranks x 3 profiled steps" in stdout
    twice = ["traces", "import", "-o", str(tmp_path / "u")] + ["--profile", str(paths[0])] * 2
    code, _, stderr = run_cli(twice)
    assert_refused(twice, code, stderr, tmp_path / "u")
    assert "same rank" in stderr


def _bad_profiles(tmp_path: Path) -> dict[str, tuple[bytes, str]]:
    good = make_profile()
    no_steps = {**good, "traceEvents": [e for e in good["traceEvents"] if "Step" not in e["name"]]}
    bad_world = {**good, "distributedInfo": {"world_size": 0}}
    again = {**good["traceEvents"][-1], "ts": good["traceEvents"][-1]["ts"] + 100}
    repeated = {**good, "traceEvents": good["traceEvents"] + [again]}  # a second full #7
    raw = {
        "not json": (b"hello", "not JSON"),
        "broken gzip": (gzip.compress(json.dumps(good).encode())[:200], "cannot read"),
        "no events": (json.dumps({"traceEvents": 3}).encode(), "no 'traceEvents' list"),
        "event not object": (json.dumps({"traceEvents": [1]}).encode(), "not an object"),
        "no steps": (json.dumps(no_steps).encode(), "no ProfilerStep#N spans"),
        "bad world": (json.dumps(bad_world).encode(), "is not a job size"),
        "repeated step": (json.dumps(repeated).encode(), "ProfilerStep numbers repeat"),
        "empty": (b"", "not JSON"),
    }
    return raw


@pytest.mark.parametrize(
    "case",
    ["not json", "broken gzip", "no events", "event not object", "no steps", "bad world",
     "repeated step", "empty"],
)  # fmt: skip
def test_malformed_profiles_are_refused_with_one_line_and_nothing_written(tmp_path, case) -> None:
    data, message = _bad_profiles(tmp_path)[case]
    profile = tmp_path / "p.json"
    profile.write_bytes(data)
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert message in stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--loss", "L.csv"], "--loss and --columns go with --profile"),
        ([], "nothing to import"),
        (["LOGS.jsonl", "--profile", "P"], "either LOGS or --profile"),
        (["--profile", "P", "--variant", "Z"], "--variant 'Z' is not one of"),
        (["--profile", "P", "--workers", "0"], "--workers must be at least 1"),
        (["--profile", "P", "--loss", "L.csv", "--columns", "epoch=e"], "--columns"),
        (["--profile", "P", "--loss", "missing.csv"], "no such file"),
        (["--profile", "P", "--loss", "BAD.csv"], "no loss column"),
        (["--profile", "missing.json"], "no such file"),
        (["--profile", "P", "--name", "a/b"], "run name"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, extra: list[str], message: str) -> None:
    write_profile(tmp_path / "P", make_profile())
    (tmp_path / "L.csv").write_text("step,loss\n1,2.0\n")
    (tmp_path / "BAD.csv").write_text("step,accuracy\n1,0.5\n")
    extra = [str(tmp_path / e) if e in ("P", "L.csv", "BAD.csv", "LOGS.jsonl", "missing.csv",
             "missing.json") else e for e in extra]  # fmt: skip
    out = tmp_path / "out"
    argv = ["traces", "import", *extra, "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert message in stderr


def test_a_backend_op_with_a_collective_name_argument_that_is_not_text_imports(tmp_path) -> None:
    """Regression (found by tests/test_hostile_byo.py): `"Collective name": true` on a gloo op
    stopped the reader with an AssertionError (a traceback) instead of reading the op by name."""
    document = make_profile(steps=1)
    for event in document["traceEvents"]:
        if event["name"] == "gloo:all_reduce":
            event["args"]["Collective name"] = True
    profile = write_profile(tmp_path / "p.json.gz", document)
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(tmp_path)])
    assert code == 0, stderr
    assert read_trace(tmp_path / "p-s0.parquet").steps["payload_bytes"].iloc[0] == 6000


def test_a_collective_running_past_the_steps_end_counts_up_to_it(tmp_path) -> None:
    """A gloo op that starts in the step and ends after its span (an async all-reduce) adds
    its part inside the span to the step's communication, not nothing."""
    document = make_profile(steps=1)
    last = [e for e in document["traceEvents"] if e["name"] == "gloo:all_reduce"][-1]
    last["dur"] = 10_000  # 6050 us into the 8000 us step: 1950 us of it inside
    profile = write_profile(tmp_path / "p.json.gz", document)
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(tmp_path)])
    assert code == 0, stderr
    steps = read_trace(tmp_path / "p-s0.parquet").steps
    assert steps["comm_s"].iloc[0] == pytest.approx((8000 - 3550) * 1e-6)
