"""Seconds per step of one run on the simulated backend and on gloo ranks over loopback.

Trains the same configuration twice in fresh output folders, once with all W workers in one
process and once as `--backend gloo --nproc N` (W/N workers per rank), then prints the median
per-step figures from each trace (whole step, one worker's forward+backward, compression, the
measured exchange) and the gloo/simulated ratio of the step time, both measured in this run.
On one machine the ranks share its cores, so this shows the cost of the real exchange and of
process overhead, not a cluster's speed-up.

    .venv/bin/python benchmarks/bench_backends.py [--preset shakespeare-mini] [--variant C]
        [--nproc 4] [--steps 20] [--workers 4]
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from transitsim.traces.format import find_traces, read_trace

COLUMNS = ("wall_s", "compute_s", "compress_s", "comm_s")


def run(out: Path, args: argparse.Namespace, *extra: str) -> dict[str, float]:
    argv = [sys.executable, "-m", "trainer", "--preset", args.preset, "--variant", args.variant]
    argv += ["--steps", str(args.steps), "--set", f"workers={args.workers}", "--quiet"]
    argv += ["--set", f"eval_every={10**6}", "-o", str(out), *extra]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=3600)
    steps = read_trace(find_traces([out])[0]).steps.iloc[1:]  # the first step warms up
    return {column: float(steps[column].median()) for column in COLUMNS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="shakespeare-mini")
    parser.add_argument("--variant", default="C")
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        simulated = run(Path(tmp) / "simulated", args)
        gloo = run(Path(tmp) / "gloo", args, "--backend", "gloo", "--nproc", str(args.nproc))
    print(
        f"{args.preset} {args.variant}, W={args.workers}, {args.steps} steps: median s/step "
        f"(simulated: 1 process; gloo: {args.nproc} ranks on loopback)"
    )
    print(f"  {'':10s}" + "".join(f"{c:>12s}" for c in COLUMNS))
    for label, figures in (("simulated", simulated), ("gloo", gloo)):
        print(f"  {label:10s}" + "".join(f"{figures[c]:12.4f}" for c in COLUMNS))
    print(f"  gloo / simulated step time: {gloo['wall_s'] / simulated['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
