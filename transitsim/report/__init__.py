"""The interactive report: one self-contained HTML file (plotly.js inlined, so it opens offline).

It leads with the answer: the question, a verdict in words generated from the results
(transitsim.analysis.verdict) and the winner map (winner.py), with the listed networks of a
sweep beside it. Then the evidence (evidence.py): loss against simulated time and against wire
bytes, the steps-to-loss ladder, where a step's time goes, the exchange time exposed and hidden
by backward and the verdict without and with overlap (overlap.py), which link is busy when
(links.py); the sortable summary (table.py); and the run's assumptions, notes, fallbacks and
failed jobs (page.py). Every chart keys its categories by full network and configuration ids;
names.py shortens them for display only.
"""

from pathlib import Path

import pandas as pd

from transitsim.analysis.metrics import METRIC_COLUMNS
from transitsim.analysis.verdict import verdict_sentences
from transitsim.base.atomic import write_text_atomic
from transitsim.report.common import Panel, ReportContext, colours, ordered, require
from transitsim.report.evidence import breakdown_figure, ladder_figure, loss_figure
from transitsim.report.links import (
    LINK_STATS_COLUMNS,
    LINK_UTIL_COLUMNS,
    busy_share_bars,
    exchange_share_bars,
    step_heatmap,
)
from transitsim.report.overlap import has_hiding, hiding_figure, overlap_verdict_table
from transitsim.report.page import render_html
from transitsim.report.step_time import step_time_figure, step_time_sentences
from transitsim.report.winner import (
    SWEEP_COLUMNS,
    is_result,
    listed_figure,
    sweep_parameters,
    winner_figure,
)
from transitsim.report.winner_parts import with_intervals
from transitsim.traces.chrome_events import write_trace_events

__all__ = [
    "Panel",
    "ReportContext",
    "build_panels",
    "render_html",
    "sweep_parameters",
    "write_report",
    "write_trace_events",
]

LADDER_COLUMNS = ("config", "variant", "target", "steps")


def _targets(summary: pd.DataFrame | None, ladder: pd.DataFrame) -> list[float]:
    """Every target of the summary and the ladder, in order of first appearance."""
    found: list[float] = []
    for frame in (summary, ladder):
        if frame is not None and len(frame) and "target" in frame:
            found += [float(t) for t in ordered(frame["target"])]
    return list(dict.fromkeys(found))


def spans_a_decade(summary: pd.DataFrame | None) -> bool:
    """Times to a target more than 10x apart: the loss-vs-time chart goes on a log time axis,
    so the fastest (15 s) are not squashed against the edge by the slowest (6,500 s)."""
    if summary is None or "time_to_target_s" not in summary:
        return False
    spent = summary["time_to_target_s"].dropna().astype(float)
    return bool(len(spent) and (spent > 0).all() and spent.max() / spent.min() > 10)


