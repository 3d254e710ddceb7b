"""The report draws the numbers it was given: every bar read back from the page's own plotly data.

Issue 22: the step-breakdown and exposed/hidden charts keyed their bars by network names cut to
~45 characters, so networks sharing a long prefix stacked as one bar (ten networks summed into
each bar of photonic-pluggable). Here twelve networks share a 60-character prefix; the figure
JSON embedded in report.html is parsed and every bar is checked against the timeline and the
summary. Also: the names and units readers see, the listed networks of a sweep, seed intervals
as error bars and in the table, and the link views.
"""

import base64
import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from transitsim.report import build_panels, write_report
from transitsim.report.grid import wrap
from transitsim.report.names import axis_ticks, axis_title, held_phrase, network_names

PREFIX = "a pair of datacentres joined by one long-haul WAN, spine tier "  # 61 characters
NETWORKS = [f"{PREFIX}{n:02d}{suffix}" for n in range(6) for suffix in ("", " +overlap")]
CONFIGS = [("A-adamw", "A", "A AdamW"), ("B-topk", "B", "B top-k")]


def read_figures(page: str) -> dict[str, tuple[list[dict], dict]]:
    """{div id: (traces, layout)} of every Plotly.newPlot call in the page."""
    decoder = json.JSONDecoder()
    figures = {}
    for found in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, found.end())
        layout, _ = decoder.raw_decode(page, page.index("{", end))
        figures[found.group(1)] = (data, layout)
    return figures


def values(array: object) -> list:
    """A plotly array as a list: plain JSON, or plotly's typed {"dtype", "bdata"} form."""
    if isinstance(array, dict) and "bdata" in array:
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        return flat.tolist()
    return list(array)


def make_timeline(networks: list[str] = NETWORKS) -> pd.DataFrame:
    """Each network its own step time, so a bar holding two networks would show."""
    rows = []
    for index, network in enumerate(networks):
        for config, variant, _ in CONFIGS:
            for seed in (0, 1):
                time_s = 0.0
                for step in range(1, 21):
                    compute = 0.030 + 0.001 * index + 0.0005 * seed
                    wire = (0.010 if variant == "A" else 0.004) * (1 + index)
                    hidden = 0.3 * wire if network.endswith("+overlap") else 0.0
                    step_s = compute + wire - hidden
                    time_s += step_s
                    rows.append(
                        {
                            "run": f"{config}-s{seed}",
                            "config": config,
                            "variant": variant,
                            "network": network,
                            "step": step,
                            "val_loss": 5 - 0.1 * step if step % 5 == 0 else math.nan,
                            "compute_s": compute,
                            "wire_s": wire - hidden,
                            "wait_s": 0.001 * (step % 3),
                            "step_s": step_s,
                            "time_s": time_s,
                            "wire_bytes": 1e6 * step,
                            "interval_steps": 1 + step % 4,
                            "exchange_s": wire,
                            "exposed_s": wire - hidden,
                            "hidden_s": hidden,
                            "overlap": "buckets" if network.endswith("+overlap") else "none",
                        }
                    )
    return pd.DataFrame(rows)


def make_summary(intervals: bool = False) -> pd.DataFrame:
    rows = []
    for index, network in enumerate(NETWORKS):
        for config, variant, label in CONFIGS:
            time_s = 10.0 + index + (3.0 if variant == "A" else 2.0 * (index % 3))
            row = {
                "config": config,
                "label": label,
                "variant": variant,
                "network": network,
                "overlap": "buckets" if network.endswith("+overlap") else "none",
                "target": 4.0,
                "seeds": 2,
                "reached": "2/2",
                "steps_to_target": 15.0,
                "time_to_target_s": time_s if (index, variant) != (3, "B") else math.nan,
                "bytes_to_target": 1e7,
                "speedup_vs_baseline": 1.0,
                "bottleneck": "wire",
            }
            if intervals:
                row |= {
                    "time_to_target_s_sd": 0.5,
                    "time_to_target_s_lo": time_s - 0.4,
                    "time_to_target_s_hi": time_s + 0.6,
                    "interval": "range",
                }
            rows.append(row)
    return pd.DataFrame(rows)


