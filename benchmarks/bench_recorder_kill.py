"""kill -9 a loop that records with `TraceRecorder`, at a random step, and read what it left.

Each kill starts a fresh process that records steps (1, 2, ...) and prints after each
`step()` the step and the last step saved to disk (`saved_step`), then sleeps briefly; the
parent reads the lines until a random step, sends SIGKILL, reads the lines still in the pipe
and opens the trace with transitsim.traces.format.read_trace. The trace must hold steps 1..n,
n between the last save reported and the last step printed + 1 (a kill between the save's
rename and the print). Exit 1 when a kill breaks that.

    python benchmarks/bench_recorder_kill.py [--kills 20] [--flush-every 10] [--max-step 60]
        [--step-s 0.02] [--seed 0] [--out DIR] [--json]

With fast steps (the default 20 ms) the saves come less often than every `--flush-every`
steps: the recorder's cost limit (saving at most 5 % of the loop's time) stretches the window
when a save (fsync included) takes 15-30 ms; `--step-s 0.05` shows the rows limit binding.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
from trainer.own import TraceRecorder
path, every, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rec = TraceRecorder(path, workers=2, variant="B", n_params=1000, flush_every=every, flush_s=None)
step = 0
while True:
    step += 1
    rec.step(loss=1.0 / step, payload_bytes=400, compute_s=0.01)
    print(step, rec.saved_step, flush=True)
    time.sleep(pause)
"""


def kill_once(path: Path, at_step: int, flush_every: int, step_s: float = 0.02) -> dict:
    """Run the recording loop until it prints `at_step`, kill -9 it, and read its trace."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(flush_every), str(step_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    for line in child.stdout:
        lines.append(line.split())
        if int(lines[-1][0]) >= at_step:
            break
    os.kill(child.pid, signal.SIGKILL)
    rest, errors = child.communicate()
    lines += [line.split() for line in rest.splitlines() if line.strip()]
    if not lines:
        raise SystemExit(f"the recording loop printed nothing: {errors[-2000:]}")
    last_step, saved = int(lines[-1][0]), lines[-1][1]
    saves = sorted({int(line[1]) for line in lines if line[1] != "None"})
    found = _rows_found(path)
    ok = isinstance(found, int) and int(saved) <= found <= last_step + 1
    return {
        "path": str(path),
        "killed_after_step": at_step,
        "last_step": last_step,
        "saved_step": int(saved),
        "rows_found": found,
        "saves_seen": saves,
        "ok": ok,
    }


def _rows_found(path: Path) -> int | str:
    """The rows of the trace, when they are steps 1..n; else what is wrong."""
    from transitsim.traces.format import read_trace

    try:
        trace = read_trace(path)
    except Exception as exc:  # a broken file is the finding, not a crash of the benchmark
        return f"unreadable: {exc}"
    steps = trace.steps["step"].tolist()
    if steps != list(range(1, len(steps) + 1)) or trace.meta["status"] != "incomplete":
        return f"steps {steps[:3]}..{steps[-3:]} status {trace.meta['status']}"
    return len(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--flush-every", type=int, default=10)
    parser.add_argument("--max-step", type=int, default=60)
    parser.add_argument("--step-s", type=float, default=0.02, help="the loop's sleep a step")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="one JSON object per kill")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="recorder-kill-"))
    failed = 0
    for kill in range(1, args.kills + 1):
        at_step = rng.randint(1, args.max_step)
        result = kill_once(out / f"kill{kill}.parquet", at_step, args.flush_every, args.step_s)
        failed += not result["ok"]
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(
                f"kill {kill:2d}: SIGKILL after step {result['last_step']:3d} "
                f"(last save reported: step {result['saved_step']:3d}), rows found: "
                f"{result['rows_found']}{'' if result['ok'] else '  FAILED'}"
                f"  (saves at steps {', '.join(map(str, result['saves_seen']))})",
                flush=True,
            )
    if not args.json:
        print(f"{args.kills - failed}/{args.kills} kills left a readable trace of steps 1..n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
