"""Bring your own run, last step: the step time its profile measured beside transitsim's
prediction on the network the run's own all-reduces measured, with the machine's load.

    python examples/byo_run/compare.py out/byo_run

Measured: the mean over the profiled steps of the job's step (each step the slowest rank's
ProfilerStep span), as `traces import` stored it: compute + the wait on the exchange after
backward + optimizer.
Predicted: `transitsim replay` of the imported trace on `traces/measured.yaml` (the network
`traces import` fitted to the gloo all-reduces the profile timed, as they ran beside backward)
with `--overlap buckets` (each bucket's all-reduce starts where the profile saw it ready) and
`--stragglers-from` (the two ranks' fitted spread), mean step time over the run. Beside it, the
same replay on `loopback.yaml`, the loopback calibrated apart from training (idle cores, ranks
in step): it under-predicts where the exchange is exposed (docs/bring-your-own-run.md).
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
    measured_net = out / "traces" / "measured.yaml"
    predicted = _replay(trace, out, measured_net, "buckets")
    serial = _replay(trace, out, measured_net, "none")
    idle = _replay(trace, out, out / "loopback.yaml", "buckets")
    error = (predicted - measured) / measured
    load = Path("/proc/loadavg").read_text().split()[:3]
    lines = [
        f"measured step (profile, mean of {len(meta['profile']['steps'])} steps x "
        f"{len(meta['profile']['files'])} ranks): {measured * 1e3:.2f} ms",
        f"  compute {template['compute_s'] * 1e3:.2f} ms, "
        f"waited on the exchange {template['waited_s'] * 1e3:.2f} ms, "
        f"optimizer {template['update_s'] * 1e3:.2f} ms, "
        f"communication {template['comm_s'] * 1e3:.2f} ms",
        f"predicted step (replay on {measured_net}, --overlap buckets, --stragglers-from): "
        f"{predicted * 1e3:.2f} ms",
        f"error: {error:+.1%} (target: within 10 %)",
        f"  (without overlap, --overlap none: {serial * 1e3:.2f} ms, "
        f"{(serial - measured) / measured:+.1%})",
        f"  (on the loopback calibrated apart from training, {out / 'loopback.yaml'}: "
        f"{idle * 1e3:.2f} ms, {(idle - measured) / measured:+.1%})",
        f"load average (1, 5, 15 min): {' '.join(load)} on {_cores()} cores",
    ]
    text = "\n".join(lines) + "\n"
    (out / "comparison.txt").write_text(text, encoding="utf-8")
    print(text, end="")


def _replay(trace: Path, out: Path, network: Path, overlap: str) -> float:
    """Mean step seconds of `transitsim replay` on `network`, with the ranks' stragglers."""
    transitsim = Path(sys.executable).with_name("transitsim")
    replay = subprocess.run(
        [str(transitsim), "replay", str(trace), "--network", str(network),
         "--overlap", overlap, "--stragglers-from", str(out / "traces"), "--json", "-q"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (row,) = json.loads(replay.stdout)
    return float(row["step_s"])


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