def make_ladder() -> pd.DataFrame:
    return pd.DataFrame(
        [{"config": c, "variant": v, "target": 4.0, "steps": 15.0} for c, v, _ in CONFIGS]
    )


LABELS = {config: label for config, _, label in CONFIGS}


def per_step_ms(timeline: pd.DataFrame, network: str, config: str, column: str) -> float:
    rows = timeline[(timeline.network == network) & (timeline.config == config)]
    return 1e3 * (rows[column] * rows.interval_steps).sum() / rows.interval_steps.sum()


def column_of(trace: dict) -> int:
    """The subplot column (1-based) a trace of a one-row grid is drawn in."""
    axis = trace.get("xaxis", "x")
    return int(axis[1:] or 1)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("truth") / "report.html"
    write_report(path, make_timeline(), make_summary(), make_ladder(), labels=LABELS)
    return path.read_text(encoding="utf-8")


def test_networks_sharing_a_long_prefix_keep_their_own_bars(page: str) -> None:
    """Breakdown and exposed/hidden: one bar per (network, configuration), each its own figure."""
    timeline = make_timeline()
    figures = read_figures(page)
    configs = [c for c, _, _ in CONFIGS]
    checked = 0
    for div, parts in (
        ("plot-breakdown", {"compute": "compute_s", "wire": "wire_s", "wait": "wait_s"}),
        ("plot-hiding", {"exposed (in the step)": "exposed_s", "hidden by backward": "hidden_s"}),
    ):
        data, layout = figures[div]
        ids = [html.escape(n, quote=False) for n in NETWORKS]
        assert layout["yaxis"]["tickvals"] == ids  # one category per network id...
        shown = layout["yaxis"]["ticktext"]
        assert len(set(shown)) == len(NETWORKS)  # ...each shown by its own name
        for trace in data:
            column = parts[trace["name"]]
            config = configs[column_of(trace) - 1]
            assert values(trace["y"]) == ids  # never two networks in one category
            for network, drawn in zip(NETWORKS, values(trace["x"]), strict=True):
                expected = per_step_ms(timeline, network, config, column)
                assert drawn == pytest.approx(expected, rel=1e-9, abs=1e-12), (div, network)
                checked += 1
    assert checked == len(NETWORKS) * len(configs) * 5


def test_every_winner_bar_is_the_summarys_time_and_the_fastest_is_marked(page: str) -> None:
    summary = make_summary().set_index(["config", "network"])["time_to_target_s"]
    data, _ = read_figures(page)["plot-winner"]
    by_label = {label: config for config, _, label in CONFIGS}
    seen = set()
    for trace in data:
        config = by_label[trace["name"]]
        networks = [html.unescape(n) for n in values(trace["y"])]
        for network, drawn, mark in zip(networks, values(trace["x"]), trace["text"], strict=True):
            expected = summary[(config, network)]
            if math.isnan(expected):
                assert drawn == 0 and mark == "not reached"
            else:
                assert drawn == pytest.approx(expected, rel=1e-12)
                others = summary.xs(network, level="network").drop(config)
                fastest = bool((others.isna() | (others > expected)).all())
                assert (mark == "★") == fastest, (config, network)
            seen.add((config, network))
    assert seen == set(summary.index)  # every summary figure is drawn, once


def test_the_summary_table_shows_every_row_with_its_full_network_id(page: str) -> None:
    table = page.split("<section id='summary'>", 1)[1].split("</table>", 1)[0]
    titles = [html.unescape(t) for t in re.findall(r"<td data-v='[^']*' title='([^']*)'", table)]
    assert titles == [n for n in NETWORKS for _ in CONFIGS]


