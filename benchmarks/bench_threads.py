"""Seconds per training step at each intra-op thread count, and with `auto` (0), on a quiet
machine and beside busy processes: the measurement behind the trainer's default `threads`.

Each round trains a few steps of the same variant at every thread count in turn (a fresh
process per measurement, as a run would be, so one count cannot warm the next), and prints the
median step time per count and its ratio to the baseline, one thread, measured in the same
rounds. Interleaving the counts keeps a load change on a shared machine from favouring one.

    .venv/bin/python benchmarks/bench_threads.py [--preset shakespeare-mini] [--variant C]
        [--threads 1 2 0] [--steps 8] [--rounds 3] [--load 0 1]

`--load N` runs each measurement beside N busy single-thread processes (a spinning Python
loop each, started before the run and killed after it): N = 1 on 2 cores is another job wanting
one core. The machine must be otherwise quiet; the 1-minute load average is printed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from trainer.config import make_config
from trainer.data.corpus import load_corpus
from trainer.loop.run import Trainer, setup_torch
from trainer.loop.threads import ThreadGovernor
preset, variant, threads, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = make_config(preset, variant, steps=steps + 2, threads=threads, eval_every=10**9)
setup_torch(max(threads, 1))
governor = ThreadGovernor() if threads == 0 else None  # as trainer/loop/run.py's train does
trainer = Trainer(cfg, load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size))
trainer.step()  # warm-up
times = []
for step in range(steps):
    started = time.perf_counter()
    if governor is not None:
        governor.before_step(step)
    trainer.step()
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


SPIN = "while True: pass"


def measure(preset: str, variant: str, threads: int, steps: int, load: int) -> list[float]:
    argv = [sys.executable, "-c", CHILD, preset, variant, str(threads), str(steps)]
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(load)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=1800)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return json.loads(out.stdout.strip().splitlines()[-1])


def name(threads: int) -> str:
    return "auto" if threads == 0 else str(threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="shakespeare-mini")
    parser.add_argument("--variant", default="C")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 0], help="0: auto")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 1], help="busy processes")
    args = parser.parse_args()
    counts = sorted(set(args.threads) | {1}, key=lambda n: (n == 0, n))
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
    for load in args.load:
        times: dict[int, list[float]] = {n: [] for n in counts}
        for _ in range(args.rounds):
            for n in counts:
                times[n] += measure(args.preset, args.variant, n, args.steps, load)
        base = statistics.median(times[1])
        print(
            f"{args.preset} {args.variant}, beside {load} busy process(es): seconds per step "
            f"over {args.rounds} rounds of {args.steps} steps"
        )
        for n in counts:
            step, worst = statistics.median(times[n]), max(times[n])
            print(
                f"  threads {name(n):>4}: median {step:.4f} s ({step / base:.2f}x 1 thread), "
                f"slowest {worst:.3f} s"
            )
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
