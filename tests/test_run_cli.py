"""`transitsim run` and `transitsim replay` end to end, on small traces written here.

The traces are short (a few rows) but carry a large model's bytes (100 MB dense), so that the
network's rate visibly changes the step time while every simulation stays cheap.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from transitsim import cli, sweep
from transitsim.analysis.metrics import INTERVAL_COLUMNS
from transitsim.run import run_scenario
from transitsim.scenario import load_scenario
from transitsim.traces.format import write_trace

N_PARAMS = 50_000_000
DENSE_BYTES = 2 * N_PARAMS
RATES = ("100 Gb/s", "400 Gb/s")
LOSSES = {"A": (4.0, 2.6), "C": (4.1, 2.9), "E": (4.1, 2.95)}


def write_test_trace(folder: Path, variant: str, seed: int, rows: int = 8) -> Path:
    """A trace of `rows` evaluated steps; A is dense all-reduce, C and E a 1/16 band."""
    first, last = LOSSES[variant]
    losses = np.linspace(first, last, rows) + 0.01 * seed
    dense = variant == "A"
    steps = pd.DataFrame(
        {
            "step": np.arange(1, rows + 1, dtype="int64"),
            "train_loss": losses,
            "val_loss": losses,
            "lr": 1e-3,
            "payload_bytes": np.full(rows, DENSE_BYTES if dense else DENSE_BYTES // 16, "int64"),
            "collective": "all_reduce" if dense else "all_gather",
            "reducible": True,
            "compute_s": 0.004 + 0.0001 * np.arange(rows),  # measured: differs step to step
            "compress_s": 0.0 if dense else 0.002,
            "update_s": 0.001,
        }
    )
    params = {"lr": 1e-3} if dense else {"band": "low", "chunk_mode": "1d", "chunk": 256}
    if variant == "E":
        params |= {"enob": 8.0, "planes": 8, "feedback": "sent"}
    name = {"A": "tiny-adamw", "C": "tiny-band-1d256", "E": "tiny-optics"}[variant]
    meta = {
        "name": f"{name}-s{seed}",
        "variant": variant,
        "seed": seed,
        "workers": 8,
        "n_params": N_PARAMS,
        "dense_bytes_per_step": DENSE_BYTES,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
        "batch": 4,
        "context": 64,
        "variant_params": {**params, "keep": 1 / 16},
    }
    return write_trace(folder / f"{name}-s{seed}.parquet", steps, meta)


SCENARIO = """\
name: tiny
traces:
  - traces/tiny-adamw-s*.parquet
  - path: traces/tiny-band-1d256-s0.parquet
    label: C [band]
networks:
  - preset: 8x200g-switch
    name: rack
grid:
  network: {preset: 8x200g-switch, name: grid}
  sweep:
    host_link.rate: ["100 Gb/s", "400 Gb/s"]
targets: [3.5, "final:A"]
baseline: A
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    for variant, seed in (("A", 0), ("A", 1), ("C", 0), ("E", 0)):
        write_test_trace(folder / "traces", variant, seed)
    (folder / "tiny.yaml").write_text(SCENARIO, encoding="utf-8")
    return folder


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The console script in this process."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def crossing(timeline: pd.DataFrame, run: str, network: str, target: float) -> tuple:
    """Independent of metrics: (the time the loss crosses target, interpolated linearly between
    the last evaluation above it and the first at or below; those two evaluations' times)."""
    rows = timeline[(timeline["run"] == run) & (timeline["network"] == network)]
    evaluated = rows[rows["val_loss"].notna()].sort_values("step")
    losses, times = evaluated["val_loss"].to_numpy(), evaluated["time_s"].to_numpy()
    first = int(np.argmax(losses <= target))
    if first == 0:
        return float(times[0]), float(times[0]), float(times[0])
    share = (losses[first - 1] - target) / (losses[first - 1] - losses[first])
    x = times[first - 1] + share * (times[first] - times[first - 1])
    return float(x), float(times[first - 1]), float(times[first])


def first_time_to(timeline: pd.DataFrame, run: str, network: str, target: float) -> float:
    return crossing(timeline, run, network, target)[0]


