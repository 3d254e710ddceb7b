"""`transitsim replay TRACE... --network NET`: one-off questions without a scenario file.

The network is a preset name or a YAML file written as a scenario's network (a mapping, or a
preset name with keys to change); `--set host_link.rate="100 Gb/s"` changes one dotted key, with
units, as a scenario grid would (transitsim.scenario.network_arg). The work is
transitsim.run.replay_traces'.
"""

import sys
from pathlib import Path

import typer

from transitsim.analysis.metrics import run_sort_key
from transitsim.analysis.summary import runs_table
from transitsim.base.errors import TransitsimError
from transitsim.base.tables import emit_table, output_format
from transitsim.base.units import parse_bytes
from transitsim.commands import QUIET_HELP
from transitsim.outputs import check_outputs_writable, write_outputs
from transitsim.overlap import OVERLAP_MODES
from transitsim.replay.fitted import read_fitted
from transitsim.replay.placement import resolve_placement
from transitsim.replay.request import ReplayRequest
from transitsim.replay.sites import REPLICAS
from transitsim.run import JobsFailed, load_traces, replay_traces
from transitsim.scenario import network_from_dict
from transitsim.scenario.network_arg import network_description
from transitsim.terminal.results import (
    print_summary,
    print_verdict,
    report_all_failed,
    report_problems,
)
from transitsim.traces.format import find_traces

RUN_HEADERS = {
    "label": "Configuration",
    "network": "Network",
    "steps": "Steps",
    "time_s": "Time (s)",
    "step_s": "Mean step (s)",
    "final_val_loss": "Final val loss",
    "wire_bytes": "Wire bytes",
    "bottleneck": "Bottleneck",
}


def replay_command(
    traces: list[Path] = typer.Argument(..., help="Trace files or folders of them."),
    network: str = typer.Option(..., "--network", "-n", help="A preset name or a YAML file."),
    settings: list[str] = typer.Option(
        [], "--set", help='Change one network key: --set host_link.rate="100 Gb/s" (repeatable).'
    ),
    targets: str | None = typer.Option(
        None, "--targets", "-t", help='Losses: "2.7,final:A" (default: final:BASELINE if given).'
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", "-b", help="Speed-ups against this config or variant id (e.g. A)."
    ),
    transform_at: str = typer.Option(
        "auto",
        "--transform-at",
        help="E/E' band made at: auto (the hardware), none, pluggable, switch.",
    ),
    sum_at: str = typer.Option(
        "auto",
        "--sum-at",
        help="Where the bands of C/D/E/F are summed: auto, receivers (all-gather), switch, "
        "ring (all-reduce).",
    ),
    overlap: str = typer.Option(
        "none",
        "--overlap",
        help="none: exchange after backward; buckets: each bucket/tensor as backward makes it.",
    ),
    bucket_size: str = typer.Option(
        "25 MiB", "--bucket-size", help="DDP bucket cap with --overlap buckets (e.g. 25 MiB)."
    ),
    replicas: str = typer.Option(
        "worker",
        "--replicas",
        help="Local SGD (H, H-s, L): worker (a replica per worker, as trained) or site (one "
        "replica per datacentre, its workers all-reducing every step over their LAN).",
    ),
    stragglers_from: Path | None = typer.Option(
        None,
        "--stragglers-from",
        help="A trace imported from several ranks' profiles: replay with the per-rank factors "
        "and jitter fitted from it (profile.stragglers).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the stragglers' jitter."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Also write timeline, summary and report here."
    ),
    csv: bool = typer.Option(False, "--csv", help="Print CSV (raw numbers)."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    json_: bool = typer.Option(False, "--json", help="Print JSON records."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    notes: bool = typer.Option(
        False, "--notes", help="Print every note (with --out, all are in notes.txt there)."
    ),
) -> int:
    """Replay traces on one network and print time-to-loss per target, then the verdict (or,
    without targets, each run's total time). Exit 0 ok, 1 when a trace could not be replayed,
    2 on bad input."""
    fmt = output_format(csv, markdown, json_)
    if overlap not in OVERLAP_MODES:
        raise TransitsimError(f"--overlap must be one of {', '.join(OVERLAP_MODES)}")
    if replicas not in REPLICAS:
        raise TransitsimError(f"--replicas must be one of {', '.join(REPLICAS)}")
    bucket_bytes = parse_bytes(bucket_size)
    if bucket_bytes < 1:
        raise TransitsimError(f"--bucket-size must be positive, got {bucket_size!r}")
    if out is not None:
        check_outputs_writable(out)
    spec = network_from_dict(network_description(network, settings))
    stragglers = None
    if stragglers_from is not None:
        stragglers, why = read_fitted(stragglers_from).for_workers(spec.workers)
        if why and not quiet:
            print(f"transitsim: note: {why}", file=sys.stderr)
    placed_transform, placed_sum = resolve_placement(spec, transform_at, sum_at)
    loaded = load_traces(find_traces(traces))
    loaded = dict(sorted(loaded.items(), key=lambda item: run_sort_key(item[1].meta)))
    if not loaded:
        raise TransitsimError(f"no traces in {', '.join(map(str, traces))}")
    try:
        request = ReplayRequest(
            network=spec,
            transform_at=placed_transform,
            sum_at=placed_sum,
            overlap=overlap,
            bucket_bytes=bucket_bytes,
            replicas=replicas,
            stragglers=stragglers,
            seed=seed,
        )
        result = replay_traces(
            loaded, request, targets=targets, baseline=baseline, quiet=quiet or fmt != "table"
        )
    except JobsFailed as exc:
        return report_all_failed(exc)
    if out is not None:
        write_outputs(result, out, ("timeline", "summary", "report"))
    report_problems(result, quiet, all_notes=notes)
    if result.targets:
        print_summary(result, fmt, baseline=baseline, quiet=quiet)
        if fmt == "table" and not quiet:
            print_verdict(result)
    else:
        table = runs_table(result.timeline, result.labels)
        if fmt in ("table", "markdown"):
            table = table.drop(columns="run")
        emit_table(table, fmt, headers=RUN_HEADERS)
    if out is not None and fmt == "table" and not quiet:
        print(f"wrote {', '.join(str(path) for path in result.files)}", file=sys.stderr)
    return result.exit_code


def register(app: typer.Typer) -> None:
    """Add `transitsim replay` to the main app (the lead wires it in transitsim/cli.py)."""
    app.command("replay")(replay_command)