def build_panels(
    timeline: pd.DataFrame,
    summary: pd.DataFrame,
    ladder: pd.DataFrame,
    link_util: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
    labels: dict[str, str] | None = None,
    link_stats: pd.DataFrame | None = None,
    measured: dict[str, float] | None = None,
) -> list[Panel]:
    """The report's panels in page order, the winner map first (a panel without data keeps its
    place with a note). link_stats: per-link totals over each run (run, network, link,
    busy_share), drawn where no step was recorded."""
    require(timeline, METRIC_COLUMNS, "timeline")
    require(ladder, LADDER_COLUMNS, "ladder")
    if sweep is not None and len(sweep):
        require(sweep, SWEEP_COLUMNS, "sweep")
    labels = labels or {}
    palette = colours(ordered(timeline["config"]))
    targets = _targets(summary, ladder)
    sweep = with_intervals(sweep, summary)
    winner, note = winner_figure(sweep, summary, targets, labels, palette)
    wire = timeline["wire_bytes"].dropna()
    log_time = spans_a_decade(summary)
    panels = [Panel("winner", "Which configuration reaches the target first", note, winner)]
    if winner is None and len(timeline):  # a replay without targets: the step it came for
        panels = [
            Panel(
                "winner",
                "Predicted step time on each network",
                "no target reached or asked: each configuration's predicted mean step time on "
                "each network it was replayed on (hover: the share of it the exchange took); "
                "dotted: the step its profiled job measured. "
                + ". ".join(step_time_sentences(timeline, labels, measured or {}))
                + ".",
                step_time_figure(timeline, labels, palette, measured),
            )
        ]
    listed = listed_figure(sweep, targets, labels, palette)
    if listed is not None:
        panels.append(
            Panel(
                "winner-listed",
                "On the networks listed one by one",
                "time to each target on each listed network (no swept value); ★ and a black "
                "outline: the fastest there",
                listed,
            )
        )
    panels += [
        Panel(
            "loss-time",
            "Loss against wall-clock time",
            "simulated time on the network chosen in the menu; line: mean over seeds, band: "
            "lowest to highest seed; dashed: the targets",
            loss_figure(
                timeline,
                "time_s",
                "simulated time (s)" + (", log scale" if log_time else ""),
                labels,
                palette,
                targets,
                log_x=log_time,
            ),
        ),
        Panel(
            "loss-bytes",
            "Loss against bytes on the wire",
            "cumulative bytes one worker put on its line, in GB"
            + (
                " (WAN and LAN apart below)"
                if _crosses_wan(timeline)
                else "; none crossed a WAN link (no network here has datacentres): all LAN"
            ),
            loss_figure(
                timeline,
                "wire_bytes",
                "wire bytes per worker (GB)",
                labels,
                palette,
                targets,
                scale=1e9,
                log_x=bool(len(wire) and (wire > 0).all()),
            ),
        ),
        *_split_bytes_panels(timeline, labels, palette, targets),
        Panel(
            "ladder",
            "Steps to loss",
            "mean over seeds of where the loss crossed the target, interpolated between "
            "evaluations (as the summary); whiskers: the evaluations either side; 'not reached' "
            "unless every seed reached the target",
            ladder_figure(ladder, labels) if len(ladder) else None,
        ),
        Panel(
            "breakdown",
            "Where a step's time goes",
            "mean milliseconds per step in each component: a row per network, a column per "
            "configuration",
            breakdown_figure(timeline, labels),
        ),
    ]
    if has_hiding(timeline):
        panels.append(
            Panel(
                "hiding",
                "Exchange time exposed and hidden by backward",
                "mean exchange milliseconds per step: what showed in the step (exposed) and what "
                "overlap with backward hid (0 without overlap); a row per network, a column per "
                "configuration",
                hiding_figure(timeline, labels),
            )
        )
    side_by_side = overlap_verdict_table(summary, timeline, labels)
    if side_by_side is not None:
        panels.append(
            Panel(
                "overlap-verdict",
                "The verdict without and with overlap",
                "per target and network: the configuration that reaches the target first when "
                "the exchange follows backward, and when it overlaps it (click a heading to sort)",
                None,
                html=side_by_side,
            )
        )
    panels.append(_links_panel(timeline, link_util, link_stats, labels))
    return panels


def _crosses_wan(timeline: pd.DataFrame) -> bool:
    """Whether any replayed byte crossed a WAN link (replay's wan_bytes column)."""
    return "wan_bytes" in timeline and bool((timeline["wan_bytes"].fillna(0.0) > 0).any())


