"""Hostile input on the testbed's commands (issue 27): every bad flag is one line and exit 2
before anything is built, every bad table one line and exit 2 before anything is written, and
`testbed compare -o` writes its whole report (issue 22). No namespaces needed: the commands
that would build one are stopped with a failing test if they get that far."""

import io
import json
import math
import shutil
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from transitsim.cli import main
from transitsim.testbed import flags, measure, netns
from transitsim.traces.format import read_trace, write_trace

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "docs" / "testbed" / "previous" / "measured.parquet"
TTL = REPO / "docs" / "testbed" / "ttl"


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def refused(argv: list[str], words: str) -> None:
    code, _, err = cli(argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (argv, code, err)
    assert lines[0].startswith("transitsim: error: ") and words in lines[0], lines


@pytest.fixture
def nothing_built(monkeypatch):
    """A command that gets as far as checking for root or measuring fails the test."""

    def built(*args, **kwargs):
        raise AssertionError("the testbed got built before its flags were checked")

    monkeypatch.setattr(netns, "preflight", built)
    monkeypatch.setattr(measure, "measure_grid", built)


RUN = ["testbed", "run", "--rates", "50 Mb/s", "--workers", "2"]
LEGACY = ["--fit", "alpha", "--calibrate", "1 MiB"]  # the fit the committed comparison used


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--sizes", "0", "--calibrate", "0"], "float32 elements"),
        (["--sizes", "1 B,64 KiB", "--calibrate", "64 KiB"], "float32 elements"),
        (["--rates", "50 Mb/s,50 Mb/s"], "given twice"),
        (["--rates", "50 Mb/s,50000 kb/s"], "given twice"),
        (["--workers", "2,4,2"], "given twice"),
        (["--sizes", "1 MiB,1 MiB"], "given twice"),
        (["--collectives", "all-reduce,all_reduce"], "given twice"),
        (["--rates", "100 Gb/s"], "outside 1 Mb/s .. 10 Gb/s"),
        (["--rates", "50 Mb/s,fast"], "rate"),
        (["--budget", "nan"], "--budget"),
        (["--budget", "-1"], "--budget"),
        (["--call-limit", "nan"], "--call-limit"),
        (["--call-limit", "-2"], "--call-limit"),
        (["--call-limit", "inf"], "--call-limit"),
        (["--workers", "２,４"], "--workers"),
        (["--workers", "²"], "--workers"),
        (["--workers", "17"], "--workers"),
        (["--workers", ","], "at least one value"),
        (["--calibrate", "2 MiB"], "must be one of --sizes"),
        (["--call-limit", "0.0001"], "no point fits"),
        (
            ["--sizes", "64 KiB,64 MiB", "--calibrate", "64 MiB", "--call-limit", "0.05"],
            "--calibrate size has no point that fits",
        ),
        (
            [
                "--rates",
                "10 Gb/s",
                "--workers",
                "16",
                "--sizes",
                "64 MiB",
                "--calibrate",
                "64 MiB",
                "--collectives",
                "all-gather",
                "--call-limit",
                "300",
            ],
            "GiB of tensors",
        ),
        (["--min-repeats", "0"], "--min-repeats"),
        (["--max-repeats", "100000"], "--max-repeats"),
        (["--warmup", "-1"], "--warmup"),
    ],
)
def test_bad_run_flags_are_refused_before_anything_is_built(nothing_built, tmp_path, extra, words):
    refused([*RUN, *extra, "-o", tmp_path / "out"], words)
    assert not (tmp_path / "out").exists()


def test_an_output_path_that_is_a_file_is_refused_before_building(nothing_built, tmp_path):
    (tmp_path / "f").write_text("mine")
    refused([*RUN, "-o", tmp_path / "f"], "not a folder")
    assert (tmp_path / "f").read_text() == "mine"


def test_sixteen_workers_and_unicode_free_lists_are_a_valid_grid():
    grid = flags.grid(
        "50 Mb/s, 1 Gb/s", "2,16", "64 KiB,1 MiB", "all-reduce", "1 MiB", 2.0, 2.5, (5, 25), 2
    )
    assert grid.workers == [2, 16] and grid.rates_bps == [50e6, 1e9]
    assert grid.points(1e9, 16)  # the 16-rank points are planned, not refused


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--seed", str(2**32)], "--seed"),
        (["--seed", "-1"], "--seed"),
        (["--variants", "A,A"], "given twice"),
        (["--variants", "A,EP,E'"], "given twice"),
        (["--rates", "100 Gb/s"], "--rates"),
        (["--targets", "3.3,nan"], "loss target"),
        (["--hosts", "9"], "--hosts"),
    ],
)
def test_bad_ttl_flags_are_refused_before_anything_is_built(nothing_built, tmp_path, extra, words):
    refused(
        ["testbed", "ttl", "--rates", "50 Mb/s", "--variants", "A", *extra, "-o", tmp_path / "out"],
        words,
    )
    assert not (tmp_path / "out").exists()


