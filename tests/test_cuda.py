"""The presets on a CUDA GPU (`--device cuda`), on one process and as an NCCL rank.

Skipped without CUDA. The spec's runs are float32 throughout (no autocast, no BF16 compute;
spec §3 "Numerics"), so CUDA runs the same arithmetic as the CPU with other kernels: losses
agree closely, not bit for bit (spec §4: GPU runs are not bit-identical).
"""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from trainer.cli import main  # noqa: E402
from trainer.config import PRESETS, make_config  # noqa: E402
from trainer.loop.run import train  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

SHORT = dict(steps=4, eval_every=2, eval_batches=2, ckpt_every=2)


@pytest.mark.parametrize("vid", ["A", "B", "C", "E", "E'"])
def test_a_cuda_run_matches_the_cpu_run(tmp_path, vid):
    cfg = make_config("synthetic", vid, **SHORT)
    cpu = read_trace(train(cfg, tmp_path / "cpu", say=lambda _: None).trace_path)
    cuda_cfg = make_config("synthetic", vid, device="cuda", **SHORT)
    gpu = read_trace(train(cuda_cfg, tmp_path / "cuda", say=lambda _: None).trace_path)
    assert gpu.meta["hardware"]["device"] == torch.cuda.get_device_name()
    np.testing.assert_allclose(gpu.steps["train_loss"], cpu.steps["train_loss"], rtol=1e-3)


@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "tinystories"])
def test_every_preset_trains_on_cuda(tmp_path, preset):
    """Two steps of each preset's C on the GPU (tinystories-gpu needs its corpus offline)."""
    cfg = make_config(preset, "C", device="cuda", steps=2, eval_every=2, eval_batches=1)
    try:
        result = train(cfg, tmp_path, say=lambda _: None)
    except Exception as exc:  # noqa: BLE001
        if "TinyStories" in str(exc) or "tinystories" in str(exc):
            pytest.skip(f"corpus not available offline: {exc}")
        raise
    trace = read_trace(result.trace_path)
    assert np.isfinite(trace.steps["train_loss"]).all() and trace.meta["config"]["device"] == "cuda"
    device = trace.meta["hardware"]["device"]
    print(f"{preset}: median step {trace.steps['wall_s'].median():.4f} s on {device}")


@pytest.mark.skipif(not torch.distributed.is_nccl_available(), reason="torch without NCCL")
def test_an_nccl_rank_per_gpu_writes_a_trace(tmp_path, capsys):
    ranks = min(2, torch.cuda.device_count())
    argv = ["--preset", "synthetic", "--variant", "B", "--steps", "4", "--device", "cuda"]
    argv += ["--backend", "nccl", "--nproc", str(ranks), "--quiet", "-o", str(tmp_path)]
    assert main(argv) == 0
    trace = read_trace(next(Path(tmp_path).glob("*.parquet")))
    assert trace.meta["backend"] == "nccl" and trace.meta["world_size"] == ranks
    assert (trace.steps["comm_s"] > 0).all()
