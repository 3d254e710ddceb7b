"""The trainer on real torch.distributed processes (gloo over loopback) equals the simulation.

Same seed, same tiny config: 4 gloo ranks, one worker each, give the losses of the simulated
backend's 4 in-process workers, for A (all-reduce), B (values and positions all-gathered),
C, E with feedback of what was sent (all-gathered optics output), E' loopback (all-reduced
band), G recal (a band rank 0 re-chooses and broadcasts) and the local-SGD variants H, H-s and
L (replicas exchanging only on their sync steps). The same again with 8 workers on the 4 ranks
(two per rank, each rank pre-summing its own workers' part of an all-reduce). Also: the
exchange's wire form, the launcher, and a killed distributed run resuming.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainer.config import make_config  # noqa: E402
from trainer.distributed.launch import launch_command  # noqa: E402
from trainer.loop.run import train  # noqa: E402
from trainer.naming import run_name  # noqa: E402
from trainer.variants.exchange import (  # noqa: E402
    LocalExchange,
    Message,
    sparse_wire,
    sparse_wires,
)
from transitsim.traces.format import read_meta, read_trace  # noqa: E402

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parent.parent
WORDS = "the a cat dog sat on mat ran to house big small red blue and then".split()
STEPS = 30
EQUIVALENT = {
    "A": {},
    "B": {},
    "C": {},
    "E": dict(feedback="sent", fs_every=10),
    "E'": dict(feedback="loopback", fs_every=10),
    "G": dict(band="recal", select_every=7),  # rank 0 chooses, broadcasts the positions
    "H": dict(inner_steps=5),  # dense mean of the pseudo-gradients every 5 steps
    "H-s": dict(inner_steps=6, fragments=3, overlap=2),  # a fragment every 2 steps, 4 bits
    "L": dict(inner_steps=5),  # 2-bit top-k of the pseudo-gradient, all-gathered
}
# Several workers per rank (8 on 4 ranks): a rank's two workers are summed before the
# all-reduce (A, E', H-s) or gathered side by side (L). The local-SGD runs, here and above, are
# 10 steps long: the bound (train loss to 1e-5 over 10 steps), two syncs or more each.
SEVERAL_PER_RANK = ("A", "E'", "H-s", "L")
SHORT_STEPS = 10
LOCAL_SGD = ("H", "H-s", "L")


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    import random

    rng = random.Random(0)
    text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(text)
    return str(path)


def steps_of(vid: str) -> int:
    return SHORT_STEPS if vid in LOCAL_SGD else STEPS


def tiny(corpus: str, vid: str, **overrides):
    settings = dict(steps=STEPS, threads=1, dataset=corpus, eval_every=10, block=32, workers=4)
    return make_config("synthetic", vid, **{**settings, **EQUIVALENT.get(vid, {}), **overrides})


@pytest.fixture(scope="module")
def gloo_runs(tiny_corpus, tmp_path_factory):
    """Every equivalence run on 4 gloo ranks, in one launch: (config, gloo trace folder)."""
    root = tmp_path_factory.mktemp("gloo")
    one = {
        vid: (tiny(tiny_corpus, vid, steps=steps_of(vid)), root / "one-per-rank")
        for vid in EQUIVALENT
    }
    several = {
        vid: (tiny(tiny_corpus, vid, workers=8, steps=SHORT_STEPS), root / "two-per-rank")
        for vid in SEVERAL_PER_RANK
    }
    spec = [
        {"config": cfg.to_dict(), "out": str(out)}
        for cfg, out in [*one.values(), *several.values()]
    ]
    (root / "runs.json").write_text(json.dumps(spec))
    worker = [sys.executable, "-m", "trainer.distributed.batch", str(root / "runs.json")]
    assert launch_command(worker, 4) == 0
    return {"one": one, "several": several, "root": root}


def assert_equivalent(vid: str, cfg, gloo_dir: Path, sim_dir: Path, steps: int) -> None:
    """The gloo run's losses are the simulated run's to 1e-5 and its exchanges are real."""
    simulated = read_trace(train(cfg, sim_dir, say=lambda _: None).trace_path)
    gloo = read_trace(gloo_dir / f"{run_name(cfg)}.parquet")
    assert gloo.meta["backend"] == "gloo" and gloo.meta["world_size"] == 4, vid
    assert gloo.meta["distributed"]["workers_per_process"] == cfg.workers // 4, vid
    assert simulated.meta["backend"] == "simulated", vid
    assert len(gloo.steps) == steps and gloo.meta["status"] == "complete", vid
    for column in ("train_loss", "val_loss"):
        sim, real = simulated.steps[column].to_numpy(), gloo.steps[column].to_numpy()
        assert np.array_equal(np.isnan(sim), np.isnan(real)), (vid, column)
        ok = ~np.isnan(sim)
        rel = np.abs(real[ok] - sim[ok]) / np.abs(sim[ok])
        assert rel.max() <= 1e-5, (vid, column, rel.max())
    # The loss must move, or equal losses would prove nothing.
    assert gloo.steps["train_loss"].iloc[-3:].mean() < gloo.steps["train_loss"].iloc[:3].mean()
    # Local SGD exchanges on its sync steps only; every other variant on every step.
    syncs = gloo.steps["outer_sync"] if vid in LOCAL_SGD else gloo.steps["comm_s"] >= 0
    assert syncs.any() and (gloo.steps["comm_s"][syncs] > 0).all(), vid
    assert (gloo.steps["exchange_bytes"][syncs] > 0).all(), vid
    assert (gloo.steps["comm_s"][~syncs] == 0).all(), vid
    assert (gloo.steps["exchange_bytes"][~syncs] == 0).all(), vid
    assert (simulated.steps["comm_s"] == 0).all(), vid
    assert gloo.steps["payload_bytes"].tolist() == simulated.steps["payload_bytes"].tolist()


def test_four_gloo_ranks_give_the_simulated_losses(gloo_runs, tmp_path):
    for vid, (cfg, gloo_dir) in gloo_runs["one"].items():
        assert_equivalent(vid, cfg, gloo_dir, tmp_path / "sim", steps_of(vid))
        gloo = read_trace(gloo_dir / f"{run_name(cfg)}.parquet")
        simulated = read_trace(tmp_path / "sim" / f"{run_name(cfg)}.parquet")
        if vid.startswith("E"):
            sim_clip = simulated.steps["clip_rate"].to_numpy()
            real_clip = gloo.steps["clip_rate"].to_numpy()
            assert np.allclose(sim_clip, real_clip, equal_nan=True), vid


def test_two_workers_per_gloo_rank_give_the_simulated_losses(gloo_runs, tmp_path):
    """8 workers on 4 ranks: each rank steps two workers and pre-sums (or stacks) their part
    of the exchange; the result is the simulated run with 8 in-process workers."""
    for vid, (cfg, gloo_dir) in gloo_runs["several"].items():
        assert cfg.workers == 8
        assert_equivalent(vid, cfg, gloo_dir, tmp_path / "sim", SHORT_STEPS)


def test_top_k_wire_form_rebuilds_the_dense_tensors_bit_for_bit():
    gen = torch.Generator().manual_seed(0)
    coef = torch.randn(3, 5, 64, generator=gen)
    chosen = torch.zeros_like(coef, dtype=torch.bool)
    chosen.scatter_(-1, coef.abs().topk(4, dim=-1).indices, True)
    sent = torch.where(chosen, coef, torch.zeros(()))
    pack, unpack = sparse_wire(4, 64)
    values, positions = pack([sent, chosen])
    assert values.shape == (3, 5, 4) and positions.dtype == torch.int16
    rebuilt, mask = unpack([values, positions])
    assert torch.equal(mask, chosen)
    assert torch.equal(rebuilt.view(torch.int32), sent.view(torch.int32))  # bits, signed zeros


def test_several_top_k_tensors_travel_floats_first_and_rebuild_bit_for_bit():
    """L sends many tensors' (values, positions) in one message; with a 2-byte position tensor
    before a float one, the byte buffer's float view would start unaligned (gloo failed so)."""
    gen = torch.Generator().manual_seed(1)
    tensors, shapes = [], [(1, 64), (4, 16), (2, 8)]
    for k, m in shapes:
        coef = torch.randn(2, 3, m, generator=gen)
        chosen = torch.zeros_like(coef, dtype=torch.bool)
        chosen.scatter_(-1, coef.abs().topk(k, dim=-1).indices, True)
        tensors += [torch.where(chosen, coef, torch.zeros(())), chosen]
    pack, unpack = sparse_wires(shapes)
    wire = pack(tensors)
    assert [t.dtype for t in wire] == [torch.float32] * 3 + [torch.int16] * 3
    offsets = np.cumsum([0] + [t.numel() * t.element_size() for t in wire])
    assert all(offsets[i] % 4 == 0 for i in range(3))  # every float starts aligned
    for got, want in zip(unpack(wire), tensors, strict=True):
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_local_exchange_combines_over_the_worker_axis():
    x = torch.arange(24.0).reshape(4, 6)
    ex = LocalExchange(4)
    gathered, summed, mean = ex.exchange(
        [Message([x], "gather"), Message([x], "sum"), Message([x], "mean")]
    )
    assert gathered[0] is x
    assert torch.equal(summed[0], x.sum(0)) and torch.equal(mean[0], x.mean(0))


