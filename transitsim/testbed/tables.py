"""The testbed's tables as read back: a measured table (measured.parquet, calibration.parquet)
and a `testbed ttl` folder's runs.csv, checked before anything is computed from them.

A measured table is what `testbed run` writes, held to the bounds its flags allow (flags.py):
every column the comparison and its report read, of the right kind, finite, in range, and the
ranks' start offsets a JSON list of one number per worker. Anything else is one
TransitsimError line naming the file, the column and the first bad row, never a table of NaN
errors or a traceback.

The columns issue 25 added (`sites`, `layout`, `wan_rate_bps`, `rtt_wan_s`, `load_start`,
`load_end`, `repeat_stop`) are optional, so the tables measured before them still compare: a
table without them is one site, its points' load is unknown (NaN, counted as such by `testbed
compare`) and their repeats' stop "not recorded". Where present they are held to the same
rules; a load may be NaN (unknown), nothing else.
"""

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.testbed.flags import ELEMENT_BYTES, RATE_RANGE_BPS, SIZE_RANGE, WORKER_RANGE
from transitsim.testbed.measure import LAYOUTS, TABLE_COLLECTIVES, layout

MAX_ROWS = 100_000
MAX_RUNS = 1_000
MAX_SECONDS = 3600.0
MIN_SECONDS = 1e-9  # a measured time below a nanosecond is not one (5e-324 s made errors inf)
MAX_OFFSETS_TEXT = 10_000
# column -> (low, high, whole numbers only, low itself allowed)
NUMERIC = {
    "rate_bps": (*RATE_RANGE_BPS, False, True),
    "workers": (*WORKER_RANGE, True, True),
    "bytes": (*SIZE_RANGE, True, True),
    "repeats": (1, 1e9, True, True),
    "median_s": (MIN_SECONDS, MAX_SECONDS, False, False),
    "iqr_s": (0.0, MAX_SECONDS, False, True),
    "spread": (0.0, 1e9, False, True),
    "rtt_s": (0.0, 10.0, False, True),
    "qdisc_efficiency": (0.0, 1.0, False, False),
}
TEXT = ("collective", "start_offsets_s", "gloo_algorithm")
MEASURED_COLUMNS = (*NUMERIC, *TEXT)
REPEAT_STOPS = ("spread", "max repeats", "time", "not recorded")
# optional column -> (low, high, whole, low allowed, value where the column is absent, NaN ok)
OPTIONAL = {
    "sites": (1, 2, True, True, 1, False),
    "wan_rate_bps": (0.0, RATE_RANGE_BPS[1], False, True, 0.0, False),
    "rtt_wan_s": (0.0, 10.0, False, True, 0.0, False),
    "load_start": (0.0, 1e4, False, True, math.nan, True),
    "load_end": (0.0, 1e4, False, True, math.nan, True),
    "foreign_running": (0.0, 1e6, True, True, math.nan, True),
    "loadavg_1m_at_start": (0.0, 1e4, False, True, math.nan, True),
}


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_numbers(frame: pd.DataFrame, name: str, where: str) -> np.ndarray:
    """The column as float64, or one line: not numbers, not finite, out of range, not whole."""
    nan_ok = False
    if name in OPTIONAL:
        low, high, whole, closed, _, nan_ok = OPTIONAL[name]
    else:
        low, high, whole, closed = NUMERIC[name]
    column = frame[name]
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        raise TransitsimError(f"{where}: column {name!r} must hold numbers, not {column.dtype}")
    values = column.to_numpy(dtype="float64", na_value=math.nan)
    bad = ~np.isfinite(values) | (values > high) | ((values < low) if closed else (values <= low))
    if nan_ok:
        bad &= ~np.isnan(values)
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
        if name not in TABLE_COLLECTIVES:
            raise TransitsimError(
                f"{where}: column 'collective' row {k}: {name!r:.40} is not one of "
                f"{TABLE_COLLECTIVES}"
            )
    extra = _check_sites(frame, where, clean, texts)
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
    for name, values in extra.items():
        out[name] = values
    return out


def _check_sites(frame: pd.DataFrame, where: str, clean: dict, texts: dict) -> dict:
    """The optional columns (defaults where absent) and their consistency: two sites need an
    even worker count and a WAN rate; the hierarchical all-reduce needs two sites; `layout`
    says what sites and collective say."""
    rows = len(frame)
    extra: dict = {}
    for name, spec in OPTIONAL.items():
        if name in frame.columns:
            extra[name] = check_numbers(frame, name, where)
        else:
            extra[name] = np.full(rows, spec[4], dtype="float64")
    sites = extra["sites"].astype("int64")
    extra["sites"] = sites
    for k in range(rows):
        collective, workers = texts["collective"][k], int(clean["workers"][k])
        if sites[k] == 2 and (workers % 2 or extra["wan_rate_bps"][k] < RATE_RANGE_BPS[0]):
            raise TransitsimError(
                f"{where}: row {k}: two sites need an even worker count and a WAN rate "
                f"(column 'wan_rate_bps') of at least {RATE_RANGE_BPS[0]:g} b/s"
            )
        if sites[k] == 1 and collective == "hierarchical_all_reduce":
            raise TransitsimError(f"{where}: row {k}: a hierarchical all-reduce needs two sites")
    expected = [layout(c, int(n)) for c, n in zip(texts["collective"], sites, strict=True)]
    if "layout" in frame.columns:
        given = _texts(frame, "layout", where)
        for k, (text, want) in enumerate(zip(given, expected, strict=True)):
            if text not in LAYOUTS or text != want:
                raise TransitsimError(
                    f"{where}: column 'layout' row {k}: {text!r:.40}, expected {want!r} (from "
                    "'sites' and 'collective')"
                )
    extra["layout"] = pd.Series(expected, dtype=object)
    stops = ["not recorded"] * rows
    if "repeat_stop" in frame.columns:
        stops = _texts(frame, "repeat_stop", where)
        for k, text in enumerate(stops):
            if text not in REPEAT_STOPS:
                raise TransitsimError(
                    f"{where}: column 'repeat_stop' row {k}: {text!r:.40} is not one of "
                    f"{REPEAT_STOPS}"
                )
    extra["repeat_stop"] = pd.Series(stops, dtype=object)
    return extra


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
