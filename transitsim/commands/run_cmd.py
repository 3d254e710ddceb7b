"""`transitsim run SCENARIO`: replay every (trace, network) of a scenario, print time-to-loss,
write the timeline, the summary and the interactive report. The work is transitsim.run's.

The terminal gets the verdict first (one sentence per target, then its table: where each
configuration is fastest or tied, with seed intervals), the summary tables, and the verdict's
sentences again at the end, so the answer is on the last screen too. A few notes go to stderr;
all of them are in notes.txt beside the outputs, and `--notes` prints them all.
"""

from pathlib import Path

import typer

from transitsim.run import JobsFailed, default_output_dir, run_scenario
from transitsim.scenario import load_scenario
from transitsim.terminal.results import (
    print_crossovers,
    print_overlap,
    print_summary,
    print_verdict,
    report_all_failed,
    report_problems,
)


def run_command(
    scenario: Path = typer.Argument(..., help="The scenario YAML file."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Output folder (default: outputs.dir, else out/<name>/)."
    ),
    serial: bool = typer.Option(False, "--serial", help="Run the jobs in this process, no Dask."),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Address of a running Dask scheduler (tcp://host:8786)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, tables or notes."),
    trace_events: Path | None = typer.Option(
        None, "--trace-events", help="Also write one step as Chrome trace events (Perfetto)."
    ),
    notes: bool = typer.Option(
        False, "--notes", help="Print every note (all are in notes.txt beside the outputs)."
    ),
) -> int:
    """Replay every trace of a scenario on every network point; print steps-, time- and
    bytes-to-loss per target; write the timeline, summary and report. Exit 0 when every job
    ran, 1 when some failed (the others are still written), 2 on bad input."""
    loaded = load_scenario(scenario)
    out_dir = out if out is not None else default_output_dir(loaded)
    try:
        result = run_scenario(
            loaded,
            out_dir,
            serial=serial,
            scheduler=scheduler,
            quiet=quiet,
            trace_events=trace_events,
        )
    except JobsFailed as exc:
        return report_all_failed(exc)
    report_problems(result, quiet, all_notes=notes)
    if not quiet:
        print(result.title)
        print_verdict(result)
        print_summary(result, baseline=loaded.baseline)
        print_crossovers(result)
        print_overlap(result, loaded.baseline)
        print_verdict(result, tables=False, again=True)
        print(f"wrote {', '.join(str(path) for path in result.files)}")
    return result.exit_code


def register(app: typer.Typer) -> None:
    """Add `transitsim run` to the main app."""
    app.command("run")(run_command)
