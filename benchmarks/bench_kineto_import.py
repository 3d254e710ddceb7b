"""Every real Kineto trace in the shared folder, imported and replayed (issue 42, items 3 and 4):
what the import reads per trace, and the step a replay predicts from it.

Per trace: the profiled steps, the mean measured step (the host's ProfilerStep spans), the mean
device step (GPU traces: the GPU's own timeline), compute, exposed and hidden communication,
the payload and the time the step waited on its exchange after backward (the mean over the
profiled steps, the slowest rank's); then the mean step that `transitsim replay --network
8x200g-switch --set workers=<the job's> --overlap buckets` predicts, and the mean step a replay
on the network the import measured predicts (`measured.yaml`, the job's own collectives fitted
like an nccl-tests table, replayed with --overlap buckets: issue 42, item 4), its error against
the measured step and the fit's worst error. The trace recorded without shapes is refused; it
is also imported with an illustrative --params (ResNet-50's parameter count: the trace does not
name its model), which gives no measured network (no sizes to fit).

    .venv/bin/python benchmarks/bench_kineto_import.py [--shared ../shared/kineto] [--markdown]
"""

import argparse
import contextlib
import io
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from transitsim import cli
from transitsim.base.errors import TransitsimError
from transitsim.base.tables import emit_table
from transitsim.calibrate.profile_table import write_profile_network
from transitsim.traces.profile_import import ImportOptions, import_profile

SHARED = Path(__file__).resolve().parents[2] / "shared" / "kineto"
NETWORK = "8x200g-switch"
ILLUSTRATIVE_PARAMS = 25_557_032  # ResNet-50: an example size, not the traced model's


def replay_time_s(folder: Path, network: str, extra: list[str]) -> float:
    """A replay's total time over the folder's one trace."""
    argv = ["replay", str(folder), "-n", network, *extra, "--json", "-q"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(err.getvalue().strip()) from None
    (row,) = json.loads(out.getvalue())
    files = len(list(folder.glob("*.parquet")))
    assert files == 1
    return float(row["time_s"])


def one_row(path: Path, options: ImportOptions, label: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        try:
            result = import_profile([path], None, folder, options)
        except TransitsimError as exc:
            return {"trace": label, "note": f"refused: {str(exc).split(': ', 1)[1][:90]}"}
        seconds = time.perf_counter() - started
        meta = result.trace.meta
        template = meta["profile"]["template"]
        steps = meta["profile"]["steps"]
        devices = [s["device_s"] for s in steps if "device_s" in s]
        rows = len(result.trace.steps)
        extra = ["--set", f"workers={meta['workers']}", "--overlap", "buckets"]
        replayed = replay_time_s(Path(folder), NETWORK, extra) / rows
        try:
            network, fit = write_profile_network(Path(folder) / "measured.yaml", meta)
        except TransitsimError:  # no collective of readable size: nothing to fit
            network, fit = None, None
        measured = (
            replay_time_s(Path(folder), str(network), ["--overlap", "buckets"]) / rows
            if network is not None
            else math.nan
        )
    ms = 1e3
    return {
        "trace": label,
        "workers": meta["workers"],
        "steps": len(steps),
        "measured step (ms)": template["wall_s"] * ms,
        "device step (ms)": sum(devices) / len(devices) * ms if devices else None,
        "compute (ms)": template["compute_s"] * ms,
        "exposed comm (ms)": template["exposed_s"] * ms,
        "hidden comm (ms)": template["hidden_s"] * ms,
        "payload (B)": int(template["payload_bytes"]),
        f"replayed on {NETWORK} (ms)": replayed * ms,
        "waited (ms)": template["waited_s"] * ms,
        "replayed on measured (ms)": measured * ms,
        "error": "" if fit is None else f"{measured / template['wall_s'] - 1:+.1%}",
        "fit worst": "" if fit is None else f"{fit.worst:.1%}",
        "import (s)": seconds,
        "note": "; ".join(w.split(": ", 1)[1][:60] for w in result.warnings),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=SHARED)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    paths = sorted([*args.shared.glob("*.json.gz"), *args.shared.glob("more/*.json.gz")])
    if not paths:
        raise SystemExit(f"no Kineto traces under {args.shared}")
    rows = []
    for path in paths:
        label = path.name.removesuffix(".json.gz")
        rows.append(one_row(path, ImportOptions(name="bench"), label))
        if rows[-1]["note"].startswith("refused"):
            options = ImportOptions(name="bench", params=ILLUSTRATIVE_PARAMS)
            rows.append(one_row(path, options, f"{label} --params {ILLUSTRATIVE_PARAMS:,}"))
    table = pd.DataFrame(rows)
    for column in table.columns:
        if column.endswith("(ms)"):
            table[column] = table[column].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    table["import (s)"] = table["import (s)"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    for column in ("workers", "steps", "payload (B)"):
        table[column] = table[column].map(lambda v: "" if pd.isna(v) else f"{int(v):,}")
    title = (
        f"Kineto traces imported; replayed on {NETWORK} (workers = the job's), --overlap buckets"
    )
    emit_table(table.fillna(""), "markdown" if args.markdown else "table", title=title)


if __name__ == "__main__":
    main()
