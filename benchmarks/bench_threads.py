"""Seconds per training step at each intra-op thread count: the measurement behind the
trainer's default `threads`.

Each round trains a few steps of the same variant at every thread count in turn (a fresh
process per measurement, as a run would be, so one count cannot warm the next), and prints the
median step time per count and its ratio to the baseline, one thread, measured in the same
rounds. Interleaving the counts keeps a load change on a shared machine from favouring one.

    .venv/bin/python benchmarks/bench_threads.py [--preset shakespeare-mini] [--variant C]
        [--threads 1 2] [--steps 8] [--rounds 3]
"""

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from trainer.config import make_config
from trainer.data.corpus import load_corpus
from trainer.loop.run import Trainer, setup_torch
preset, variant, threads, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = make_config(preset, variant, steps=steps + 2, threads=threads, eval_every=10**9)
setup_torch(threads)
trainer = Trainer(cfg, load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size))
trainer.step()  # warm-up
times = []
for _ in range(steps):
    started = time.perf_counter()
    trainer.step()
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def measure(preset: str, variant: str, threads: int, steps: int) -> list[float]:
    argv = [sys.executable, "-c", CHILD, preset, variant, str(threads), str(steps)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="shakespeare-mini")
    parser.add_argument("--variant", default="C")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    counts = sorted(set(args.threads) | {1})
    times: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(args.rounds):
        for n in counts:
            times[n] += measure(args.preset, args.variant, n, args.steps)
    base = statistics.median(times[1])
    print(f"{args.preset} {args.variant}: median seconds per step over {args.rounds} rounds")
    for n in counts:
        step = statistics.median(times[n])
        print(f"  threads {n}: {step:.4f} s/step  ({step / base:.2f}x the 1-thread time)")


if __name__ == "__main__":
    main()
