"""The comparison as a report-style page: measured vs simulated per collective, then the table."""

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transitsim.base.atomic import write_text_atomic
from transitsim.report import Panel, render_html
from transitsim.testbed import rate_label

RATE_COLOURS = {50e6: "#1f77b4", 200e6: "#ff7f0e", 1e9: "#2ca02c"}
WORKER_SYMBOLS = {2: "circle", 4: "square", 8: "diamond"}


def figure(table: pd.DataFrame, collective: str) -> go.Figure:
    """Time against payload, measured (markers, IQR bars) and simulated (lines), per rate and P."""
    rows = table[table["collective"] == collective]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time", "simulated / measured - 1"))
    for (rate, workers), group in rows.groupby(["rate_bps", "workers"], sort=True):
        group = group.sort_values("bytes")
        colour = RATE_COLOURS.get(rate, "#7f7f7f")
        name = f"{rate_label(rate)}, {workers} workers"
        half_iqr = group["iqr_s"] / 2
        fig.add_trace(
            go.Scatter(
                x=group["bytes"],
                y=group["median_s"],
                error_y={"type": "data", "array": half_iqr, "visible": True},
                mode="markers",
                marker={"color": colour, "symbol": WORKER_SYMBOLS.get(workers, "x"), "size": 8},
                name=f"measured {name}",
                legendgroup=name,
                hovertemplate="%{x} B: %{y:.4g} s measured<extra>" + name + "</extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=group["bytes"],
                y=group["simulated_s"],
                mode="lines",
                line={"color": colour, "dash": {2: "solid", 4: "dash", 8: "dot"}.get(workers)},
                name=f"simulated {name}",
                legendgroup=name,
                hovertemplate="%{x} B: %{y:.4g} s simulated<extra>" + name + "</extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=group["bytes"],
                y=group["rel_error"],
                mode="markers+lines",
                marker={"color": colour, "symbol": WORKER_SYMBOLS.get(workers, "x")},
                line={"color": colour, "width": 1},
                showlegend=False,
                legendgroup=name,
                hovertemplate="%{x} B: %{y:+.1%}<extra>" + name + "</extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="payload per worker (bytes)")
    fig.update_yaxes(type="log", title_text="seconds", row=1, col=1)
    fig.update_yaxes(tickformat="+.0%", row=1, col=2)
    fig.update_layout(height=560)
    return fig


def write_page(path: Path | str, table: pd.DataFrame, note: str) -> Path:
    """The self-contained page (plotly.js inlined once)."""
    panels = [
        Panel(
            key=collective.replace("_", "-"),
            heading=f"gloo {collective.replace('_', '-')}: measured vs simulated",
            note=note,
            figure=figure(table, collective),
        )
        for collective in sorted(table["collective"].unique())
    ]
    shown = table[
        [
            "rate_bps",
            "collective",
            "workers",
            "bytes",
            "median_s",
            "spread",
            "simulated_s",
            "rel_error",
            "fitted",
            "gloo_algorithm",
        ]
    ]
    page = render_html("transitsim testbed: gloo collectives measured and simulated", panels, shown)
    return write_text_atomic(path, page)
