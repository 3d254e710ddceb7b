"""`transitsim traces import|list|show`: bring published logs in as traces and look at traces."""

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import typer

from transitsim.analysis.metrics import run_sort_key, wire_bytes_per_step
from transitsim.base.atomic import check_writable_file, check_writable_folder
from transitsim.base.errors import TransitsimError, escaped_line
from transitsim.base.tables import emit_json, emit_table, format_cell, output_format, variant_label
from transitsim.calibrate.profile_table import fit_profile, write_profile_network
from transitsim.commands import QUIET_HELP
from transitsim.traces.experiment_logs import import_logs
from transitsim.traces.format import Trace, find_traces, read_trace
from transitsim.traces.loss_logs import parse_columns, read_loss_log
from transitsim.traces.profile_import import (
    ImportOptions,
    ProfileImport,
    build_trace,
    write_import,
)

DEFAULT_TRACES = Path("traces")
MEASURED = "measured.yaml"  # the network a profile measured, beside its trace
CSV = typer.Option(False, "--csv", help="Print CSV (raw numbers).")
MARKDOWN = typer.Option(False, "--markdown", help="Print a markdown table.")
JSON = typer.Option(False, "--json", help="Print JSON (raw numbers).")
QUIET = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)
LIST_HEADERS = {
    "folder": "Folder",
    "name": "Run",
    "variant": "Var",
    "params": "Parameters",
    "seed": "Seed",
    "steps": "Steps",
    "final_val_loss": "Final val loss",
    "payload_bytes_per_step": "Payload/step (B)",
    "wire_bytes_per_step": "Ring wire/step (B)",
    "status": "Status",
}


def run_status(trace: Trace) -> str:
    """complete / incomplete, with "diverged" added when the importer or trainer noted it."""
    diverged = any(str(note).startswith("diverged") for note in trace.meta.get("notes", []))
    return trace.meta["status"] + (", diverged" if diverged else "")


def traces_table(traces: list[Trace]) -> pd.DataFrame:
    """One row per run, in the experiment's table order."""
    rows = [
        {
            "folder": trace.path.parent.name if trace.path else "",
            "name": trace.name,
            "variant": trace.variant,
            "params": variant_label(trace.meta),
            "seed": trace.seed,
            "steps": int(trace.steps["step"].iloc[-1]),
            "final_val_loss": trace.final_val_loss,
            "payload_bytes_per_step": trace.payload_bytes_per_step,
            "wire_bytes_per_step": wire_bytes_per_step(trace),
            "status": run_status(trace),
        }
        for trace in sorted(traces, key=lambda t: run_sort_key(t.meta))
    ]
    return pd.DataFrame(rows, columns=list(LIST_HEADERS))


def trace_summary(trace: Trace) -> dict[str, Any]:
    """The facts about one run that people ask first, as (field -> raw value)."""
    meta, steps = trace.meta, trace.steps
    evaluated = steps.dropna(subset=["val_loss"])
    best = evaluated.loc[evaluated["val_loss"].idxmin()] if len(evaluated) else None
    model = meta.get("model") or {}
    summary: dict[str, Any] = {
        "name": trace.name,
        "config": trace.config_name,
        "variant": trace.variant,
        "params": variant_label(meta),
        "seed": trace.seed,
        "status": run_status(trace),
        "notes": "; ".join(meta.get("notes", [])) or None,
        "origin": meta["origin"],
        "source_log": meta.get("source_log"),
        "rows": f"{len(steps)} ({meta['rows']})",
        "first_step": int(steps["step"].iloc[0]),
        "last_step": int(steps["step"].iloc[-1]),
        "steps_planned": meta.get("steps_planned"),
        "final_val_loss": trace.final_val_loss,
        "best_val_loss": None if best is None else float(best["val_loss"]),
        "best_val_loss_step": None if best is None else int(best["step"]),
        "final_train_loss": float(steps["train_loss"].iloc[-1]),
        "workers": trace.workers,
        "batch": meta.get("batch"),
        "context": meta.get("context"),
        "corpus": meta.get("corpus"),
        "tokenizer": meta.get("tokenizer"),
        "model": ", ".join(f"{k} {v}" for k, v in model.items() if v is not None) or None,
        "n_params": meta["n_params"],
        "device": (meta.get("hardware") or {}).get("device"),
        "versions": ", ".join(f"{k} {v}" for k, v in (meta.get("versions") or {}).items()) or None,
        "dense_bytes_per_step": meta["dense_bytes_per_step"],
        "payload_bytes_per_step": trace.payload_bytes_per_step,
        "payload_int64_bytes_per_step": meta.get("payload_bytes_int64_per_step"),
        "wire_bytes_per_step": wire_bytes_per_step(trace),
        "dense_over_payload": meta["dense_bytes_per_step"] / trace.payload_bytes_per_step
        if trace.payload_bytes_per_step
        else None,
        "collective": str(steps["collective"].iloc[-1]),
        "reducible": bool(steps["reducible"].iloc[-1]),
        "mean_wall_s": float(steps["wall_s"].mean()) if "wall_s" in steps else None,
        "mean_compute_s": float(steps["compute_s"].mean()),
        "timing": meta.get("timing"),
        "diagnostics_rows": len(trace.diagnostics),
    }
    for column in ("clip_rate", "clip_rate_interval"):
        if column in steps and steps[column].notna().any():
            summary[f"final_{column}"] = float(steps[column].dropna().iloc[-1])
    return summary


