"""A run killed with SIGKILL and re-run ends with the same trace as a run never interrupted."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from trainer.config import make_config  # noqa: E402
from trainer.loop.run import TIMING_COLUMNS, train  # noqa: E402
from trainer.naming import run_name  # noqa: E402
from transitsim.traces.format import read_meta, read_trace  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parent.parent
WORDS = "the a cat dog sat on mat ran to house big small red blue and then".split()
STEPS = 60


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    rng = random.Random(0)
    text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(text)
    return str(path)


def command(corpus: str, vid: str, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "trainer", "--preset", "synthetic", "--variant", vid,
        "--corpus", corpus, "--steps", str(STEPS), "--threads", "1", "--feedback",
        "sent" if vid == "E" else "exact", "--fs-every", "10" if vid == "E" else "0",
        "--set", "ckpt_every=5", "--set", "eval_every=10", "--set", "block=32",
        "-o", str(out), "--quiet",
    ]  # fmt: skip


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def kill_after_checkpoint(proc: subprocess.Popen, ckpt: Path, newer_than: float) -> None:
    """SIGKILL the process right after it (re)writes its checkpoint."""
    deadline = time.monotonic() + 120
    while not (ckpt.exists() and ckpt.stat().st_mtime_ns > newer_than):
        assert proc.poll() is None, f"run ended before a checkpoint: {proc.communicate()}"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def resume_config(corpus: str, vid: str):
    return make_config(
        "synthetic", vid, dataset=corpus, steps=STEPS, threads=1, ckpt_every=5,
        eval_every=10, block=32, feedback="sent" if vid == "E" else "exact",
        fs_every=10 if vid == "E" else 0,
    )  # fmt: skip


def assert_same_trace(path_a: Path, path_b: Path, steps: int = STEPS) -> None:
    """Every column but the measured timings, and the diagnostics, bit for bit."""
    a, b = read_trace(path_a), read_trace(path_b)
    assert a.meta["status"] == b.meta["status"] == "complete" and len(a.steps) == steps
    pd.testing.assert_frame_equal(
        a.steps.drop(columns=list(TIMING_COLUMNS)),
        b.steps.drop(columns=list(TIMING_COLUMNS)),
        check_exact=True,
    )
    pd.testing.assert_frame_equal(a.diagnostics, b.diagnostics, check_exact=True)


def test_kill_minus_9_then_resume_equals_an_uninterrupted_run(tiny_corpus, tmp_path):
    """Variant E: DeMo state, calibration, optics noise generator and clip counters resume."""
    vid = "E"
    out = tmp_path / "killed"
    cfg = resume_config(tiny_corpus, vid)
    name = run_name(cfg)
    ckpt, trace_path = out / f"{name}.ckpt", out / f"{name}.parquet"

    first = start(command(tiny_corpus, vid, out))
    kill_after_checkpoint(first, ckpt, newer_than=-1)
    assert first.returncode == -signal.SIGKILL
    assert read_meta(trace_path)["status"] == "incomplete"

    second = subprocess.run(
        command(tiny_corpus, vid, out), cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    resumed_at = int(second.stderr.split("from step ")[1].split()[0])
    assert 5 <= resumed_at < STEPS and resumed_at % 5 == 0
    assert not ckpt.exists()

    reference = train(cfg, tmp_path / "straight", say=lambda _: None).trace_path
    assert_same_trace(trace_path, reference)


class Crash(Exception):
    pass


@pytest.mark.parametrize("vid", ["A", "D"])
def test_a_run_that_crashed_resumes_to_the_same_trace(tiny_corpus, tmp_path, vid):
    """AdamW's optimiser state and D's calibration survive a crash between checkpoints."""
    cfg = resume_config(tiny_corpus, vid)

    def crash_at_step_7(report) -> None:
        if report.done == 7:
            raise Crash

    with pytest.raises(Crash):
        train(cfg, tmp_path / "crashed", on_step=crash_at_step_7, say=lambda _: None)
    said: list[str] = []
    resumed = train(cfg, tmp_path / "crashed", say=said.append)
    assert resumed.resumed_from == 5 and "from step 5" in said[0]
    straight = train(cfg, tmp_path / "straight", say=lambda _: None)
    assert_same_trace(resumed.trace_path, straight.trace_path)


def test_a_checkpoint_of_another_configuration_is_refused(tiny_corpus, tmp_path):
    from trainer.loop.checkpoint import checkpoint_path, save_checkpoint
    from transitsim.base.errors import TransitsimError

    cfg = make_config("synthetic", "C", dataset=tiny_corpus, steps=5, threads=1, block=32)
    save_checkpoint(checkpoint_path(tmp_path, run_name(cfg)), {"config": {"other": 1}})
    with pytest.raises(TransitsimError, match="different configuration"):
        train(cfg, tmp_path, say=lambda _: None)
    checkpoint_path(tmp_path, run_name(cfg)).write_bytes(b"garbage")
    with pytest.raises(TransitsimError, match="unreadable checkpoint"):
        train(cfg, tmp_path, say=lambda _: None)


# H-s: a fragment synchronises every 2 steps and lands 2 later, so every checkpoint (each 5
# steps) holds one outer update in flight, besides the replicas, their AdamW moments and the
# outer momentum. 30 steps.
LOCAL_STEPS = 30
STREAMING = ("--set", "inner_steps=6", "--set", "fragments=3", "--set", "overlap=2")


def local_command(corpus: str, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "trainer", "--preset", "synthetic", "--variant", "H-s",
        "--corpus", corpus, "--steps", str(LOCAL_STEPS), "--threads", "1", *STREAMING,
        "--set", "ckpt_every=5", "--set", "eval_every=10", "--set", "block=32",
        "-o", str(out), "--quiet",
    ]  # fmt: skip


def local_config(corpus: str, vid: str):
    schedule = {"H-s": dict(inner_steps=6, fragments=3, overlap=2), "L": dict(inner_steps=4)}
    return make_config(
        "synthetic", vid, dataset=corpus, steps=LOCAL_STEPS, threads=1, ckpt_every=5,
        eval_every=10, block=32, **schedule.get(vid, dict(inner_steps=4)),
    )  # fmt: skip


def test_kill_minus_9_then_resume_streaming_diloco_equals_an_uninterrupted_run(
    tiny_corpus, tmp_path
):
    """H-s: replicas, inner AdamW, outer momentum and the fragment in flight all resume."""
    out = tmp_path / "killed"
    cfg = local_config(tiny_corpus, "H-s")
    name = run_name(cfg)
    ckpt, trace_path = out / f"{name}.ckpt", out / f"{name}.parquet"
    first = start(local_command(tiny_corpus, out))
    kill_after_checkpoint(first, ckpt, newer_than=-1)
    assert first.returncode == -signal.SIGKILL
    assert read_meta(trace_path)["status"] == "incomplete"
    state = torch.load(ckpt, weights_only=True)["local_sgd"]
    assert len(state["pending"]) == 1 and state["replica"]["wte.weight"].shape[0] == 2

    second = subprocess.run(
        local_command(tiny_corpus, out), cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    resumed_at = int(second.stderr.split("from step ")[1].split()[0])
    assert 5 <= resumed_at < LOCAL_STEPS and resumed_at % 5 == 0
    reference = train(cfg, tmp_path / "straight", say=lambda _: None).trace_path
    assert_same_trace(trace_path, reference, LOCAL_STEPS)
    assert read_trace(trace_path).steps["outer_sync"].sum() == LOCAL_STEPS // 2


@pytest.mark.parametrize("vid", ["H", "L"])
def test_a_local_sgd_run_that_crashed_resumes_to_the_same_trace(tiny_corpus, tmp_path, vid):
    """DiLoCo's outer momentum, SparseLoCo's error feedback and both's replicas survive a crash
    between checkpoints (a sync at step 4 before the checkpoint at 5, one at 8 after it)."""
    cfg = local_config(tiny_corpus, vid)

    def crash_at_step_9(report) -> None:
        if report.done == 9:
            raise Crash

    with pytest.raises(Crash):
        train(cfg, tmp_path / "crashed", on_step=crash_at_step_9, say=lambda _: None)
    resumed = train(cfg, tmp_path / "crashed", say=lambda _: None)
    assert resumed.resumed_from == 5
    straight = train(cfg, tmp_path / "straight", say=lambda _: None)
    assert_same_trace(resumed.trace_path, straight.trace_path, LOCAL_STEPS)
