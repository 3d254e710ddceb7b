"""How `traces import --profile` scales with the profiled steps, and what a profile of many tiny
events costs (issue 45, item 5).

Steps: gloo DDP profiles of 250 .. N steps (a CPU trace as torch.profiler writes one: per step
the forward, autograd ops, per bucket a c10d::allreduce_ launch and its gloo op on a worker
thread, the optimiser; 10 + 3 x buckets events), each imported (read, steps, trace built, not
written). Printed per size: events, JSON MB, seconds, microseconds per event, and that figure
over the smallest size's, measured in the same run: ~1 where the import is O(events log events),
growing with the steps where it is O(steps x events) (as it was: 5,000 steps took 85-99 s).

Tiny events: a .json.gz holding M million instant events `{"ph":"i","ts":1}` before a small
valid profile (the issue's 0.85 MB file of 40 M events, 1.1 GB of JSON): the seconds and the
peak resident memory the read adds (the whole document parsed at once ended in MemoryError).

    .venv/bin/python benchmarks/bench_profile_import.py [--steps 250,1000,5000] [--tiny 4]
"""

import argparse
import gzip
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from transitsim.base.tables import emit_table
from transitsim.traces.kineto_events import read_raw_profile
from transitsim.traces.profile_import import ImportOptions, build_trace


def gloo_profile(steps: int, buckets: int = 4) -> dict[str, Any]:
    """A CPU-only DDP run of `steps` steps on gloo (times in microseconds)."""
    events: list[dict[str, Any]] = []

    def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts,
                       "dur": dur, "args": args})  # fmt: skip

    t = 1000.0
    for n in range(steps):
        op(f"ProfilerStep#{n}", t, 8000, cat="user_annotation")
        for k in range(4):
            op("aten::linear", t + 10 + 700 * k, 600)
        op("autograd::engine::evaluate_function: AddmmBackward0", t + 3100, 2000)
        for b in range(buckets):
            launch = t + 3200 + 700 * b
            op("c10d::allreduce_", launch, 30, **{"Input Dims": [[[1000]]],
                                                 "Input type": ["TensorList"]})  # fmt: skip
            op("gloo:all_reduce", launch + 50, 600, tid=10 + b, cat="user_annotation",
               **{"Input Dims": [[1000]], "Input type": ["float"]})  # fmt: skip
            op("aten::add_", launch + 100, 20)
        op("autograd::engine::evaluate_function: AddmmBackward0", t + 6200, 300)
        op("Optimizer.step#SGD.step", t + 7000, 500, cat="user_annotation")
        t += 8100
    return {
        "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2},
        "traceEvents": events,
    }


def step_rows(sizes: list[int], folder: Path) -> pd.DataFrame:
    rows = []
    for steps in sizes:
        document = gloo_profile(steps)
        path = folder / f"p{steps}.json.gz"
        text = json.dumps(document)
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
        started = time.perf_counter()
        result = build_trace([path], None, ImportOptions())
        seconds = time.perf_counter() - started
        assert len(result.trace.steps) == steps
        events = len(document["traceEvents"])
        rows.append({"steps": steps, "events": events, "json_mb": len(text) / 1e6,
                     "seconds": seconds, "us_per_event": seconds / events * 1e6})  # fmt: skip
    frame = pd.DataFrame(rows)
    frame["per_event_vs_smallest"] = frame["us_per_event"] / frame["us_per_event"].iloc[0]
    return frame


def tiny_row(millions: float, folder: Path) -> pd.DataFrame:
    document = gloo_profile(2)
    head = json.dumps({"distributedInfo": document["distributedInfo"]})[:-1]
    path = folder / "tiny.json.gz"
    count = int(millions * 1e6)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as handle:
        handle.write(head + ', "traceEvents": [')
        for _ in range(count // 100_000):
            handle.write('{"ph":"i","ts":1},' * 100_000)
        handle.write(",".join(json.dumps(e) for e in document["traceEvents"]) + "]}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    raw = read_raw_profile(path)
    seconds = time.perf_counter() - started
    added = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    row = {"tiny_events": count, "file_mb": path.stat().st_size / 1e6,
           "json_mb": (count * 18 + 5000) / 1e6, "events_kept": len(raw.events),
           "seconds": seconds, "peak_rss_added_mb": added / 1024}  # fmt: skip
    return pd.DataFrame([row])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="250,1000,5000", help="profiled step counts")
    parser.add_argument("--tiny", type=float, default=4.0, help="millions of tiny events (0: no)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.steps.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        if args.tiny:  # first: its peak memory is then its own
            emit_table(tiny_row(args.tiny, Path(folder)), "table", title="Many tiny events")
        emit_table(step_rows(sizes, Path(folder)), "table", title="Import time by steps")


if __name__ == "__main__":
    main()
