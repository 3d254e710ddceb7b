"""Hostile input, generated (issue 15): hypothesis mutates real traces and real logs and runs
every command that reads them, in this process, through the console script's main().

A trace is a real Parquet file written with pyarrow from a recorded run whose step table or
metadata was changed (a column dropped or of another kind, NaN/inf/negative/2^62 values, steps
out of order, "False" as text, nothing in it), or whose bytes were cut short, flipped or replaced.
A log is the published JSONL format with lines deleted, cut short, swapped or with a field
replaced by a hostile JSON value (NaN, Infinity, 2^70, text, lists, objects). The testbed's
tables (issue 27): measured tables and a `testbed ttl` folder's runs.csv and calibration.

The promise checked for every example: exit 2 with exactly one line on stderr and nothing
written (no output folder), or exit 0 with outputs that are whole and hold finite times; never
a traceback (it fails the test here) and never exit 1 (bad input is not a failed job).
"""

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import logfactory as lf
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from cli_run import assert_refused, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from transitsim.traces.format import (
    DIAG_KEY,
    META_KEY,
    REQUIRED_META,
    STEP_COLUMNS,
    read_trace,
    write_trace,
)

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "traces/shakespeare-mini"
BASE_TRACES = [
    MINI / "shakespeare-adamw-lr0.003-s0.parquet",
    MINI / "shakespeare-band-low-k16-1d256-lr0.001-s0.parquet",
    MINI / "shakespeare-optics-low-k16-1d256-enob8.0-p8-agc50-fbsent-lr0.001-s0.parquet",
    ROOT / "traces/published/tinystories-gpu/tinystories-topk-k16-2d64-lr0.001-s0.parquet",
]
ROWS = 12  # the first rows of each recorded run: a valid trace that replays in a blink
NETWORK = "8x200g-switch"
SCENARIO = f"traces: [traces/]\nnetworks: [{NETWORK}]\ntargets: [3.5]\n"
REPLAY = ["replay", "-n", NETWORK, "--overlap", "buckets"]  # reads the backward profile too
FUZZ = settings(
    # 40 a test keeps the suite quick; TRANSITSIM_FUZZ_EXAMPLES=500 for a longer hunt
    max_examples=int(os.environ.get("TRANSITSIM_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,  # every run draws afresh; a failure prints its example to reproduce it
)


def _small(path: Path) -> tuple[pa.Table, dict[str, Any]]:
    """The first ROWS rows of a recorded trace, written and read back as the library would."""
    trace = read_trace(path)
    with tempfile.TemporaryDirectory() as folder:
        small = write_trace(
            Path(folder) / path.name, trace.steps.iloc[:ROWS], trace.meta, trace.diagnostics
        )
        table = pq.read_table(small)
    return table, json.loads(table.schema.metadata[META_KEY])


BASES = [_small(path) for path in BASE_TRACES]


def exit_codes(commands: dict[str, list[str]]) -> dict[str, int]:
    """Each command's exit code; any that did not succeed was refused in one line."""
    codes = {}
    for name, argv in commands.items():
        code, _, stderr = run_cli(argv)
        codes[name] = code
        if code != 0:
            assert_refused(argv, code, stderr)
    return codes


# --- hostile values ------------------------------------------------------------------------

SPECIAL_NUMBERS = st.sampled_from(
    [math.nan, math.inf, -math.inf, -1.0, -1e-12, 0.0, 2.0**62, 1e300, -(2.0**62), 5e-324]
)
SPECIAL_INTS = st.sampled_from([-1, 0, 2**62, 2**63 - 1, -(2**63), 10**15])
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    SPECIAL_NUMBERS,
    st.text(max_size=12),
    st.sampled_from(["False", "True", "nan", "Infinity", "1e309", "", "\x00", "x" * 300]),
    st.sampled_from([10**400, -(10**400)]),  # integers beyond any float (issue 45)
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested dicts and lists (lists of dicts: the backward profile)."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value[:3])
    for key, child in items:
        path = (*prefix, key)
        found.append(path)
        if isinstance(child, dict | list) and len(path) < 4:
            found.extend(_paths(child, path))
    return found


# metadata keys some reader uses (the rest is carried along and only shown)
READ_META = [
    *((key,) for key in REQUIRED_META),
    *((key,) for key in ("format", "format_version", "notes", "variant_params", "model")),
    *((key,) for key in ("hardware", "versions", "config", "timing", "backward_profile")),
    *((key,) for key in ("payload_bytes_per_step", "payload_bytes_int64_per_step")),
    *((key,) for key in ("wire_bytes_per_step", "batch", "context", "steps_planned")),
    *((key,) for key in ("source_log", "corpus", "tokenizer")),
    *(("variant_params", key) for key in ("band", "chunk", "chunk_mode", "enob", "planes")),
    *(("variant_params", key) for key in ("fs_every", "feedback", "keep", "lr", "selection")),
    ("variant_params", "select_every"),
    ("model", "block"),
    ("hardware", "device"),
    *(("config", key) for key in ("dataset", "block", "steps", "batch", "n_layer", "workers")),
    ("backward_profile", "tensors"),
    ("backward_profile", "backward_share"),
    ("notes", 0),
]


def _set_path(document: Any, path: tuple, value: Any, delete: bool = False) -> None:
    node = document
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, list) and path[-1] >= len(node):
        node.append(value)  # a list too short for the path: the value joins it
    elif delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


# --- traces --------------------------------------------------------------------------------


def _column(table: pa.Table, name: str, values: list[Any]) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, pa.array(values))


