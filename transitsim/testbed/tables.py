"""The testbed's tables as read back: a measured table (measured.parquet, calibration.parquet)
and a `testbed ttl` folder's runs.csv, checked before anything is computed from them.

A measured table is what `testbed run` writes, held to the bounds its flags allow (flags.py):
every column the comparison and its report read, of the right kind, finite, in range, and the
ranks' start offsets a JSON list of one number per worker. Anything else is one
TransitsimError line naming the file, the column and the first bad row, never a table of NaN
errors or a traceback.
"""

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.testbed.flags import ELEMENT_BYTES, RATE_RANGE_BPS, SIZE_RANGE, WORKER_RANGE
from transitsim.testbed.measure import COLLECTIVES

MAX_ROWS = 100_000
MAX_RUNS = 1_000
MAX_SECONDS = 3600.0
MAX_OFFSETS_TEXT = 10_000
# column -> (low, high, whole numbers only, low itself allowed)
NUMERIC = {
    "rate_bps": (*RATE_RANGE_BPS, False, True),
    "workers": (*WORKER_RANGE, True, True),
    "bytes": (*SIZE_RANGE, True, True),
    "repeats": (1, 1e9, True, True),
    "median_s": (0.0, MAX_SECONDS, False, False),
    "iqr_s": (0.0, MAX_SECONDS, False, True),
    "spread": (0.0, 1e9, False, True),
    "rtt_s": (0.0, 10.0, False, True),
    "qdisc_efficiency": (0.0, 1.0, False, False),
}
TEXT = ("collective", "start_offsets_s", "gloo_algorithm")
MEASURED_COLUMNS = (*NUMERIC, *TEXT)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_numbers(frame: pd.DataFrame, name: str, where: str) -> np.ndarray:
    """The column as float64, or one line: not numbers, not finite, out of range, not whole."""
    low, high, whole, closed = NUMERIC[name]
    column = frame[name]
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        raise TransitsimError(f"{where}: column {name!r} must hold numbers, not {column.dtype}")
    values = column.to_numpy(dtype="float64", na_value=math.nan)
    bad = ~np.isfinite(values) | (values > high) | ((values < low) if closed else (values <= low))
    if whole:
        bad |= np.isfinite(values) & (values != np.round(values))
    if bad.any():
        k = _first_bad(bad)
        kind = f"{'whole ' if whole else ''}numbers {'from' if closed else 'above'}"
        raise TransitsimError(
            f"{where}: column {name!r} row {k}: {float(values[k]):g}, "
            f"expected {kind} {low:g} to {high:g}"
        )
    return values


def _texts(frame: pd.DataFrame, name: str, where: str) -> list[str]:
    values = frame[name].tolist()
    for k, value in enumerate(values):
        if not isinstance(value, str):
            raise TransitsimError(
                f"{where}: column {name!r} row {k}: expected text, got {value!r:.40}"
            )
    return values


def _offsets(text: str, workers: int, where: str, k: int) -> list[float]:
    """One row's start offsets: a JSON list of `workers` finite, non-negative seconds."""
    problem = f"{where}: column 'start_offsets_s' row {k}"
    if len(text) > MAX_OFFSETS_TEXT:
        raise TransitsimError(f"{problem}: longer than {MAX_OFFSETS_TEXT} characters")
    try:
        values = json.loads(text)
    except (ValueError, RecursionError):
        raise TransitsimError(f"{problem}: not JSON: {text!r:.40}") from None
    if not isinstance(values, list) or len(values) != workers:
        raise TransitsimError(f"{problem}: expected a JSON list of {workers} numbers, one a rank")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TransitsimError(f"{problem}: {value!r:.40} is not a number")
        if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
            raise TransitsimError(f"{problem}: {value!r} is not a start offset in seconds")
    return [float(v) for v in values]


