"""The trace: one training run as one Parquet file, the contract the trainer and simulator share.

One row per optimiser step (or, for imported logs, per evaluated step), metadata as JSON under one
schema key, and the diagnostics (energy shares) as a long table in a second metadata key. Plain
pyarrow, pandas, duckdb or polars read the step table without this module; the metadata is JSON.
"""

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from transitsim.base.atomic import atomic_path
from transitsim.base.errors import TraceError, TransitsimError
from transitsim.traces.backward_profile import backward_profile

FORMAT_NAME = "transitsim.trace"
FORMAT_VERSION = 1
META_KEY = b"transitsim.trace"
DIAG_KEY = b"transitsim.diagnostics"

VARIANTS = ("A", "B", "C", "D", "E", "E'", "F", "G", "H", "H-s", "L")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_at_switch")
ROW_KINDS = ("every_step", "evaluated_steps", "profiled_steps")  # the last: each row one step
ORIGINS = ("trainer", "import")
STATUSES = ("complete", "incomplete")

# Required step columns and their Arrow types.
STEP_COLUMNS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "train_loss": pa.float64(),
    "val_loss": pa.float64(),
    "lr": pa.float64(),
    "payload_bytes": pa.int64(),
    "collective": pa.dictionary(pa.int32(), pa.string()),
    "reducible": pa.bool_(),
    "compute_s": pa.float64(),
    "compress_s": pa.float64(),
}
OPTIONAL_COLUMNS: dict[str, pa.DataType] = {
    "payload_int64_bytes": pa.int64(),
    "wire_bytes": pa.float64(),
    "update_s": pa.float64(),
    "comm_s": pa.float64(),  # measured exchange seconds (torch.distributed backends)
    "exchange_bytes": pa.int64(),
    "wall_s": pa.float64(),
    "end_unix_s": pa.float64(),  # wall-clock time at the end of the step
    "clip_rate": pa.float64(),
    "clip_rate_interval": pa.float64(),
}
DIAG_COLUMNS: dict[str, str] = {
    "step": "int64",
    "source": "str",
    "group": "str",
    "selector": "str",
    "share": "float64",
}
REQUIRED_META: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "variant": str,
    "seed": int,
    "workers": int,
    "n_params": int,
    "dense_bytes_per_step": int,
    "rows": str,
    "origin": str,
    "status": str,
}

# Optional metadata that some reader uses, and what it must hold when present (null: absent).
# Anything else a trace carries is kept and shown as it is.
OPTIONAL_META: dict[str, type | tuple[type, ...]] = {
    "notes": list,
    "variant_params": dict,
    "config": dict,
    "model": dict,
    "hardware": dict,
    "versions": dict,
    "backward_profile": dict,
    "timing": (str, dict),
    "source_log": str,
    "corpus": str,
    "tokenizer": str,
    "optimizer": str,  # a user's run: its optimiser ("" unknown); absent: the design's
}
META_BYTE_COUNTS = ("payload_bytes_per_step", "payload_bytes_int64_per_step", "wire_bytes_per_step")
META_COUNTS = ("batch", "context", "steps_planned")
PARAM_TEXT = ("band", "chunk_mode", "feedback", "selection")
PARAM_COUNTS = ("chunk", "planes", "fs_every", "select_every", "warmup")
PARAM_NUMBERS = ("enob", "keep", "lr", "kappa")
SCALE_COUNTS = ("n_layer", "n_embd", "n_head", "block", "steps", "workers", "batch", "warmup")

MAX_NAME_BYTES = 160  # run names become file names: <name>.parquet, .<name>.parquet.<tmp>.tmp
MAX_STEP_BYTES = 2**50  # a PiB per worker per step: beyond it, a corrupt number, not a run
MAX_STEP_SECONDS = 10**7  # four months per step
MAX_PARAMS = 10**15
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")
_SEED_SUFFIX = re.compile(r"-s\d+$")


def config_name(run_name: str) -> str:
    """A run's configuration: its name without the trailing `-s<seed>` seed part."""
    return _SEED_SUFFIX.sub("", run_name)