def test_display_names_show_what_varies_and_never_repeat() -> None:
    grid = [
        "2dc[wan_link.rate=1 Gb/s, wan_link.length=1,000 km]",
        "2dc[wan_link.rate=1 Gb/s, wan_link.length=1,000 km] +overlap",
        "2dc[wan_link.rate=10 Gb/s, wan_link.length=1,000 km]",
        "2dc[wan_link.rate=10 Gb/s, wan_link.length=5,000 km]",
    ]
    assert list(network_names(grid).values()) == [
        "1 Gb/s · 1,000 km",
        "1 Gb/s · 1,000 km · overlap",
        "10 Gb/s · 1,000 km",
        "10 Gb/s · 5,000 km",
    ]
    lanes = [
        "p[pluggable.host_lane_rate=10 Gb/s, pluggable.line_rate=1 Gb/s]",
        "p[pluggable.host_lane_rate=50 Gb/s, pluggable.line_rate=5 Gb/s]",
    ]
    assert network_names(lanes)[lanes[0]] == "lane 10 Gb/s · line 1 Gb/s"  # one unit: named
    mixed = [
        "rack[placement.sum=switch, host_link.rate=1 Gb/s]",
        "rack[placement.sum=receivers, host_link.rate=10 Gb/s]",
        "band made at the switch +overlap",
    ]
    assert list(network_names(mixed).values()) == [
        "rack · summed at switch · 1 Gb/s",  # beside a listed network, the grid keeps its name
        "rack · summed at receivers · 10 Gb/s",
        "band made at the switch · overlap",
    ]
    switch = [
        "r[switch.aggregator=true, host_link.rate=1 Gb/s]",
        "r[switch.aggregator=false, host_link.rate=1 Gb/s]",
    ]
    assert list(network_names(switch).values()) == ["switch sums: yes", "switch sums: no"]
    fabric = [
        "f[workers=8, collective=ring_allreduce] +overlap",
        "f[workers=64, collective=switch_sum]",
    ]
    assert list(network_names(fabric).values()) == [
        "8 workers · ring_allreduce · overlap",
        "64 workers · switch_sum",
    ]
    held = ["2dc[wan_link.background=0.25]", "2dc[wan_link.background=wan.csv]"]
    assert list(network_names(held).values()) == ["held 25 %", "held wan.csv"]
    # a lone grid point still says its value (not "" or just "overlap")
    lone = ["2dc[wan_link.background=wan.csv]", "2dc[wan_link.background=wan.csv] +overlap"]
    assert list(network_names(lone).values()) == ["held wan.csv", "held wan.csv · overlap"]
    # two ids that would show alike keep their ids
    alike = ["x[rate=1 Gb/s] +overlap", "x[rate=1 Gb/s, b=2] +overlap", "x[rate=2 Gb/s]"]
    names = network_names(alike)
    assert names[alike[0]] == alike[0] and names[alike[1]] == alike[1]
    assert names[alike[2]] == "2 Gb/s"


def test_axes_are_named_for_people_in_one_unit() -> None:
    assert axis_title("host_link.rate", [1e9, 4e11]) == "host link rate (Gb/s)"
    assert axis_title("pluggable.host_lane_rate", [1e10, 8e11]) == "host lane rate (Gb/s)"
    assert axis_title("wan_link.length", [1e4, 5e6]) == "WAN length (km)"
    assert axis_title("wan_link.background", [0.0, 0.9]) == "WAN share held by other traffic (%)"
    assert axis_title("switch.forwarding_latency", [1e-6, 5e-6]) == "switch latency (µs)"
    assert axis_title("switch.forwarding_latency", [5e-7, 2e-6]) == "switch latency (ns)"
    assert axis_title("workers", [8, 1024]) == "workers"
    assert axis_ticks("host_link.rate", [1e9, 2.5e9, 1.6e12]) == (
        [1e9, 2.5e9, 1.6e12],
        ["1", "2.5", "1,600"],
    )
    assert axis_ticks("wan_link.background", [0.0, 0.25, 0.9])[1] == ["0", "25", "90"]
    assert held_phrase("overlap", "none") == "no overlap"
    assert held_phrase("overlap", "buckets") == "with overlap"
    assert held_phrase("switch.aggregator", np.bool_(True)) == "switch sums: yes"
    assert held_phrase("placement.sum", "receivers") == "summed at receivers"


def test_titles_wrap_at_their_separators_to_fit_a_column() -> None:
    assert wrap("to loss 3.3 · no overlap", 30) == ["to loss 3.3 · no overlap"]
    assert wrap("to loss 3.3 · no overlap · summed at receivers", 26) == [
        "to loss 3.3 · no overlap ·",
        "summed at receivers",
    ]
    assert all(len(line) <= 12 for line in wrap("a b c d e f g h i j k l m n", 12))