def _split_bytes_panels(
    timeline: pd.DataFrame, labels: dict[str, str], palette: dict[str, str], targets: list[float]
) -> list[Panel]:
    """Loss against the bytes that crossed a WAN link and those that stayed inside a site, where
    any crossed one: local SGD's point is few WAN bytes, whatever its sites send on their LANs."""
    if not _crosses_wan(timeline):
        return []
    split = timeline.assign(lan_bytes=timeline["wire_bytes"] - timeline["wan_bytes"])
    panels = []
    for column, key, heading, note in (
        (
            "wan_bytes",
            "loss-wan-bytes",
            "Loss against bytes across the WAN",
            "cumulative bytes per worker that crossed a link between datacentres, in GB",
        ),
        (
            "lan_bytes",
            "loss-lan-bytes",
            "Loss against bytes inside a site (LAN)",
            "cumulative bytes per worker that stayed inside its datacentre, in GB (wire bytes "
            "less WAN bytes)",
        ),
    ):
        shown = split
        if column == "wan_bytes":  # a network without datacentres would draw an empty chart
            crossing = split.groupby("network", sort=False)["wan_bytes"].max() > 0
            shown = split[split["network"].map(crossing)]
            if not crossing.all():
                note += f"; the {int(crossing.sum())} of {len(crossing)} networks with a WAN"
        positive = shown[column].dropna()
        positive = positive[positive > 0]
        # a log axis where the bytes span more than 10x (local SGD's few WAN bytes beside A's);
        # a step before any byte crossed (0) has no place on it and is left out
        log_x = bool(len(positive) and positive.max() > 10 * positive.min())
        if log_x:
            note += "; log scale, steps before the first byte left out"
        figure = loss_figure(
            shown,
            column,
            f"{column[:3].upper()} bytes per worker (GB)",
            labels,
            palette,
            targets,
            scale=1e9,
            log_x=log_x,
        )
        panels.append(Panel(key, heading, note, figure))
    return panels


def _links_panel(
    timeline: pd.DataFrame,
    link_util: pd.DataFrame | None,
    link_stats: pd.DataFrame | None,
    labels: dict[str, str],
) -> Panel:
    """Which link is busy when, from the best data given (links.py)."""
    heading = "Which link is busy when"
    if link_util is not None and len(link_util):
        require(link_util, LINK_UTIL_COLUMNS, "link_util")
        figure, links = step_heatmap(link_util, timeline)
        figure.update_layout(height=max(300, 170 + 24 * links))
        return Panel(
            "links",
            heading,
            "share of each link's rate in use over one recorded step (the last) of the run named "
            "in the menu, on its network: a row per link (its busiest), time across; white: idle",
            figure,
        )
    if link_stats is not None and len(link_stats):
        require(link_stats, LINK_STATS_COLUMNS, "link_stats")
        figure, links = busy_share_bars(link_stats, timeline)
        figure.update_layout(height=max(320, 170 + 60 * min(links, 16)))
        return Panel(
            "links",
            heading,
            "no step was recorded on these networks; instead, the share of the whole run each "
            "of the busiest links was busy, per configuration (mean over seeds), on the network "
            "chosen in the menu",
            figure,
        )
    figure = exchange_share_bars(timeline, labels)
    return Panel(
        "links",
        heading,
        "no link was recorded on these networks (steps are recorded on networks of at most 64 "
        "workers); instead, from the timeline: the share of each step the exchange kept the "
        "network busy (wire and waiting time over step time)"
        if figure is not None
        else "no link data given, and the timeline has no step times to show instead",
        figure,
    )


def write_report(
    path: Path | str,
    timeline: pd.DataFrame,
    summary: pd.DataFrame,
    ladder: pd.DataFrame,
    link_util: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
    title: str = "transitsim report",
    labels: dict[str, str] | None = None,
    context: ReportContext | None = None,
    link_stats: pd.DataFrame | None = None,
) -> Path:
    """Write the self-contained HTML report atomically. labels: config name -> display name;
    context: question, verdict (None: generated), assumptions, notes and failed jobs;
    link_stats: per-link totals per run, drawn where no step was recorded (links.py)."""
    context = context or ReportContext()
    if context.verdict is None:
        params = context.params or (
            [] if sweep is None else [c for c in sweep.columns if not is_result(c)]
        )
        context.verdict = verdict_sentences(summary, params, labels)
    panels = build_panels(
        timeline, summary, ladder, link_util, sweep, labels, link_stats, context.measured_step_s
    )
    return write_text_atomic(path, render_html(title, panels, summary, labels, context))