@dataclass
class Trace:
    """One validated training run: metadata, the step table and the diagnostics table."""

    meta: dict[str, Any]
    steps: pd.DataFrame
    diagnostics: pd.DataFrame = field(default_factory=lambda: _empty_diagnostics())
    path: Path | None = None

    @property
    def name(self) -> str:
        return self.meta["name"]

    @property
    def variant(self) -> str:
        return self.meta["variant"]

    @property
    def seed(self) -> int:
        return self.meta["seed"]

    @property
    def workers(self) -> int:
        return self.meta["workers"]

    @property
    def config_name(self) -> str:
        return config_name(self.meta["name"])

    @property
    def final_val_loss(self) -> float:
        """The last evaluated validation loss (NaN when the run never evaluated)."""
        evaluated = self.steps["val_loss"].dropna()
        return float(evaluated.iloc[-1]) if len(evaluated) else math.nan

    @property
    def payload_bytes_per_step(self) -> int:
        if "payload_bytes_per_step" in self.meta:
            return int(self.meta["payload_bytes_per_step"])
        return int(self.steps["payload_bytes"].iloc[-1])


def _empty_diagnostics() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in DIAG_COLUMNS.items()})


def _where(path: Path | str | None) -> str:
    return str(path) if path is not None else "<trace>"


def check_run_name(name: str, where: str) -> None:
    """A run name is a file name: printable, no slashes, not too long (TraceError otherwise)."""
    if not name or _BAD_NAME.search(name) or name in (".", ".."):
        raise TraceError(
            f"{where}: run name {name[:40]!r} must be printable, without slashes or control "
            "characters"
        )
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise TraceError(
            f"{where}: run name of {len(name):,} characters (at most {MAX_NAME_BYTES} bytes)"
        )


def validate_trace(trace: "Trace") -> "Trace":
    """A Trace built in code checked as read_trace checks a file (TraceError otherwise)."""
    if not isinstance(trace, Trace) or not isinstance(trace.meta, dict):
        raise TraceError(f"expected a Trace, got {type(trace).__name__}")
    where = (
        trace.path or trace.meta.get("name") if isinstance(trace.meta.get("name"), str) else None
    )
    validate_meta(trace.meta, where)
    validate_steps(trace.steps, where)
    validate_diagnostics(trace.diagnostics, where)
    return trace


