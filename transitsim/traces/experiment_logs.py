"""Foreign logs -> traces: the published fixed-band experiment's JSONL logs (spec §12).

A log is one JSON object per line: a `config` record, then `diag`/`eval` records at the logging
steps, then `done`. The trace keeps one row per evaluated step (rows = "evaluated_steps"); its
per-step fields are averages over the interval since the previous evaluation, recovered from the
log's cumulative counters. What a log lacks (a separate compute time) is estimated and says so.
"""

import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from transitsim.base.atomic import check_writable_folder, remove_stale_temps
from transitsim.base.errors import TransitsimError
from transitsim.base.reading import read_regular_file
from transitsim.traces.format import (
    DIAG_COLUMNS,
    STEP_COLUMNS,
    Trace,
    check_run_name,
    config_name,
    read_meta,
    validate_diagnostics,
    validate_meta,
    validate_steps,
    write_trace,
)

MAX_LOG_BYTES = 1 << 28  # 256 MiB: the published logs are kilobytes; /dev/zero is not a log
MAX_STEP = 10**12  # an optimiser step count beyond any run: a corrupt number
DIVERGED_LOSS = 50.0  # a val loss above this (nats/token) is a diverged run, not a slow one
TIMING_NOTE = "estimated: wall-clock per step / workers"
_PLAIN_VARIANTS = {"adamw": "A", "topk": "B", "calib": "D", "optics": "E"}
_BAND_VARIANTS = {"low": "C", "zigzag": "F", "high": "F", "random": "F"}
_EVAL_FIELDS = ("step", "val_loss", "train_loss", "lr", "payload_bytes", "wire_bytes", "seconds")
_CONFIG_FIELDS = ("n_params", "dense_bytes_per_step", "payload_bytes_per_step")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass
class ImportResult:
    """One imported run and what the user should hear about it (one line each, naming the log)."""

    trace: Trace
    warnings: list[str] = field(default_factory=list)
    source: Path | None = None


def variant_id(config: dict[str, Any], where: str) -> str:
    """The design's variant letter for a run config of the experiment."""
    kind = config.get("variant")
    if not isinstance(kind, str):
        raise TransitsimError(f"{where}: config has no variant name, got {kind!r}")
    if kind == "band":
        band = config.get("band")
        if not isinstance(band, str) or band not in _BAND_VARIANTS:
            raise TransitsimError(f"{where}: unknown band {band!r} for variant 'band'")
        return _BAND_VARIANTS[band]
    if kind not in _PLAIN_VARIANTS:
        raise TransitsimError(
            f"{where}: unknown variant {kind!r} (expected adamw, topk, band, calib or optics)"
        )
    return _PLAIN_VARIANTS[kind]


def _read_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """(line number, record) pairs; a broken last line is dropped with a note, others are errors."""
    if not os.path.lexists(path) and "\x00" not in str(path):
        raise TransitsimError(f"{path}: no such file")
    if path.is_dir():
        raise TransitsimError(f"{path}: is a folder, not a log file")
    # bounded, and never a FIFO (which would block) or a device that never ends (/dev/zero)
    raw = read_regular_file(path, MAX_LOG_BYTES, "training log")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TransitsimError(f"{path}: not a JSONL log (not UTF-8 text)") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise TransitsimError(f"{path}: empty log")
    records: list[tuple[int, dict[str, Any]]] = []
    notes: list[str] = []
    for index, (number, line) in enumerate(lines):
        try:
            record = _loads(line, f"{path}:{number}")
        except json.JSONDecodeError:
            if index == len(lines) - 1 and index > 0:
                notes.append("ignored a broken last line")
                break
            if index == 0:
                raise TransitsimError(
                    f"{path}: not a JSONL log (line {number} is not JSON)"
                ) from None
            raise TransitsimError(f"{path}:{number}: broken line (not valid JSON)") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise TransitsimError(f"{path}:{number}: not a log record (no 'type' field)")
        records.append((number, record))
    return records, notes


def _loads(line: str, where: str) -> Any:
    """One line's JSON; what json.loads cannot build is one line too: integers longer than
    Python converts (`int_max_str_digits`), nesting deeper than its recursion limit, and text
    holding a lone surrogate (\\udc80), which no UTF-8 file name or metadata can hold."""
    try:
        record = json.loads(line)
    except RecursionError:
        raise TransitsimError(f"{where}: JSON nested too deeply for a log record") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise TransitsimError(
            f"{where}: a number with more than {sys.get_int_max_str_digits():,} digits"
        ) from None
    if _SURROGATE_ESCAPE.search(line):  # only an escape can make one; valid pairs pass
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise TransitsimError(
                f"{where}: text with a lone surrogate escape (not a Unicode character)"
            ) from None
    return record


