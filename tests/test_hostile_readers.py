"""Hostile input to the readers (issue 27): background CSVs, experiment logs, backward profiles and
--set values. Every case is one line on stderr and exit 2 quickly (or, where the input is valid,
a correct result), with nothing written.

A FIFO blocks its reader at open() until some writer comes: each FIFO here gets a writer after
UNBLOCK_S, so a reader that blocks fails the test (too slow, wrong message) instead of hanging
the suite.
"""

import json
import os
import threading
import time
from pathlib import Path

import logfactory as lf
import pandas as pd
import pyarrow.parquet as pq
import pytest
from test_hostile_inputs import one_line_exit_2
from test_run_cli import run_cli, write_test_trace

UNBLOCK_S = 8.0
NETWORK = '[{{preset: 2dc-wan, wan_link: {{rate: "10 Gb/s", background: {{csv: "{csv}"}}}}}}]'


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-readers")
    write_test_trace(folder / "traces", "A", 0)
    write_test_trace(folder / "traces", "C", 0)
    (folder / "good.csv").write_text("time_s,background_share\n0,0.1\n0.01,0.5\n")
    return folder


def fifo(path: Path) -> Path:
    """A FIFO that gets (and at once loses) a writer after UNBLOCK_S: no reader waits for ever."""
    os.mkfifo(path)

    def unblock() -> None:
        time.sleep(UNBLOCK_S)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader is blocked on it: nothing to release

    threading.Thread(target=unblock, daemon=True).start()
    return path


def scenario(work: Path, name: str, csv: str) -> str:
    path = work / name
    text = f"traces: [traces/tiny-adamw-s0.parquet]\nnetworks: {NETWORK.format(csv=csv)}\n"
    path.write_text(text + "targets: [3.5]\n", encoding="utf-8")
    return str(path)


# --- background CSV --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_background_csv_that_is_no_file_is_refused_at_once(
    work: Path, tmp_path: Path, capsys, kind: str
) -> None:
    """A FIFO or /dev/zero as the CSV hung validate, run and replay --set."""
    csv = str(fifo(tmp_path / "bg.csv")) if kind == "fifo" else "/dev/zero"
    path = scenario(tmp_path, f"{kind}.yaml", csv)
    (tmp_path / "traces").symlink_to(work / "traces")
    seconds = UNBLOCK_S / 2
    one_line_exit_2(["validate", path], capsys, "not a regular file", seconds=seconds)
    out = tmp_path / "out"
    run = ["run", path, "--serial", "-q", "-o", str(out)]
    one_line_exit_2(run, capsys, "not a regular file", seconds=seconds)
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    replay = ["replay", trace, "--network", "2dc-wan", "--targets", "3.5"]
    setting = f"wan_link.background={{csv: {csv}}}"
    one_line_exit_2([*replay, "--set", setting], capsys, "not a regular file", seconds=seconds)
    assert not out.exists()


def test_a_nul_in_the_csv_name_is_one_line(work: Path, capsys) -> None:
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    argv = ["replay", trace, "--network", "2dc-wan", "--targets", "3.5"]
    one_line_exit_2([*argv, "--set", 'wan_link.background={csv: "a\\0b"}'], capsys, "NUL")


def test_a_sweep_over_background_mappings_runs_to_its_summary(work: Path, capsys) -> None:
    """It passed validate, then the summary failed to write (ArrowInvalid: numbers beside
    {"csv": ...} text in one column) after the whole run."""
    path = work / "sweep.yaml"
    path.write_text(
        "traces: [traces/tiny-adamw-s0.parquet]\nnetworks: []\ngrid:\n"
        '  network: {preset: 2dc-wan, wan_link: {rate: "10 Gb/s"}}\n'
        "  sweep:\n    wan_link.background: [0.1, {csv: good.csv}, {share: 0.3}]\n"
        "targets: [3.5]\n",
        encoding="utf-8",
    )
    code, _, stderr = run_cli(["validate", str(path)], capsys)
    assert code == 0, stderr
    out = work / "sweep-out"
    code, _, stderr = run_cli(["run", str(path), "--serial", "-q", "-o", str(out)], capsys)
    assert code == 0, stderr
    summary = pd.read_csv(out / "summary.csv").set_index("wan_link.background")
    assert sorted(summary.index) == sorted(['{"csv": "good.csv"}', '{"share": 0.3}', "0.1"])
    time_s = summary["time_to_target_s"]
    # 10 % held throughout < 30 % held < 10 % then 50 % from 10 ms on
    assert time_s["0.1"] < time_s['{"share": 0.3}'] < time_s['{"csv": "good.csv"}']
    timeline = pd.read_parquet(out / "timeline.parquet")
    assert set(timeline["wan_link.background"]) == set(summary.index)


# --- --set values ----------------------------------------------------------------------------


def test_a_set_value_with_a_python_tag_is_one_line(work: Path, capsys, tmp_path: Path) -> None:
    """yaml's ConstructorError was a traceback (nothing ran, but it was one line before)."""
    marker = tmp_path / "ran"
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    argv = ["replay", trace, "--network", "8x200g-switch", "--targets", "3.5"]
    value = f'workers=!!python/object/apply:os.system ["touch {marker}"]'
    one_line_exit_2([*argv, "--set", value], capsys, "--set workers", "constructor")
    deep = "description=" + "[" * 5000 + "]" * 5000
    one_line_exit_2([*argv, "--set", deep], capsys, "nested too deeply")
    assert not marker.exists()


