"""`TraceRecorder` under hostile use (issue 45): steps that skip, bad values, an exception in
its `with` block, kill -9 in the middle of a run. Each test names the defect it guards."""

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cli_run import run_cli  # noqa: E402

from trainer.own import TraceRecorder  # noqa: E402
from trainer.own.recorder import SAVE_SHARE  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"loss": 1.0, "payload_bytes": 400, "compute_s": 0.01}


def recorder(path: Path, **kwargs) -> TraceRecorder:
    return TraceRecorder(path, workers=2, variant="B", n_params=1000, **kwargs)


def replayed_steps(path: Path) -> int:
    argv = ["replay", str(path), "-n", "8x200g-switch", "--set", "workers=2", "--json", "-q"]
    code, stdout, stderr = run_cli(argv)
    assert code == 0, stderr
    (row,) = json.loads(stdout)
    return row["steps"]


# --- 1. steps that skip ---------------------------------------------------------------------


def test_steps_that_skip_are_stored_as_the_steps_given(tmp_path) -> None:
    path = tmp_path / "skip.parquet"
    with recorder(path) as rec:
        for step in (1, 50, 100):
            rec.step(**GOOD, step=step)
    trace = read_trace(path)
    assert trace.steps["step"].tolist() == [1, 50, 100]
    assert trace.meta["rows"] == "evaluated_steps"  # each row stands for the steps since the last
    assert replayed_steps(path) == 100  # not 3


def test_consecutive_steps_from_1_are_every_step(tmp_path) -> None:
    path = tmp_path / "every.parquet"
    with recorder(path) as rec:
        for _ in range(3):
            rec.step(**GOOD)
    assert read_trace(path).meta["rows"] == "every_step"
    assert replayed_steps(path) == 3


# --- 2. each value checked at step() --------------------------------------------------------

BAD = [
    ({"loss": -0.5}, ValueError, r"loss must be a number >= 0 .*got -0\.5"),
    ({"loss": -math.inf}, ValueError, "loss must be a number >= 0"),
    ({"loss": "abc"}, TypeError, "loss must be a number .*got 'abc'"),
    ({"loss": torch.ones(3)}, TypeError, "loss must be a number"),
    ({"val_loss": -1.0}, ValueError, "val_loss must be a number >= 0"),
    ({"step": 2.5}, ValueError, r"step must be a whole number in \[1, .*got 2\.5"),
    ({"step": 0}, ValueError, r"step must be a whole number in \[1, "),
    ({"step": "7"}, TypeError, "step must be a whole number"),
    ({"payload_bytes": 12.5}, ValueError, r"payload_bytes must be a whole number in \[0, "),
    ({"payload_bytes": -4}, ValueError, "payload_bytes must be a whole number"),
    ({"payload_bytes": 2**51}, ValueError, "payload_bytes must be a whole number"),
    ({"payload_bytes": "12"}, TypeError, "payload_bytes must be a whole number.*got '12'"),
    ({"payload_bytes": True}, TypeError, "payload_bytes must be a whole number"),
    ({"payload_bytes": 10**5000}, ValueError, "payload_bytes must be a whole .*an int of 16,610"),
    ({"compute_s": -1.0}, ValueError, r"compute_s must be a finite number in \[0, "),
    ({"compute_s": math.inf}, ValueError, "compute_s must be a finite number"),
    ({"compute_s": math.nan}, ValueError, "compute_s must be a finite number"),
    ({"compute_s": 1e8}, ValueError, "compute_s must be a finite number"),
    ({"compute_s": None}, TypeError, "compute_s must be a finite number"),
    ({"exchange_s": 10**400}, ValueError, "exchange_s must be a finite number"),
    ({"lr": -0.1}, ValueError, "lr must be a finite number >= 0"),
    ({"wall_s": math.inf}, ValueError, "wall_s must be a finite number"),
]


