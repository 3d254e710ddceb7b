"""Panels of small charts that do not collide: how many a row, titles wrapped to their width.

A subplot title wider than its column runs into its neighbour's, and a title over a second row
runs into the x axis above it. So the grid picks its columns, wraps each title onto lines that
fit one column (at " · " where it can), and leaves between rows the room the axis labels and
the title lines take. tests/test_report_layout.py measures the result in Chromium.
"""

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transitsim.report.common import short, text

PLOT_WIDTH_PX = 940  # what a 1,280 px page leaves the charts beside their legend
CHAR_PX = 7.2  # one character of a 13 px subplot title, wide letters counted in
TITLE_LINE_PX = 17
AXIS_BELOW_PX = 62  # tick labels and the axis title under a chart
MAX_TITLE_LINES = 3  # a configuration column's title: wrapped, not cut, up to this


def wrap(title: str, room: int) -> list[str]:
    """A title cut into lines of at most `room` characters (a word longer than that keeps its
    own line), at " · " where it can, else between words."""
    parts = title.split(" · ")
    segments = [part + (" ·" if i < len(parts) - 1 else "") for i, part in enumerate(parts)]
    lines: list[str] = []
    current = ""
    for segment in segments:
        candidate = f"{current} {segment}" if current else segment
        if len(candidate) <= room:
            current = candidate
            continue
        if current:
            lines.append(current)
            current = ""
        for word in segment.split(" "):
            candidate = f"{current} {word}" if current else word
            if len(candidate) <= room or not current:
                current = candidate
            else:
                lines.append(current)
                current = word
    if current:
        lines.append(current)
    return lines or [""]


def shape(count: int, max_cols: int = 4) -> tuple[int, int]:
    """Rows and columns: up to four panels on one row (two targets, overlap off and on, stay on
    the first screen); eight in two rows of four; more wrap at three a row."""
    if count <= max_cols:
        cols = count
    elif count == 8 and max_cols >= 4:
        cols = 4
    else:
        cols = min(3, max_cols)
    return max(1, math.ceil(count / max(cols, 1))), max(cols, 1)


def panel_grid(
    titles: list[str],
    row_px: int = 330,
    max_cols: int = 4,
    shared_yaxes: bool = False,
    horizontal_spacing: float = 0.07,
) -> tuple[go.Figure, int, int]:
    """A figure of len(titles) panels with titles that fit; (figure, rows, cols)."""
    rows, cols = shape(len(titles), max_cols)
    room = max(12, int(PLOT_WIDTH_PX * (1 - horizontal_spacing * (cols - 1)) / cols / CHAR_PX))
    wrapped = [wrap(title, room) for title in titles]
    lines = max((len(w) for w in wrapped), default=1)
    height = row_px * rows + TITLE_LINE_PX * lines * rows
    top = 24 + TITLE_LINE_PX * lines
    bottom = AXIS_BELOW_PX
    plot_px = height - top - bottom
    gap_px = AXIS_BELOW_PX + TITLE_LINE_PX * lines + 14
    vertical = min(gap_px / plot_px, 0.9 / max(rows - 1, 1)) if rows > 1 else 0.0
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=["<br>".join(text(line) for line in w) for w in wrapped],
        horizontal_spacing=horizontal_spacing,
        vertical_spacing=vertical,
        shared_yaxes=shared_yaxes,
    )
    fig.update_annotations(font={"size": 13})
    fig.update_layout(height=height, margin={"t": top, "b": bottom})
    return fig, rows, cols


def config_columns(configs: list[str], labels: dict[str, str]) -> go.Figure:
    """One column of horizontal bars per configuration, the networks shared down the side;
    column titles wrapped onto two lines of their column's width, then cut (hover and the
    legend name them whole)."""
    spacing = 0.02 if len(configs) <= 4 else 0.035  # room for the tick labels between columns
    room = max(8, int(PLOT_WIDTH_PX * 0.8 / max(len(configs), 1) / CHAR_PX))
    titles, most = [], 1
    for config in configs:
        lines = wrap(labels.get(config, config), room)
        if len(lines) > MAX_TITLE_LINES:
            lines = [*lines[: MAX_TITLE_LINES - 1], " ".join(lines[MAX_TITLE_LINES - 1 :])]
        titles.append("<br>".join(text(short(line, room)) for line in lines))
        most = max(most, len(lines))
    fig = make_subplots(
        rows=1,
        cols=len(configs),
        shared_yaxes=True,
        horizontal_spacing=spacing,
        subplot_titles=titles,
    )
    fig.update_annotations(font={"size": 13})
    fig.update_layout(margin={"t": 34 + TITLE_LINE_PX * most})  # titles clear the mode bar
    return fig


SPAN_FOR_OWN_SCALES = 10.0  # columns whose largest bars differ more than this get their own scale


def column_scales(
    fig: go.Figure, configs: list[str], values: dict[tuple[str, str], list[float]], parts: list[str]
) -> bool:
    """One x scale for every column, so bars compare across configurations, unless the columns'
    largest stacked bars span more than SPAN_FOR_OWN_SCALES (local SGD's 15 ms steps beside
    AdamW's 15 s were invisible on one scale): then each column keeps its own. values: per
    (config, part) one figure per network (NaN: none). True when the columns keep their own."""
    largest = []
    for config in configs:
        stacked = np.nansum([values[(config, part)] for part in parts], axis=0)
        largest.append(float(np.max(stacked)) if len(stacked) else 0.0)
    positive = [v for v in largest if v > 0]
    own = len(positive) > 1 and max(positive) > SPAN_FOR_OWN_SCALES * min(positive)
    if not own:
        for col in range(2, len(largest) + 1):
            fig.update_xaxes(matches="x", row=1, col=col)
    return own


def column_height(fig: go.Figure, rows: int) -> int:
    """A bar-column figure's height: 22 px a row, and never less than its legend and titles
    need (a short legend in a short chart scrolls)."""
    legend = sum(1 for trace in fig.data if trace.showlegend is not False)
    top = fig.layout.margin.t or 80
    return max(top + 90 + 22 * rows, top + 150 + 24 * legend, 320)