def _plain(column: pd.Series) -> bool:
    """A column safe to carry into the outputs (numbers, or text in every row)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return True
    return all(isinstance(v, str) for v in column.tolist())


def check_measured(frame: Any, source: Path | str) -> pd.DataFrame:
    """A measured table, checked; returned with clean dtypes (and only columns that are plain
    numbers or text: the rest of a hostile file never reaches the outputs)."""
    where = str(source)
    if not isinstance(frame, pd.DataFrame):
        raise TransitsimError(f"{where}: not a table")
    if missing := [c for c in MEASURED_COLUMNS if c not in frame.columns]:
        raise TransitsimError(f"{where}: not a testbed table (missing {sorted(missing)})")
    if frame.columns.duplicated().any():
        raise TransitsimError(f"{where}: a column name appears twice")
    if len(frame) == 0:
        raise TransitsimError(f"{where}: the table has no measured points")
    if len(frame) > MAX_ROWS:
        raise TransitsimError(f"{where}: more than {MAX_ROWS:,} rows: not a testbed table")
    frame = frame.reset_index(drop=True)
    clean = {name: check_numbers(frame, name, where) for name in NUMERIC}
    texts = {name: _texts(frame, name, where) for name in TEXT}
    for k, name in enumerate(texts["collective"]):
        if name not in COLLECTIVES:
            raise TransitsimError(
                f"{where}: column 'collective' row {k}: {name!r:.40} is not one of {COLLECTIVES}"
            )
    bytes_ = clean["bytes"]
    if (bytes_ % ELEMENT_BYTES).any():
        k = _first_bad(bytes_ % ELEMENT_BYTES != 0)
        raise TransitsimError(f"{where}: column 'bytes' row {k}: not whole float32 elements")
    for k, text in enumerate(texts["start_offsets_s"]):
        _offsets(text, int(clean["workers"][k]), where, k)
    out = frame[[c for c in frame.columns if isinstance(c, str) and _plain(frame[c])]].copy()
    for name, values in clean.items():
        whole = NUMERIC[name][2]
        out[name] = values.astype("int64") if whole else values
    for name, values in texts.items():
        out[name] = pd.Series(values, dtype=object)
    return out


def check_runs(runs: Any, folder: Path, source: Path | str) -> pd.DataFrame:
    """runs.csv of a `testbed ttl` folder: at least one run, each with a rate and a trace file
    inside the folder, and (newer folders) the trace of its variant's compute run."""
    where = str(source)
    if not isinstance(runs, pd.DataFrame):
        raise TransitsimError(f"{where}: not a table")
    if missing := {"variant", "rate_bps", "trace"} - set(runs.columns):
        raise TransitsimError(f"{where}: missing column(s) {sorted(missing)}")
    if len(runs) == 0:
        raise TransitsimError(f"{where}: lists no runs")
    if len(runs) > MAX_RUNS:
        raise TransitsimError(f"{where}: more than {MAX_RUNS} runs: not a `testbed ttl` table")
    runs = runs.reset_index(drop=True)
    rates = check_numbers(runs, "rate_bps", where)
    checked = {"variant": runs["variant"].astype(str), "rate_bps": rates,
               "trace": _paths(runs, "trace", folder, where)}  # fmt: skip
    if "compute_trace" in runs.columns:  # every run's compute run, or none (older folders)
        checked["compute_trace"] = _paths(runs, "compute_trace", folder, where)
    return pd.DataFrame(checked)


def _paths(runs: pd.DataFrame, column: str, folder: Path, where: str) -> list[str]:
    """A column of file names, each inside `folder`."""
    root = folder.resolve()
    out = []
    for k, trace in enumerate(runs[column].tolist()):
        if not isinstance(trace, str) or not trace.strip() or "\x00" in trace:
            raise TransitsimError(f"{where}: column '{column}' row {k}: expected a file name")
        path = Path(trace)
        if path.is_absolute() or ".." in path.parts:
            raise TransitsimError(
                f"{where}: column '{column}' row {k}: {trace!r:.60} is not a path inside {folder}"
            )
        if not (root / path).resolve().is_relative_to(root):
            raise TransitsimError(f"{where}: column '{column}' row {k}: leads outside {folder}")
        out.append(trace)
    return out