def import_command(
    logs: list[Path] = typer.Argument(
        None, help="Published-format .jsonl logs or folders of them (or use --profile)."
    ),
    out: Path = typer.Option(DEFAULT_TRACES, "-o", "--out", help="Folder for the traces."),
    profile: list[Path] = typer.Option(
        [],
        "--profile",
        help="A torch.profiler (Kineto) trace, .json or .json.gz; repeat for each rank's file.",
    ),
    loss: Path | None = typer.Option(
        None, "--loss", help="With --profile: the run's loss log (CSV, JSONL, TensorBoard events)."
    ),
    columns: str | None = typer.Option(
        None, "--columns", help="The loss log's columns: step=iter,train_loss=loss,val_loss=..."
    ),
    variant: str = typer.Option("A", "--variant", help="With --profile: the run's variant."),
    name: str | None = typer.Option(None, "--name", help="With --profile: the run's name."),
    seed: int = typer.Option(0, "--seed", help="With --profile: the run's seed."),
    workers: int | None = typer.Option(
        None, "--workers", help="With --profile: workers, if the profile does not say."
    ),
    params: int | None = typer.Option(
        None,
        "--params",
        help="With --profile: model parameters (default: the elements sent); the payload is "
        "N x the element size where the trace records no sizes.",
    ),
    dtype: str | None = typer.Option(
        None,
        "--dtype",
        help="With --params: the gradients' type (default: the trace's, else fp32).",
    ),
    optimizer: str | None = typer.Option(
        None, "--optimizer", help="With --profile: the run's optimiser (default: the trace's)."
    ),
    write_network: Path | None = typer.Option(
        None,
        "--write-network",
        help="With --profile: where to write the network the profile measured (default: "
        "OUT/measured.yaml; replay on it with --overlap buckets to reproduce the profiled step).",
    ),
    csv: bool = CSV,
    markdown: bool = MARKDOWN,
    json_: bool = JSON,
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Only errors: no warnings, no table (the traces are written)."
    ),
) -> int:
    """Convert the experiment's JSONL logs, or a profiler trace and a loss log, into traces
    (<run name>.parquet in the out folder)."""
    fmt = output_format(csv, markdown, json_)
    if profile:
        if logs:
            raise TransitsimError("give either LOGS or --profile, not both")
        options = ImportOptions(name=name, variant=variant, seed=seed, workers=workers,
                                params=params, dtype=dtype, optimizer=optimizer)  # fmt: skip
        return _import_profile(profile, loss, columns, out, fmt, quiet, options, write_network)
    if loss is not None or columns is not None:
        raise TransitsimError("--loss and --columns go with --profile")
    if any(v is not None for v in (params, dtype, optimizer, write_network)):
        raise TransitsimError(
            "--params, --dtype, --optimizer and --write-network go with --profile"
        )
    if not logs:
        raise TransitsimError("nothing to import: give LOGS or --profile PROFILE.json[.gz]")
    results = import_logs(logs, out)
    if quiet:
        return 0
    for result in results:
        for warning in result.warnings:
            print(f"transitsim: warning: {escaped_line(warning)}", file=sys.stderr)
    table = pd.DataFrame(
        [
            {
                "log": str(result.source),
                "trace": str(result.trace.path),
                "variant": result.trace.variant,
                "params": variant_label(result.trace.meta),
                "rows": len(result.trace.steps),
                "status": run_status(result.trace),
            }
            for result in results
        ]
    )
    emit_table(table, fmt, title=f"Imported {len(results)} log(s) into {out}")
    return 0


