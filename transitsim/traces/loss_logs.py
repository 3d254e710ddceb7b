"""A researcher's own loss log: CSV, JSONL or TensorBoard events, as one table of losses per step.

The profile times a few steps; the loss log gives the convergence of every step it logged. A log
has a step column and one or more loss columns, named by `--columns step=iter,train_loss=loss`
or recognised from the common names (`STEP_NAMES`, `TRAIN_NAMES`, `VAL_NAMES`, `LR_NAMES`).
Rows that log only some columns (a validation row every N steps beside the training rows) are
merged by step. TensorBoard event files (a file or a folder of them) are read through `tbparse`,
in the optional `byo` extra (`pip install 'transitsim[byo]'`); CSV and JSONL need nothing extra.

Every problem is one TransitsimError line naming the file: not a table, no step column, no loss
column, text where numbers go, negative losses (the trace stores losses >= 0).
"""

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.base.reading import read_regular_file

MAX_LOG_BYTES = 1 << 28  # 256 MiB
MAX_STEP = 10**12
STEP_NAMES = ("step", "global_step", "iter", "iteration", "it", "_step", "trainer/global_step")
TRAIN_NAMES = ("train_loss", "loss", "train/loss", "training_loss", "train/loss_step", "tr_loss")
VAL_NAMES = ("val_loss", "eval/loss", "eval_loss", "valid_loss", "validation_loss", "val/loss")
LR_NAMES = ("lr", "learning_rate", "train/lr", "train/learning_rate")
ROLES = ("step", "train_loss", "val_loss", "lr")
_DEFAULTS = dict(zip(ROLES, (STEP_NAMES, TRAIN_NAMES, VAL_NAMES, LR_NAMES), strict=True))


@dataclass
class LossLog:
    """Losses per step: columns step (int64, strictly increasing, from 1), train_loss,
    val_loss (NaN where not evaluated), lr (NaN where not logged); notes say what was assumed."""

    path: Path
    table: pd.DataFrame
    columns: dict[str, str]  # role -> the log's own column (or TensorBoard tag)
    notes: list[str] = field(default_factory=list)

    @property
    def every_step(self) -> bool:
        steps = self.table["step"].to_numpy()
        return bool(len(steps) and steps[0] == 1 and (np.diff(steps) == 1).all())


def parse_columns(text: str | None) -> dict[str, str]:
    """`step=iter,val_loss=eval/loss` -> {"step": "iter", "val_loss": "eval/loss"}."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in text.split(","):
        role, sep, name = item.partition("=")
        role, name = role.strip(), name.strip()
        if not sep or not name or role not in ROLES:
            raise TransitsimError(
                f"--columns {item.strip()!r}: expected ROLE=COLUMN with ROLE one of "
                f"{', '.join(ROLES)} (e.g. step=iter,train_loss=loss)"
            )
        if role in out:
            raise TransitsimError(f"--columns names {role!r} twice")
        out[role] = name
    return out


def _read_text(path: Path) -> str:
    if not path.exists():
        raise TransitsimError(f"{path}: no such file")
    raw = read_regular_file(path, MAX_LOG_BYTES, "loss log")  # a FIFO is refused, not waited on
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TransitsimError(f"{path}: not a loss log (not UTF-8 text)") from None
    if not text.strip():
        raise TransitsimError(f"{path}: empty loss log")
    if "\x00" in text:
        raise TransitsimError(f"{path}: not a loss log (binary data)")
    return text


def _jsonl_records(path: Path, text: str) -> list[dict[str, Any]]:
    records = []
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    for index, (number, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            if index == len(lines) - 1 and index > 0:
                break  # a run killed mid-write: its last line is cut (noted by the caller)
            raise TransitsimError(f"{path}:{number}: not a JSONL loss log (not JSON)") from None
        if not isinstance(record, dict):
            raise TransitsimError(f"{path}:{number}: a JSONL loss log holds one object a line")
        records.append(record)
    return records


def _csv_frame(path: Path, text: str, notes: list[str]) -> pd.DataFrame:
    sample = text[:65536]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t")
        delimiter = dialect.delimiter
    except csv.Error:
        delimiter = ","
    rows = _checked_rows(path, text, delimiter, notes)
    try:
        frame = pd.read_csv(
            io.StringIO(text), sep=delimiter, dtype=str, keep_default_na=False, nrows=rows
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else "unreadable"
        raise TransitsimError(f"{path}: not a CSV loss log ({first})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _checked_rows(path: Path, text: str, delimiter: str, notes: list[str]) -> int | None:
    """The data rows to read: every row must have the header's fields (pandas would take the
    extra leading fields of a longer row as its index, shifting every column), except a short
    last row, a run killed mid-write, which is dropped with a note (None: read them all)."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(reader, [])
        ragged, rows = [], 0
        for row in reader:
            if not row:
                continue  # a blank line, which pandas skips too
            rows += 1
            if len(row) != len(header):
                ragged.append((reader.line_num, len(row), rows))
    except csv.Error as exc:
        raise TransitsimError(f"{path}:{reader.line_num}: not a CSV loss log ({exc})") from None
    if not ragged:
        return None
    line, fields, index = ragged[0]
    if len(ragged) == 1 and index == rows and fields < len(header):
        notes.append(f"its last line ({line}) is cut short (a run killed mid-write): dropped")
        return rows - 1
    raise TransitsimError(
        f"{path}:{line}: {fields} field(s) where the header has {len(header)}: a ragged CSV "
        "row (its columns would shift)"
    )


