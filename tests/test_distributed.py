"""The trainer on real torch.distributed processes (gloo over loopback) equals the simulation.

Same seed, same tiny config: 4 gloo ranks, one worker each, give the losses of the simulated
backend's 4 in-process workers, for A (all-reduce), B (values and positions all-gathered),
C, E with feedback of what was sent (all-gathered optics output), E' loopback (all-reduced
band) and G recal (a band rank 0 re-chooses and broadcasts). Also: the exchange's wire form,
the launcher, and a killed distributed run resuming.
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
from trainer.variants.exchange import LocalExchange, Message, sparse_wire  # noqa: E402
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
}


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    import random

    rng = random.Random(0)
    text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(text)
    return str(path)


def tiny(corpus: str, vid: str, **overrides):
    settings = dict(steps=STEPS, threads=1, dataset=corpus, eval_every=10, block=32, workers=4)
    return make_config("synthetic", vid, **{**settings, **EQUIVALENT.get(vid, {}), **overrides})


def test_four_gloo_ranks_give_the_simulated_losses(tiny_corpus, tmp_path):
    configs = {vid: tiny(tiny_corpus, vid) for vid in EQUIVALENT}
    spec = [{"config": cfg.to_dict(), "out": str(tmp_path / "gloo")} for cfg in configs.values()]
    (tmp_path / "runs.json").write_text(json.dumps(spec))
    worker = [sys.executable, "-m", "trainer.distributed.batch", str(tmp_path / "runs.json")]
    assert launch_command(worker, 4) == 0

    for vid, cfg in configs.items():
        simulated = read_trace(train(cfg, tmp_path / "sim", say=lambda _: None).trace_path)
        gloo = read_trace(tmp_path / "gloo" / f"{run_name(cfg)}.parquet")
        assert gloo.meta["backend"] == "gloo" and gloo.meta["world_size"] == 4, vid
        assert simulated.meta["backend"] == "simulated", vid
        assert len(gloo.steps) == STEPS and gloo.meta["status"] == "complete", vid
        for column in ("train_loss", "val_loss"):
            sim, real = simulated.steps[column].to_numpy(), gloo.steps[column].to_numpy()
            assert np.array_equal(np.isnan(sim), np.isnan(real)), (vid, column)
            ok = ~np.isnan(sim)
            rel = np.abs(real[ok] - sim[ok]) / np.abs(sim[ok])
            assert rel.max() <= 1e-5, (vid, column, rel.max())
        # The loss must move, or equal losses would prove nothing.
        assert gloo.steps["train_loss"].iloc[-5:].mean() < gloo.steps["train_loss"].iloc[:5].mean()
        assert (gloo.steps["comm_s"] > 0).all() and (gloo.steps["exchange_bytes"] > 0).all(), vid
        assert (simulated.steps["comm_s"] == 0).all(), vid
        if vid.startswith("E"):
            sim_clip = simulated.steps["clip_rate"].to_numpy()
            real_clip = gloo.steps["clip_rate"].to_numpy()
            assert np.allclose(sim_clip, real_clip, equal_nan=True), vid


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
