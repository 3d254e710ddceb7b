"""The HTML report (figures, escaping, atomic and deterministic writes, a real browser render) and
the Perfetto trace-event writer."""

import html
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import CHROMIUM, chromium

from transitsim.base.errors import TransitsimError
from transitsim.report import build_panels, write_report
from transitsim.traces.chrome_events import trace_events, write_trace_events

# A label that would run script, or rewrite the page, if it ever reached the DOM unescaped.
EVIL = (
    "<b>bold</b><a href='javascript:alert(1)'>link</a>"
    "<img src=x onerror=\"document.title='PWNED'\">"
    "<script>document.body.setAttribute('data-pwned','1')</script>"
)
NETWORKS = ["lan", "wan"]
RUNS = [
    ("A-adamw-s0", "A-adamw", "A"),
    ("A-adamw-s1", "A-adamw", "A"),
    (f"C-{EVIL}-s0", f"C-{EVIL}", "C"),
]
CONFIGS = [("A-adamw", "A"), (f"C-{EVIL}", "C")]
TARGETS = [4.0, 3.2]
LINKS = {"lan": ["h0->s0", "s0->h1"], "wan": ["h0->s0", "dc0->dc1", f"wan {EVIL}"]}
COMPONENTS = ["compute_s", "transform_s", "wire_s", "wait_s"]


def make_timeline(steps: int = 40) -> pd.DataFrame:
    rows = []
    for network in NETWORKS:
        slow = 3.0 if network == "wan" else 1.0
        for run, config, variant in RUNS:
            time_s = wire_bytes = 0.0
            seed_shift = 0.01 * int(run[-1])
            for step in range(1, steps + 1):
                wire_s = (0.05 if variant == "A" else 0.01) * slow
                parts = {
                    "compute_s": 0.1,
                    "transform_s": 0.002 * (variant == "C"),
                    "wire_s": wire_s,
                }
                parts["wait_s"] = 0.004 * (network == "wan")
                step_s = sum(parts.values())
                time_s += step_s
                wire_bytes += 1e6 if variant == "A" else 1e5
                evaluated = step % 5 == 0
                rows.append(
                    {
                        "run": run,
                        "config": config,
                        "variant": variant,
                        "network": network,
                        "step": step,
                        "val_loss": 5 - step * (0.05 if variant == "A" else 0.045) + seed_shift
                        if evaluated
                        else math.nan,
                        "train_loss": 5 - step * 0.05,
                        **parts,
                        "step_s": step_s,
                        "time_s": time_s,
                        "wire_bytes": wire_bytes,
                        "extrapolated": step > 30,
                    }
                )
    return pd.DataFrame(rows)


def make_ladder() -> pd.DataFrame:
    rows = [
        ("A-adamw", "A", 4.0, 20.0, 2e7),
        ("A-adamw", "A", 3.2, 40.0, 4e7),
        (f"C-{EVIL}", "C", 4.0, 25.0, 2.5e6),
        (f"C-{EVIL}", "C", 3.2, math.nan, math.nan),
    ]
    return pd.DataFrame(
        [
            {
                "config": c,
                "variant": v,
                "target": t,
                "steps": s,
                "payload_bytes": p,
                "wire_bytes": p * 1.75,
            }
            for c, v, t, s, p in rows
        ]
    )


def make_summary() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "config": config,
                "variant": variant,
                "network": network,
                "target": 4.0,
                "steps_to_target": 20.0,
                "time_to_target_s": 3.1,
                "bytes_to_target": 2e7,
                "speedup_vs_baseline": 1.0,
                "bottleneck": "wire",
            }
            for config, variant in CONFIGS
            for network in NETWORKS
        ]
    )


def make_link_util() -> pd.DataFrame:
    rows = []
    for network in NETWORKS:
        for index, link in enumerate(LINKS[network]):
            for k in range(20):
                rows.append(
                    {
                        "network": network,
                        "link": link,
                        "t_s": k * 0.01,
                        "utilisation": ((k + index) % 7) / 7,
                    }
                )
    return pd.DataFrame(rows)