@pytest.mark.parametrize(
    ("bad", "kind", "message"), BAD, ids=[next(iter(bad)) for bad, _, _ in BAD]
)
def test_a_bad_value_is_refused_at_step_and_the_rows_before_it_are_kept(
    tmp_path, bad: dict, kind: type, message: str
) -> None:
    path = tmp_path / "r.parquet"
    rec = recorder(path)
    for _ in range(3):
        rec.step(**GOOD)
    with pytest.raises(kind, match=f"^TraceRecorder.step: {message}"):
        rec.step(**{**GOOD, **bad})
    rec.step(**GOOD)  # the loop goes on
    rec.close()
    trace = read_trace(path)
    assert trace.steps["step"].tolist() == [1, 2, 3, 4]
    assert trace.meta["status"] == "complete"


def test_numpy_scalars_and_one_element_tensors_are_accepted(tmp_path) -> None:
    path = tmp_path / "r.parquet"
    with recorder(path) as rec:
        rec.step(
            loss=torch.tensor(2.5),
            payload_bytes=np.int64(400),
            compute_s=np.float32(0.25),
            exchange_s=torch.tensor(0.125, dtype=torch.float64),
            step=np.int32(1),
        )
        rec.step(loss=np.float64(2.0), payload_bytes=torch.tensor(300), compute_s=torch.tensor(0.5))
        rec.step(loss=1.5, payload_bytes=200.0, compute_s=1, step=torch.tensor(3.0))
    steps = read_trace(path).steps
    assert steps["step"].tolist() == [1, 2, 3]
    assert steps["payload_bytes"].tolist() == [400, 300, 200]
    assert steps["compute_s"].tolist() == [0.25, 0.5, 1.0]
    assert steps["train_loss"].tolist() == [2.5, 2.0, 1.5]
    assert steps["comm_s"].tolist() == [0.125, 0.0, 0.0]


def test_a_diverged_loss_is_kept_as_inf_and_an_unevaluated_val_loss_as_nan(tmp_path) -> None:
    path = tmp_path / "r.parquet"
    with recorder(path) as rec:
        rec.step(**{**GOOD, "loss": math.nan, "val_loss": math.nan})
        rec.step(**{**GOOD, "loss": math.inf, "val_loss": math.inf})
    steps = read_trace(path).steps
    assert steps["train_loss"].tolist() == [math.inf, math.inf]
    assert math.isnan(steps["val_loss"].iloc[0]) and steps["val_loss"].iloc[1] == math.inf


def test_a_name_a_trace_cannot_hold_is_refused_when_the_recorder_is_made(tmp_path) -> None:
    with pytest.raises(ValueError, match="run name"):
        TraceRecorder(tmp_path / "r.parquet", workers=1, n_params=10, name="a/b")
    with pytest.raises(ValueError, match="n_params"):
        TraceRecorder(tmp_path / "r.parquet", workers=1, n_params=2.5)


# --- 3. the caller's exception wins ---------------------------------------------------------


def test_the_callers_exception_propagates_when_the_recorder_cannot_save_at_exit(tmp_path) -> None:
    path = tmp_path / "r.parquet"
    with pytest.raises(RuntimeError, match="the loop crashed") as caught:  # noqa: PT012
        with recorder(path) as rec:
            rec.step(**GOOD)
            path.unlink(missing_ok=True)
            path.mkdir()  # the recorder's own save will fail at exit
            raise RuntimeError("the loop crashed")
    notes = getattr(caught.value, "__notes__", [])
    assert any("TraceRecorder could not save" in note and str(path) in note for note in notes)


def test_a_bad_value_caught_in_the_loop_does_not_spoil_the_trace_at_exit(tmp_path) -> None:
    path = tmp_path / "r.parquet"
    with pytest.raises(RuntimeError, match="the loop crashed"):  # noqa: PT012
        with recorder(path) as rec:
            rec.step(**GOOD)
            try:
                rec.step(**{**GOOD, "loss": -0.5})
            except ValueError:
                pass
            raise RuntimeError("the loop crashed")
    trace = read_trace(path)
    assert trace.meta["status"] == "incomplete" and trace.steps["step"].tolist() == [1]


# --- 4. durable as it goes ------------------------------------------------------------------


