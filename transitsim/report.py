"""The interactive report: one self-contained HTML file (plotly.js inlined, so it opens offline).

Panels: loss against wall-clock time and against bytes on the wire (a dropdown per network), the
steps-to-loss ladder, the step-time breakdown, link utilisation over one step, and the crossover
chart (time-to-target against a swept parameter, marking where the best configuration changes).
Every user string (run, config, network, link, parameter names) is HTML-escaped before it
reaches plotly or the page, so a label like `<script>` is shown, never run.
"""

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from transitsim.atomic import write_text_atomic
from transitsim.errors import TransitsimError
from transitsim.metrics import TIMELINE_COLUMNS, crossovers
from transitsim.trace_events import write_trace_events
from transitsim.units import key_unit

__all__ = ["Panel", "build_panels", "render_html", "write_report", "write_trace_events"]

LADDER_COLUMNS = ("config", "variant", "target", "steps")
LINK_UTIL_COLUMNS = ("network", "link", "t_s", "utilisation")
SWEEP_COLUMNS = ("network", "config", "variant", "target", "time_to_target_s")
# Columns of a sweep/summary table that are results, not swept parameters.
RESULT_COLUMNS = {
    *SWEEP_COLUMNS,
    "label",
    "seeds",
    "reached",
    "steps_to_target",
    "bytes_to_target",
    "speedup_vs_baseline",
    "bottleneck",
}
# Step-time components, stacked in this order where the timeline has them.
COMPONENTS = (
    ("compute_s", "compute"),
    ("compress_s", "compress"),
    ("transform_s", "transform"),
    ("wire_s", "wire"),
    ("wait_s", "wait"),
    ("update_s", "update"),
)
COMPONENT_COLOURS = {
    "compute": "#4C78A8",
    "compress": "#9D755D",
    "transform": "#B279A2",
    "wire": "#F58518",
    "wait": "#BAB0AC",
    "update": "#54A24B",
}
MAX_CROSSOVER_VIEWS = 60
MAX_TABLE_ROWS = 500
_PALETTE = qualitative.Plotly + qualitative.D3 + qualitative.Dark24
_NUMBER = ":.9~g"  # hover numbers: nine significant digits, no trailing zeros


@dataclass(frozen=True)
class Panel:
    """One section of the report: an id, a heading, a plain-text note, maybe a figure."""

    key: str
    heading: str
    note: str
    figure: go.Figure | None


def _esc(text: Any) -> str:
    """A user string made safe for the page's HTML."""
    return html.escape(str(text), quote=True)


def _text(text: Any) -> str:
    """A user string made safe for plotly, which reads a little HTML in labels and shows
    &lt; &gt; &amp; as characters (but would show &quot; literally, so quotes stay)."""
    return html.escape(str(text), quote=False)