def make_sweep() -> pd.DataFrame:
    """A gets faster than C as the WAN gets faster: the winner changes once, at 1e11 b/s."""
    rows = []
    for rate in (1e10, 1e11, 1e12):
        for length in (1e4, 1e6):
            for config, variant in CONFIGS:
                base = 100 * 1e10 / rate if variant == "A" else 30 * 1e10 / rate + 20
                rows.append(
                    {
                        "network": f"g[{rate:g},{length:g}]",
                        "wan_link.rate": rate,
                        "wan_link.length": length,
                        "config": config,
                        "variant": variant,
                        "target": 4.0,
                        "time_to_target_s": base + length * 1e-5,
                    }
                )
    return pd.DataFrame(rows)


def panels_by_key(**overrides):
    inputs = {
        "timeline": make_timeline(),
        "summary": make_summary(),
        "ladder": make_ladder(),
        "link_util": make_link_util(),
        "sweep": make_sweep(),
    }
    inputs.update(overrides)
    return {panel.key: panel for panel in build_panels(**inputs)}


def test_loss_panels_show_each_config_as_mean_and_band_over_seeds_per_network() -> None:
    panels = panels_by_key()
    timeline = make_timeline()
    for key, x, scale in (("loss-time", "time_s", 1.0), ("loss-bytes", "wire_bytes", 1e9)):
        fig = panels[key].figure
        # per network: A (2 seeds) has a band and a mean line, C (1 seed) a line
        assert len(fig.data) == len(NETWORKS) * 3
        assert [t.visible for t in fig.data] == [True] * 3 + [False] * 3
        buttons = fig.layout.updatemenus[0].buttons
        assert [b.label for b in buttons] == NETWORKS
        assert buttons[1].args[0]["visible"] == [False] * 3 + [True] * 3
        band, mean = fig.data[3], fig.data[4]
        assert band.fill == "toself" and mean.name == "A-adamw (mean of 2)"
        wan_a = timeline[(timeline.network == "wan") & (timeline.config == "A-adamw")]
        by_step = wan_a.dropna(subset=["val_loss"]).groupby("step")
        assert list(mean.y) == pytest.approx(list(by_step.val_loss.mean()))
        assert list(mean.x) == pytest.approx(list(by_step[x].mean() / scale))
        assert max(band.y) == pytest.approx(by_step.val_loss.max().max())
        assert min(band.y) == pytest.approx(by_step.val_loss.min().min())
        # the targets are drawn as lines
        assert sorted(shape.y0 for shape in fig.layout.shapes) == sorted(TARGETS)
        # colours: one per config, the same in both panels, distinct
        assert fig.data[1].line.color != fig.data[2].line.color
    assert panels["loss-bytes"].figure.layout.xaxis.type == "log"


def test_ladder_marks_targets_not_reached_and_counts_seeds() -> None:
    ladder = make_ladder().assign(seeds=[2, 2, 1, 1])
    fig = panels_by_key(ladder=ladder)["ladder"].figure
    assert [t.name for t in fig.data] == ["to 4.0", "to 3.2"]
    assert list(fig.data[1].y) == [40.0, 0.0]
    assert list(fig.data[1].text) == ["40 (mean of 2)", "not<br>reached"]


def test_ladder_bars_stand_where_the_loss_crossed_with_the_evaluations_as_whiskers() -> None:
    """Issue 43: the bar is the interpolated crossing the summary reports, not the first
    evaluation at or below; the whisker spans the evaluations either side of it."""
    ladder = make_ladder().assign(
        steps_crossed=[15.0, 32.5, 25.0, math.nan], steps_before=[10.0, 30.0, 25.0, math.nan]
    )
    fig = panels_by_key(ladder=ladder)["ladder"].figure
    four = fig.data[0]
    assert list(four.y) == [15.0, 25.0]
    assert list(four.error_y.array) == [5.0, 0.0] and list(four.error_y.arrayminus) == [5.0, 0.0]
    assert "at or below at 20" in four.customdata[0][3]
    assert list(fig.data[1].y) == [32.5, 0.0]