def sweep_with_listed() -> pd.DataFrame:
    """in-network-sum's shape: a rate swept per placement.sum and overlap, plus two networks
    listed one by one (no rate, no placement.sum) under both overlap modes."""
    rows = []
    for overlap in ("none", "buckets"):
        tail = " +overlap" if overlap == "buckets" else ""
        for sum_at in ("receivers", "switch"):
            for rate in (1e9, 1e10, 1e11):
                for config, variant, _ in CONFIGS:
                    time_s = (40 if variant == "A" else 20) * 1e9 / rate + 5 * (sum_at == "switch")
                    rows.append(
                        {
                            "network": f"rack[placement.sum={sum_at}, host_link.rate={rate:g}]"
                            + tail,
                            "placement.sum": sum_at,
                            "host_link.rate": rate,
                            "overlap": overlap,
                            "config": config,
                            "variant": variant,
                            "target": 4.0,
                            "time_to_target_s": time_s,
                            "time_to_target_s_lo": time_s * 0.9,
                            "time_to_target_s_hi": time_s * 1.2,
                            "interval": "t95",
                            "seeds": 3,
                        }
                    )
        for name in ("band at the switch, 10 Gb/s", "band at the switch, 100 Gb/s"):
            for config, variant, _ in CONFIGS:
                rows.append(
                    {
                        "network": name + tail,
                        "placement.sum": None,
                        "host_link.rate": math.nan,
                        "overlap": overlap,
                        "config": config,
                        "variant": variant,
                        "target": 4.0,
                        "time_to_target_s": 30.0 if variant == "A" else 31.0,
                    }
                )
    return pd.DataFrame(rows)


def small_timeline() -> pd.DataFrame:
    """Two networks: enough for the panels a test does not read."""
    return make_timeline(NETWORKS[:2])


@pytest.fixture(scope="module")
def listed_panels() -> dict:
    sweep = sweep_with_listed()
    panels = build_panels(small_timeline(), sweep, make_ladder(), sweep=sweep, labels=LABELS)
    return {p.key: p for p in panels}


def test_listed_networks_of_a_sweep_get_their_own_panel_not_an_empty_one(listed_panels) -> None:
    panels = listed_panels
    fig = panels["winner"].figure
    titles = [a.text for a in fig.layout.annotations]
    # 2 overlap modes; the two placements share each chart (issue 43: E and E' on one axes)
    assert len(titles) == 2 and not any("–" in t for t in titles)
    assert "no overlap" in titles[0]
    names = {t.name for t in fig.data if t.xaxis in (None, "x")}
    assert {"A AdamW, all-gathered", "A AdamW, summed at the switch"} <= names
    for trace in fig.data:  # every line has points, so no panel is empty
        assert len(trace.x) and all(math.isfinite(x) for x in trace.x)
    assert all(math.isfinite(shape.x0) for shape in fig.layout.shapes)  # no stray diagonal
    listed = panels["winner-listed"].figure
    assert {a.text for a in listed.layout.annotations} == {
        "to loss 4.0 · no overlap",
        "to loss 4.0 · with overlap",
    }
    a_bars = [t for t in listed.data if t.name == "A AdamW"]
    assert [list(t.text) for t in a_bars] == [["★", "★"], ["★", "★"]]  # 30 s beats 31 s
    assert [list(t.marker.line.width) for t in a_bars] == [[2.5, 2.5], [2.5, 2.5]]


def test_seed_intervals_become_error_bars_and_a_table_column(listed_panels) -> None:
    sweep = sweep_with_listed()
    points = sweep[sweep["host_link.rate"].notna()]
    fig = listed_panels["winner"].figure
    line = next(t for t in fig.data if t.name == "A AdamW, all-gathered")
    rows = points[(points.config == "A-adamw") & (points.overlap == "none")]
    rows = rows[rows["placement.sum"] == "receivers"].sort_values("host_link.rate")
    mean = rows.time_to_target_s.to_numpy()
    assert list(line.error_y.array) == pytest.approx(list(0.2 * mean))
    assert list(line.error_y.arrayminus) == pytest.approx(list(0.1 * mean))
    assert "95 % t interval" in line.customdata[0][2] and "3 seeds" in line.customdata[0][2]

    # the summary table: an Interval column where the summary has one, none where it has not
    from transitsim.report.table import summary_html

    with_it = summary_html(make_summary(intervals=True), LABELS)
    assert "<th title='click to sort'>Interval</th>" in with_it
    assert "9.6 s–10.6 s, range, 2 seeds" in html.unescape(with_it)
    without = summary_html(make_summary(), LABELS)
    assert "Interval" not in without


