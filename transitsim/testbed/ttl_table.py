"""The time-to-loss validation table: printed with rich, written as CSV and JSON.

Its headline puts two errors side by side, per cell and summarised (median and worst |error|,
how many within 10 %): the time to loss, and the exchange alone (predicted exchange against
the measured `comm_s` up to the same step), which the time to loss dilutes by everything else
in the step. And per (rate, target) column: the variants' predicted order against the measured
one.
"""

import json
import math
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from transitsim.base.atomic import atomic_path
from transitsim.testbed import json_ready, rate_label
from transitsim.testbed.ttl_model import COLUMNS

WITHIN = 0.10
NOTES_INDEPENDENT = (
    "compute: each variant's compute run on the unshaped testbed (step 1, the mean plain step, "
    "the mean evaluated step); the predicted run gives only its loss curve and bytes",
    "gathers: the loss gather (and E'/optics' clip counts) every step: fixed costs inside the "
    "compute run's compute, bytes replayed at the rate; checkpoints: none inside the runs "
    "(left out of both sides)",
)
NOTES_OWN = (
    "NOT INDEPENDENT: this folder has no compute runs, so each step's compute is the run's own "
    "wall_s - comm_s plus gaps (checkpoint gathers included): predicted - measured is the "
    "exchange's error, diluted",
)


def _num(value: float, fmt: str) -> str:
    return "–" if pd.isna(value) else format(value, fmt)


def _errors(values: pd.Series) -> dict:
    """Median and worst |error| (the worst with its sign), how many within 10 %."""
    values = values.dropna()
    if values.empty:
        return {"median_abs_error": float("nan"), "worst_abs_error": float("nan"),
                "worst_error": float("nan"), "within_10pct": 0, "cells": 0}  # fmt: skip
    worst = float(values.loc[values.abs().idxmax()])
    return {
        "median_abs_error": float(values.abs().median()),
        "worst_abs_error": abs(worst),
        "worst_error": worst,
        "within_10pct": int((values.abs() <= WITHIN).sum()),
        "cells": int(len(values)),
    }


def orders(table: pd.DataFrame) -> list[dict]:
    """Per (rate, target): the variants that reached it, fastest first, as predicted and as
    measured, and whether the two orders are the same."""
    out = []
    done = table.dropna(subset=["step"])
    for (rate, target), group in done.groupby(["rate_bps", "target"], sort=True):
        predicted = group.sort_values("predicted_s", kind="stable")["variant"].tolist()
        measured = group.sort_values("measured_s", kind="stable")["variant"].tolist()
        out.append(
            {
                "rate_bps": float(rate),
                "target": float(target),
                "predicted": predicted,
                "measured": measured,
                "right": predicted == measured,
            }
        )
    return sorted(out, key=lambda o: (o["rate_bps"], -o["target"]))


def summary(table: pd.DataFrame) -> dict:
    """The headline: both errors summarised, the orders, and whether the cells are independent."""
    done = table.dropna(subset=["step"])
    ttl, exchange, columns = _errors(done["error"]), _errors(done["exchange_error"]), orders(table)
    independent = bool(len(done)) and bool(done["independent"].astype(bool).all())
    return {
        "cells": int(len(table)),
        "reached": int(len(done)),
        "independent": independent,
        "notes": list(NOTES_INDEPENDENT if independent else NOTES_OWN),
        # the time to loss, under the names earlier tables used
        "within_10pct": ttl["within_10pct"],
        "median_abs_error": ttl["median_abs_error"],
        "worst_abs_error": ttl["worst_abs_error"],
        "time_to_loss": ttl,
        "exchange": exchange,
        "order": {
            "columns": len(columns),
            "right": sum(c["right"] for c in columns),
            "per_column": columns,
        },
    }


def _pct(value: float) -> str:
    return _num(value, "+.1%")