def test_breakdown_has_a_row_per_network_and_a_column_per_config() -> None:
    timeline = make_timeline()
    timeline["interval_steps"] = np.where(timeline["step"] % 2 == 0, 3, 1)
    timeline.loc[timeline["step"] % 2 == 0, "wire_s"] *= 2
    fig = panels_by_key(timeline=timeline)["breakdown"].figure
    names = ["compute", "transform", "wire", "wait"]
    assert [t.name for t in fig.data] == names * 2  # per configuration column
    first, second = [a.text for a in fig.layout.annotations][:2]
    assert first == "A-adamw"  # a column title wraps onto three lines of its width, then is cut
    lines = second.split("<br>")
    assert len(lines) == 3 and lines[2].endswith("…")
    assert lines[0] == html.escape("C-<b>bold</b><a", quote=False)  # escaped: shown, not run
    wire = fig.data[2]
    assert list(wire.y) == NETWORKS
    rows = timeline[(timeline.network == "wan") & (timeline.config == "A-adamw")]
    expected = (rows.wire_s * rows.interval_steps).sum() / rows.interval_steps.sum()
    assert wire.x[1] == pytest.approx(1e3 * expected, rel=1e-12)  # milliseconds


def test_breakdown_stays_legible_at_fifty_networks() -> None:
    timeline = pd.concat(
        [make_timeline(steps=5).assign(network=f"grid[rate={n} Gb/s]") for n in range(60)]
    )
    fig = panels_by_key(timeline=timeline)["breakdown"].figure
    assert len(fig.data) == 4 * 2  # not one bar per (network, config) pair
    assert len(fig.data[0].y) == 120 // 2 and fig.data[0].y[0] == "grid[rate=0 Gb/s]"  # the id
    assert fig.layout.yaxis.ticktext[0] == "0 Gb/s"  # ...shown by its value alone
    assert fig.layout.height >= 22 * 60


def test_winner_heatmap_for_a_two_dimensional_sweep() -> None:
    panel = panels_by_key()["winner"]
    (heat,) = [t for t in panel.figure.data if t.type == "heatmap"]
    # one unit per axis, named on the axis
    assert list(heat.x) == ["10", "100", "1,000"] and list(heat.y) == ["10", "1,000"]
    assert panel.figure.layout.xaxis.title.text == "WAN rate (Gb/s)"
    assert panel.figure.layout.yaxis.title.text == "WAN length (km)"
    # C fastest at 10 Gb/s, A from 100 Gb/s on, at both lengths; the margin in each cell
    assert [list(row) for row in heat.z] == [[1, 0, 0], [1, 0, 0]]
    margin = (30 * 0.1 + 20 + 0.1) / (100 * 0.1 + 0.1)  # C / A at 100 Gb/s, 10 km
    assert heat.text[0][1] == f"A<br>{margin:.2f}x"  # the variant: the labels are too long
    assert "A-adamw" in heat.customdata[0][1]  # hover names it whole


def test_winner_lines_for_a_one_dimensional_sweep_one_chart_per_target() -> None:
    sweep = make_sweep()
    sweep = sweep[sweep["wan_link.length"] == 1e4].drop(columns="wan_link.length")
    sweep = pd.concat(
        [sweep, sweep.assign(target=3.2, time_to_target_s=sweep.time_to_target_s * 2)]
    )
    fig = panels_by_key(sweep=sweep)["winner"].figure
    titles = [a.text for a in fig.layout.annotations if a.text.startswith("to loss")]
    assert titles == ["to loss 4.0", "to loss 3.2"]  # both visible, no menu
    assert not fig.layout.updatemenus
    stars = [t for t in fig.data if t.name == "fastest"]
    assert len(stars) == 2 and list(stars[0].x) == [10, 100, 1000]  # in the axis's Gb/s
    assert (
        "C-&lt;b&gt;bold" in stars[0].customdata[0][0]
        and stars[0].customdata[1][0] == "fastest: A-adamw"
    )
    changes = [shape for shape in fig.layout.shapes if shape.line.dash == "dot"]
    assert [shape.x0 for shape in changes] == [100, 100]
    assert list(fig.layout.xaxis.ticktext) == ["10", "100", "1,000"]
    assert fig.layout.xaxis.title.text == "WAN rate (Gb/s)"
    assert fig.layout.yaxis.title.text == "time to target (s)"


def test_missing_inputs_give_the_view_the_data_allows() -> None:
    panels = panels_by_key(link_util=None, sweep=None)
    # no link recorded: the exchange's share of each step, from the timeline, not an empty panel
    assert panels["links"].figure is not None and "no link was recorded" in panels["links"].note
    assert panels["winner"].figure is not None  # the listed networks, as bars per target
    assert "each network" in panels["winner"].note