def cli(corpus: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "trainer", "--preset", "synthetic", "--variant", "E",
        "--corpus", corpus, "--steps", "20", "--threads", "1", "--set", "ckpt_every=5",
        "--set", "block=32", "--set", "eval_every=10", "--feedback", "sent",
        "--fs-every", "10", "--backend", "gloo", "--nproc", "2", "--quiet", "-o", str(out),
        *extra,
    ]  # fmt: skip


def test_a_killed_gloo_run_resumes_to_the_simulated_trace(tiny_corpus, tmp_path):
    """Launcher and ranks killed at once (SIGKILL to the group) after a checkpoint: the same
    command resumes from the one merged checkpoint and ends where the simulation ends."""
    out = tmp_path / "killed"
    cfg = make_config(
        "synthetic", "E", dataset=tiny_corpus, steps=20, threads=1, ckpt_every=5, block=32,
        eval_every=10, feedback="sent", fs_every=10,
    )  # fmt: skip
    ckpt = out / f"{run_name(cfg)}.ckpt"
    proc = subprocess.Popen(cli(tiny_corpus, out), cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 240
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ckpt.exists(), "no checkpoint was written"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert read_meta(out / f"{run_name(cfg)}.parquet")["status"] == "incomplete"

    again = subprocess.run(
        cli(tiny_corpus, out), cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr and str(out) in again.stdout
    resumed = read_trace(out / f"{run_name(cfg)}.parquet")
    assert resumed.meta["backend"] == "gloo" and not ckpt.exists()
    reference = read_trace(train(cfg, tmp_path / "sim", say=lambda _: None).trace_path)
    np.testing.assert_allclose(
        resumed.steps["train_loss"], reference.steps["train_loss"], rtol=1e-5
    )


def test_a_rank_leaves_without_the_interpreters_teardown():
    """A torch.distributed rank exits with its code and its streams flushed, skipping the
    interpreter's teardown (atexit, gloo's thread destructors), where a finished rank once
    aborted; a process that is not a rank exits normally, its atexit handlers run."""
    body = (
        "import atexit, sys; import torch.distributed; from trainer.__main__ import "
        "leave_process; atexit.register(lambda: print('teardown')); print('flushed', end=''); "
        "leave_process(3)"
    )
    rank = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True,
                          env={**os.environ, "RANK": "1"}, timeout=120)  # fmt: skip
    assert rank.returncode == 3 and rank.stdout == "flushed", rank
    plain = {k: v for k, v in os.environ.items() if k != "RANK"}
    other = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True,
                           env=plain, timeout=120)  # fmt: skip
    assert other.returncode == 3 and other.stdout == "flushedteardown\n", other