# --- measured tables ------------------------------------------------------------------------


def _measured() -> pd.DataFrame:
    """The committed measurement at 50 Mb/s: 22 points, compared in a blink."""
    frame = pd.read_parquet(MEASURED)
    return frame[frame["rate_bps"] == 50e6].reset_index(drop=True)


def _calibration_rows(frame: pd.DataFrame) -> pd.Series:
    return frame["bytes"] == 1 << 20


def _set(name: str, value):
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        values = frame[name].astype(object)
        values.iloc[3] = value
        return frame.assign(**{name: values})

    return change


def _drop(name: str):
    return lambda frame: frame.drop(columns=[name])


HOSTILE_TABLES = {
    **{f"no {c}": _drop(c) for c in ("median_s", "qdisc_efficiency", "rtt_s", "rate_bps")},
    "no start_offsets_s": _drop("start_offsets_s"),
    "unknown collective": _set("collective", "broadcast"),
    "empty": lambda f: f.iloc[:0],
    "junk offsets": _set("start_offsets_s", "[0.0, oops"),
    "offsets not a list": _set("start_offsets_s", '{"rank": 0}'),
    "offsets for another P": _set("start_offsets_s", "[0.0]"),
    "NaN offset": _set("start_offsets_s", "[0.0, NaN]"),
    "text rates": lambda f: f.assign(rate_bps="50 Mb/s"),
    "workers 0": lambda f: f.assign(workers=0),
    "NaN medians": lambda f: f.assign(median_s=math.nan),
    "one NaN median": _set("median_s", math.nan),
    "a denormal median (its error was inf)": _set("median_s", 5e-324),
    "negative calibration medians": lambda f: f.assign(
        median_s=f["median_s"].where(~_calibration_rows(f), -0.2)
    ),
    "zero bytes": _set("bytes", 0),
    "1-byte payload": _set("bytes", 1),
    "NaN efficiency": lambda f: f.assign(qdisc_efficiency=math.nan),
    "efficiency above 1": _set("qdisc_efficiency", 1.5),
    "boolean workers": lambda f: f.assign(workers=True),
    "negative rtt": _set("rtt_s", -1e-5),
}


@pytest.mark.parametrize("case", HOSTILE_TABLES)
def test_a_hostile_measured_table_is_one_line_and_nothing_written(tmp_path, case):
    path = tmp_path / "measured.parquet"
    HOSTILE_TABLES[case](_measured()).to_parquet(path)
    refused(["testbed", "compare", path, "-o", tmp_path / "out"], str(path))
    assert not (tmp_path / "out").exists()


def test_compare_writes_its_whole_report_end_to_end(tmp_path):
    """`transitsim testbed compare docs/testbed/previous/measured.parquet -o DIR` (issue 22: it
    ended in `KeyError: 'network'` while writing report.html)."""
    out = tmp_path / "tb"
    code, stdout, err = cli(["testbed", "compare", MEASURED, *LEGACY, "-o", out])
    assert code == 0, err
    assert "all rates: 67 predicted points, median |error| 29.8%, worst 552.6%" in stdout
    flat = " ".join(stdout.split())
    assert "the run began at a 1-minute load average of 12.41" in flat
    assert "85 with no load recorded" in flat
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.csv",
        "comparison.parquet",
        "report.html",
        "summary.json",
    ]
    ours = pd.read_csv(out / "comparison.csv")
    committed = pd.read_csv(MEASURED.parent / "comparison.csv")
    assert set(committed.columns) <= set(ours.columns)
    for name in committed.columns:  # the committed columns, as committed (new ones beside)
        assert ours[name].astype(str).tolist() == committed[name].astype(str).tolist(), name
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "67 predicted points (and 18 fitted): median |error| 29.8%, worst 552.6%." in page
    for key in ("plot-all-gather", "plot-all-reduce", "plot-points"):
        assert f'id="{key}"' in page
    assert "50 Mb/s: payload share 0.9382" in page  # the per-rate parameters, in words


def test_text_that_looks_like_html_in_a_table_is_shown_not_run(tmp_path):
    path = tmp_path / "measured.parquet"
    _set("gloo_algorithm", "<script>alert(1)</script>")(_measured()).to_parquet(path)
    code, _, err = cli(["testbed", "compare", path, "-o", tmp_path / "out"])
    assert code == 0, err
    assert "<script>alert(1)" not in (tmp_path / "out" / "report.html").read_text()


# --- a `testbed ttl` folder -----------------------------------------------------------------