def test_link_chart_names_the_run_and_network_of_its_step() -> None:
    link_util = make_link_util().assign(run="A-adamw-s0")
    fig = panels_by_key(link_util=link_util)["links"].figure
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert labels == ["lan · step of A-adamw-s0", "wan · step of A-adamw-s0"]
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]  # links x time, one per step
    assert list(fig.data[0].y) == [html.escape(link) for link in LINKS["lan"]]
    one = panels_by_key(link_util=link_util[link_util.network == "lan"])["links"].figure
    assert one.layout.title.text == "lan · step of A-adamw-s0"  # one step: named in the title


def test_missing_columns_are_one_clear_error() -> None:
    with pytest.raises(TransitsimError, match="timeline table lacks column.*time_s"):
        panels_by_key(timeline=make_timeline().drop(columns="time_s"))
    with pytest.raises(TransitsimError, match="sweep table lacks"):
        panels_by_key(sweep=make_sweep().drop(columns="config"))


def write(path: Path, title: str = f"report {EVIL}") -> Path:
    return write_report(
        path, make_timeline(), make_summary(), make_ladder(), make_link_util(), make_sweep(), title
    )


def test_report_is_self_contained_escaped_atomic_and_deterministic(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "report.html").read_bytes()
    second = write(tmp_path / "b" / "report.html").read_bytes()
    assert first == second
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["report.html"]
    page = first.decode()
    assert "<script src=" not in page and 'src="http' not in page  # plotly.js is inline
    assert "Plotly.newPlot" in page and len(page) > 1_000_000
    assert EVIL not in page and "data-pwned','1')</script>" not in page
    assert "<title>report &lt;b&gt;bold" in page
    assert "&lt;script&gt;document.body" in page


# ---------------------------------------------------------------------------------------------
# A real browser: the page renders offline, without console errors, with the expected traces.


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium (apt)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    report = write(tmp_path / "report.html")
    url = report.as_uri()
    dump = chromium(
        tmp_path / "profile-dom",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=20000",
        "--dump-dom",
        url,
    )
    assert dump.returncode == 0, dump.stderr[-2000:]
    console = [line for line in dump.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    dom = dump.stdout
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]  # the script never ran
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("report &lt;b&gt;bold")  # onerror would have set it to "PWNED"
    assert '<img src="x"' not in dom
    # ...and labels are shown as the text they are, not read as plotly's pseudo-HTML
    legend = re.findall(r'class="legendtext"[^>]*>([^<]*)<', dom)
    assert html.escape(f"C-{EVIL}"[:39], quote=False) + "…" in legend
    # Initially visible traces: each loss panel shows the first network's band and 2 lines,
    # the link panel its 2 links, the winner map its heatmap; bars: 2 targets, 4 x 2 components.
    scatter = len(re.findall(r'class="trace scatter', dom))
    bars = len(re.findall(r'class="trace bars', dom))
    assert scatter >= 3 + 3 + 2 and bars == 2 + 4 * 2, (scatter, bars)
    assert 'class="hm"' in dom or "heatmaplayer" in dom
    assert dom.count('class="main-svg"') >= 6
    assert "<th title='click to sort'>" in dom.replace('"', "'")

    shot = tmp_path / "report.png"
    result = chromium(
        tmp_path / "profile-shot",
        "--window-size=1280,3900",
        "--virtual-time-budget=20000",
        f"--screenshot={shot}",
        url,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    keep = Path("/tmp/transitsim-report-screenshot.png")
    shutil.copyfile(shot, keep)  # for a person to look at after the run


# ---------------------------------------------------------------------------------------------
# Trace events (Perfetto)


def step_timeline() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "process": ["workers", "workers", "links", "workers"],
            "track": ["worker 0", "worker 1", "h0->s0", "worker 0"],
            "name": ["compute", "compute", "chunk 0", "wait"],
            "start_s": [0.0, 0.0, 0.1, 0.1],
            "end_s": [0.1, 0.12, 0.1005, 0.13],
            "bytes": [np.nan, np.nan, 4096, np.nan],
        }
    )


