"""How closely N gloo ranks over loopback reproduce the simulated backend, per variant.

Trains the equivalence test's tiny configuration (the synthetic preset's model on a word-salad
text, 4 workers, 30 steps, same seed) once with all workers in one process and once as N gloo
ranks, and prints per variant the largest relative difference of the training and validation
losses over all steps (the test requires at most 1e-5), and the median step times.

    .venv/bin/python benchmarks/check_equivalence.py [--nproc 4] [--steps 30]
"""

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from trainer.config import make_config
from trainer.distributed.launch import launch_command
from trainer.loop.run import train
from trainer.naming import run_name
from transitsim.traces.format import read_trace

WORDS = "the a cat dog sat on mat ran to house big small red blue and then".split()
VARIANTS = {
    "A": {},
    "B": {},
    "C": {},
    "D": {},
    "F": {},
    "E": dict(feedback="sent", fs_every=10),
    "E' loopback": dict(feedback="loopback", fs_every=10),
    "E' exact": dict(feedback="exact", fs_every=10),
    "E' mean": dict(feedback="mean", fs_every=10),
}


def max_rel(a: np.ndarray, b: np.ndarray) -> float:
    ok = ~np.isnan(a)
    return float((np.abs(a[ok] - b[ok]) / np.abs(a[ok])).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rng = random.Random(0)
        words = (rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
        (tmp / "tiny.txt").write_text(" ".join(words))
        settings = dict(steps=args.steps, threads=1, dataset=str(tmp / "tiny.txt"))
        settings.update(eval_every=10, block=32, workers=args.nproc)
        configs = {
            label: make_config("synthetic", label.split()[0], **settings, **extra)
            for label, extra in VARIANTS.items()
        }
        runs = [{"config": c.to_dict(), "out": str(tmp / "gloo")} for c in configs.values()]
        (tmp / "runs.json").write_text(json.dumps(runs))
        batch = [sys.executable, "-m", "trainer.distributed.batch", str(tmp / "runs.json")]
        if launch_command(batch, args.nproc) != 0:
            sys.exit("the gloo ranks failed")
        print(f"{args.nproc} gloo ranks vs simulated, {args.steps} steps, same seed")
        print(f"  {'variant':12s} {'train rel':>10s} {'val rel':>10s} {'sim s/step':>11s}"
              f" {'gloo s/step':>12s} {'comm s':>9s}")  # fmt: skip
        for label, cfg in configs.items():
            sim = read_trace(train(cfg, tmp / "sim", say=lambda _: None).trace_path).steps
            real = read_trace(tmp / "gloo" / f"{run_name(cfg)}.parquet").steps
            train_rel = max_rel(sim["train_loss"].to_numpy(), real["train_loss"].to_numpy())
            val_rel = max_rel(sim["val_loss"].to_numpy(), real["val_loss"].to_numpy())
            print(
                f"  {label:12s} {train_rel:10.1e} {val_rel:10.1e} {sim['wall_s'].median():11.4f}"
                f" {real['wall_s'].median():12.4f} {real['comm_s'].median():9.4f}"
            )


if __name__ == "__main__":
    main()