def _tensorboard_frame(path: Path) -> pd.DataFrame:
    """Scalars of a TensorBoard event file or folder as a wide table (one column per tag)."""
    try:
        from tbparse import SummaryReader  # the optional `byo` extra
    except ImportError:
        raise TransitsimError(
            f"{path}: reading TensorBoard event files needs the byo extra "
            "(pip install 'transitsim[byo]'); CSV and JSONL logs need nothing extra"
        ) from None
    try:
        scalars = SummaryReader(str(path), pivot=False).scalars
    except Exception as exc:  # tbparse and tensorboard raise many kinds on a broken file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TransitsimError(f"{path}: not a TensorBoard event log ({first[:120]})") from None
    if scalars is None or len(scalars) == 0 or "tag" not in scalars:
        raise TransitsimError(f"{path}: no scalars in the TensorBoard events")
    wide = scalars.pivot_table(index="step", columns="tag", values="value", aggfunc="last")
    # the events' own step numbers are the column `step`; a scalar logged under the tag `step`
    # keeps its values as `step (tag)` (--columns step='step (tag)' picks it)
    wide.columns = [f"{c} (tag)" if str(c) == "step" else str(c) for c in wide.columns]
    wide = wide.reset_index()
    return wide.astype(object).where(wide.notna(), None)  # a tag not logged at a step: missing


def _is_tensorboard(path: Path) -> bool:
    if path.is_dir():
        return True
    return "tfevents" in path.name


def _pick(frame: pd.DataFrame, role: str, given: dict[str, str], path: Path) -> str | None:
    if role in given:
        if given[role] not in frame.columns:
            raise TransitsimError(
                f"{path}: no column {given[role]!r} for {role} (columns: "
                f"{', '.join(map(str, list(frame.columns)[:12]))})"
            )
        return given[role]
    lower = {str(c).lower(): c for c in frame.columns}
    for name in _DEFAULTS[role]:
        if name in lower:
            return str(lower[name])
    return None


def _number(value: Any, nan: float) -> float | None:
    """One cell as a float (None: not a number). Empty cells and nulls are missing (NaN); a
    logged 'nan' is what a diverged run writes, returned as `nan` (inf for losses); bools and
    other text are not numbers."""
    if value is None:
        return math.nan
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        try:
            number = float(value)
        except OverflowError:  # a JSON integer beyond any float
            return None
    elif isinstance(value, str):
        if not value.strip():
            return math.nan
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return nan if math.isnan(number) else number


def _numbers(frame: pd.DataFrame, column: str, path: Path, nan: float = math.nan) -> pd.Series:
    """A column as floats: empty cells NaN; 'nan', 'inf' as numbers; other text an error."""
    values = frame[column]
    converted = [_number(v, nan) for v in values.astype(object)]
    bad = [i for i, v in enumerate(converted) if v is None]
    if bad:
        raise TransitsimError(
            f"{path}: column {column!r} holds {str(values.iloc[bad[0]])[:40]!r} at row "
            f"{bad[0] + 1}: not a number"
        )
    return pd.Series(converted, index=values.index, dtype="float64")