def test_trace_events_are_complete_events_in_microseconds(tmp_path: Path) -> None:
    path = write_trace_events(tmp_path / "step.json", step_timeline())
    document = json.loads(path.read_text())
    events = document["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 4
    assert complete[1]["ts"] == 0.0 and complete[1]["dur"] == pytest.approx(0.12e6)
    assert complete[2]["dur"] == pytest.approx(500.0) and complete[2]["args"] == {"bytes": 4096.0}
    assert complete[0]["args"] == {"bytes": None}
    names = {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and "name" in e["args"]
    }
    assert names[(1, None)] == "workers" and names[(2, None)] == "links"
    assert names[(complete[2]["pid"], complete[2]["tid"])] == "h0->s0"
    assert complete[0]["tid"] == complete[3]["tid"]  # same track, same thread
    assert (
        path.read_text() == json.dumps(trace_events(step_timeline()), separators=(",", ":")) + "\n"
    )


def test_trace_events_refuse_bad_intervals() -> None:
    bad = step_timeline()
    bad.loc[2, "end_s"] = 0.0
    with pytest.raises(TransitsimError, match="row 2"):
        trace_events(bad)
    with pytest.raises(TransitsimError, match="lacks column"):
        trace_events(step_timeline().drop(columns="track"))


def test_notes_that_differ_only_in_the_run_are_said_once_naming_the_runs() -> None:
    """in-network-sum-modes' report listed 36 fallbacks that differed only in the run's name
    (3 seeds x 12 networks) and 9 'no backward profile' notes: each is said once now, naming
    its runs; a note naming no run, or two, stays as it is."""
    from transitsim.report.page import grouped

    notes = [
        "overlap: x-band-s0 has no backward profile; assumed uniform backward",
        "overlap: x-band-s1 has no backward profile; assumed uniform backward",
        "overlap: y-s0 on rack[rate=10 Gb/s]: 78 exchanges, replayed as one bucket",
        "overlap: y-s0 on rack[rate=50 Gb/s]: 78 exchanges, replayed as one bucket",
        "network 'rack' has no summing switch: replayed as ring_allreduce",
        "compute: a-s0 and a-s1 ran on different GPUs",
    ]
    assert grouped(notes) == [
        "overlap: each of 2 runs has no backward profile; assumed uniform backward "
        "(x-band-s0, x-band-s1)",
        notes[2],
        notes[3],
        notes[4],
        notes[5],
    ]
    assert grouped(notes[:1]) == notes[:1]


def test_columns_far_apart_in_scale_each_keep_their_own() -> None:
    """background-traffic-local-sgd: local SGD's steps (ms) beside AdamW's (s) on one shared
    scale showed as no bar at all. Columns whose largest bars differ by more than 10x keep
    their own scale (and the axis says so); closer ones share one, so bars compare."""
    breakdown = panels_by_key()["breakdown"].figure
    assert breakdown.layout.xaxis2.matches == "x"  # the fixture's configs: within 10x
    timeline = make_timeline()
    timeline.loc[timeline["config"] != "A-adamw", ["compute_s", "wire_s"]] /= 1000.0
    panels = panels_by_key(timeline=timeline)
    for key in ("breakdown", "hiding"):
        if key not in panels:
            continue
        fig = panels[key].figure
        assert fig.layout.xaxis2.matches is None, key
        assert "each column its own scale" in fig.layout.xaxis.title.text


def test_a_long_list_of_notes_shows_eight_and_folds_the_rest() -> None:
    """in-network-sum-modes ended in 50 fallback lines; the page shows 8 and folds the rest
    under "N more" (a click opens them), and the heading counts them all."""
    from transitsim.report.page import _facts

    page = _facts("Fallbacks", [f"note {i}" for i in range(20)], "none")
    assert page.startswith("<h3>Fallbacks (20)</h3>")
    shown, folded = page.split("<details>")
    assert shown.count("<li>") == 8 and folded.count("<li>") == 12
    assert "<summary>12 more</summary>" in folded
    assert "<details>" not in _facts("Notes", ["one"], "none")


def test_the_wan_chart_offers_only_the_networks_with_a_wan() -> None:
    """moving-bands: the WAN bytes chart opened on a one-switch network, whose WAN bytes are
    none: an empty chart. It offers only the networks where bytes crossed a WAN, and says so."""
    timeline = make_timeline()
    timeline["wan_bytes"] = np.where(timeline["network"] == "wan", timeline["wire_bytes"] / 2, 0)
    panel = panels_by_key(timeline=timeline)["loss-wan-bytes"]
    buttons = panel.figure.layout.updatemenus
    labels = [b.label for b in buttons[0].buttons] if buttons else []
    assert labels in ([], ["wan"])
    assert all(t.x is None or len(t.x) for t in panel.figure.data)
    assert f"the 1 of {len(NETWORKS)} networks with a WAN" in panel.note