@st.composite
def step_table_mutation(draw, table: pa.Table) -> pa.Table:
    """One change to the step table that write_trace would never make."""
    rows = len(table)
    names = table.column_names
    kind = draw(
        st.sampled_from(["drop", "retype", "values", "steps", "reducible", "collective", "empty"])
    )
    if kind == "drop":
        return table.drop_columns([draw(st.sampled_from(list(STEP_COLUMNS)))])
    if kind == "empty":
        return table.slice(0, 0)
    if kind == "steps":
        steps = table.column("step").to_pylist()
        order = draw(
            st.sampled_from(["reverse", "duplicate", "zero", "negative", "swap", "float", "nan"])
        )
        if order == "reverse":
            steps = steps[::-1]
        elif order == "duplicate":
            at = draw(st.integers(1, rows - 1))
            steps[at] = steps[at - 1]
        elif order == "zero":
            steps = [step - steps[0] for step in steps]
        elif order == "negative":
            steps = [-step for step in steps]
        elif order == "swap":
            at = draw(st.integers(0, rows - 2))
            steps[at], steps[at + 1] = steps[at + 1], steps[at]
        elif order == "float":
            steps = [step + 0.5 for step in steps]
        else:
            steps = [math.nan] + [float(step) for step in steps[1:]]
        return _column(table, "step", steps)
    if kind == "reducible":
        value = draw(st.sampled_from(["False", "True", "no", 0, 1, 0.0, None]))
        return _column(table, "reducible", [value] * rows)
    if kind == "collective":
        value = draw(st.sampled_from(["all-reduce", "", "ALL_REDUCE", "broadcast", 1]))
        return _column(table, "collective", [value] * rows)
    numeric = [n for n in names if n not in ("collective", "reducible")]
    name = draw(st.sampled_from(numeric))
    if kind == "retype":
        old = table.column(name).to_pylist()
        form = draw(st.sampled_from(["text", "bool", "null", "float"]))
        if form == "text":
            new = [None if v is None else str(v) for v in old]
        elif form == "bool":
            new = [bool(v) for v in old]
        elif form == "null":
            new = [None] * rows
        else:
            new = [None if v is None else float(v) + 0.25 for v in old]
        return _column(table, name, new)
    values = table.column(name).to_pylist()
    at = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=3, unique=True))
    integer = pa.types.is_integer(table.schema.field(name).type)
    value = draw(SPECIAL_INTS if integer and draw(st.booleans()) else SPECIAL_NUMBERS)
    for index in at:
        values[index] = value
    if integer and isinstance(value, float):
        values = [float(v) for v in values]
    return _column(table, name, values)


@st.composite
def meta_mutation(draw, meta: dict[str, Any]) -> bytes:
    """The trace metadata JSON with one key removed or replaced, or broken JSON."""
    kind = draw(st.sampled_from(["replace", "replace", "delete", "broken", "other json"]))
    text = json.dumps(meta)
    if kind == "broken":
        return text[: draw(st.integers(0, len(text) - 1))].encode()
    if kind == "other json":
        return json.dumps(draw(JSON_VALUE)).encode()
    meta = json.loads(text)
    used = [path for path in READ_META if path[:-1] in [()] + _paths(meta)]
    any_key = draw(st.integers(0, 4)) == 0  # mostly the keys readers use; now and then any
    path = draw(st.sampled_from(_paths(meta) if any_key else used))
    if kind == "delete" and path not in _paths(meta):
        kind = "replace"
    if kind == "delete":
        _set_path(meta, path, None, delete=True)
    else:
        _set_path(meta, path, draw(JSON_VALUE))
    return json.dumps(meta).encode()