def test_a_sweep_given_without_intervals_takes_them_from_the_summary() -> None:
    """outputs.py may pass the sweep without the interval columns; the summary has them."""
    summary = sweep_with_listed()
    sweep = summary.drop(columns=["time_to_target_s_lo", "time_to_target_s_hi", "interval"])
    panels = build_panels(small_timeline(), summary, make_ladder(), sweep=sweep, labels=LABELS)
    fig = {p.key: p for p in panels}["winner"].figure
    line = next(t for t in fig.data if t.name == "A AdamW, all-gathered")
    assert line.error_y.array is not None and "95 % t interval" in line.customdata[0][2]


def test_without_intervals_the_charts_draw_as_before() -> None:
    sweep = sweep_with_listed().drop(
        columns=["time_to_target_s_lo", "time_to_target_s_hi", "interval", "seeds"]
    )
    fig = {p.key: p for p in build_panels(small_timeline(), sweep, make_ladder(), sweep=sweep)}[
        "winner"
    ].figure
    assert all(t.error_y.array is None for t in fig.data if t.type == "scatter")


def test_link_heatmap_orders_links_by_host_number() -> None:
    rows = [("n", "r", link, t, 0.5) for link in ("h10->sw", "h2->sw", "h1->sw") for t in (0, 1)]
    link_util = pd.DataFrame(rows, columns=["network", "run", "link", "t_s", "utilisation"])
    panels = build_panels(small_timeline(), make_summary(), make_ladder(), link_util)
    (heat,) = {p.key: p for p in panels}["links"].figure.data
    assert [html.unescape(y) for y in heat.y] == ["h1->sw", "h2->sw", "h10->sw"]


def test_link_heatmap_bins_the_step_function_exactly() -> None:
    """One link busy at 100 % from 1 to 2 ms and at 50 % from 3 to 4 ms, another idle but at
    the ends: each time bin holds the mean utilisation over its span."""
    link_util = pd.DataFrame(
        [
            ("n", "r", "a", 0.0, 0.0),
            ("n", "r", "a", 0.001, 1.0),
            ("n", "r", "a", 0.002, 0.0),
            ("n", "r", "a", 0.003, 0.5),
            ("n", "r", "a", 0.004, 0.0),
            ("n", "r", "b", 0.0, 0.0),
            ("n", "r", "b", 0.004, 0.0),
        ],
        columns=["network", "run", "link", "t_s", "utilisation"],
    )
    timeline = small_timeline()
    fig = {p.key: p for p in build_panels(timeline, make_summary(), make_ladder(), link_util)}[
        "links"
    ].figure
    (heat,) = fig.data
    z = np.asarray(heat.z)
    assert z.shape == (2, 120) and list(heat.y) == ["a", "b"]
    quarter = 30  # 120 bins over 4 ms
    assert z[0, :quarter] == pytest.approx(0.0) and z[0, quarter : 2 * quarter] == pytest.approx(
        100.0
    )
    assert z[0, 3 * quarter :] == pytest.approx(50.0) and z[1].max() == 0.0
    assert heat.x[0] == pytest.approx(4 / 240) and heat.zmax == 100