def _number(record: dict[str, Any], key: str, where: str) -> float:
    """A number field; only losses may be null or non-finite (a diverged run). JSON logs can
    hold Infinity and NaN, and integers too large for a float."""
    value = record.get(key)
    if value is None and key in ("val_loss", "train_loss"):
        return math.nan  # a loss logged as null: the run produced no finite loss
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TransitsimError(f"{where}: {record['type']} record has no number {key!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) and key not in ("val_loss", "train_loss"):
        raise TransitsimError(f"{where}: {record['type']} record has {key!r} {value!r}")
    return number


def _meta(config_record: dict[str, Any], where: str) -> dict[str, Any]:
    """Trace metadata from the config record (spec §12.1)."""
    config = config_record.get("config")
    if not isinstance(config, dict):
        raise TransitsimError(f"{where}: config record has no 'config' object")
    name = config_record.get("name")
    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise TransitsimError(f"{where}: config record has no usable run name")
    check_run_name(name, where)
    for key in _CONFIG_FIELDS:
        value = config_record.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TransitsimError(f"{where}: config record has no positive integer {key!r}")
    for key in ("seed", "workers"):
        if isinstance(config.get(key), bool) or not isinstance(config.get(key), int):
            raise TransitsimError(f"{where}: config has no integer {key!r}")
    variant = variant_id(config, where)
    payload = config_record["payload_bytes_per_step"]
    int64_payload = config_record.get("payload_bytes_int64_per_step", payload)
    if isinstance(int64_payload, bool) or not isinstance(int64_payload, int) or int64_payload < 0:
        raise TransitsimError(f"{where}: 'payload_bytes_int64_per_step' is not a byte count")
    data = config_record.get("data") or {}
    hardware = config_record.get("hardware") or {}
    for key, value in (("data", data), ("hardware", hardware)):
        if not isinstance(value, dict):
            raise TransitsimError(f"{where}: config record's {key!r} is not an object")
    meta: dict[str, Any] = {
        "name": name,
        "variant": variant,
        "variant_params": {
            "band": config.get("band"),
            "chunk_mode": config.get("chunk_mode"),
            "chunk": config.get("chunk"),
            "keep": config.get("keep"),
            "lr": config.get("lr"),
            "enob": config.get("enob"),
            "planes": config.get("planes"),
            "kappa": config.get("kappa"),
            "fs_every": config.get("fs_every", 0),  # older logs predate the key (spec §1.1)
            "feedback": config.get("feedback", "exact"),
        },
        "config": config,
        "model": {
            "n_layer": config.get("n_layer"),
            "n_head": config.get("n_head"),
            "n_embd": config.get("n_embd"),
            "block": config.get("block"),
            "vocab": data.get("vocab"),
        },
        "seed": config["seed"],
        "workers": config["workers"],
        "batch": config.get("batch"),
        "context": config.get("block"),
        "corpus": config.get("dataset"),
        "tokenizer": data.get("tokeniser"),
        "hardware": hardware,
        "n_params": config_record["n_params"],
        "dense_bytes_per_step": config_record["dense_bytes_per_step"],
        "payload_bytes_per_step": payload,
        "payload_bytes_int64_per_step": int64_payload,
        "wire_bytes_per_step": config_record.get("wire_bytes_per_step"),
        "steps_planned": config.get("steps"),
        "rows": "evaluated_steps",
        "origin": "import",
        "timing": TIMING_NOTE,
    }
    versions = {key: hardware[key] for key in ("torch", "python") if key in hardware}
    if versions:
        meta["versions"] = versions
    return meta


def _diag_rows(record: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The nested energy object {source: {group: {selector: share}}} as long-table rows."""
    energy = record.get("energy")
    if not isinstance(energy, dict):
        raise TransitsimError(f"{where}: diag record has no 'energy' object")
    step = int(_number(record, "step", where))
    rows = []
    for source, groups in energy.items():
        if not isinstance(groups or {}, dict):
            raise TransitsimError(f"{where}: diag energy {source!r} is not an object")
        for group, selectors in (groups or {}).items():
            if not isinstance(selectors or {}, dict):
                raise TransitsimError(f"{where}: diag energy {source}/{group} is not an object")
            for selector, share in (selectors or {}).items():
                if (
                    isinstance(share, bool)
                    or not isinstance(share, int | float)
                    or not math.isfinite(share)
                ):
                    raise TransitsimError(f"{where}: diag share {source}/{group}/{selector} bad")
                rows.append(
                    {
                        "step": step,
                        "source": source,
                        "group": group,
                        "selector": selector,
                        "share": float(share),
                    }
                )
    return rows


def _step_table(
    evals: list[dict[str, Any]], meta: dict[str, Any]
) -> tuple[pd.DataFrame, list[str]]:
    """Per-interval averages from the cumulative counters, one row per evaluated step."""
    notes: list[str] = []
    variant = meta["variant"]
    rows = []
    previous = {"step": 0, "payload_bytes": 0.0, "wire_bytes": 0.0, "seconds": 0.0}
    for record in evals:
        steps_done = record["step"] - previous["step"]
        wall_s = (record["seconds"] - previous["seconds"]) / steps_done
        rows.append(
            {
                "step": int(record["step"]),
                "train_loss": record["train_loss"],
                "val_loss": record["val_loss"],
                "lr": record["lr"],
                "payload_bytes": round(
                    (record["payload_bytes"] - previous["payload_bytes"]) / steps_done
                ),
                "payload_int64_bytes": int(meta["payload_bytes_int64_per_step"]),
                "wire_bytes": (record["wire_bytes"] - previous["wire_bytes"]) / steps_done,
                "collective": "all_reduce" if variant == "A" else "all_gather",
                "reducible": variant != "B",  # top-k positions differ between workers
                "wall_s": wall_s if wall_s >= 0 else math.nan,
                "compress_s": 0.0,
                "clip_rate": record.get("clip_rate", math.nan),
                "clip_rate_interval": record.get("clip_rate_interval", math.nan),
            }
        )
        previous = record
    steps = pd.DataFrame(rows)
    if steps["wall_s"].isna().any():
        bad = int(steps.loc[steps["wall_s"].isna(), "step"].iloc[0])
        notes.append(f"clock went back before step {bad}: its time per step is the run's mean")
        steps["wall_s"] = steps["wall_s"].fillna(steps["wall_s"].mean()).fillna(0.0)
    steps["compute_s"] = steps["wall_s"] / meta["workers"]
    for column in ("clip_rate", "clip_rate_interval"):
        steps[column] = pd.to_numeric(steps[column], errors="coerce").astype("float64")
        if steps[column].isna().all():
            steps = steps.drop(columns=column)
    for column in ("val_loss", "train_loss"):
        bad = ~steps[column].map(math.isfinite)
        if bad.any():
            notes.append(f"non-finite {column} stored as inf")
            steps.loc[bad, column] = math.inf
    required = list(STEP_COLUMNS)
    return steps[required + [c for c in steps.columns if c not in required]], notes


def import_log(path: Path | str) -> ImportResult:
    """Read one published-format log into a validated, unwritten Trace (trace.path is None).

    A log that ended early, diverged or lost its last line imports what is there; each such fact
    is a note in the metadata and a warning line. Anything else wrong raises TransitsimError.
    """
    path = Path(path)
    records, notes = _read_records(path)
    first_line, config_record = records[0]
    if config_record["type"] != "config":
        raise TransitsimError(
            f"{path}: no config record (line {first_line} is a {config_record['type']!r} record)"
        )
    meta = _meta(config_record, f"{path}:{first_line}")
    evals: dict[int, dict[str, Any]] = {}
    diags: dict[int, list[dict[str, Any]]] = {}
    unknown: dict[str, int] = {}
    resumed = False
    for number, record in records[1:]:
        where = f"{path}:{number}"
        kind = record["type"]
        if kind == "eval":
            values = {key: _number(record, key, where) for key in _EVAL_FIELDS}
            for key in ("clip_rate", "clip_rate_interval"):
                if key in record:
                    values[key] = _number(record, key, where)
            step = int(values["step"])
            if step != values["step"] or not 1 <= step <= MAX_STEP:
                raise TransitsimError(f"{where}: eval record has step {values['step']:g}")
            values["step"] = step
            resumed |= bool(evals) and step <= max(evals)
            evals[step] = values  # a resumed run re-logs steps: the later record wins
        elif kind == "diag":
            rows = _diag_rows(record, where)
            if rows:
                diags[rows[0]["step"]] = rows
        elif kind == "config":
            if record.get("name") != meta["name"]:
                raise TransitsimError(f"{where}: a second config record, of another run")
        elif kind != "done":
            unknown[kind] = unknown.get(kind, 0) + 1
    if not evals:
        raise TransitsimError(f"{path}: no eval records: nothing to import")
    if resumed:
        notes.append("resumed: re-logged steps replace the earlier records")
    for kind, count in sorted(unknown.items()):
        notes.append(f"ignored {count} record(s) of unknown type {kind!r}")
    ordered = [evals[step] for step in sorted(evals)]
    steps, table_notes = _step_table(ordered, meta)
    notes.extend(table_notes)

    last_step, planned = ordered[-1]["step"], meta["steps_planned"]
    complete = records[-1][1]["type"] == "done"
    if not complete:
        notes.append(
            f"ended early at step {last_step} of {planned}"
            if isinstance(planned, int) and last_step < planned
            else f"no done record (last evaluated step {last_step})"
        )
    for record in ordered:
        if not math.isfinite(record["val_loss"]) or record["val_loss"] > DIVERGED_LOSS:
            notes.append(f"diverged: val_loss {record['val_loss']:.3f} at step {record['step']}")
            break
    if config_name(meta["name"]) == meta["name"]:
        meta["name"] = f"{meta['name']}-s{meta['seed']}"
        notes.append(f"run name lacked its seed part: named {meta['name']}")
    meta["status"] = "complete" if complete else "incomplete"
    meta["notes"] = notes
    meta["source_log"] = path.name

    diagnostics = pd.DataFrame(
        [row for step in sorted(diags) for row in diags[step]], columns=list(DIAG_COLUMNS)
    ).astype(DIAG_COLUMNS)
    validate_meta(meta, path)
    validate_steps(steps, path)
    validate_diagnostics(diagnostics, path)
    trace = Trace(meta=meta, steps=steps, diagnostics=diagnostics, path=None)
    return ImportResult(trace=trace, warnings=[f"{path}: {note}" for note in notes], source=path)


def find_logs(paths: list[Path | str]) -> list[Path]:
    """Expand folders to their *.jsonl files (sorted) and keep files as given."""
    found: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            found.extend(sorted(item.glob("*.jsonl")))
        elif item.exists():
            found.append(item)
        else:
            raise TransitsimError(f"{item}: no such file or folder")
    unique = {log.resolve(): log for log in reversed(found)}  # a file named twice imports once
    return [log for log in found if unique[log.resolve()] is log]


def _check_text_path(path: Path) -> None:
    """A path whose name is not UTF-8 (bytes such as 0xff, which Python holds as lone
    surrogates) cannot be written into a trace's metadata or printed in its table."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = ascii(str(path))
        raise TransitsimError(f"{shown}: the path is not UTF-8 text: rename it") from None


def import_logs(paths: list[Path | str], out_dir: Path | str) -> list[ImportResult]:
    """Import every log (folders give their *.jsonl), then write `<run name>.parquet` in out_dir.

    Every log is read before anything is written, so a bad log or two logs of the same run name
    (e.g. an lr sweep beside the main runs) leave out_dir untouched.
    """
    check_writable_folder(out_dir, what="traces folder")
    logs = find_logs(paths)
    for item in [Path(out_dir), *logs]:  # the trace's metadata and every table name them
        _check_text_path(item)
    if not logs:
        raise TransitsimError(f"no .jsonl logs in {', '.join(map(str, paths))}")
    results = [import_log(log) for log in logs]
    by_name: dict[str, Path] = {}
    for result in results:
        other = by_name.setdefault(result.trace.name, result.source)
        if other != result.source:
            raise TransitsimError(
                f"{other} and {result.source} are both run {result.trace.name!r}: "
                "import them into different folders"
            )
    out_dir = Path(out_dir)
    if out_dir.is_dir():  # what a killed import left; a live writer's temp file is locked
        remove_stale_temps(out_dir, ".*.parquet.*.tmp")
    for result in results:
        trace = result.trace
        trace.path = write_trace(
            out_dir / f"{trace.name}.parquet", trace.steps, trace.meta, trace.diagnostics
        )
        trace.meta = read_meta(trace.path)  # as written: with the format keys
    return results
