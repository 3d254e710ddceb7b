"""The report's overlap panels: exchange time exposed and hidden per network, and the verdict
without and with overlap side by side, checked on the figures and in headless Chromium."""

import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import CHROMIUM, chromium
from test_report import make_ladder, make_timeline

from transitsim.report import build_panels, write_report

NETWORKS = ("wan", "wan +overlap")


def overlap_timeline() -> pd.DataFrame:
    """make_timeline's runs on a network without and with overlap: with it, A hides 60 % of its
    exchange on even steps (which stand for 3 steps each) and none on odd ones; C hides nothing."""
    base = make_timeline(steps=10)
    base = base[base["network"] == "wan"]
    frames = []
    for network in NETWORKS:
        part = base.assign(network=network, overlap="buckets" if "+" in network else "none")
        part["interval_steps"] = np.where(part["step"] % 2 == 0, 3, 1)
        part["exchange_s"] = part["wire_s"] + part["wait_s"]
        share = np.where(
            (part["network"] == "wan +overlap")
            & (part["variant"] == "A")
            & (part["step"] % 2 == 0),
            0.6,
            0.0,
        )
        part["hidden_s"] = part["exchange_s"] * share
        part["exposed_s"] = part["exchange_s"] - part["hidden_s"]
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def overlap_summary() -> pd.DataFrame:
    """To 4.0, C wins without overlap and A with it; to 3.2 A wins both ways."""
    times = {
        (4.0, "none"): {"A-adamw": 5.0, "C": 4.0},
        (4.0, "buckets"): {"A-adamw": 3.0, "C": 4.0},
        (3.2, "none"): {"A-adamw": 9.0, "C": np.nan},
        (3.2, "buckets"): {"A-adamw": 7.0, "C": np.nan},
    }
    rows = []
    for (target, overlap), by_config in times.items():
        for config, time_s in by_config.items():
            rows.append(
                {
                    "config": config,
                    "variant": config[0],
                    "network": "wan +overlap" if overlap == "buckets" else "wan",
                    "overlap": overlap,
                    "target": target,
                    "steps_to_target": 20.0,
                    "time_to_target_s": time_s,
                    "bytes_to_target": 2e7,
                    "speedup_vs_baseline": 1.0,
                    "bottleneck": "wire",
                }
            )
    return pd.DataFrame(rows)


def inputs() -> dict:
    timeline = overlap_timeline()
    timeline["config"] = timeline["config"].where(timeline["variant"] == "A", "C")
    return {"timeline": timeline, "summary": overlap_summary(), "ladder": make_ladder()}


def test_hiding_panel_shows_exposed_and_hidden_per_network() -> None:
    data = inputs()
    panels = {panel.key: panel for panel in build_panels(**data)}
    fig = panels["hiding"].figure
    assert [t.name for t in fig.data] == ["exposed (in the step)", "hidden by backward"] * 2
    exposed_a, hidden_a, _, hidden_c = fig.data
    assert list(hidden_a.y) == list(NETWORKS)
    rows = data["timeline"]
    a = rows[(rows.network == "wan +overlap") & (rows.config == "A-adamw")]
    weights = a.interval_steps.sum()
    assert hidden_a.x[1] == pytest.approx(1e3 * (a.hidden_s * a.interval_steps).sum() / weights)
    assert exposed_a.x[1] == pytest.approx(1e3 * (a.exposed_s * a.interval_steps).sum() / weights)
    assert hidden_a.x[0] == 0.0 and list(hidden_c.x) == [0.0, 0.0]  # nothing hidden without
    assert hidden_a.x[1] > 0 and exposed_a.x[1] < exposed_a.x[0]
    # hidden share in the hover: even steps hide 60 % and weigh 3 of every 4 steps
    assert hidden_a.customdata[1] == "45%"


def table_cells(page: str) -> list[list[str]]:
    """The shown text of each row of the side-by-side verdict table (an HTML table)."""
    table = page.split("id='overlap-verdict-table'", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]


def test_verdict_without_and_with_overlap_side_by_side() -> None:
    panels = {panel.key: panel for panel in build_panels(**inputs())}
    rows = table_cells(panels["overlap-verdict"].html)
    target, network, without, _, with_, _, changed = zip(*rows, strict=True)
    assert list(network) == ["wan", "wan"] and list(target) == ["4.0", "3.2"]
    assert list(without) == ["C", "A-adamw"] and list(with_) == ["A-adamw", "A-adamw"]
    assert list(changed) == ["yes", "no"]
    assert panels["overlap-verdict"].figure is None  # not a plotly table: nothing is clipped


def test_verdict_table_keeps_underscores_and_escapes_names() -> None:
    data = inputs()
    for frame in (data["summary"], data["timeline"]):
        frame["config"] = frame["config"].replace({"C": "C_ring_allreduce<b>"})
    panels = {panel.key: panel for panel in build_panels(**data)}
    table = panels["overlap-verdict"].html
    assert "C_ring_allreduce&lt;b&gt;" in table and "<b>" not in table
    assert table_cells(table)[0][2] == "C_ring_allreduce<b>"


def test_without_an_overlap_axis_there_is_no_side_by_side_table() -> None:
    data = inputs()
    data["summary"] = data["summary"][data["summary"]["overlap"] == "none"]
    keys = [panel.key for panel in build_panels(**data)]
    assert "hiding" in keys and "overlap-verdict" not in keys


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium (apt)")
def test_overlap_panels_render_in_headless_chromium(tmp_path: Path) -> None:
    report = write_report(tmp_path / "report.html", title="overlap", **inputs())
    dump = chromium(
        tmp_path / "profile",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=20000",
        "--dump-dom",
        report.as_uri(),
    )
    assert dump.returncode == 0, dump.stderr[-2000:]
    assert [line for line in dump.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = dump.stdout
    hiding = dom.split('<section id="hiding">', 1)[1].split("</section>", 1)[0]
    assert "Exchange time exposed and hidden by backward" in hiding
    assert len(re.findall(r'class="trace bars', hiding)) == 4  # 2 parts x 2 configurations
    legend = re.findall(r'class="legendtext"[^>]*>([^<]*)<', hiding)
    assert legend == ["exposed (in the step)", "hidden by backward"]
    verdict = dom.split('<section id="overlap-verdict">', 1)[1].split("</section>", 1)[0]
    assert "verdict changes" in verdict and "fastest with overlap" in verdict
    rows = table_cells(verdict.replace('"', "'"))
    assert rows[0] == ["4.0", "wan", "C", "4 s", "A-adamw", "3 s", "yes"]
    assert rows[1] == ["3.2", "wan", "A-adamw", "9 s", "A-adamw", "7 s", "no"]