def validate_meta(meta: dict[str, Any], path: Path | str | None = None) -> None:
    """Raise TraceError naming the file when metadata lacks a required key or has a bad value."""
    where = _where(path)
    for key, kind in REQUIRED_META.items():
        if key not in meta:
            raise TraceError(f"{where}: metadata lacks required key {key!r}")
        value = meta[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TraceError(
                f"{where}: metadata key {key!r} must be {kind.__name__}, got {value!r}"
            )
    check_run_name(meta["name"], where)
    if meta["n_params"] > MAX_PARAMS or meta["dense_bytes_per_step"] > MAX_STEP_BYTES:
        raise TraceError(
            f"{where}: n_params (at most {MAX_PARAMS:,}) or dense_bytes_per_step "
            f"(at most {MAX_STEP_BYTES:,}) is too large"
        )
    if meta["variant"] not in VARIANTS:
        raise TraceError(
            f"{where}: unknown variant {meta['variant']!r} (expected one of {VARIANTS})"
        )
    if meta["rows"] not in ROW_KINDS:
        raise TraceError(
            f"{where}: metadata 'rows' must be one of {ROW_KINDS}, got {meta['rows']!r}"
        )
    if meta["origin"] not in ORIGINS:
        raise TraceError(f"{where}: metadata 'origin' must be one of {ORIGINS}")
    if meta["status"] not in STATUSES:
        raise TraceError(f"{where}: metadata 'status' must be one of {STATUSES}")
    if meta["workers"] < 1:
        raise TraceError(f"{where}: metadata 'workers' must be at least 1, got {meta['workers']}")
    if meta["n_params"] < 1 or meta["dense_bytes_per_step"] < 1:
        raise TraceError(f"{where}: n_params and dense_bytes_per_step must be positive")
    _validate_optional_meta(meta, where)


_KIND_WORDS = {list: "a list", dict: "an object", str: "text"}


def _is_count(value: Any, limit: int | float) -> bool:
    """A whole number of things, 0..limit (never a bool, which Python counts as an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _validate_optional_meta(meta: dict[str, Any], where: str) -> None:
    """The optional keys readers use hold what they expect: a list of notes, mappings where
    mappings go, byte counts that are counts. Otherwise `traces show` or the labels would fail
    far from the file (a traceback), or print a wrong label."""
    for key, kind in OPTIONAL_META.items():
        value = meta.get(key)
        if value is not None and not isinstance(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            wanted = " or ".join(_KIND_WORDS[k] for k in kinds)
            raise TraceError(f"{where}: metadata key {key!r} must be {wanted}, got {value!r:.60}")
    if not all(isinstance(note, str) for note in meta.get("notes") or []):
        raise TraceError(f"{where}: metadata 'notes' must be a list of text")
    for key in META_BYTE_COUNTS:
        value = meta.get(key)
        ok = _is_count(value, MAX_STEP_BYTES) or (
            key == "wire_bytes_per_step" and _is_number(value) and 0 <= value <= MAX_STEP_BYTES
        )
        if value is not None and not ok:
            raise TraceError(
                f"{where}: metadata {key!r} must be a byte count of at most {MAX_STEP_BYTES:,}, "
                f"got {value!r:.60}"
            )
    for key in META_COUNTS:
        value = meta.get(key)
        if value is not None and not _is_count(value, 2**62):
            raise TraceError(f"{where}: metadata {key!r} must be a whole number, got {value!r:.60}")
    _validate_params(meta.get("variant_params") or {}, where)
    try:  # checked on reading, so that a broken profile is bad input, not a failed job
        backward_profile(meta)
    except TransitsimError as exc:
        raise TraceError(f"{where}: {exc}") from None
    for section in ("config", "model"):  # the run's scale: compared, grouped, shown
        for key, value in (meta.get(section) or {}).items():
            if key in SCALE_COUNTS and value is not None and not _is_count(value, 2**62):
                raise TraceError(
                    f"{where}: metadata '{section}.{key}' must be a whole number, got {value!r:.60}"
                )


def _param_problem(name: str, value: Any) -> str | None:
    """What a variant parameter should be, when it is not (None when it is fine or unknown)."""
    if name in PARAM_TEXT and not isinstance(value, str):
        return "text"
    if name in PARAM_COUNTS and not _is_count(value, 2**62):
        return "a whole number"
    if name == "keep" and not (_is_number(value) and 1 / MAX_PARAMS <= value <= 1):
        return f"a fraction in [{1 / MAX_PARAMS:g}, 1]"  # the share of coefficients sent
    if name in PARAM_NUMBERS and not _is_number(value):
        return "a finite number"
    return None


def _validate_params(params: dict[str, Any], where: str) -> None:
    """variant_params name the run in every table: text, counts and finite numbers."""
    for name, value in params.items():
        problem = None if value is None else _param_problem(name, value)
        if problem:
            raise TraceError(
                f"{where}: metadata 'variant_params.{name}' must be {problem}, got {value!r:.60}"
            )


def validate_steps(steps: pd.DataFrame, path: Path | str | None = None) -> None:
    """Raise TraceError when a required column is missing, null where it may not be, of the
    wrong kind (text losses, "False" as text), out of range (a negative loss, inf seconds, more
    bytes than any network could carry), or an optional column holds such values."""
    where = _where(path)
    if not isinstance(steps, pd.DataFrame):
        raise TraceError(f"{where}: the step table is not a table")
    missing = [name for name in STEP_COLUMNS if name not in steps.columns]
    if missing:
        raise TraceError(f"{where}: step table lacks column(s) {', '.join(missing)}")
    if len(steps) == 0:
        raise TraceError(f"{where}: step table has no rows")
    for name in STEP_COLUMNS:
        if name != "val_loss" and steps[name].isna().any():
            raise TraceError(f"{where}: column {name!r} has missing values")
    for name, kind in {**STEP_COLUMNS, **OPTIONAL_COLUMNS}.items():
        if name in steps.columns:
            _check_kind(steps[name], name, kind, where)
    step = steps["step"].to_numpy()
    if step[0] < 1 or (np.diff(step) <= 0).any():
        raise TraceError(f"{where}: column 'step' must start at 1 or later and strictly increase")
    for name in ("train_loss", "val_loss"):  # inf: a diverged run, NaN val: not evaluated
        if (steps[name] < 0).any():
            raise TraceError(f"{where}: column {name!r} has negative losses")
    for name in OPTIONAL_COLUMNS.keys() | {"lr", "payload_bytes", "compute_s", "compress_s"}:
        if name not in steps.columns or name == "end_unix_s":
            continue
        values = steps[name].astype("float64")
        if (values < 0).any():
            raise TraceError(f"{where}: column {name!r} has negative values")
        if np.isinf(values).any():
            raise TraceError(f"{where}: column {name!r} has infinite values")
        if name.endswith("bytes") and (values > MAX_STEP_BYTES).any():
            raise TraceError(
                f"{where}: column {name!r} has more than {MAX_STEP_BYTES:,} bytes in a step"
            )
        if name.endswith("_s") and (values > MAX_STEP_SECONDS).any():
            raise TraceError(
                f"{where}: column {name!r} has steps longer than {MAX_STEP_SECONDS:,} s"
            )
    unknown = set(steps["collective"].astype(str)) - set(COLLECTIVES)
    if unknown:
        raise TraceError(
            f"{where}: column 'collective' has unknown value(s) {sorted(unknown)} "
            f"(expected {COLLECTIVES})"
        )


def _check_kind(column: pd.Series, name: str, kind: pa.DataType, where: str) -> None:
    """The column holds what its Arrow type says: text is never a number or a bool (a table
    built in code may hold them as Python objects; each value is checked then)."""
    if pa.types.is_boolean(kind):
        allowed: tuple[type, ...] = (bool, np.bool_)
        wanted = "true/false values (not text)"
    elif pa.types.is_integer(kind):
        allowed, wanted = (int, np.integer), "integers"
    elif pa.types.is_floating(kind):
        allowed, wanted = (int, float, np.integer, np.floating), "numbers"
    else:
        return
    dtype = column.dtype
    if pd.api.types.is_object_dtype(dtype):
        values = column[column.notna()]
        is_bool = pa.types.is_boolean(kind)
        ok = all(
            isinstance(v, allowed) and (is_bool or not isinstance(v, bool | np.bool_))
            for v in values
        )
    elif pa.types.is_boolean(kind):
        ok = pd.api.types.is_bool_dtype(dtype)
    elif pa.types.is_integer(kind):
        ok = pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
    else:
        ok = pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
    if not ok:
        raise TraceError(f"{where}: column {name!r} must hold {wanted}, got {dtype}")


def validate_diagnostics(diagnostics: pd.DataFrame, path: Path | str | None = None) -> None:
    missing = [name for name in DIAG_COLUMNS if name not in diagnostics.columns]
    if missing:
        raise TraceError(f"{_where(path)}: diagnostics table lacks column(s) {', '.join(missing)}")


def _steps_table(steps: pd.DataFrame) -> pa.Table:
    """The step table with the contract's Arrow types; extra columns are kept as they are."""
    arrays: dict[str, pa.Array] = {}
    for name, kind in STEP_COLUMNS.items():
        values = steps[name]
        if name == "collective":
            arrays[name] = pa.array(values.astype(str).tolist()).dictionary_encode()
        elif name == "val_loss":
            arrays[name] = pa.array(values.astype("float64"), type=kind, from_pandas=True)
        else:
            arrays[name] = pa.array(values.to_numpy().astype(kind.to_pandas_dtype()), type=kind)
    for name in steps.columns:
        if name in arrays:
            continue
        kind = OPTIONAL_COLUMNS.get(name)
        values = steps[name]
        if kind is not None:
            arrays[name] = pa.array(values.to_numpy().astype(kind.to_pandas_dtype()), type=kind)
        else:
            arrays[name] = pa.array(values, from_pandas=True)
    return pa.table(arrays)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {value!r}")


def write_trace(
    path: Path | str,
    steps: pd.DataFrame,
    meta: dict[str, Any],
    diagnostics: pd.DataFrame | None = None,
    *,
    durable: bool = False,
) -> Path:
    """Validate and write one run atomically (temp file + rename): a crash leaves old or new.
    `durable` fsyncs it too (atomic_path), for a file rewritten while a run goes on."""
    path = Path(path)
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **meta}
    meta["format"], meta["format_version"] = FORMAT_NAME, FORMAT_VERSION
    validate_meta(meta, path)
    validate_steps(steps, path)
    diagnostics = _empty_diagnostics() if diagnostics is None else diagnostics
    validate_diagnostics(diagnostics, path)
    table = _steps_table(steps.reset_index(drop=True))
    diag_json = {
        name: diagnostics[name].astype(dtype).tolist() for name, dtype in DIAG_COLUMNS.items()
    }
    table = table.replace_schema_metadata(
        {
            META_KEY: json.dumps(meta, default=_json_default, sort_keys=True),
            DIAG_KEY: json.dumps(diag_json),
        }
    )
    with atomic_path(path, durable=durable) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return path


