"""The comparison as a report-style page: measured vs simulated per collective, then the table."""

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transitsim.base.atomic import write_text_atomic
from transitsim.report import Panel, ReportContext, render_html
from transitsim.report.common import text
from transitsim.testbed import percent, rate_label, size_label

RATE_COLOURS = {50e6: "#1f77b4", 200e6: "#ff7f0e", 1e9: "#2ca02c"}
WORKER_SYMBOLS = {2: "circle", 4: "square", 8: "diamond"}


def _fitted_words(f: dict) -> str:
    if f["alpha_s"] > 0 or f["host_per_transfer_s"] == 0 and f["host_rate_bps"] == float("inf"):
        return f"alpha {f['alpha_s'] * 1e3:.3f} ms per gloo transfer"
    rate = f["host_rate_bps"]
    shared = "no rate cap" if rate == float("inf") else f"{rate_label(rate)} shared by the ranks"
    return f"endpoint {f['host_per_transfer_s'] * 1e3:.3f} ms per gloo transfer, {shared}"


def figure(table: pd.DataFrame, collective: str) -> go.Figure:
    """Time against payload, measured (markers, IQR bars) and simulated (lines), per rate and P."""
    rows = table[table["collective"] == collective]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time", "simulated / measured - 1"))
    for (where, rate, workers), group in rows.groupby(["layout", "rate_bps", "workers"]):
        group = group.sort_values("bytes")
        colour = RATE_COLOURS.get(rate, "#7f7f7f")
        name = f"{rate_label(rate)}, {workers} workers"
        name += "" if where == "1 site" else f", {where}"
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


SHOWN = (
    "rate",
    "collective",
    "P",
    "payload",
    "repeats",
    "measured s",
    "spread",
    "simulated s",
    "error",
    "gloo algorithm",
)


def table_figure(table: pd.DataFrame) -> go.Figure:
    """Every point as a plotly table (the page's summary table is the simulator's format, which
    a testbed comparison is not, so the points travel as a figure of their own)."""
    pairs = zip(table["rel_error"], table["fitted"], strict=True)
    error = [f"{e:+.1%}" + (" (fitted)" if f else "") for e, f in pairs]
    columns = [
        [rate_label(r) for r in table["rate_bps"]],
        [text(c) for c in table["collective"]],
        [str(int(w)) for w in table["workers"]],
        [size_label(int(b)) for b in table["bytes"]],
        [str(int(r)) for r in table["repeats"]],
        [f"{m:.4f}" for m in table["median_s"]],
        [f"{x:.1%}" for x in table["spread"]],
        [f"{x:.4f}" for x in table["simulated_s"]],
        error,
        [text(a) for a in table["gloo_algorithm"]],
    ]
    fig = go.Figure(
        go.Table(
            header={"values": list(SHOWN), "align": "left"},
            cells={"values": columns, "align": "left"},
            columnwidth=[7, 8, 3, 9, 5, 7, 6, 7, 9, 30],
        )
    )
    fig.update_layout(height=min(200 + 24 * len(table), 1400), margin={"t": 10, "b": 10})
    return fig


def write_page(path: Path | str, table: pd.DataFrame, note: str, figures: dict) -> Path:
    """The self-contained page (plotly.js inlined once): the figures per collective, every
    point, and the model's parameters and errors per rate in words."""
    panels = [
        Panel(
            key=collective.replace("_", "-"),
            heading=f"gloo {collective.replace('_', '-')}: measured vs simulated",
            note=note,
            figure=figure(table, collective),
        )
        for collective in sorted(table["collective"].unique())
    ]
    panels.append(
        Panel(
            "points", "Every measured point", "error: simulated / measured - 1", table_figure(table)
        )  # fmt: skip
    )
    overall = figures["overall"]
    fitted = overall["points"] - overall["predicted_points"]
    verdict = [
        f"{overall['predicted_points']} predicted points (and {fitted} fitted): median |error| "
        f"{percent(overall['median_abs_error'])}, worst {percent(overall['worst_abs_error'])}."
    ]
    assumptions = [
        f"{label}: payload share {f['efficiency']:.4f} (measured by tbf's counters), latency "
        f"{f['latency_s'] * 1e6:.1f} us (RTT/4, measured), {_fitted_words(f)} (fitted); median "
        f"|error| {percent(f['median_abs_error'])} over {f['predicted_points']} predicted points"
        for label, f in figures["per_rate"].items()
    ]
    context = ReportContext(
        question="Does transitsim's model of this network give the times real gloo collectives "
        "take on it?",
        verdict=verdict,
        assumptions=assumptions,
    )
    title = "transitsim testbed: gloo collectives measured and simulated"
    return write_text_atomic(path, render_html(title, panels, pd.DataFrame(), context=context))
