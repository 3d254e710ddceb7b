"""Background traffic from scenario YAML: a swept share and a CSV series, end to end, and bad
input refused in one line with exit 2."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_run_cli import run_cli, write_test_trace

from transitsim.network.background import Background
from transitsim.scenario import load_scenario, scenario_to_networks

SCENARIO = """\
name: bg
traces: [traces/tiny-adamw-s0.parquet]
networks:
  - preset: 2dc-wan
    name: csv
    wan_link: {rate: "10 Gb/s", background: {csv: wan.csv}}
  - preset: 2dc-wan
    name: greedy
    wan_link: {rate: "10 Gb/s", background: {greedy_flows: 1}}
grid:
  network: {preset: 2dc-wan, name: grid, wan_link: {rate: "10 Gb/s"}}
  sweep:
    wan_link.background: [0, 0.5]
targets: [3.5]
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("background")
    write_test_trace(folder / "traces", "A", 0)
    (folder / "wan.csv").write_text("time_s,available_rate\n0,10 Gb/s\n0.5,5 Gb/s\n")
    (folder / "bg.yaml").write_text(SCENARIO, encoding="utf-8")
    return folder


def test_swept_share_and_csv_series_reach_the_network(workdir: Path) -> None:
    networks = {
        name: spec for name, spec, _ in scenario_to_networks(load_scenario(workdir / "bg.yaml"))
    }
    assert networks["csv"].wan_link.background == Background((0.0, 0.5), (0.0, 0.5))
    assert networks["greedy"].wan_link.background == Background((0.0,), (0.0,), 1)
    assert networks["grid[wan_link.background=0]"].wan_link.background is None
    half = networks["grid[wan_link.background=0.5]"].wan_link.background
    assert half == Background.constant(0.5)


def test_run_with_background_is_slower_where_it_should_be(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workdir / "out"
    code, _, stderr = run_cli(["run", str(workdir / "bg.yaml"), "-o", str(out), "-q"], capsys)
    assert code == 0, stderr
    timeline = pd.read_parquet(out / "timeline.parquet")
    end = timeline.groupby("network")["time_s"].max()
    free, half = end["grid[wan_link.background=0]"], end["grid[wan_link.background=0.5]"]
    assert free < end["csv"] < half  # the series halves the WAN from 0.5 s on
    # one greedy flow beside the 8 cross-WAN flows of the hierarchical all-reduce takes 1/9
    assert free < end["greedy"] < half
    steps = timeline[timeline["network"] == "csv"]["step_s"].to_numpy()
    free_steps = timeline[timeline["network"] == "grid[wan_link.background=0]"]["step_s"]
    assert steps[0] == pytest.approx(free_steps.iloc[0], rel=1e-12)  # before the change


@pytest.mark.parametrize(
    ("link", "csv", "message"),
    [
        ("{background: 1.0}", None, "background share must be < 1"),
        ("{background: -0.1}", None, "background share must be >= 0"),
        ("{background: yes}", None, "background"),
        ("{background: {csv: b.csv, share: 0.5}}", "time_s,background_share\n0,0\n", "not both"),
        ("{background: {greedy_flows: -1}}", None, "greedy_flows"),
        ("{background: {share: 1.5}}", None, "background share must be < 1"),
        ("{background: {csv: nope.csv}}", None, "background CSV not found"),
        ("{background: {csv: b.csv}}", "time_s,share\n0,0.1\n", "header must have time_s"),
        ("{background: {csv: b.csv}}", "time_s,background_share\n0,2\n", "must be < 1"),
        ("{background: {csv: b.csv}}", "time_s,background_share\n1,0.1\n0,0.2\n", "must increase"),
        ("{background: {csv: b.csv}}", "time_s,available_rate\n0,20 Gb/s\n", "more than the link"),
    ],
)
def test_bad_background_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], link: str, csv: str | None, message: str
) -> None:
    if csv is not None:
        (workdir / "b.csv").write_text(csv)
    rate = '{rate: "10 Gb/s", ' + link[1:]
    bad = workdir / "bad-bg.yaml"
    bad.write_text(
        "traces: [traces/]\nnetworks:\n"
        f"  - {{preset: 2dc-wan, wan_link: {rate}}}\ntargets: [3.5]\n",
        encoding="utf-8",
    )
    code, _, stderr = run_cli(["validate", str(bad)], capsys)
    assert code == 2
    assert len(stderr.splitlines()) == 1, stderr
    assert message in stderr and "bad-bg.yaml:3" in stderr


def test_bad_csv_prints_no_traceback(workdir: Path) -> None:
    (workdir / "neg.csv").write_text("time_s,background_share\n0,-0.2\n")
    (workdir / "neg.yaml").write_text(
        "traces: [traces/]\nnetworks:\n  - {preset: 2dc-wan, wan_link: "
        '{rate: "10 Gb/s", background: {csv: neg.csv}}}\ntargets: [3.5]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "transitsim.cli", "run", str(workdir / "neg.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "neg.csv:2" in done.stderr
    assert "Traceback" not in done.stderr