def print_table(table: pd.DataFrame) -> None:
    console = Console(width=max(Console().width, 150))
    s = summary(table)
    how = "compute measured apart" if s["independent"] else "NOT INDEPENDENT: the run's own compute"
    grid = Table(title=f"time to loss on the testbed: measured vs transitsim ({how})")
    heads = ("variant", "rate", "target", "step", "measured s", "predicted s", "error",
             "exchange meas. s", "exchange pred. s", "exchange error", "exchange share",
             "compute pred. s", "pred. without alpha s")  # fmt: skip
    for head in heads:
        grid.add_column(head, justify="left" if head == "variant" else "right")
    for row in table.itertuples():
        reached = not pd.isna(row.step)
        extrapolated = reached and bool(row.compute_extrapolated)
        grid.add_row(
            row.variant,
            rate_label(row.rate_bps),
            f"{row.target:g}",
            str(int(row.step)) if reached else "not reached",
            *(
                (
                    f"{row.measured_s:.2f}",
                    f"{row.predicted_s:.2f}",
                    _pct(row.error),
                    f"{row.exchange_measured_s:.2f}",
                    f"{row.exchange_predicted_s:.2f}",
                    _pct(row.exchange_error),
                    f"{row.exchange_share:.0%}",
                    f"{row.compute_predicted_s:.2f}" + ("*" if extrapolated else ""),
                    f"{row.predicted_no_alpha_s:.2f}",
                )
                if reached
                else ("–",) * 9
            ),
        )
    console.print(grid, width=max(console.width, 150))
    for row in table.drop_duplicates("rate_bps").itertuples():
        if pd.isna(row.net_host_rate_bps):
            endpoint = (
                f"alpha {row.net_alpha_s * 1e3:.3f} ms per gloo transfer (fitted on the 1 MiB "
                "calibration)"
            )
        else:
            cap = (
                "no rate cap"
                if math.isinf(row.net_host_rate_bps)
                else f"{row.net_host_rate_bps / 1e6:.4g} Mb/s shared by the ranks"
            )
            endpoint = (
                f"endpoint o {row.net_host_per_transfer_s * 1e3:.3f} ms per gloo transfer, {cap} "
                "(fitted on the 64 KiB and 4 MiB calibration)"
            )
        sites = getattr(row, "net_sites", 1)
        wan = (
            f"two sites, WAN {rate_label(row.net_wan_rate_bps)} (its latency "
            f"{row.net_wan_latency_s * 1e6:.1f} us: the kernel's, no netem), "
            if sites == 2
            else ""
        )
        console.print(
            f"{rate_label(row.rate_bps)}: {wan}payload share {row.net_efficiency:.4f} (tbf "
            f"counters), latency {row.net_latency_s * 1e6:.1f} us (RTT/4), {endpoint}",
            soft_wrap=True,
        )
    for column in s["order"]["per_column"]:
        console.print(
            f"{rate_label(column['rate_bps'])} to {column['target']:g}: predicted "
            f"{' < '.join(column['predicted'])}, measured {' < '.join(column['measured'])}: "
            + ("right" if column["right"] else "WRONG"),
            soft_wrap=True,
        )
    if table["compute_extrapolated"].eq(True).any():
        console.print("*: the target step lies past the compute run's steps (same figures)")
    for note in s["notes"]:
        console.print(f"note: {note}", soft_wrap=True)
    ttl, ex = s["time_to_loss"], s["exchange"]
    console.print(
        f"{s['reached']} of {s['cells']} cells reached; time to loss |error| median "
        f"{_num(ttl['median_abs_error'], '.1%')}, worst {_pct(ttl['worst_error'])}, "
        f"{ttl['within_10pct']} within 10 %; exchange alone |error| median "
        f"{_num(ex['median_abs_error'], '.1%')}, worst {_pct(ex['worst_error'])}, "
        f"{ex['within_10pct']} within 10 %; order right in {s['order']['right']} of "
        f"{s['order']['columns']} columns",
        soft_wrap=True,
    )


def write_table(table: pd.DataFrame, folder: Path) -> None:
    with atomic_path(folder / "time_to_loss.csv") as tmp:
        table.reindex(columns=COLUMNS).to_csv(tmp, index=False, float_format="%.6g")
    with atomic_path(folder / "time_to_loss.json") as tmp:
        tmp.write_text(json.dumps(json_ready(summary(table)), indent=2) + "\n")
