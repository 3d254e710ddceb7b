"""Bring your own run, last step: the step time its profile measured beside transitsim's
prediction on the network it ran on (the calibrated loopback), with the machine's load.

    python examples/byo_run/compare.py out/byo_run

Measured: the mean over the profiled steps of the job's step (each step the slower rank's
ProfilerStep span), as `traces import` stored it: compute + exposed communication + optimizer.
Predicted: `transitsim replay` of the
imported trace on `loopback.yaml` with `--overlap buckets` (each bucket's all-reduce starts
where the profile saw it launched), mean step time over the run.
"""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/byo_run")
    (trace,) = sorted((out / "traces").glob("*.parquet"))
    meta = json.loads(pq.read_schema(trace).metadata[b"transitsim.trace"])
    template = meta["profile"]["template"]
    measured = template["wall_s"]
    predicted, serial = (_replay(trace, out, overlap) for overlap in ("buckets", "none"))
    error = (predicted - measured) / measured
    load = Path("/proc/loadavg").read_text().split()[:3]
    lines = [
        f"measured step (profile, mean of {len(meta['profile']['steps'])} steps x "
        f"{len(meta['profile']['files'])} ranks): {measured * 1e3:.2f} ms",
        f"  compute {template['compute_s'] * 1e3:.2f} ms, "
        f"optimizer {template['update_s'] * 1e3:.2f} ms, "
        f"communication {template['comm_s'] * 1e3:.2f} ms "
        f"({template['exposed_s'] * 1e3:.2f} exposed, {template['hidden_s'] * 1e3:.2f} hidden)",
        f"predicted step (replay on {out / 'loopback.yaml'}, --overlap buckets): "
        f"{predicted * 1e3:.2f} ms",
        f"error: {error:+.1%} (target: within 10 %)",
        f"  (without overlap, --overlap none: {serial * 1e3:.2f} ms, "
        f"{(serial - measured) / measured:+.1%})",
        f"load average (1, 5, 15 min): {' '.join(load)} on {_cores()} cores",
    ]
    text = "\n".join(lines) + "\n"
    (out / "comparison.txt").write_text(text, encoding="utf-8")
    print(text, end="")


def _replay(trace: Path, out: Path, overlap: str) -> float:
    """Mean step seconds of `transitsim replay` on the calibrated loopback."""
    transitsim = Path(sys.executable).with_name("transitsim")
    replay = subprocess.run(
        [str(transitsim), "replay", str(trace), "--network", str(out / "loopback.yaml"),
         "--overlap", overlap, "--json", "-q"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (row,) = json.loads(replay.stdout)
    return float(row["step_s"])


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
