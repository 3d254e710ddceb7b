"""Seconds per training step of the `shakespeare` preset, split into fwd+bwd, compression, update.

Runs a few steps of variants A, B, C and E on this machine and prints, per variant, one worker's
forward+backward, one worker's share of the compression, the update, and the whole simulated
step (all W workers in one process). The figure that matters is compression as a fraction of
forward+backward, both measured in the same run (goal: at most 20%): the median over measured
steps of each step's own ratio, so a load spike on a shared machine moves both parts of a ratio
together; the 25-75% range of those ratios shows how steady the machine was.

    .venv/bin/python benchmarks/bench_train_step.py [--steps 20] [--threads 1]

E is measured with the optics running: its calibration window is moved to the first two steps.
"""

import argparse
import statistics
import time

from trainer.config import make_config
from trainer.data.corpus import load_corpus
from trainer.loop.run import Trainer, setup_torch

GOAL = 0.20
WARMUP_STEPS = 2
VARIANTS = {
    "A": {},
    "B": {},
    "C": {},
    "E": {"calib_start": 0, "calib_steps": WARMUP_STEPS},
}


def build(variant: str, overrides: dict, steps: int, threads: int, corpus) -> Trainer:
    cfg = make_config(
        "shakespeare",
        variant,
        steps=steps + WARMUP_STEPS + 1,
        threads=threads,
        eval_every=10**9,  # evaluates only after the last step, which is not measured
        **overrides,
    )
    return Trainer(cfg, corpus)


def summarise(trainer: Trainer, rows: list[dict]) -> dict[str, float]:
    """Median per-step figures over the measured steps, and quartiles of the per-step ratio."""

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    ratios = [r["compress_s"] / r["compute_s"] for r in rows]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios * 3)
    return {
        "fwd_bwd_s": median("compute_s"),
        "compress_s": median("compress_s"),
        "update_s": median("update_s"),
        "step_s": median("step_s"),
        "ratio": statistics.median(ratios),
        "ratio_q1": q1,
        "ratio_q3": q3,
        "optics": bool(getattr(trainer.demo, "optics_active", False)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="measured steps per variant")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    setup_torch(args.threads)
    corpus = load_corpus("shakespeare")
    print(
        f"shakespeare preset, {args.steps} measured steps per variant, {args.threads} threads; "
        "per-worker seconds (median)"
    )
    header = (
        f"{'variant':<8}{'fwd+bwd':>10}{'compress':>10}{'update':>10}"
        f"{'sim. step':>11}{'compress/fwd+bwd':>18}{'25-75%':>14}"
    )
    print(header)
    trainers = {
        v: build(v, overrides, args.steps, args.threads, corpus)
        for v, overrides in VARIANTS.items()
    }
    rows: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for step in range(args.steps + WARMUP_STEPS):  # round robin: load spikes hit every variant
        for variant, trainer in trainers.items():
            started = time.perf_counter()
            row = trainer.step()
            row["step_s"] = time.perf_counter() - started
            if step >= WARMUP_STEPS:
                rows[variant].append(row)
    for variant, trainer in trainers.items():
        r = summarise(trainer, rows[variant])
        verdict = "" if variant == "A" else ("  ok" if r["ratio"] <= GOAL else "  over goal")
        verdict += " (optics running)" if r["optics"] else ""
        spread = f"{r['ratio_q1']:.1%}-{r['ratio_q3']:.1%}"
        print(
            f"{variant:<8}{r['fwd_bwd_s']:>10.4f}{r['compress_s']:>10.4f}{r['update_s']:>10.4f}"
            f"{r['step_s']:>11.3f}{r['ratio']:>17.1%}{spread:>15}{verdict}"
        )
    print(
        "sim. step = all W workers' fwd+bwd in turn plus the batched compression and the update; "
        "compress = 1/W of the batched compression; compress/fwd+bwd = median of the per-step "
        f"ratios (25-75%: their quartiles); goal <= {GOAL:.0%}"
    )


if __name__ == "__main__":
    main()