def test_link_totals_and_the_timeline_fallback() -> None:
    timeline = make_timeline(NETWORKS[:3])
    stats = pd.DataFrame(
        {
            "run": ["A-adamw-s0", "A-adamw-s1", "B-topk-s0", "A-adamw-s0"],
            "network": [NETWORKS[0]] * 4,
            "link": ["nic0", "nic0", "nic0", "spine"],
            "busy_share": [0.2, 0.4, 0.1, 0.05],
        }
    )
    panels = {
        p.key: p for p in build_panels(timeline, make_summary(), make_ladder(), link_stats=stats)
    }
    bars = panels["links"].figure.data
    assert [t.name for t in bars] == ["A-adamw", "B-topk"]
    assert list(bars[0].y) == ["nic0", "spine"]
    assert list(bars[0].x) == pytest.approx([30.0, 5.0])  # mean of the seeds, in %
    fallback = {p.key: p for p in build_panels(timeline, make_summary(), make_ladder())}["links"]
    first = fallback.figure.data[0]  # A, every network: (wire + wait) / step, weighted
    rows = timeline[(timeline.network == NETWORKS[2]) & (timeline.config == "A-adamw")]
    busy = ((rows.wire_s + rows.wait_s) * rows.interval_steps).sum()
    expected = 100 * busy / (rows.step_s * rows.interval_steps).sum()
    assert first.x[2] == pytest.approx(expected)
    bare = timeline.drop(columns=["step_s", "wire_s", "wait_s"])
    nothing = {p.key: p for p in build_panels(bare, make_summary(), make_ladder())}["links"]
    assert nothing.figure is None and "no link data given" in nothing.note


def test_error_bars_reach_the_page(tmp_path: Path) -> None:
    path = write_report(
        tmp_path / "r.html",
        small_timeline(),
        make_summary(intervals=True),
        make_ladder(),
        sweep=sweep_with_listed(),
    )
    data, _ = read_figures(path.read_text(encoding="utf-8"))["plot-winner"]
    assert any(t.get("error_y") for t in data)


def test_winner_map_calls_a_near_tie_a_tie() -> None:
    """A cell whose runner-up is within the verdict's 1 % reads "tie", as the verdict says; a
    clear win keeps its margin alone (issue 22: winners by noise)."""
    from transitsim.report.winner_grid import heatmap_map

    rows = []
    for rate, b_time in ((1e9, 452.0), (10e9, 300.0)):
        for config, variant, time_s in (("a", "A", 453.7), ("b", "B", b_time)):
            rows.append(
                {
                    "config": config,
                    "variant": variant,
                    "network": f"2dc[rate={rate:g}]",
                    "wan_link.rate": rate,
                    "wan_link.length": 5e6,
                    "target": 2.0,
                    "time_to_target_s": time_s,
                }
            )
    sweep = pd.DataFrame(rows)
    labels = {"a": "A AdamW", "b": "B top-k"}
    fig = heatmap_map(
        sweep,
        ["wan_link.rate", "wan_link.length"],
        [],
        [2.0],
        labels,
        {"a": "#1f77b4", "b": "#ff7f0e"},
    )
    cells = [str(c) for trace in fig.data for c in np.asarray(trace.text).ravel()]
    assert any("tie" in c and "1.00x" in c for c in cells), cells  # 452.0 vs 453.7: 0.37 %
    assert any("1.51x" in c and "tie" not in c for c in cells), cells  # 300 vs 453.7: a win


def test_winner_map_calls_overlapping_seed_intervals_a_tie() -> None:
    """2.2x apart in the mean, but the seeds' ranges overlap: the verdict calls it a tie, and so
    does the map."""
    from transitsim.report.winner_grid import heatmap_map

    rows = []
    for rate in (1e9, 10e9):
        for config, variant, mean, lo, hi in (
            ("a", "A", 82.6, 55.0, 110.0),
            ("b", "B", 103.2, 103.1, 103.3),
        ):
            overlap = rate == 1e9
            rows.append(
                {
                    "config": config,
                    "variant": variant,
                    "network": f"2dc[rate={rate:g}]",
                    "wan_link.rate": rate,
                    "wan_link.length": 1e4,
                    "target": 3.3,
                    "time_to_target_s": mean,
                    "time_to_target_s_lo": lo if overlap else mean,
                    "time_to_target_s_hi": hi if overlap else mean,
                }
            )
    fig = heatmap_map(
        pd.DataFrame(rows),
        ["wan_link.rate", "wan_link.length"],
        [],
        [3.3],
        {"a": "A AdamW", "b": "B top-k"},
        {"a": "#1f77b4", "b": "#ff7f0e"},
    )
    cells = [str(c) for trace in fig.data for c in np.asarray(trace.text).ravel()]
    assert sum("tie" in c for c in cells) == 1, cells  # the overlapping point only