@st.composite
def hostile_trace(draw, kinds: tuple[str, ...]) -> tuple[str, bytes]:
    """(what was done, the bytes of a trace file)."""
    table, meta = draw(st.sampled_from(BASES))
    kind = draw(st.sampled_from(kinds))
    metadata = dict(table.schema.metadata)
    if kind == "steps":
        table = draw(step_table_mutation(table)).replace_schema_metadata(metadata)
    elif kind == "meta":
        metadata[META_KEY] = draw(meta_mutation(meta))
        table = table.replace_schema_metadata(metadata)
    elif kind == "diagnostics":
        metadata[DIAG_KEY] = draw(
            st.one_of(
                st.binary(max_size=40),
                JSON_VALUE.map(lambda v: json.dumps(v).encode()),
                st.just(b'{"step": [1], "source": ["x"]}'),
            )
        )
        table = table.replace_schema_metadata(metadata)
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    data = buffer.getvalue().to_pybytes()
    if kind == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == "random":
        data = draw(st.sampled_from([b"", b"PAR1"])) + draw(st.binary(max_size=600))
    elif kind == "flip":  # a few bytes of the footer (metadata, schema) changed
        data = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            at = len(data) - 8 - draw(st.integers(0, min(2000, len(data) - 9)))
            data[at] ^= draw(st.integers(1, 255))
        data = bytes(data)
    return kind, data


def _finite_outputs(out: Path) -> None:
    """A replay that was accepted wrote whole outputs whose times are numbers."""
    assert sorted(p.name for p in out.iterdir()) == [
        "notes.txt",
        "report.html",
        "summary.csv",
        "timeline.parquet",
    ]
    timeline = pd.read_parquet(out / "timeline.parquet")
    assert len(timeline) and timeline["time_s"].map(math.isfinite).all()
    assert (timeline.groupby("run")["time_s"].diff().dropna() >= 0).all()
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary)


def check_every_reader(kind: str, data: bytes) -> None:
    """Every command that reads traces, on one trace file: all refuse it alike (exit 2, one
    line, nothing written) or all accept it and replay writes whole, finite outputs."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        trace = folder / "traces" / "run-s0.parquet"
        trace.parent.mkdir()
        trace.write_bytes(data)
        (folder / "s.yaml").write_text(SCENARIO, encoding="utf-8")
        out = folder / "out"
        commands = {
            "show": ["traces", "show", str(trace)],
            "list": ["traces", "list", str(trace.parent)],
            "ladder": ["ladder", str(trace.parent), "-t", "3.5", "-q"],
            "findings": ["findings", str(trace.parent), "-q"],
            "validate": ["validate", str(folder / "s.yaml")],
            "replay": [*REPLAY, str(trace), "-t", "3.5", "-q", "-o", str(out)],
        }
        codes = exit_codes(commands)
        event(f"{kind}: {'refused' if codes['show'] else 'read'}, replay exit {codes['replay']}")
        assert trace.read_bytes() == data, "a reader changed the trace"
        left = {p.name for p in folder.iterdir()} - {"s.yaml", "traces", "out"}
        assert not left, f"a command left {left} behind"
        assert not (folder / "out").exists() or codes["replay"] == 0, "a refused replay wrote"
        assert len(set(codes.values())) == 1, f"the readers disagree: {codes}"
        if codes["replay"] == 0:
            _finite_outputs(out)


@FUZZ
@given(case=hostile_trace(("steps",)))
def test_generated_broken_step_tables_are_refused_by_every_reader(case) -> None:
    check_every_reader(*case)


@FUZZ
@given(case=hostile_trace(("meta",)))
def test_generated_broken_trace_metadata_is_refused_by_every_reader(case) -> None:
    check_every_reader(*case)


@FUZZ
@given(case=hostile_trace(("diagnostics", "truncate", "random", "flip")))
def test_generated_broken_trace_files_are_refused_by_every_reader(case) -> None:
    check_every_reader(*case)


# --- logs ----------------------------------------------------------------------------------


def _log_lines() -> list[list[str]]:
    """Valid logs: the spec's example (the first records of a published top-k run, copied from
    the spec) and the factory's logs of four kinds of run."""
    example = Path(__file__).parent / "fixtures" / "published-example.jsonl"
    logs = [lf.records([4.0, 3.5, 3.2], variant=v) for v in ("adamw", "topk", "band")]
    logs.append(lf.records([4.1, 3.6, 3.3, 3.1], variant="optics", done=False))
    lines = [[json.dumps(record) for record in log] for log in logs]
    return [*lines, example.read_text(encoding="utf-8").splitlines()]