def read_loss_log(path: Path | str, columns: dict[str, str] | None = None) -> LossLog:
    """Read a loss log into losses per step (TransitsimError, one line, when it is not one)."""
    path = Path(path)
    given = dict(columns or {})
    notes: list[str] = []
    if not path.exists():
        raise TransitsimError(f"{path}: no such file or folder")
    if _is_tensorboard(path):
        frame = _tensorboard_frame(path)
        if "step" not in given:
            given["step"] = "step"
    else:
        text = _read_text(path)
        if path.suffix.lower() in (".jsonl", ".ndjson") or text.lstrip().startswith("{"):
            records = _jsonl_records(path, text)
            if not records:
                raise TransitsimError(f"{path}: no records in the JSONL loss log")
            keys = list(dict.fromkeys(k for record in records for k in record))
            # a key a record lacks is None (missing), a logged NaN stays NaN (diverged)
            frame = pd.DataFrame(
                {str(k): [record.get(k) for record in records] for k in keys}, dtype=object
            )
        else:
            frame = _csv_frame(path, text, notes)
    if len(frame) == 0:
        raise TransitsimError(f"{path}: no rows in the loss log")
    picked = {role: _pick(frame, role, given, path) for role in ROLES}
    if picked["step"] is None:
        raise TransitsimError(
            f"{path}: no step column (one of {', '.join(STEP_NAMES)}, or --columns step=NAME)"
        )
    if picked["train_loss"] is None and picked["val_loss"] is None:
        raise TransitsimError(
            f"{path}: no loss column (one of {', '.join(TRAIN_NAMES + VAL_NAMES)}, or "
            "--columns train_loss=NAME)"
        )
    table = pd.DataFrame({"step": _numbers(frame, picked["step"], path)})  # type: ignore[index]
    for role in ROLES[1:]:
        name = picked[role]
        diverged = math.inf if role.endswith("loss") else math.nan
        table[role] = _numbers(frame, name, path, diverged) if name is not None else np.nan
    table = table.dropna(subset=["step"])
    steps = table["step"].to_numpy()
    if not len(steps):
        raise TransitsimError(f"{path}: no row has a step number")
    if (steps != np.floor(steps)).any() or (steps < 0).any() or (steps > MAX_STEP).any():
        raise TransitsimError(f"{path}: step numbers must be whole numbers from 0 to {MAX_STEP:,}")
    table["step"] = table["step"].astype("int64")
    if table["step"].duplicated().any():
        notes.append("rows of the same step merged (the last value of each column kept)")
    table = table.groupby("step", sort=True).last().reset_index()  # last non-null per column
    return _finish(path, table, {r: n for r, n in picked.items() if n}, notes)


def _finish(path: Path, table: pd.DataFrame, picked: dict[str, str], notes: list[str]) -> LossLog:
    """Fill what the trace needs and say so: a train loss on every row, steps from 1."""
    if "train_loss" not in picked:
        table["train_loss"] = table["val_loss"]
        notes.append(f"no training-loss column: train_loss is the log's {picked['val_loss']!r}")
    table = table[table[["train_loss", "val_loss"]].notna().any(axis=1)].reset_index(drop=True)
    if not len(table):
        raise TransitsimError(f"{path}: no row has a loss")
    for column in ("train_loss", "val_loss"):
        values = table[column].to_numpy()
        if (values < 0).any():
            step = int(table["step"].iloc[int(np.flatnonzero(values < 0)[0])])
            raise TransitsimError(
                f"{path}: negative {column} at step {step} (a trace stores losses >= 0)"
            )
    missing = table["train_loss"].isna()
    if missing.any():
        table["train_loss"] = table["train_loss"].ffill().bfill()
        notes.append(f"{int(missing.sum())} row(s) without a train loss: the previous one kept")
    nonfinite = ~np.isfinite(table["train_loss"].to_numpy())
    if nonfinite.any():
        table.loc[nonfinite, "train_loss"] = math.inf
        notes.append(f"{int(nonfinite.sum())} non-finite train loss(es) stored as inf (diverged)")
    val = table["val_loss"].to_numpy()
    if np.isinf(val).any():
        notes.append("non-finite val_loss stored as inf (diverged)")
    if int(table["step"].iloc[0]) == 0:
        table["step"] = table["step"] + 1
        notes.append("steps counted from 0 in the log: shifted by 1 (a trace counts from 1)")
    return LossLog(path=path, table=table[list(ROLES)], columns=picked, notes=notes)