class FakeClock:
    """Seconds that pass only when the test says so: each step and each save take their time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_trace_on_disk_mid_run_is_incomplete_and_replays_by_its_path(tmp_path) -> None:
    path = tmp_path / "mine.parquet"
    rec = recorder(path, flush_every=100, flush_s=None)
    rec.clock = FakeClock()  # no time passes: saves by rows alone, however long one takes
    for step in range(1, 151):
        rec.step(**GOOD)
        if step == 1:
            assert read_trace(path).steps["step"].tolist() == [1]  # the first step at once
    assert rec.saved_step == 101  # 100 rows after the first save
    trace = read_trace(path)
    assert trace.meta["status"] == "incomplete"
    assert trace.steps["step"].tolist() == list(range(1, 102))
    code, stdout, stderr = run_cli(["traces", "show", str(path)])
    assert code == 0, stderr
    assert "incomplete" in stdout
    assert replayed_steps(path) == 101
    rec.close()
    assert read_trace(path).meta["status"] == "complete" and rec.saved_step == 150


def count_saves(rec: TraceRecorder, steps: int, step_s: float, save_s: float) -> list[int]:
    """Record `steps` steps of `step_s` each, every save taking `save_s`: the steps saved at."""
    clock, saved_at = FakeClock(), []
    rec.clock = clock

    def timed_save(status: str) -> None:
        clock.now += save_s
        saved_at.append(rec.rows[-1]["step"])

    rec.write = timed_save  # the policy alone, without the files
    for _ in range(steps):
        clock.now += step_s
        rec.step(**GOOD)
    return saved_at


def test_a_10000_step_run_is_saved_every_100_steps_not_every_step(tmp_path) -> None:
    saved = count_saves(recorder(tmp_path / "r.parquet"), 10_000, step_s=0.01, save_s=0.001)
    assert saved == [1] + list(range(101, 10_001, 100))  # the first step, then every 100


def test_slow_steps_are_saved_every_flush_s_seconds(tmp_path) -> None:
    rec = recorder(tmp_path / "r.parquet", flush_every=100, flush_s=60.0)
    saved = count_saves(rec, 50, step_s=10.0, save_s=0.0)
    assert saved == [1, 7, 13, 19, 25, 31, 37, 43, 49]  # 60 s after each save


def test_saving_takes_at_most_a_twentieth_of_the_loops_time(tmp_path) -> None:
    """Saves that take 1 s (a huge trace) come at most once every 20 s, whatever flush_every."""
    rec = recorder(tmp_path / "r.parquet", flush_every=10, flush_s=None)
    saved = count_saves(rec, 1_000, step_s=0.1, save_s=1.0)
    assert np.diff(saved).min() >= 200  # 20 s of 0.1 s steps between saves
    assert 4 <= len(saved) <= 6  # over 100 s of steps


def test_a_fast_loop_spends_at_most_a_twentieth_of_its_time_saving(tmp_path) -> None:
    """10,000 real steps of a loop that does nothing else: saving every 100 rows would cost
    more than the loop itself; the policy keeps the saves to 5 % of its time (plus the last)."""
    rec = recorder(tmp_path / "r.parquet")
    started = time.monotonic()
    for _ in range(10_000):
        rec.step(**GOOD)
    elapsed = time.monotonic() - started
    assert rec.saves >= 1 and rec.saved_step is not None
    assert rec.save_s <= SAVE_SHARE * elapsed + rec.last_save_s
    rec.close()
    assert len(read_trace(tmp_path / "r.parquet").steps) == 10_000


def test_kill_9_keeps_every_step_up_to_the_last_save(tmp_path) -> None:
    """5 kills at random steps (benchmarks/bench_recorder_kill.py runs 20): after each the file
    holds steps 1..n, n at least the last save the loop reported before it died."""
    script = ROOT / "benchmarks" / "bench_recorder_kill.py"
    done = subprocess.run(
        [sys.executable, str(script), "--kills", "5", "--out", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kills = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(kills) == 5
    for kill in kills:
        trace = read_trace(kill["path"])
        steps = trace.steps["step"].tolist()
        assert steps == list(range(1, len(steps) + 1)), kill
        assert kill["saved_step"] <= len(steps) <= kill["last_step"] + 1, kill
        assert trace.meta["status"] == "incomplete"