@pytest.fixture
def ttl_folder(tmp_path) -> Path:
    """The committed A run at 50 Mb/s, its calibration and runs.csv, in a folder of its own."""
    folder = tmp_path / "ttl"
    shutil.copytree(TTL, folder)
    runs = pd.read_csv(folder / "runs.csv")
    runs.iloc[:1].to_csv(folder / "runs.csv", index=False)
    return folder


def _retime(folder: Path, **columns) -> None:
    path = folder / pd.read_csv(folder / "runs.csv")["trace"].iloc[0]
    trace = read_trace(path)
    steps = trace.steps.copy()
    for name, (row, value) in columns.items():
        steps.loc[steps.index[row], name] = value
    write_trace(path, steps, trace.meta, trace.diagnostics)


def _runs(folder: Path, **values) -> None:
    runs = pd.read_csv(folder / "runs.csv").astype(object)
    for name, value in values.items():
        runs.loc[0, name] = value
    runs.to_csv(folder / "runs.csv", index=False)


def _calibration(folder: Path, change) -> None:
    frame = pd.read_parquet(folder / "calibration.parquet")
    change(frame).to_parquet(folder / "calibration.parquet")


HOSTILE_FOLDERS = {
    "header-only runs.csv": (
        lambda f: (f / "runs.csv").write_text("variant,rate_bps,trace\n"),
        "lists no runs",
    ),
    "NaN trace": (lambda f: _runs(f, trace=""), "column 'trace' row 0"),
    "text rate": (lambda f: _runs(f, rate_bps="50 Mb/s"), "rate_bps"),
    "trace outside": (lambda f: _runs(f, trace="../../etc/passwd"), "not a path inside"),
    "negative calibration medians": (
        lambda f: _calibration(f, lambda c: c.assign(median_s=-c["median_s"])),
        "median_s",
    ),
    "no rtt": (lambda f: _calibration(f, lambda c: c.drop(columns=["rtt_s"])), "rtt_s"),
    "comm_s > wall_s": (lambda f: _retime(f, comm_s=(4, 5.0)), "comm_s"),
    "NaN wall_s": (lambda f: _retime(f, wall_s=(2, math.nan)), "wall_s"),
    "clock going back": (lambda f: _retime(f, end_unix_s=(5, 1.0)), "end_unix_s"),
}


@pytest.mark.parametrize("case", HOSTILE_FOLDERS)
def test_a_hostile_ttl_folder_is_one_line(ttl_folder, case):
    damage, words = HOSTILE_FOLDERS[case]
    damage(ttl_folder)
    before = sorted(p.name for p in ttl_folder.iterdir())
    refused(["testbed", "ttl-compare", ttl_folder, "--write"], words)
    assert sorted(p.name for p in ttl_folder.iterdir()) == before


def test_unreached_targets_are_a_table_of_not_reached_cells(ttl_folder):
    """What `testbed ttl --steps 5` met after training (`KeyError: ['error']`): no run reaches
    the target, which is an answer, not a crash."""
    code, stdout, err = cli(["testbed", "ttl-compare", ttl_folder, "--targets", "0.5", "--write"])
    assert code == 0, err
    assert "0 of 1 cells reached" in stdout
    table = pd.read_csv(ttl_folder / "time_to_loss.csv")
    assert len(table) == 1 and table["measured_s"].isna().all() and table["error"].isna().all()


def test_a_trace_whose_exchange_outlasts_its_step_is_refused_by_the_model():
    from transitsim.testbed.ttl_compute import outside_exchange

    path = TTL / pd.read_csv(TTL / "runs.csv")["trace"].iloc[0]
    trace = read_trace(path)
    steps = trace.steps.assign(comm_s=trace.steps["wall_s"] * 10)
    with pytest.raises(Exception, match="comm_s") as info:
        outside_exchange(replace(trace, steps=steps))
    assert type(info.value).__name__ == "TransitsimError"


def test_a_table_of_calibration_points_only_has_no_errors_to_summarise(tmp_path):
    """Nothing is predicted (every point is the fitted size): "–" and null, not "nan%" and
    a summary.json no strict JSON reader takes."""
    path, out = tmp_path / "measured.parquet", tmp_path / "out"
    frame = _measured()
    frame[_calibration_rows(frame)].to_parquet(path)
    code, stdout, err = cli(["testbed", "compare", path, *LEGACY, "-o", out])
    assert code == 0, err
    assert "0 predicted points, median |error| –, worst –" in stdout and "nan" not in stdout

    def strict(constant: str):
        raise ValueError(f"{constant} in summary.json")

    figures = json.loads((out / "summary.json").read_text(), parse_constant=strict)
    assert figures["overall"]["median_abs_error"] is None