def test_winner_map_calls_a_tie_with_a_wide_interval_behind_the_runner_up() -> None:
    """two-datacentres-local-sgd at 1 Gb/s x 5,000 km: H-s 15.82 s [10.43, 21.20], L 32.69 s
    (tight), H every 50 37.31 s [5.20, 69.42]. The verdict ties H-s with H (intervals overlap)
    though L, the runner-up by mean, is clear of it; the map must say tie as well."""
    from transitsim.report.winner_grid import heatmap_map

    rows = []
    for rate, wide in ((1e9, True), (10e9, False)):
        for config, variant, mean, lo, hi in (
            ("hs", "H-s", 15.82, 10.43, 21.20),
            ("l", "L", 32.69, 32.68, 32.70),
            ("h", "H", 37.31, 5.20 if wide else 37.3, 69.42 if wide else 37.32),
        ):
            rows.append(
                {
                    "config": config,
                    "variant": variant,
                    "network": f"2dc[rate={rate:g}]",
                    "wan_link.rate": rate,
                    "wan_link.length": 5e6,
                    "target": 3.0,
                    "time_to_target_s": mean,
                    "time_to_target_s_lo": lo,
                    "time_to_target_s_hi": hi,
                }
            )
    fig = heatmap_map(
        pd.DataFrame(rows),
        ["wan_link.rate", "wan_link.length"],
        [],
        [3.0],
        {"hs": "H-s Streaming DiLoCo", "l": "L SparseLoCo", "h": "H DiLoCo every 50"},
        {"hs": "#000000", "l": "#f0e442", "h": "#d55e00"},
    )
    cells = [str(c) for trace in fig.data for c in np.asarray(trace.text).ravel()]
    assert sum("tie" in c for c in cells) == 1, cells  # only where H's range reaches H-s's
    assert any("2.07x" in c and "tie" in c for c in cells), cells


def test_link_view_names_the_links_it_leaves_out() -> None:
    """Issue 43: the link heatmap showed 12 of 16 links without saying so. Now every link of a
    16-link step is kept, and past LINKS_PER_NETWORK the quieter ones are named in the view."""
    from transitsim.analysis.summary import LINKS_PER_NETWORK, link_utilisation
    from transitsim.report.links import step_heatmap

    def events(count: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "process": "links",
                "track": [f"h{i}-up" for i in range(count)],
                "start_s": 0.0,
                "end_s": [0.001 * (i + 1) for i in range(count)],
                "utilisation": 1.0,
            }
        )

    sixteen = link_utilisation([("rack", "A-s0", events(16))])
    assert sixteen["link"].nunique() == 16 and not sixteen.attrs["omitted"]
    many = link_utilisation([("rack", "A-s0", events(LINKS_PER_NETWORK + 3))])
    assert many["link"].nunique() == LINKS_PER_NETWORK
    assert many.attrs["omitted"] == {"rack|A-s0": ["h0-up", "h1-up", "h2-up"]}
    timeline = make_timeline(["rack"])
    fig, _ = step_heatmap(many, timeline)
    assert "not shown: h0-up, h1-up, h2-up" in fig.layout.title.text


def test_a_replay_without_targets_opens_on_the_predicted_step_time() -> None:
    """Issue 43: the bring-your-own report's first screen said "no configuration reached a
    target"; it now shows each configuration's predicted mean step on each network."""
    timeline = make_timeline(NETWORKS[:2])
    empty = pd.DataFrame(columns=["config", "network", "target", "time_to_target_s"])
    panels = build_panels(timeline, empty, make_ladder(), labels=LABELS)
    first = panels[0]
    assert first.key == "winner" and first.heading == "Predicted step time on each network"
    bars = [t for t in first.figure.data if t.type == "bar"]
    assert {t.name for t in bars} == set(LABELS.values())
    weights = timeline["interval_steps"].astype(float)
    rows = timeline[(timeline["config"] == "A-adamw") & (timeline["network"] == NETWORKS[0])]
    expected = (rows["step_s"] * weights[rows.index]).sum() / weights[rows.index].sum()
    a_bar = next(t for t in bars if t.name == "A AdamW")
    assert values(a_bar.x)[0] == pytest.approx(expected)