def test_run_writes_consistent_outputs(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = workdir / "out"
    events = workdir / "step.json"
    argv = ["run", str(workdir / "tiny.yaml"), "-o", str(out), "--serial"]
    code, stdout, stderr = run_cli([*argv, "--trace-events", str(events)], capsys)
    assert code == 0, stderr

    files = sorted(p.name for p in out.iterdir())
    assert files == ["ladder.csv", "notes.txt", "report.html", "summary.csv", "timeline.parquet"]

    networks = ["rack", 'grid[host_link.rate="100 Gb/s"]', 'grid[host_link.rate="400 Gb/s"]']
    networks = [n.replace('"', "") for n in networks]
    timeline = pd.read_parquet(out / "timeline.parquet")
    assert list(dict.fromkeys(timeline["network"])) == networks
    assert len(timeline) == 3 * 8 * len(networks)  # three traces of eight rows on each network
    rates = timeline.groupby("network", sort=False)["host_link.rate"].first()
    assert rates.iloc[0] != rates.iloc[0] and list(rates.iloc[1:]) == [100e9, 400e9]
    assert (timeline.groupby(["run", "network"])["time_s"].diff().dropna() > 0).all()

    summary = pd.read_csv(out / "summary.csv")
    columns = list(summary.columns)
    after = columns.index("time_to_target_s") + 1
    assert columns[after : after + len(INTERVAL_COLUMNS)] == list(INTERVAL_COLUMNS)
    a_row = summary[(summary["config"] == "tiny-adamw") & (summary["target"] == 3.5)].iloc[0]
    assert a_row["interval"] == "range"  # two seeds
    assert a_row["time_to_target_s_lo"] <= a_row["time_to_target_s"] <= a_row["time_to_target_s_hi"]
    configs = ["tiny-adamw", "tiny-band-1d256"]
    assert len(summary) == len(configs) * len(networks) * 2  # configs x networks x targets
    assert not summary.duplicated(["config", "network", "target"]).any()
    assert set(summary["label"]) == {"A AdamW", "C [band]"}
    assert set(summary["bottleneck"].str.split().str[0]) <= {"compute", "transform", "wire"}

    final_a = float(np.mean([2.6, 2.61]))  # "final:A": the mean final loss of A's seeds
    assert sorted(summary["target"].unique()) == pytest.approx([final_a, 3.5])
    for network in networks:
        row = summary[
            (summary["config"] == "tiny-band-1d256")
            & (summary["network"] == network)
            & (summary["target"] == 3.5)
        ].iloc[0]
        c_s = first_time_to(timeline, "tiny-band-1d256-s0", network, 3.5)
        a_s = np.mean([first_time_to(timeline, f"tiny-adamw-s{s}", network, 3.5) for s in (0, 1)])
        assert row["time_to_target_s"] == pytest.approx(c_s)
        assert row["speedup_vs_baseline"] == pytest.approx(a_s / c_s)
        assert row["reached"] == "1/1"
    a_rows = summary[summary["config"] == "tiny-adamw"]
    assert (a_rows["speedup_vs_baseline"].dropna() == 1.0).all()
    slow, fast = (
        summary[(summary["network"] == n) & (summary["target"] == 3.5)] for n in networks[1:]
    )
    assert (slow["time_to_target_s"].to_numpy() > fast["time_to_target_s"].to_numpy()).all()

    html = (out / "report.html").read_text(encoding="utf-8")
    assert "plotly" in html and html.rstrip().endswith("</html>")
    assert "C [band]" in stdout and networks[1] in stdout  # brackets survive the rich table
    assert f"wrote {out / 'timeline.parquet'}" in stdout

    document = json.loads(events.read_text(encoding="utf-8"))
    spans = [e for e in document["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in spans}
    assert {"compute", "exchange", "busy"} <= names
    assert all(e["dur"] >= 0 and math.isfinite(e["ts"]) for e in spans)


@pytest.mark.slow
def test_dask_gives_the_serial_results(workdir: Path) -> None:
    """Two worker processes of a LocalCluster, batches finishing in any order: the same
    numbers."""
    scenario = load_scenario(workdir / "tiny.yaml")
    serial = run_scenario(scenario, workdir / "serial", serial=True, quiet=True)
    # the first job here, then (the rest "too slow" for this process) the rest on the cluster
    parallel = run_scenario(scenario, workdir / "dask", cluster_after_s=1e-9, quiet=True)
    pd.testing.assert_frame_equal(serial.timeline, parallel.timeline, check_exact=True)
    pd.testing.assert_frame_equal(serial.summary, parallel.summary, check_exact=True)
    assert (workdir / "serial" / "summary.csv").read_bytes() == (
        workdir / "dask" / "summary.csv"
    ).read_bytes()


def test_a_short_grid_never_starts_dask(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default executor: jobs that take seconds in this process are run here (a local
    cluster takes ~5 s to start on two cores, twice what the grid needs)."""

    def no_dask(*args, **kwargs):
        raise AssertionError("Dask was started for a grid of a few seconds")

    monkeypatch.setattr(sweep, "_run_on_dask", no_dask)
    scenario = load_scenario(workdir / "tiny.yaml")
    result = run_scenario(scenario, workdir / "default", quiet=True)
    assert not result.failures and len(result.summary) > 1


def test_failed_job_is_reported_and_the_others_kept(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E's band cannot be made at a switch that does not sum (an all-gather passes it by)."""
    text = """\
traces: [traces/tiny-adamw-s0.parquet, traces/tiny-optics-s0.parquet]
networks:
  - {preset: 8x200g-switch, name: plain}
  - preset: 8x200g-switch
    name: odd switch
    switch: {transform: {size: 256, planes: 8, rate: "1 GHz"}}
    placement: {transform: switch}
targets: [3.5]
baseline: A
"""
    (workdir / "odd.yaml").write_text(text, encoding="utf-8")
    out = workdir / "odd-out"
    argv = ["run", str(workdir / "odd.yaml"), "-o", str(out), "--serial"]
    code, stdout, stderr = run_cli(argv, capsys)
    assert code == 1
    failures = [line for line in stderr.splitlines() if "job failed" in line]
    assert len(failures) == 1
    assert failures[0].startswith("transitsim: job failed: tiny-optics-s0 on odd switch: ")
    assert "switch_sum" in failures[0] and "Traceback" not in stderr
    summary = pd.read_csv(out / "summary.csv")
    pairs = set(zip(summary["config"], summary["network"], strict=True))
    assert pairs == {
        ("tiny-adamw", "plain"),
        ("tiny-optics", "plain"),
        ("tiny-adamw", "odd switch"),
    }


def test_every_job_failing_is_exit_1_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = """\
traces: [traces/tiny-optics-s0.parquet]
networks:
  - preset: 8x200g-switch
    switch: {transform: {size: 256, planes: 8, rate: "1 GHz"}}
    placement: {transform: switch}
targets: [3.5]
"""
    (workdir / "all-odd.yaml").write_text(text, encoding="utf-8")
    out = workdir / "all-odd-out"
    code, stdout, stderr = run_cli(["run", str(workdir / "all-odd.yaml"), "-o", str(out)], capsys)
    assert code == 1 and stdout == ""
    assert stderr.splitlines()[0].startswith("transitsim: job failed: tiny-optics-s0 on ")
    assert stderr.splitlines()[-1] == "transitsim: every job failed; nothing written"
    assert not out.exists()


def test_replay_with_a_preset_and_set(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = [
        str(workdir / "traces" / f"{name}.parquet")
        for name in ("tiny-adamw-s0", "tiny-band-1d256-s0")
    ]
    times = {}
    for rate in RATES:
        argv = ["replay", *traces, "--network", "8x200g-switch", "--set", f"host_link.rate={rate}"]
        code, stdout, stderr = run_cli(
            [*argv, "--targets", "3.5", "--baseline", "A", "--json"], capsys
        )
        assert code == 0, stderr
        rows = json.loads(stdout)
        assert [row["config"] for row in rows] == ["tiny-adamw", "tiny-band-1d256"]
        assert {row["network"] for row in rows} == {f"8x200g-switch[host_link.rate={rate}]"}
        times[rate] = [row["time_to_target_s"] for row in rows]
        assert rows[0]["speedup_vs_baseline"] == 1.0
    assert all(slow > fast for slow, fast in zip(times[RATES[0]], times[RATES[1]], strict=True))

    network = workdir / "net.yaml"
    network.write_text('preset: 8x200g-switch\nhost_link: {rate: "100 Gb/s"}\n', encoding="utf-8")
    out = workdir / "replay-out"
    code, stdout, stderr = run_cli(
        ["replay", *traces, "--network", str(network), "--targets", "3.5", "--csv", "-o", str(out)],
        capsys,
    )
    assert code == 0, stderr
    from_file = pd.read_csv(pd.io.common.StringIO(stdout))
    assert list(from_file["time_to_target_s"]) == pytest.approx(times[RATES[0]], rel=0, abs=0)
    assert sorted(p.name for p in out.iterdir()) == [
        "notes.txt",
        "report.html",
        "summary.csv",
        "timeline.parquet",
    ]

    code, stdout, stderr = run_cli(["replay", *traces, "--network", "8x200g-switch"], capsys)
    assert code == 0 and "AdamW" in stdout and "Final val loss" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "{bad}"], "host_link.rate"),
        (["run", "{missing}"], "no such scenario file"),
        (["replay", "{trace}", "--network", "no-such-net"], "neither a preset"),
        (
            ["replay", "{trace}", "--network", "8x200g-switch", "--set", "host_link.rate=fast"],
            "rate",
        ),
        (["replay", "{trace}", "--network", "8x200g-switch", "--set", "nonsense"], "KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    bad = workdir / "bad.yaml"
    bad.write_text(
        "traces: [traces/]\nnetworks:\n  - {preset: 8x200g-switch, host_link: {rate: fast}}\n"
        "targets: [3.5]\n",
        encoding="utf-8",
    )
    trace = workdir / "traces" / "tiny-adamw-s0.parquet"
    argv = [a.format(bad=bad, missing=workdir / "nope.yaml", trace=trace) for a in argv]
    code, stdout, stderr = run_cli(argv, capsys)
    assert code == 2
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("transitsim: error: ") and message in stderr


def test_bad_scenario_process_prints_no_traceback(workdir: Path) -> None:
    (workdir / "typo.yaml").write_text(
        "traces: [traces/]\nnetwork: [8x200g-switch]\ntargets: [3]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "transitsim.cli", "run", str(workdir / "typo.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "unknown key" in done.stderr
    assert "Traceback" not in done.stderr


def test_what_if_scale_is_replayed_and_said_everywhere(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scale: {params: ...} replays every trace as a bigger model: bytes and compute grow with it,
    losses do not, every row is marked, and the printed run and the report say so."""
    base = SCENARIO.replace("name: tiny\n", "name: tiny-scaled\n")
    (workdir / "scaled.yaml").write_text(base + "scale: {params: 2e8}\n", encoding="utf-8")
    (workdir / "unscaled.yaml").write_text(base, encoding="utf-8")
    out, plain_out = workdir / "scaled-out", workdir / "unscaled-out"
    code, stdout, stderr = run_cli(
        ["run", str(workdir / "scaled.yaml"), "-o", str(out), "--serial"], capsys
    )
    assert code == 0, stderr
    said = "extrapolated to 200,000,000 parameters"
    assert said in stdout + stderr
    assert said in (out / "report.html").read_text(encoding="utf-8")
    code, _, stderr = run_cli(
        ["run", str(workdir / "unscaled.yaml"), "-o", str(plain_out), "--serial", "-q"], capsys
    )
    assert code == 0, stderr
    assert "extrapolated to" not in (plain_out / "report.html").read_text(encoding="utf-8")

    scaled = pd.read_parquet(out / "timeline.parquet")
    plain = pd.read_parquet(plain_out / "timeline.parquet")
    assert scaled["extrapolated"].all() and not plain["extrapolated"].any()
    ratio = 2e8 / N_PARAMS
    assert (scaled["payload_bytes"] == ratio * plain["payload_bytes"]).all()
    np.testing.assert_allclose(scaled["compute_s"], ratio * plain["compute_s"], rtol=1e-12)
    assert scaled["val_loss"].tolist() == plain["val_loss"].tolist()
    assert (scaled["time_s"] > plain["time_s"]).all()
    summary = pd.read_csv(out / "summary.csv")
    assert summary["extrapolated"].all()


def test_rich_tables_print_brackets_as_written() -> None:
    """Cells, headers and titles are text, not rich markup: "[...]" is kept, never eaten."""
    import io

    from transitsim.base.tables import emit_table

    table = pd.DataFrame(
        {"network": ["rack[host_link.rate=100 Gb/s]", "[bold]x[/bold]"], "time_s": [1.5, 2.0]}
    )
    out = io.StringIO()
    emit_table(table, "table", title="runs [on a rack]", headers={"network": "Net [name]"}, out=out)
    text = out.getvalue()
    for written in ("rack[host_link.rate=100 Gb/s]", "[bold]x[/bold]", "runs [on a rack]"):
        assert written in text
    assert "Net [name]" in text and "\\[" not in text


def test_an_unfinished_trace_is_said_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A run still in progress (or killed) counts as a seed that never reaches a target, which
    changes the answer: the run says so in its first note, naming the trace."""
    write_test_trace(tmp_path / "traces", "A", 0)
    path = write_test_trace(tmp_path / "traces", "A", 1)
    from transitsim.traces.format import read_trace

    whole = read_trace(path)  # its first 3 of 8 steps, as a run stopped there leaves it
    meta = {**whole.meta, "status": "incomplete", "steps_planned": 8}
    write_trace(path, whole.steps.iloc[:3], meta)
    (tmp_path / "s.yaml").write_text(
        "name: partial\ntraces: [traces/tiny-adamw-s*.parquet]\n"
        "networks: [{preset: 8x200g-switch}]\ntargets: [2.7]\n",
        encoding="utf-8",
    )
    code, stdout, stderr = run_cli(
        ["run", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "out"), "--serial"], capsys
    )
    assert code == 0, stderr
    notes = [line for line in (stdout + stderr).splitlines() if line.startswith("note: ")]
    assert notes[0].startswith("note: tiny-adamw-s1 is incomplete (3 of 8 steps, not diverged)")
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["reached"].tolist() == ["1/2"]  # what the note warns of


NOTED = """\
name: noted
traces: [traces/tiny-adamw-s*.parquet, traces/tiny-band-1d256-s0.parquet]
networks:
  - {preset: 8x200g-switch, name: wide, workers: 16}
targets: [3.5]
overlap: [none, buckets]
"""


def test_every_note_is_in_notes_txt_and_notes_prints_them(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two notes on stderr, then where the rest are; notes.txt holds every one, a line each;
    --notes prints them all. The run replays 8-worker traces on 16 workers: the title and the
    verdict say so, as they say a what-if model size."""
    from transitsim.terminal import results

    monkeypatch.setattr(results, "MAX_NOTES", 2)
    (workdir / "noted.yaml").write_text(NOTED, encoding="utf-8")
    out = workdir / "noted-out"
    argv = ["run", str(workdir / "noted.yaml"), "-o", str(out), "--serial"]
    code, stdout, stderr = run_cli(argv, capsys)
    assert code == 0, stderr
    header, *notes = (out / "notes.txt").read_text(encoding="utf-8").splitlines()
    assert header == "# transitsim notes: transitsim: noted (extrapolated to 16 workers)"
    assert len(notes) >= 4 and any("replayed on 16" in n for n in notes)
    shown = [line for line in stderr.splitlines() if line.startswith("note: ")]
    assert shown[:2] == [f"note: {n}" for n in notes[:2]]
    assert shown[2] == (
        f"note: ... and {len(notes) - 2} more notes (in {out / 'notes.txt'}; "
        "--notes prints them all)"
    )
    code, _, stderr = run_cli([*argv, "--notes"], capsys)
    assert code == 0
    assert [line for line in stderr.splitlines() if line.startswith("note: ")] == [
        f"note: {n}" for n in notes
    ]
    assert stdout.splitlines()[0] == "transitsim: noted (extrapolated to 16 workers)"
    assert "Verdict: To loss 3.5 (extrapolated to 16 workers), " in stdout


def test_the_verdict_is_printed_first_with_its_table_and_again_last(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workdir / "out-again"
    code, stdout, stderr = run_cli(["run", str(workdir / "tiny.yaml"), "-o", str(out)], capsys)
    assert code == 0, stderr
    lines = stdout.splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith("Verdict: ")]
    again = [i for i, line in enumerate(lines) if line.startswith("Verdict (as above): ")]
    assert first == [1, 2] and len(again) == 2  # one sentence per target, under the title
    assert [lines[i].split(": ", 1)[1] for i in first] == [
        lines[i].split(": ", 1)[1] for i in again
    ]
    tables = [i for i, line in enumerate(lines) if line.startswith("Val loss ")]
    point_by_point = [i for i, line in enumerate(lines) if "point by point" in line]
    assert first[-1] < point_by_point[0] < tables[0] < tables[-1] < again[0]
    assert lines[-1].startswith("wrote ") and "notes.txt" in lines[-1]
    assert "Seed interval" in stdout and "less than 1 % apart" in stdout


def test_simulate_gives_the_same_interval_columns(workdir: Path) -> None:
    """The notebook API's summary is the CSV's: the spread over A's two seeds, as a range."""
    import transitsim

    traces = sorted((workdir / "traces").glob("tiny-adamw-s*.parquet"))
    result = transitsim.simulate(traces, "8x200g-switch", targets=[3.5])
    columns = list(result.summary.columns)
    after = columns.index("time_to_target_s") + 1
    assert columns[after : after + len(INTERVAL_COLUMNS)] == list(INTERVAL_COLUMNS)
    (row,) = result.summary.itertuples()
    found = [crossing(result.timeline, f"tiny-adamw-s{s}", "8x200g-switch", 3.5) for s in (0, 1)]
    seeds, before, after = (np.array(column) for column in zip(*found, strict=True))
    # the seeds' range, widened to the mean of their evaluation brackets (issue 43)
    assert (row.interval, row.time_to_target_s_lo, row.time_to_target_s_hi) == (
        "range",
        pytest.approx(min(seeds.min(), before.mean())),
        pytest.approx(max(seeds.max(), after.mean())),
    )
