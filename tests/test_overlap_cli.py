"""`overlap` in scenarios (one mode, or an axis) and `--overlap` on `transitsim replay`."""

from pathlib import Path

import pandas as pd
import pytest
from test_run_cli import run_cli, write_test_trace

from transitsim.base.errors import TransitsimError
from transitsim.run import run_scenario
from transitsim.scenario import load_scenario

SCENARIO = """\
name: overlap-axis
traces: [traces/tiny-adamw-s0.parquet, traces/tiny-band-1d256-s0.parquet]
networks:
  - {preset: 8x200g-switch, name: rack}
grid:
  network: {preset: 8x200g-switch, name: grid}
  sweep:
    host_link.rate: ["10 Gb/s", "100 Gb/s"]
overlap: [none, buckets]
bucket_size: 10 MB
targets: [3.5]
baseline: A
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("overlap")
    for variant in ("A", "C"):
        write_test_trace(folder / "traces", variant, 0)
    (folder / "axis.yaml").write_text(SCENARIO, encoding="utf-8")
    return folder


def test_an_overlap_axis_replays_every_network_both_ways(workdir: Path) -> None:
    scenario = load_scenario(workdir / "axis.yaml")
    result = run_scenario(scenario, workdir / "out", serial=True, quiet=True)
    timeline = result.timeline
    names = list(dict.fromkeys(timeline["network"]))
    assert names == [
        "rack",
        "rack +overlap",
        "grid[host_link.rate=10 Gb/s]",
        "grid[host_link.rate=10 Gb/s] +overlap",
        "grid[host_link.rate=100 Gb/s]",
        "grid[host_link.rate=100 Gb/s] +overlap",
    ]
    assert set(result.summary["overlap"]) == {"none", "buckets"}
    last = timeline.groupby(["run", "network"], sort=False)["time_s"].last()
    for run in ("tiny-adamw-s0", "tiny-band-1d256-s0"):
        for name in names[::2]:
            assert last[(run, f"{name} +overlap")] <= last[(run, name)]
    plain = timeline[timeline["overlap"] == "none"]
    assert (plain["hidden_s"] == 0).all()
    # A's 100 MB all-reduce on 100 Gb/s hides behind backward in 10 MB buckets
    dense = timeline[(timeline["run"] == "tiny-adamw-s0") & (timeline["overlap"] == "buckets")]
    assert (dense["hidden_s"] > 0).all()
    assert any("uniform backward" in note for note in result.notes)


def test_a_single_mode_keeps_the_network_names(workdir: Path) -> None:
    text = SCENARIO.replace("overlap: [none, buckets]", "overlap: buckets")
    (workdir / "one.yaml").write_text(text, encoding="utf-8")
    scenario = load_scenario(workdir / "one.yaml")
    result = run_scenario(scenario, workdir / "one", serial=True, quiet=True)
    assert "+overlap" not in " ".join(result.timeline["network"].unique())
    assert (result.timeline["overlap"] == "buckets").all()


def test_bad_overlap_keys_are_one_line_errors(workdir: Path) -> None:
    for bad, words in (("overlap: maybe", "overlap"), ("bucket_size: 0", "bucket_size")):
        text = SCENARIO.replace("overlap: [none, buckets]", bad)
        (workdir / "bad.yaml").write_text(text, encoding="utf-8")
        with pytest.raises(TransitsimError, match=words):
            load_scenario(workdir / "bad.yaml")


def test_replay_overlap_option(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(workdir / "traces" / "tiny-adamw-s0.parquet")
    base = ["replay", trace, "--network", "8x200g-switch", "--csv"]
    code, plain, err = run_cli(base, capsys)
    assert code == 0, err
    code, over, err = run_cli([*base, "--overlap", "buckets", "--bucket-size", "10 MB"], capsys)
    assert code == 0, err
    read = lambda text: pd.read_csv(pd.io.common.StringIO(text))  # noqa: E731
    assert read(over)["time_s"].iloc[0] < read(plain)["time_s"].iloc[0]
    assert "uniform backward" in err
    code, _, err = run_cli([*base, "--overlap", "sometimes"], capsys)
    assert code == 2 and "--overlap must be one of none, buckets" in err


def test_run_prints_the_verdict_with_and_without_overlap(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["run", str(workdir / "axis.yaml"), "-o", str(workdir / "cli")], capsys
    )
    assert code == 0, err
    assert "Overlap with backward, to val loss 3.500" in out
    assert "Baseline exchange hidden" in out
    assert "grid[host_link.rate=10 Gb/s]" in out


def test_overlap_verdicts_fold_the_axis_and_flag_a_change() -> None:
    from transitsim.analysis.overlap_verdict import overlap_verdicts

    summary = pd.DataFrame(
        {
            "config": ["a", "c", "a", "c"],
            "network": ["wan", "wan", "wan +overlap", "wan +overlap"],
            "overlap": ["none", "none", "buckets", "buckets"],
            "target": 3.0,
            "time_to_target_s": [10.0, 8.0, 6.0, 7.5],
        }
    )
    timeline = pd.DataFrame(
        {
            "config": ["a", "a", "c", "c"],
            "variant": ["A", "A", "C", "C"],
            "network": ["wan", "wan +overlap", "wan", "wan +overlap"],
            "overlap": ["none", "buckets", "none", "buckets"],
            "interval_steps": 1,
            "exchange_s": [4.0, 4.0, 1.0, 1.0],
            "exposed_s": [4.0, 1.0, 1.0, 0.5],
            "hidden_s": [0.0, 3.0, 0.0, 0.5],
        }
    )
    table = overlap_verdicts(summary, timeline, {"a"})
    row = table.iloc[0]
    assert row["network"] == "wan"
    assert (row["fastest_without"], row["fastest_with"]) == ("c", "a")
    assert row["changed"] and row["baseline_hidden_share"] == pytest.approx(0.75)
    assert overlap_verdicts(summary.drop(columns="overlap"), timeline).empty
