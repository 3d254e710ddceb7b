"""The time-to-loss validation table: printed with rich, written as CSV and JSON."""

import json
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from transitsim.base.atomic import atomic_path
from transitsim.testbed import json_ready, rate_label
from transitsim.testbed.ttl_model import COLUMNS


def _num(value: float, fmt: str) -> str:
    return "–" if pd.isna(value) else format(value, fmt)


def summary(table: pd.DataFrame) -> dict:
    """Median and worst |error| over the reached cells; how many are within 10 %."""
    done = table.dropna(subset=["error"])
    errors = done["error"].abs()
    return {
        "cells": int(len(table)),
        "reached": int(len(done)),
        "within_10pct": int((errors <= 0.10).sum()),
        "median_abs_error": float(errors.median()) if len(done) else float("nan"),
        "worst_abs_error": float(errors.max()) if len(done) else float("nan"),
    }


def print_table(table: pd.DataFrame) -> None:
    console = Console(width=max(Console().width, 130))
    grid = Table(title="time to loss on the testbed: measured vs transitsim (same run's trace)")
    heads = ("variant", "rate", "target", "step", "measured s", "predicted s", "error",
             "exchange meas. s", "exchange pred. s", "exchange share",
             "pred. without alpha s")  # fmt: skip
    for head in heads:
        grid.add_column(head, justify="left" if head == "variant" else "right")
    for row in table.itertuples():
        reached = not pd.isna(row.step)
        grid.add_row(
            row.variant,
            rate_label(row.rate_bps),
            f"{row.target:g}",
            str(int(row.step)) if reached else "not reached",
            *(
                (
                    f"{row.measured_s:.2f}",
                    f"{row.predicted_s:.2f}",
                    f"{row.error:+.1%}",
                    f"{row.exchange_measured_s:.2f}",
                    f"{row.exchange_predicted_s:.2f}",
                    f"{row.exchange_share:.0%}",
                    f"{row.predicted_no_alpha_s:.2f}",
                )
                if reached
                else ("–",) * 7
            ),
        )
    console.print(grid)
    params = table.drop_duplicates("rate_bps")
    for row in params.itertuples():
        console.print(
            f"{rate_label(row.rate_bps)}: payload share {row.net_efficiency:.4f} (tbf counters), "
            f"latency {row.net_latency_s * 1e6:.1f} us (RTT/4), alpha "
            f"{row.net_alpha_s * 1e3:.3f} ms per gloo transfer (fitted on the 1 MiB calibration)"
        )
    s = summary(table)
    console.print(
        f"{s['reached']} of {s['cells']} cells reached; |error| median "
        f"{_num(s['median_abs_error'], '.1%')}, worst {_num(s['worst_abs_error'], '.1%')}; "
        f"{s['within_10pct']} within 10 %"
    )


def write_table(table: pd.DataFrame, folder: Path) -> None:
    with atomic_path(folder / "time_to_loss.csv") as tmp:
        table.reindex(columns=COLUMNS).to_csv(tmp, index=False, float_format="%.6g")
    with atomic_path(folder / "time_to_loss.json") as tmp:
        tmp.write_text(json.dumps(json_ready(summary(table)), indent=2) + "\n")
