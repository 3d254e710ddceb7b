"""Where a plain step's time went, measured: each shaped run beside its compute run.

The replay charges every step the compute run's figures, measured on the unshaped testbed.
Where the hosts, not the link, set the pace, the shaped run's own compute, compression and
the rest of its step (the loss gather, Python) grow past those figures; this table shows by
how much, from the traces alone, so a prediction's error can be read as link or host.

Plain steps: steps 2 up to the compute run's last step, without evaluation; medians in ms.
"the rest" is wall - comm - compute - compress - update.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from transitsim.testbed import rate_label
from transitsim.traces.format import Trace, read_trace

PARTS = ("wall_s", "comm_s", "compute_s", "compress_s", "update_s", "rest_s")


def plain_parts(trace: Trace, last_step: int) -> dict[str, float]:
    """Median seconds of each part over the trace's plain steps 2..last_step."""
    steps = trace.steps
    step = steps["step"].to_numpy(dtype=int)
    plain = steps[(step >= 2) & (step <= last_step) & steps["val_loss"].isna().to_numpy()]
    if plain.empty:
        return dict.fromkeys(PARTS, float("nan"))
    rest = plain["wall_s"] - plain["comm_s"] - plain["compute_s"]
    rest = rest - plain["compress_s"] - plain["update_s"]
    figures = {part: float(np.median(plain[part])) for part in PARTS[:-1]}
    return {**figures, "rest_s": float(np.median(rest))}


def parts_table(folder: Path, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run with a compute run, and one per compute run (rate 0: unshaped)."""
    rows, last_steps = [], {}
    for run in runs.to_dict("records"):
        if not isinstance(run.get("compute_trace"), str):
            continue
        key = run["compute_trace"]
        if key not in last_steps:  # one row per compute run, read once
            compute = read_trace(folder / key)
            last_steps[key] = int(compute.steps["step"].max())
            unshaped = plain_parts(compute, last_steps[key])
            rows.append({"variant": run["variant"], "rate_bps": 0.0, **unshaped})
        shaped = read_trace(folder / run["trace"])
        parts = plain_parts(shaped, last_steps[key])
        rows.append({"variant": run["variant"], "rate_bps": run["rate_bps"], **parts})
    return pd.DataFrame(rows, columns=["variant", "rate_bps", *PARTS])


def print_parts(table: pd.DataFrame, ttl: pd.DataFrame) -> None:
    """The table, in ms, rows of a variant together; `ttl` (the time-to-loss table) says
    whether the runs crossed a WAN."""
    wan = ""
    if "net_sites" in ttl and (ttl["net_sites"] == 2).any():
        wan = f" + WAN {rate_label(float(ttl['net_wan_rate_bps'].iloc[0]))}"
    out = Table(title="plain steps, median ms: compute run (unshaped) and shaped runs")
    for name in ("variant", "run", *(p.removesuffix("_s") for p in PARTS)):
        out.add_column(name, justify="left" if name in ("variant", "run") else "right")
    for row in table.sort_values(["variant", "rate_bps"], kind="stable").to_dict("records"):
        run = "compute run" if row["rate_bps"] == 0 else rate_label(row["rate_bps"]) + wan
        out.add_row(row["variant"], run, *(f"{row[p] * 1e3:.1f}" for p in PARTS))
    Console(width=140).print(out)