def _short(text: str, limit: int = 40) -> str:
    """An axis tick label short enough to leave room for the plot (hover shows it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TransitsimError(f"report: {what} table lacks column(s) {', '.join(missing)}")


def _ordered(values: pd.Series) -> list[Any]:
    """Distinct values in order of first appearance (deterministic, follows the input)."""
    return list(dict.fromkeys(values.tolist()))


def _colours(configs: list[str]) -> dict[str, str]:
    return {config: _PALETTE[index % len(_PALETTE)] for index, config in enumerate(configs)}


def _dropdown(fig: go.Figure, options: list[tuple[str, list[bool], dict[str, Any]]]) -> None:
    """A menu that shows one group of traces at a time (label, visibility mask, layout changes)."""
    if len(options) < 2:
        return
    buttons = [
        {"label": label, "method": "update", "args": [{"visible": mask}, layout]}
        for label, mask, layout in options
    ]
    fig.update_layout(
        updatemenus=[
            {
                "buttons": buttons,
                "direction": "down",
                "active": 0,
                "showactive": True,
                "x": 0.0,
                "xanchor": "left",
                "y": 1.02,
                "yanchor": "bottom",
            }
        ],
        margin={"t": 90},
    )


def _per_network_mask(
    trace_networks: list[str], networks: list[str]
) -> list[tuple[str, list[bool], dict]]:
    return [(_text(n), [t == n for t in trace_networks], {}) for n in networks]


def _loss_figure(
    timeline: pd.DataFrame, x: str, x_title: str, labels: dict[str, str], log_x: bool
) -> go.Figure:
    """Validation loss against `x`, a line per run, coloured by config, one network at a time."""
    evaluated = timeline[timeline["val_loss"].notna()]
    networks = _ordered(timeline["network"])
    colours = _colours(_ordered(timeline["config"]))
    fig = go.Figure()
    trace_networks: list[str] = []
    for network in networks:
        legend_done: set[str] = set()
        on_network = evaluated[evaluated["network"] == network]
        for run in _ordered(on_network["run"]):
            rows = on_network[on_network["run"] == run].sort_values("step", kind="stable")
            config = rows["config"].iloc[0]
            extrapolated = (
                rows["extrapolated"].astype(bool)
                if "extrapolated" in rows
                else pd.Series(False, index=rows.index)
            )
            fig.add_trace(
                go.Scatter(
                    x=rows[x],
                    y=rows["val_loss"],
                    mode="lines+markers",
                    name=_text(_short(labels.get(config, config), 48)),
                    legendgroup=_text(config),
                    showlegend=config not in legend_done,
                    visible=network == networks[0],
                    line={"color": colours[config]},
                    marker={
                        "symbol": np.where(extrapolated, "circle-open", "circle").tolist(),
                        "size": 6,
                    },
                    customdata=np.column_stack(
                        [
                            np.full(len(rows), _text(run), dtype=object),
                            rows["step"].to_numpy(),
                            np.where(extrapolated, "yes", "no"),
                        ]
                    ),
                    hovertemplate=(
                        "<b>%{customdata[0]}</b><br>step %{customdata[1]}<br>"
                        f"{x_title} %{{x{_NUMBER}}}<br>val loss %{{y{_NUMBER}}}"
                        "<br>extrapolated: %{customdata[2]}<extra></extra>"
                    ),
                )
            )
            legend_done.add(config)
            trace_networks.append(network)
    fig.update_layout(
        xaxis={
            "title": {"text": x_title},
            "type": "log" if log_x else "linear",
            "exponentformat": "SI",
        },
        yaxis={"title": {"text": "validation loss"}},
        legend={"title": {"text": "configuration"}},
        hovermode="closest",
    )
    _dropdown(fig, _per_network_mask(trace_networks, networks))
    return fig


def _ladder_figure(ladder: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Steps to each target per config (grouped bars); 'not reached' unless every seed was."""
    fig = go.Figure()
    configs = _ordered(ladder["config"])
    for target in _ordered(ladder["target"]):
        rows = ladder[ladder["target"] == target].set_index("config").reindex(configs)
        steps = rows["steps"].astype("float64")
        reached = steps.notna()
        payload = (
            rows["payload_bytes"]
            if "payload_bytes" in rows
            else pd.Series(np.nan, index=rows.index)
        )
        wire = rows["wire_bytes"] if "wire_bytes" in rows else pd.Series(np.nan, index=rows.index)
        fig.add_trace(
            go.Bar(
                x=[_text(labels.get(c, c)) for c in configs],
                y=steps.fillna(0.0),
                name=_text(f"to {target:.4g}"),
                text=[
                    f"{s:,.0f}" if ok else "not reached"
                    for s, ok in zip(steps, reached, strict=True)
                ],
                textposition="outside",
                customdata=np.column_stack(
                    [
                        np.where(reached, steps.map(lambda v: f"{v:,.0f}"), "not reached"),
                        payload.astype("float64").to_numpy(),
                        wire.astype("float64").to_numpy(),
                    ]
                ),
                hovertemplate=(
                    f"<b>%{{x}}</b><br>target {_text(f'{target:.9g}')}<br>steps %{{customdata[0]}}"
                    f"<br>payload bytes %{{customdata[1]{_NUMBER}}}"
                    f"<br>wire bytes %{{customdata[2]{_NUMBER}}}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        barmode="group",
        xaxis={
            "title": {"text": "configuration"},
            "tickvals": [_text(labels.get(c, c)) for c in configs],
            "ticktext": [_text(_short(labels.get(c, c))) for c in configs],
        },
        yaxis={"title": {"text": "optimiser steps to reach the target"}},
        legend={"title": {"text": "validation loss"}},
    )
    return fig


def _breakdown_figure(timeline: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Mean seconds per step in each component, stacked, a bar per (network, config)."""
    present = [(column, name) for column, name in COMPONENTS if column in timeline.columns]
    weights = (
        timeline["interval_steps"].astype("float64")
        if "interval_steps" in timeline.columns
        else pd.Series(1.0, index=timeline.index)
    )
    groups = timeline.assign(_w=weights).groupby(["network", "config"], sort=False)
    bars, means = [], {name: [] for _, name in present}
    for (network, config), rows in groups:
        bars.append(f"{network} · {labels.get(config, config)}")
        total = rows["_w"].sum()
        for column, name in present:
            values = rows[column].astype("float64").fillna(0.0)
            means[name].append(float((values * rows["_w"]).sum() / total) if total else math.nan)
    categories = [_text(bar) for bar in bars]
    fig = go.Figure()
    for _, name in present:
        fig.add_trace(
            go.Bar(
                y=categories,
                x=means[name],
                orientation="h",
                name=name,
                marker={"color": COMPONENT_COLOURS[name]},
                hovertemplate=f"%{{y}}<br>{name}: %{{x{_NUMBER}}} s per step<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=max(320, 150 + 36 * len(bars)),
        xaxis={"title": {"text": "seconds per step (mean over steps)"}},
        yaxis={
            "autorange": "reversed",
            "tickvals": categories,
            "ticktext": [_text(_short(bar, 60)) for bar in bars],
        },
        legend={"title": {"text": "component"}},
    )
    return fig


def _link_figure(link_util: pd.DataFrame) -> go.Figure:
    """Utilisation of each link over one step, one network at a time."""
    networks = _ordered(link_util["network"])
    fig = go.Figure()
    trace_networks: list[str] = []
    for network in networks:
        on_network = link_util[link_util["network"] == network]
        for index, link in enumerate(_ordered(on_network["link"])):
            rows = on_network[on_network["link"] == link].sort_values("t_s", kind="stable")
            fig.add_trace(
                go.Scatter(
                    x=rows["t_s"],
                    y=rows["utilisation"],
                    mode="lines",
                    line={"shape": "hv", "color": _PALETTE[index % len(_PALETTE)]},
                    name=_text(_short(link, 48)),
                    visible=network == networks[0],
                    hovertemplate=(
                        f"<b>{_text(link)}</b><br>t %{{x{_NUMBER}}} s"
                        f"<br>utilisation %{{y:.4%}}<extra></extra>"
                    ),
                )
            )
            trace_networks.append(network)
    fig.update_layout(
        xaxis={"title": {"text": "time within the step (s)"}},
        yaxis={"title": {"text": "utilisation"}, "tickformat": ".0%", "range": [0, 1.05]},
        legend={"title": {"text": "link"}},
    )
    _dropdown(fig, _per_network_mask(trace_networks, networks))
    return fig


def _param_title(param: str) -> str:
    """'wan_link.rate' -> 'wan_link.rate (b/s)': the unit of a swept scenario key."""
    unit = key_unit(param)
    return f"{param} ({unit})" if unit else param


def sweep_parameters(sweep: pd.DataFrame) -> list[str]:
    """Swept parameters a crossover chart can use: numeric columns with two or more values."""
    params = []
    for column in sweep.columns:
        if column in RESULT_COLUMNS or not pd.api.types.is_numeric_dtype(sweep[column]):
            continue
        if pd.api.types.is_bool_dtype(sweep[column]):
            continue
        if sweep[column].dropna().nunique() >= 2:
            params.append(column)
    return params


def _winner_changes(
    best: pd.DataFrame, param: str, labels: dict[str, str], log_x: bool
) -> tuple[list[dict], list[dict]]:
    """A dotted line and an 'old -> new' note at each value where the fastest config changes.
    (On a log axis plotly places annotations by log10 of the value, shapes by the value.)"""
    shapes: list[dict] = []
    annotations: list[dict] = []
    previous = None
    for value, winner in zip(best[param], best["best_config"], strict=True):
        if previous is not None and winner != previous:
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": value,
                    "x1": value,
                    "y0": 0,
                    "y1": 1,
                    "line": {"dash": "dot", "color": "#444"},
                }
            )
            old = _text(_short(labels.get(previous, previous), 30))
            new = _text(_short(labels.get(winner, winner), 30))
            annotations.append(  # inside the plot, below the view menu; stacked if several
                {
                    "x": math.log10(value) if log_x else value,
                    "xref": "x",
                    "xanchor": "left",
                    "y": 1 - 0.08 * (len(annotations) % 4),
                    "yref": "paper",
                    "yanchor": "top",
                    "showarrow": False,
                    "bgcolor": "rgba(255,255,255,0.85)",
                    "text": f"{old} → {new}",
                }
            )
        previous = winner
    return shapes, annotations


def _crossover_figure(sweep: pd.DataFrame, labels: dict[str, str]) -> tuple[go.Figure, str]:
    """Time-to-target against each swept parameter (others held fixed), a line per config, a star
    on the fastest config at each value and a marker where the fastest config changes."""
    params = [c for c in sweep.columns if c not in RESULT_COLUMNS]
    numeric = sweep_parameters(sweep)
    colours = _colours(_ordered(sweep["config"]))
    fig = go.Figure()
    views: list[tuple[str, list[int], dict[str, Any]]] = []
    truncated = False
    for param in numeric:
        others = [c for c in params if c != param]
        columns = [*SWEEP_COLUMNS, *params]
        usable = sweep.dropna(subset=[param])[columns]
        for fixed, part in usable.groupby(["target", *others], sort=False, dropna=False):
            if len(views) >= MAX_CROSSOVER_VIEWS:
                truncated = True
                break
            fixed = fixed if isinstance(fixed, tuple) else (fixed,)
            target, held = fixed[0], dict(zip(others, fixed[1:], strict=True))
            indices = []
            for config in _ordered(part["config"]):
                rows = part[part["config"] == config].sort_values(param, kind="stable")
                indices.append(len(fig.data))
                fig.add_trace(
                    go.Scatter(
                        x=rows[param],
                        y=rows["time_to_target_s"],
                        mode="lines+markers",
                        name=_text(_short(labels.get(config, config), 48)),
                        line={"color": colours[config]},
                        visible=not views,
                        customdata=np.column_stack(
                            [rows["network"].map(_esc).to_numpy(dtype=object)]
                        ),
                        hovertemplate=(
                            f"<b>{_text(labels.get(config, config))}</b><br>{_text(param)} "
                            f"%{{x{_NUMBER}}}<br>time to target %{{y{_NUMBER}}} s"
                            "<br>network %{customdata[0]}<extra></extra>"
                        ),
                    )
                )
            best = crossovers(part, param)
            best = best[best["best_config"].notna()]
            indices.append(len(fig.data))
            fig.add_trace(
                go.Scatter(
                    x=best[param],
                    y=best["time_to_target_s"],
                    mode="markers",
                    name="fastest",
                    marker={
                        "symbol": "star",
                        "size": 14,
                        "color": "gold",
                        "line": {"color": "black", "width": 1},
                    },
                    visible=not views,
                    customdata=np.column_stack(
                        [
                            best["best_config"]
                            .map(lambda c: _text(labels.get(c, c)))
                            .to_numpy(dtype=object)
                        ]
                    ),
                    hovertemplate=(
                        f"fastest at {_text(param)} %{{x{_NUMBER}}}: <b>%{{customdata[0]}}</b>"
                        f"<br>%{{y{_NUMBER}}} s<extra></extra>"
                    ),
                )
            )
            log_x = bool(
                (usable[param] > 0).all() and usable[param].max() / usable[param].min() >= 100
            )
            times = part["time_to_target_s"].dropna()
            log_y = bool(len(times) and (times > 0).all() and times.max() / times.min() >= 10)
            shapes, annotations = _winner_changes(best, param, labels, log_x)
            held_text = ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in held.items()
            )
            label = f"{param} · loss {target:.4g}" + (f" · {held_text}" if held_text else "")
            layout = {
                "shapes": shapes,
                "annotations": annotations,
                "xaxis.title.text": _text(_param_title(param)),
                "xaxis.type": "log" if log_x else "linear",
                "yaxis.type": "log" if log_y else "linear",  # times spanning a decade or more
            }
            views.append((_text(label), indices, layout))
    if not views:
        return fig, "no swept parameter with two or more numeric values"
    first = views[0][2]
    fig.update_layout(
        shapes=first["shapes"],
        annotations=first["annotations"],
        xaxis={
            "title": {"text": first["xaxis.title.text"]},
            "type": first["xaxis.type"],
            "exponentformat": "SI",
        },
        yaxis={"title": {"text": "time to target (s)"}, "type": first["yaxis.type"]},
        legend={"title": {"text": "configuration"}},
    )
    count = len(fig.data)
    options = [
        (label, [i in set(indices) for i in range(count)], layout)
        for label, indices, layout in views
    ]
    _dropdown(fig, options)
    note = "a star marks the fastest configuration at each value; dotted lines where it changes"
    if truncated:
        note += f" (first {MAX_CROSSOVER_VIEWS} views shown)"
    return fig, note


def build_panels(
    timeline: pd.DataFrame,
    summary: pd.DataFrame,
    ladder: pd.DataFrame,
    link_util: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
    labels: dict[str, str] | None = None,
) -> list[Panel]:
    """The report's panels in page order (a panel without data keeps its place with a note)."""
    _require(timeline, TIMELINE_COLUMNS, "timeline")
    _require(ladder, LADDER_COLUMNS, "ladder")
    labels = labels or {}
    positive_bytes = bool((timeline["wire_bytes"].dropna() > 0).all())
    panels = [
        Panel(
            "loss-time",
            "Loss against wall-clock time",
            "simulated time on each network; hollow markers are extrapolated steps",
            _loss_figure(timeline, "time_s", "time (s)", labels, log_x=False),
        ),
        Panel(
            "loss-bytes",
            "Loss against bytes on the wire",
            "cumulative bytes one worker put on its line",
            _loss_figure(timeline, "wire_bytes", "wire bytes per worker", labels, positive_bytes),
        ),
        Panel(
            "ladder",
            "Steps to loss",
            "mean over seeds; 'not reached' unless every seed reached the target",
            _ladder_figure(ladder, labels) if len(ladder) else None,
        ),
        Panel(
            "breakdown",
            "Where a step's time goes",
            "mean seconds per step in each component, per network and configuration",
            _breakdown_figure(timeline, labels),
        ),
    ]
    if link_util is not None and len(link_util):
        _require(link_util, LINK_UTIL_COLUMNS, "link_util")
        panels.append(
            Panel(
                "links",
                "Link utilisation over one step",
                "fraction of each link's rate in use",
                _link_figure(link_util),
            )
        )
    else:
        panels.append(Panel("links", "Link utilisation over one step", "no link data given", None))
    if sweep is not None and len(sweep):
        _require(sweep, SWEEP_COLUMNS, "sweep")
        figure, note = _crossover_figure(sweep, labels)
        panels.append(Panel("crossover", "Crossovers", note, figure if len(figure.data) else None))
    else:
        panels.append(Panel("crossover", "Crossovers", "no parameter sweep in this scenario", None))
    return panels


def _format_cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return "–" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def _summary_html(summary: pd.DataFrame, labels: dict[str, str]) -> str:
    """The summary as an escaped HTML table (every cell through html.escape)."""
    if summary is None or not len(summary):
        return "<p class='note'>no summary rows</p>"
    shown = summary.head(MAX_TABLE_ROWS)
    header = "".join(f"<th>{_esc(c)}</th>" for c in shown.columns)
    body = []
    for row in shown.itertuples(index=False):
        cells = []
        for column, value in zip(shown.columns, row, strict=True):
            text = labels.get(value, value) if column == "config" else value
            cells.append(f"<td>{_esc(_format_cell(text))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f"<p class='note'>first {MAX_TABLE_ROWS} of {len(summary)} rows</p>"
        if len(summary) > MAX_TABLE_ROWS
        else ""
    )
    table = f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f"<div class='wide'>{table}</div>{more}"  # scrolls sideways, never past the page


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; }
nav a { margin-right: 1em; } .note { color: #666; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; } th, td { padding: 2px 8px; }
th { background: #eee; text-align: left; } tr:nth-child(even) td { background: #f8f8f8; }
.wide { overflow-x: auto; }
"""


def render_html(
    title: str, panels: list[Panel], summary: pd.DataFrame, labels: dict[str, str] | None = None
) -> str:
    """The whole page. plotly.js is inlined once, with the first figure; ids are fixed, so the
    same inputs give the same bytes."""
    labels = labels or {}
    parts = []
    inline_js = True
    for panel in panels:
        body = f"<p class='note'>{_esc(panel.note)}</p>"
        if panel.figure is not None:
            panel.figure.update_layout(template="plotly_white")
            if panel.figure.layout.height is None:
                panel.figure.update_layout(height=480)
            body += panel.figure.to_html(
                full_html=False,
                include_plotlyjs=inline_js,
                div_id=f"plot-{panel.key}",
                config={"displaylogo": False, "responsive": True},
            )
            inline_js = False
        parts.append(f"<section id='{panel.key}'><h2>{_esc(panel.heading)}</h2>{body}</section>")
    nav = "".join(f"<a href='#{p.key}'>{_esc(p.heading)}</a>" for p in panels)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_esc(title)}</h1><nav>{nav}<a href='#summary'>Summary</a></nav>"
        + "".join(parts)
        + f"<section id='summary'><h2>Summary</h2>{_summary_html(summary, labels)}</section>"
        + "</body></html>\n"
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
) -> Path:
    """Write the self-contained HTML report atomically. labels: config name -> display name."""
    panels = build_panels(timeline, summary, ladder, link_util, sweep, labels)
    return write_text_atomic(path, render_html(title, panels, summary, labels))