LOGS = _log_lines()


def _record(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


@st.composite
def log_mutation(draw, lines: list[str]) -> list[str]:
    """One change to a log's lines."""
    kind = draw(
        st.sampled_from(
            ["delete", "truncate", "field", "field", "field", "drop key", "swap", "junk"]
        )
    )
    records = [i for i, line in enumerate(lines) if _record(line) is not None]
    if kind in ("field", "drop key") and not records:
        kind = "delete"
    at = draw(
        st.sampled_from(records)
        if kind in ("field", "drop key")
        else st.integers(0, len(lines) - 1)
    )
    lines = list(lines)
    if kind == "delete":
        del lines[at]
    elif kind == "truncate":
        lines[at] = lines[at][: draw(st.integers(0, max(0, len(lines[at]) - 1)))]
    elif kind == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    elif kind == "junk":
        lines.insert(at, draw(st.sampled_from(["{", "[]", "null", '{"type": 3}', "\x00", "é"])))
    else:
        record = _record(lines[at])
        paths = _paths(record)
        if not paths:
            return lines
        path = draw(st.sampled_from(paths))
        if kind == "drop key":
            _set_path(record, path, None, delete=True)
        else:
            _set_path(record, path, draw(JSON_VALUE))
        lines[at] = json.dumps(record)  # NaN and Infinity as JSON logs may hold them
    return lines


@st.composite
def hostile_log(draw) -> bytes:
    lines = draw(st.sampled_from(LOGS))
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300)) + b"\xff"  # not UTF-8 text
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            break
        lines = draw(log_mutation(lines))
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


@FUZZ
@given(data=hostile_log())
def test_generated_broken_logs_import_whole_or_not_at_all(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        log = folder / "run.jsonl"
        log.write_bytes(data)
        out = folder / "out"
        argv = ["traces", "import", str(log), "-o", str(out), "-q"]
        code, _, stderr = run_cli(argv)
        event(f"import exit {code}")
        if code != 0:
            assert_refused(argv, code, stderr)
            assert not out.exists(), "a refused import left an output folder"
            return
        (written,) = out.iterdir()  # one log, one trace, no temporary files beside it
        trace = read_trace(written)
        assert trace.meta["origin"] == "import"
        for argv in (["traces", "show", str(written)], ["traces", "list", str(out)]):
            code, _, stderr = run_cli(argv)
            assert code == 0, (argv, stderr)
        argv = ["replay", str(written), "-n", NETWORK, "--json", "-q"]
        code, stdout, stderr = run_cli(argv)
        if code != 0:
            assert_refused(argv, code, stderr)
            return
        (row,) = json.loads(stdout)
        for key in ("time_s", "step_s", "wire_bytes"):
            assert math.isfinite(row[key]) and row[key] >= 0, (key, row)


# --- testbed tables (issue 27): measured.parquet-like tables, a `testbed ttl` folder ----------

TESTBED = ROOT / "docs" / "testbed"
# half the examples: an accepted table writes a whole report (plotly inlined), ~1 s here
FUZZ_TESTBED = settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 2))
CELL_VALUES = st.one_of(
    SPECIAL_NUMBERS,
    SPECIAL_INTS,
    st.sampled_from([True, "50 Mb/s", "", "nan", "[0.0]", "[0, 1e400]", "[", "<b>x</b>", "é"]),
    st.builds(json.dumps, JSON_VALUE),
)


def _measured_base() -> pd.DataFrame:
    """The committed points at 50 Mb/s with 2 workers (8 rows: compared in a blink)."""
    frame = pd.read_parquet(TESTBED / "previous" / "measured.parquet")
    return frame[(frame["rate_bps"] == 50e6) & (frame["workers"] == 2)].reset_index(drop=True)


