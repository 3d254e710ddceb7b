"""Traps a new user hit, each pinned by a test that failed before it was fixed: validate plans
every job; a reducible band can be ring all-reduced; thousands separators in scenario files."""

from pathlib import Path

import pandas as pd
import pytest
from test_replay import SWITCH, make_trace
from test_run_cli import run_cli, write_test_trace

from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.run import run_scenario
from transitsim.scenario import load_scenario

# A summing scenario on two datacentres: no single switch every host reaches, so every job
# fails at run time ("switch_sum needs one switch every host reaches") though the file is valid.
UNREACHABLE_SUM = """\
traces: [traces/tiny-adamw-s*.parquet, traces/tiny-band-1d256-s0.parquet]
grid:
  network:
    preset: 2dc-wan
    switch: {aggregator: true}
    collective: switch_sum
  sweep:
    wan_link.rate: ["10 Gb/s", "100 Gb/s", "400 Gb/s"]
    wan_link.length: ["10 km", "2,000 km", "5,000 km"]
targets: [3.5]
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    for variant, seed in (("A", 0), ("A", 1), ("C", 0)):
        write_test_trace(tmp_path / "traces", variant, seed)
    return tmp_path


def test_validate_plans_every_job_and_reports_each_reason_once(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = folder / "sum-across-wan.yaml"
    scenario.write_text(UNREACHABLE_SUM, encoding="utf-8")
    code, stdout, stderr = run_cli(["validate", str(scenario)], capsys)
    assert code == 2 and stdout == ""
    (line,) = stderr.splitlines()
    assert "27 of 27 jobs would fail" in line and "switch_sum needs one switch" in line
    assert line.count("switch_sum needs one switch") == 1 and "Traceback" not in stderr


def test_validate_still_passes_a_scenario_whose_jobs_all_plan(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = folder / "ok.yaml"
    # without the forced collective the sums go to the receivers, which every network can do
    text = UNREACHABLE_SUM.replace("    collective: switch_sum\n", "").replace(
        "switch: {aggregator: true}", "switch: {aggregator: false}"
    )
    scenario.write_text(text, encoding="utf-8")
    code, stdout, _ = run_cli(["validate", str(scenario)], capsys)
    # (not `"27" not in stdout`: the temporary folder's name may hold it, as pytest-227 did)
    assert code == 0 and "would fail" not in stdout and stdout.startswith("ok ")


def test_thousands_separators_in_a_scenario(folder: Path) -> None:
    scenario = folder / "ok.yaml"
    scenario.write_text(
        UNREACHABLE_SUM.replace("    collective: switch_sum\n", ""), encoding="utf-8"
    )
    lengths = {params["wan_link.length"] for params in _grid(load_scenario(scenario))}
    assert lengths == {1e4, 2e6, 5e6}


def _grid(scenario) -> list[dict]:
    from transitsim.scenario import scenario_to_networks

    return [params for _, _, params in scenario_to_networks(scenario)]


def test_a_band_can_be_ring_all_reduced_for_a_fair_comparison(tmp_path: Path) -> None:
    band = make_trace(tmp_path, variant="C", collective="all_gather", payload_bytes=125_000)
    gathered = replay(band, ReplayRequest(SWITCH)).timeline
    reduced = replay(band, ReplayRequest(SWITCH, sum_at="ring")).timeline
    assert (gathered["algo"] == "ring_allgather").all()
    assert (reduced["algo"] == "ring_allreduce").all()
    # a ring all-reduce moves 2 (N-1)/N of the payload, an all-gather (N-1) payloads
    assert reduced["wire_bytes"].iloc[-1] < gathered["wire_bytes"].iloc[-1]
    topk = make_trace(
        tmp_path, variant="B", collective="all_gather", reducible=False, name="B-tiny-s0"
    )
    assert (
        replay(topk, ReplayRequest(SWITCH, sum_at="ring")).timeline["algo"] == "ring_allgather"
    ).all()


def test_scenario_placement_sum_ring(folder: Path) -> None:
    scenario = folder / "ring.yaml"
    scenario.write_text(
        """\