def _schema(path: Path) -> pa.Schema:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a folder, not a trace file")
    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a Parquet file ({str(exc).splitlines()[0]})") from None


def _meta_from_schema(schema: pa.Schema, path: Path) -> dict[str, Any]:
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise TraceError(f"{path}: Parquet file without transitsim trace metadata: not a trace")
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past any real trace
        raise TraceError(f"{path}: trace metadata is not valid JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise TraceError(f"{path}: metadata does not describe a transitsim trace")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise TraceError(
            f"{path}: trace format version {version!r} is not supported "
            f"(this transitsim reads version {FORMAT_VERSION})"
        )
    validate_meta(meta, path)
    return meta


def read_meta(path: Path | str) -> dict[str, Any]:
    """The validated metadata of a trace, without reading its rows."""
    path = Path(path)
    return _meta_from_schema(_schema(path), path)


def read_trace(path: Path | str) -> Trace:
    """Read and validate one trace; anything else raises TraceError naming the file."""
    path = Path(path)
    schema = _schema(path)
    meta = _meta_from_schema(schema, path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: unreadable Parquet data ({str(exc).splitlines()[0]})") from None
    steps = table.to_pandas()
    if "collective" in steps.columns:
        steps["collective"] = steps["collective"].astype(str)
    validate_steps(steps, path)
    diagnostics = _empty_diagnostics()
    raw_diag = (schema.metadata or {}).get(DIAG_KEY)
    if raw_diag:
        try:
            columns = json.loads(raw_diag)
            if not _same_lengths(columns):
                raise ValueError("not a table of columns of one length")
            diagnostics = pd.DataFrame(columns).astype(DIAG_COLUMNS)
        except (KeyError, ValueError, TypeError, RecursionError):
            raise TraceError(f"{path}: diagnostics table is corrupt") from None
        validate_diagnostics(diagnostics, path)
    return Trace(meta=meta, steps=steps, diagnostics=diagnostics, path=path)


def _same_lengths(columns: object) -> bool:
    """Whether the JSON is the column table write_trace stores: every value a list, one length
    (pandas would pad short columns, or rows of a list of lists, with NaN)."""
    if not isinstance(columns, dict) or not all(isinstance(v, list) for v in columns.values()):
        return False
    return len({len(v) for v in columns.values()}) <= 1


def find_traces(paths: list[Path | str]) -> list[Path]:
    """Expand folders (their *.parquet files, sorted, subfolders included) and keep files.

    A missing path is an error."""
    found: list[Path] = []
    for item in paths:
        item = Path(item)
        if item.is_dir():
            found.extend(sorted(item.rglob("*.parquet")))
        elif item.exists():
            found.append(item)
        else:
            raise TraceError(f"{item}: no such file or folder")
    return found