@st.composite
def measured_mutation(draw, frame: pd.DataFrame) -> pd.DataFrame:
    """One to three changes: a column dropped or replaced, a cell replaced, rows cut."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "column", "drop", "rows"]))
        name = draw(st.sampled_from(list(frame.columns))) if len(frame.columns) else None
        if kind == "rows" or name is None:
            frame = frame.iloc[: draw(st.integers(0, len(frame)))]
        elif kind == "drop":
            frame = frame.drop(columns=[name])
        elif kind == "column":
            frame = frame.assign(**{name: draw(CELL_VALUES)})
        elif len(frame):
            values = frame[name].astype(object)
            values.iloc[draw(st.integers(0, len(frame) - 1))] = draw(CELL_VALUES)
            frame = frame.assign(**{name: values})
    return frame


def _write_frame(frame: pd.DataFrame, path: Path) -> None:
    """As Parquet; a column pyarrow cannot hold as it is (mixed kinds) goes as text."""
    for name in frame.columns:
        try:
            pa.array(frame[name].tolist())
        except (pa.ArrowException, OverflowError):
            frame = frame.assign(**{name: frame[name].astype(str)})
    frame.to_parquet(path)


@FUZZ_TESTBED
@given(frame=measured_mutation(_measured_base()))
def test_generated_broken_measured_tables_are_compared_whole_or_refused(frame) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path, out = Path(folder) / "measured.parquet", Path(folder) / "out"
        _write_frame(frame, path)
        argv = ["testbed", "compare", str(path), "-o", str(out)]
        code, _, stderr = run_cli(argv)
        event(f"compare exit {code}")
        if code != 0:
            assert_refused(argv, code, stderr)
            assert not out.exists(), "a refused comparison wrote"
            return
        table = pd.read_csv(out / "comparison.csv")
        assert len(table) == len(frame)
        for name in ("simulated_s", "rel_error", "alpha_s"):
            assert table[name].map(math.isfinite).all(), name
        assert (table["simulated_s"] > 0).all() and (table["alpha_s"] >= 0).all()
        assert (out / "report.html").read_text().rstrip().endswith("</html>")


def _ttl_base(folder: Path) -> None:
    """The committed A run at 50 Mb/s cut to 60 steps (3.3 at step 50), as a ttl folder."""
    runs = pd.read_csv(TESTBED / "ttl" / "runs.csv").iloc[:1]
    trace = read_trace(TESTBED / "ttl" / runs["trace"].iloc[0])
    write_trace(folder / runs["trace"].iloc[0], trace.steps.iloc[:60], trace.meta)
    shutil.copy(TESTBED / "ttl" / "calibration.parquet", folder)
    runs.to_csv(folder / "runs.csv", index=False)


RUNS_CELLS = st.sampled_from(
    ["", "nan", "inf", "-5e7", "1e400", "0", "50 Mb/s", "A", "E'", "traces", "../runs.csv",
     "/etc/passwd", "runs.csv", "traces/A-50Mbps", '"', "5e7", "400000000.0", "\x00"]
)  # fmt: skip


@st.composite
def ttl_folder_damage(draw) -> tuple[str, Any]:
    """A damaged runs.csv (a cell, a column, the rows) or a damaged calibration table."""
    if draw(st.integers(0, 3)) == 0:
        calibration = pd.read_parquet(TESTBED / "ttl" / "calibration.parquet")
        return "calibration", draw(measured_mutation(calibration))
    lines = (TESTBED / "ttl" / "runs.csv").read_text().splitlines()[:3]
    rows = [line.split(",") for line in lines]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "cell", "rows", "junk"]))
        if kind == "rows":
            rows = rows[: draw(st.integers(0, len(rows)))]
        elif kind == "junk":
            rows.insert(draw(st.integers(0, len(rows))), [draw(RUNS_CELLS)])
        elif rows:
            row = rows[draw(st.integers(0, len(rows) - 1))]
            row[draw(st.integers(0, len(row) - 1))] = draw(RUNS_CELLS)
    return "runs", "\n".join(",".join(row) for row in rows) + "\n"


@FUZZ_TESTBED
@given(damage=ttl_folder_damage())
def test_generated_broken_ttl_folders_are_predicted_or_refused(damage) -> None:
    kind, value = damage
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        _ttl_base(folder)
        if kind == "calibration":
            _write_frame(value, folder / "calibration.parquet")
        else:
            (folder / "runs.csv").write_text(value, encoding="utf-8")
        before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        argv = ["testbed", "ttl-compare", str(folder), "--targets", "3.3,1.0", "--write"]
        code, _, stderr = run_cli(argv)
        event(f"ttl-compare ({kind}) exit {code}")
        if code != 0:
            assert_refused(argv, code, stderr)
            after = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
            assert after == before, "a refused ttl-compare changed the folder"
            return
        table = pd.read_csv(folder / "time_to_loss.csv")
        reached = table.dropna(subset=["step"])
        assert len(reached) and table["step"].isna().any()  # 3.3 is reached, 1.0 is not
        for name in ("measured_s", "predicted_s", "exchange_predicted_s"):
            assert (reached[name].map(math.isfinite) & (reached[name] > 0)).all(), name
        assert ((reached["exchange_share"] >= 0) & (reached["exchange_share"] <= 1)).all()