traces: [traces/tiny-adamw-s0.parquet, traces/tiny-band-1d256-s0.parquet]
networks: [8x200g-switch]
placement: {sum: ring}
targets: [3.5]
""",
        encoding="utf-8",
    )
    result = run_scenario(load_scenario(scenario), folder / "out", serial=True, quiet=True)
    algos = result.timeline.groupby("config")["algo"].unique()
    assert list(algos["tiny-band-1d256"]) == ["ring_allreduce"]
    assert list(algos["tiny-adamw"]) == ["ring_allreduce"]
    assert isinstance(result.summary, pd.DataFrame)


def test_simulate_takes_paths_globs_presets_and_mappings(folder: Path) -> None:
    import transitsim

    result = transitsim.simulate(
        str(folder / "traces" / "tiny-adamw-s*.parquet"), "8x200g-switch", targets=[3.5]
    )
    assert sorted(result.timeline["run"].unique()) == ["tiny-adamw-s0", "tiny-adamw-s1"]
    both = transitsim.simulate(
        [folder / "traces"],
        ["8x200g-switch", {"preset": "2dc-wan", "wan_link": {"rate": "2,000 Mb/s"}}],
        targets=[3.5],
    )
    assert list(dict.fromkeys(both.summary["network"])) == ["8x200g-switch", "2dc-wan"]
    assert both.verdict and both.verdict[0].startswith("To loss 3.5, ")
    with pytest.raises(transitsim.TransitsimError, match="no trace file matches"):
        transitsim.simulate(str(folder / "nothing-*.parquet"), "8x200g-switch", targets=[3.5])


def test_the_api_summary_is_the_cli_csv(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import transitsim

    scenario = folder / "one.yaml"
    scenario.write_text(
        "traces: [traces/tiny-adamw-s0.parquet, traces/tiny-band-1d256-s0.parquet]\n"
        "networks: [8x200g-switch]\ntargets: [3.5]\nbaseline: A\n",
        encoding="utf-8",
    )
    code, _, _ = run_cli(["run", str(scenario), "-o", str(folder / "out"), "--serial"], capsys)
    assert code == 0
    csv = pd.read_csv(folder / "out" / "summary.csv")
    api = transitsim.simulate(
        [
            folder / "traces" / "tiny-adamw-s0.parquet",
            folder / "traces" / "tiny-band-1d256-s0.parquet",
        ],
        "8x200g-switch",
        targets=[3.5],
        baseline="A",
    ).summary
    assert list(api.columns) == list(csv.columns)
    assert list(api["time_to_target_s"]) == pytest.approx(list(csv["time_to_target_s"]))


def test_the_package_has_a_public_api_with_docstrings() -> None:
    import transitsim

    names = [name for name in dir(transitsim) if not name.startswith("_")]
    assert {"simulate", "SimulationResult", "load_scenario", "run_scenario", "read_trace"} <= set(
        names
    )
    for name in names:
        assert getattr(transitsim, name).__doc__, name


def _leaf_commands(command, prefix=()):
    if hasattr(command, "commands"):  # a group (typer's click may be its own copy)
        for name, sub in command.commands.items():
            yield from _leaf_commands(sub, (*prefix, name))
    else:
        yield prefix, command


def test_every_command_takes_q(capsys: pytest.CaptureFixture[str]) -> None:
    import typer.main

    from transitsim import cli

    commands = dict(_leaf_commands(typer.main.get_command(cli.build_app())))
    assert len(commands) >= 10
    for path, command in commands.items():
        if path == ("train",):  # its options are the trainer's own parser
            code, out, _ = run_cli(["train", "--help"], capsys)
            assert "-q, --quiet" in out, path
            continue
        flags = {flag for param in command.params for flag in getattr(param, "opts", [])}
        assert {"-q", "--quiet"} <= flags, path


def test_quiet_ladder_prints_the_table_only(folder: Path, capsys) -> None:
    argv = ["ladder", str(folder / "traces"), "--targets", "3.5"]
    _, loud, _ = run_cli(argv, capsys)
    _, quiet, _ = run_cli([*argv, "-q"], capsys)
    assert "Steps to reach a loss" in loud and "Steps to reach a loss" not in quiet
    assert "tiny-adamw" in quiet or "AdamW" in quiet


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        code, out, _ = run_cli([flag], capsys)
        assert code == 0 and out == f"transitsim {version('transitsim')}\n"
