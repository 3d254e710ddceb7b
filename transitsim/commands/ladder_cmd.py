"""`transitsim ladder`: steps (and bytes) each configuration needs to reach given losses."""

from pathlib import Path

import pandas as pd
import typer

from transitsim.analysis.metrics import group_by_config, ladder, parse_targets
from transitsim.base.errors import TransitsimError
from transitsim.base.tables import DASH, config_labels, emit_table, format_gb, output_format
from transitsim.commands import QUIET_HELP
from transitsim.traces.format import find_traces, read_trace

DEFAULT_TRACES = Path("traces")


def ladder_grid(table: pd.DataFrame, labels: dict[str, str], bytes_column: str) -> pd.DataFrame:
    """The long ladder as the slides print it: a row per configuration, a column per target,
    cells "2,667 (5.28 GB)" (mean steps, bytes per worker) or "– (2/3)" (seeds that reached)."""
    configs = list(dict.fromkeys(table["config"]))
    grid: dict[str, list] = {
        "configuration": [labels[name] for name in configs],
        "seeds": [int(table.loc[table["config"] == name, "seeds"].iloc[0]) for name in configs],
    }
    for target, rows in table.groupby("target", sort=False):
        header = f"to {target:.3f}"
        while header in grid:
            header += "'"
        cells = {}
        for row in rows.itertuples(index=False):
            if pd.isna(row.steps):
                cells[row.config] = f"{DASH} ({row.reached})"
            else:
                cells[row.config] = f"{row.steps:,.0f} ({format_gb(getattr(row, bytes_column))})"
        grid[header] = [cells[name] for name in configs]
    return pd.DataFrame(grid)


def ladder_command(
    paths: list[Path] = typer.Argument(None, help="Trace files or folders (default: traces/)."),
    targets: str | None = typer.Option(
        None,
        "--targets",
        "-t",
        help='Losses, comma-separated: "3.158,3.124", or "final:CONFIG" (a configuration\'s '
        "mean final val loss; CONFIG is a name, a unique part of one, or a variant id like A).",
    ),
    wire: bool = typer.Option(False, "--wire", help="Show ring wire bytes instead of payload."),
    csv: bool = typer.Option(False, "--csv", help="Print the long table as CSV (raw numbers)."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    json_: bool = typer.Option(False, "--json", help="Print the long table as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> int:
    """Steps to the first evaluation at or below each target, mean over seeds, with the bytes
    one worker sent by then; a dash where not every seed gets there. --csv/--json add where the
    loss crossed the target, interpolated (steps_crossed), and the evaluation before it."""
    fmt = output_format(csv, markdown, json_)
    if targets is None:  # checked here, so that it is one line and exit 2 like any bad input
        raise TransitsimError("give the loss targets: --targets 3.158,3.124 or final:CONFIG")
    paths = paths or [DEFAULT_TRACES]
    traces = [read_trace(path) for path in find_traces(paths)]
    if not traces:
        raise TransitsimError(f"no traces in {', '.join(map(str, paths))}")
    table = ladder(traces, parse_targets(targets, traces))
    metas = {name: runs[0].meta for name, runs in group_by_config(traces).items()}
    labels = config_labels(metas)
    if fmt in ("csv", "json"):
        table.insert(1, "label", table["config"].map(labels))
        emit_table(table, fmt)
        return 0
    what = "wire" if wire else "payload"
    emit_table(
        ladder_grid(table, labels, f"{what}_bytes"),
        fmt,
        title=None
        if quiet
        else f"Steps to reach a loss (mean over seeds; {what} per worker in brackets)",
        headers={"configuration": "Configuration", "seeds": "Seeds"},
    )
    return 0


def register(app: typer.Typer) -> None:
    """Add `transitsim ladder` to the main app."""
    app.command("ladder")(ladder_command)
