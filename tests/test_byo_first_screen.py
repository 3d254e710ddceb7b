"""The bring-your-own report's first screen (issue 43, item 5): the step the profiled job
measured beside the predicted step on the network it was replayed on (the what-if), read back
from report.html. The profile is test_byo_cli's: 3 steps of 8,000 us on one rank of 2."""

import html
import re
from pathlib import Path

import pandas as pd
import pytest
from cli_run import run_cli
from test_byo_cli import make_profile, write_profile
from test_report_truth import read_figures

from transitsim.base import human

NETWORK = "2dc-wan"  # a what-if: the profiled job's 2 ranks split over two datacentres


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("byo")
    profile = write_profile(folder / "rank0.json.gz", make_profile())
    traces = folder / "traces"
    code, _, stderr = run_cli(
        ["traces", "import", "--profile", str(profile), "-o", str(traces), "--name", "mine"]
    )
    assert code == 0, stderr
    out = folder / "out"
    argv = ["replay", str(traces), "-n", NETWORK, "--set", "workers=2", "-o", str(out), "-q"]
    code, _, stderr = run_cli(argv)
    assert code == 0, stderr
    return out


def first_panel(page: str) -> tuple[str, dict]:
    """The first panel's note (text) and figure layout as the page holds them."""
    section = page[page.index("<section id='winner'>") :]
    note = re.search(r"<p class='note'>(.*?)</p>", section, re.S)
    assert note is not None
    _, layout = next(iter(read_figures(section).values()))
    return html.unescape(note[1]), layout


def test_first_screen_gives_the_measured_step_beside_each_networks_prediction(
    replayed: Path,
) -> None:
    page = (replayed / "report.html").read_text(encoding="utf-8")
    note, layout = first_panel(page)
    measured = human.seconds(0.008)  # the profiled step: 8,000 us
    assert f"measured {measured} a step on the profiled job" in note
    timeline = pd.read_parquet(replayed / "timeline.parquet")
    assert timeline["network"].unique().tolist() == [f"{NETWORK}[workers=2]"]
    weights = timeline["interval_steps"].astype(float)
    predicted = float((timeline["step_s"] * weights).sum() / weights.sum())
    assert predicted != pytest.approx(0.008)  # the WAN makes the what-if differ
    expected = f"{human.seconds(predicted)} ({predicted / 0.008:.2f}x measured)"
    assert expected in note, (expected, note)
    lines = [s for s in layout.get("shapes", []) if s.get("type") == "line"]
    assert [round(s["x0"], 9) for s in lines] == [0.008]  # the dotted measured step