# --- experiment logs -------------------------------------------------------------------------


def _log_lines(change=None) -> list[str]:
    records = lf.records([4.0, 3.5, 3.2], variant="band")
    if change:
        change(records)
    return [json.dumps(r) for r in records]


def _huge_int(lines: list[str]) -> list[str]:
    lines[2] = lines[2].replace('"seconds": ', '"seconds": ' + "9" * 5000 + ', "x": ', 1)
    return lines


def _deep(lines: list[str]) -> list[str]:
    return [lines[0], '{"type": "diag", "energy": ' + "[" * 1000 + "]" * 1000 + "}", *lines[1:]]


BAD_LOGS = [
    ("5,000-digit integer", _huge_int, ":3: a number with more than 4,300 digits"),
    ("nested 1,000 deep", _deep, ":2: JSON nested too deeply"),
    (
        "lone surrogate in the name",
        lambda lines: [lines[0].replace("-s0", "\\udc80-s0", 1), *lines[1:]],
        ":1: text with a lone surrogate",
    ),
]


@pytest.mark.parametrize(("case", "edit", "message"), BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_logs_json_cannot_build_are_one_line(tmp_path: Path, capsys, case, edit, message) -> None:
    """ValueError (int_max_str_digits), RecursionError and UnicodeEncodeError tracebacks."""
    log = tmp_path / "bad.jsonl"
    log.write_text("\n".join(edit(_log_lines())) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    one_line_exit_2(["traces", "import", str(log), "-o", str(out)], capsys, message)
    assert not out.exists()


def test_a_valid_surrogate_pair_still_imports(tmp_path: Path, capsys) -> None:
    """The lone-surrogate check must not refuse an escaped emoji (a valid pair)."""
    log = tmp_path / "ok.jsonl"
    lines = _log_lines(lambda r: r[0]["config"].update(note="\U0001f600"))
    assert "\\ud83d\\ude00" in lines[0]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, stderr = run_cli(["traces", "import", str(log), "-o", str(tmp_path / "out")], capsys)
    assert code == 0, stderr


def test_a_log_fifo_or_a_name_that_is_not_utf8_is_one_line(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    pipe = fifo(tmp_path / "log.jsonl")
    argv = ["traces", "import", str(pipe), "-o", str(out)]
    one_line_exit_2(argv, capsys, "not a regular file", seconds=UNBLOCK_S / 2)
    odd = Path(os.fsdecode(bytes(tmp_path / "odd") + b"\xff.jsonl"))
    odd.write_text("\n".join(_log_lines()) + "\n", encoding="utf-8")
    one_line_exit_2(["traces", "import", str(odd), "-o", str(out)], capsys, "not UTF-8")
    assert not out.exists()


# --- backward profiles -----------------------------------------------------------------------


def with_profile(source: Path, target: Path, tensors: int, **changes) -> Path:
    """A copy of a trace carrying a backward profile of `tensors` tensors, keys changed."""
    table = pq.read_table(source)
    metadata = dict(table.schema.metadata)
    meta = json.loads(metadata[b"transitsim.trace"])
    items = [
        {"name": f"t{i}", "numel": 1000, "ready": changes.get("ready", (tensors - i) / tensors)}
        for i in range(tensors)
    ]
    meta["backward_profile"] = {
        "backward_share": changes.get("share", 0.6),
        "tensors": items,
    }
    metadata[b"transitsim.trace"] = json.dumps(meta)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(metadata), target)
    return target


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ready": True}, "ready must be a number, got True"),
        ({"ready": "0.5"}, "ready must be a number, got '0.5'"),
        ({"share": "0.5"}, "backward_share must be a number"),
        ({"share": True}, "backward_share must be a number"),
    ],
)
def test_profile_fractions_must_be_numbers(
    work: Path, tmp_path: Path, capsys, changes, message
) -> None:
    """Booleans and strings were taken by float() and used (True as "ready at the end")."""
    source = work / "traces" / "tiny-band-1d256-s0.parquet"
    bad = with_profile(source, tmp_path / "x.parquet", 4, **changes)
    one_line_exit_2(["traces", "show", str(bad)], capsys, message)
    replay = ["replay", str(bad), "--network", "8x200g-switch", "--targets", "3.5"]
    one_line_exit_2([*replay, "--overlap", "buckets"], capsys, message)


def test_a_profile_of_too_many_tensors_is_refused_quickly(
    work: Path, tmp_path: Path, capsys
) -> None:
    """10^5 tensors timed out (each is a unit of DeMo's overlapped exchange)."""
    source = work / "traces" / "tiny-band-1d256-s0.parquet"
    bad = with_profile(source, tmp_path / "many.parquet", 100_000)
    argv = ["replay", str(bad), "--network", "8x200g-switch", "--targets", "3.5"]
    one_line_exit_2([*argv, "--overlap", "buckets"], capsys, "100,000 tensors", seconds=20)
    ok = with_profile(source, tmp_path / "ok.parquet", 64)
    code, _, stderr = run_cli([*argv[:1], str(ok), *argv[2:], "--overlap", "buckets"], capsys)
    assert code == 0, stderr