def _import_profile(
    profiles: list[Path],
    loss: Path | None,
    columns: str | None,
    out: Path,
    fmt: str,
    quiet: bool,
    options: ImportOptions,
    network: Path | None = None,
) -> int:
    """`traces import --profile ... [--loss ...]`: one trace from a profile and a loss log (and
    the measured network); nothing is written when any part cannot be."""
    check_writable_folder(out, what="traces folder")  # before any file is read
    if network is not None:
        check_writable_file(network, what="network file")
    log = read_loss_log(loss, parse_columns(columns)) if loss is not None else None
    result = build_trace(profiles, log, options)
    why = None
    try:
        fit_profile(result.trace.meta)  # a --write-network that cannot be made: nothing written
    except TransitsimError as exc:
        if network is not None:
            raise
        why = str(exc)
    write_import(result, out)
    if why is None:
        path, fit = write_profile_network(network or Path(out) / MEASURED, result.trace.meta)
        result.notes.append(
            f"the measured network: {path} ({fit.rows} {fit.collective.replace('_', '-')}(s) "
            f"timed, {fit.sizes} size(s), worst |error| {fit.worst:.1%}); replay --network "
            f"{path} --overlap buckets reproduces the profiled step"
        )
    else:
        result.notes.append(why)
    if quiet:
        return 0
    for note in result.notes:
        print(f"transitsim: note: {escaped_line(note)}", file=sys.stderr)
    for warning in result.warnings:
        print(f"transitsim: warning: {escaped_line(warning)}", file=sys.stderr)
    emit_table(
        profile_summary(result, fmt_raw=fmt in ("csv", "json")),
        fmt,
        title=f"Imported {result.trace.path}",
    )
    if result.stragglers and fmt == "table":
        fitted = result.stragglers
        factors = ", ".join(f"{f:g}" for f in fitted["worker_factors"])
        print(
            f"stragglers fitted from {fitted['fitted_from']}: {{distribution: "
            f"{fitted['distribution']}, scale: {fitted['scale']:g}, mode: {fitted['mode']}, "
            f"worker_factors: [{factors}]}}"
        )
    return 0


def profile_summary(result: ProfileImport, fmt_raw: bool = False) -> pd.DataFrame:
    """The imported template, field by field: what the profile measured per step."""
    meta = result.trace.meta
    template = meta["profile"]["template"]
    backward = meta.get("backward_profile")
    fields = {
        "run": meta["name"],
        "rows": f"{len(result.trace.steps)} ({meta['rows']})",
        "workers": meta["workers"],
        "profiled steps": len(meta["profile"]["steps"]),
        "ranks profiled": len(meta["profile"]["files"]),
        "step wall (s)": template["wall_s"],
        "compute (s)": template["compute_s"],
        "optimizer (s)": template["update_s"],
        "communication (s)": template["comm_s"],
        "exposed (s)": template["exposed_s"],
        "hidden (s)": template["hidden_s"],
        "waited on exchange (s)": template["waited_s"],
        "payload/step (B)": template["payload_bytes"],
        "collective": template["collective"],
        "buckets": len(backward["tensors"]) if backward else 0,
    }
    if fmt_raw:
        return pd.DataFrame({"field": list(fields), "value": list(fields.values())})
    shown = [f"{v:.4g}" if isinstance(v, float) else format_cell(k, v) for k, v in fields.items()]
    return pd.DataFrame({"field": list(fields), "value": shown})


def list_command(
    paths: list[Path] = typer.Argument(None, help="Trace files or folders (default: traces/)."),
    csv: bool = CSV,
    markdown: bool = MARKDOWN,
    json_: bool = JSON,
    quiet: bool = QUIET,
) -> int:
    """One row per run: variant, parameters, seed, steps, final loss, bytes per step, status."""
    fmt = output_format(csv, markdown, json_)
    traces = [read_trace(path) for path in find_traces(paths or [DEFAULT_TRACES])]
    title = None if quiet else f"{len(traces)} trace(s)"
    emit_table(traces_table(traces), fmt, title=title, headers=LIST_HEADERS)
    return 0


def show_command(
    trace_path: Path = typer.Argument(..., metavar="TRACE", help="One trace file."),
    steps: bool = typer.Option(False, "--steps", help="Also print the step table."),
    csv: bool = CSV,
    markdown: bool = MARKDOWN,
    json_: bool = JSON,
    quiet: bool = QUIET,
) -> int:
    """A trace's metadata and summary (and with --steps, its rows)."""
    fmt = output_format(csv, markdown, json_)
    trace = read_trace(trace_path)
    summary = trace_summary(trace)
    if fmt == "json":
        document: dict[str, Any] = {"meta": trace.meta, "summary": summary}
        if steps:
            document["steps"] = trace.steps.to_dict(orient="records")
        emit_json(document)
        return 0
    fields = pd.DataFrame({"field": list(summary), "value": list(summary.values())})
    if fmt != "csv":  # each value formatted by what its field holds
        fields["value"] = [format_cell(name, value) for name, value in summary.items()]
    title = None if quiet else str(trace_path)
    emit_table(fields, fmt, title=title, headers={"field": "Field", "value": "Value"})
    if steps:
        emit_table(trace.steps, fmt, title=None if quiet else "Rows")
    return 0


def register(app: typer.Typer) -> None:
    """Add `transitsim traces ...` to the main app."""
    traces_app = typer.Typer(help="Import, list and inspect training traces.", no_args_is_help=True)
    traces_app.command("import")(import_command)
    traces_app.command("list")(list_command)
    traces_app.command("show")(show_command)
    app.add_typer(traces_app, name="traces")
