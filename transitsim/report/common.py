"""What every part of the report shares: the panel record, escaping, colours, small table helpers.

Every user string (run, config, network, link, parameter names) is HTML-escaped before it
reaches plotly or the page, so a label like `<script>` is shown, never run.
"""

import html
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from transitsim.base.errors import TransitsimError
from transitsim.report.names import cut_apart

# Okabe-Ito (colour-blind safe), then Tableau 10 for more configurations than eight.
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#000000",
    "#F0E442",
    "#1F77B4",
    "#FF7F0E",
    "#2CA02C",
    "#D62728",
    "#9467BD",
    "#8C564B",
    "#E377C2",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
)
NUMBER = ":.9~g"  # hover numbers: nine significant digits, no trailing zeros


@dataclass(frozen=True)
class Panel:
    """One section of the report: an id, a heading, a plain-text note, maybe a figure, maybe a
    block of (already escaped) HTML drawn under it, such as a table."""

    key: str
    heading: str
    note: str
    figure: go.Figure | None
    html: str = ""


@dataclass
class ReportContext:
    """What the report says around its figures: the question it answers, the verdict (None:
    generated from the summary), the grid parameters, and the run's assumptions, notes and
    failed jobs (shown on the page, not only on stderr)."""

    question: str = ""
    verdict: list[str] | None = None
    params: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # per configuration, the mean step its profiled job measured (beside the predicted ones)
    measured_step_s: dict[str, float] = field(default_factory=dict)


def esc(text: Any) -> str:
    """A user string made safe for the page's HTML."""
    return html.escape(str(text), quote=True)


def text(value: Any) -> str:
    """A user string made safe for plotly, which reads a little HTML in labels and shows
    &lt; &gt; &amp; as characters (but would show &quot; literally, so quotes stay)."""
    return html.escape(str(value), quote=False)


def short(value: str, limit: int = 40) -> str:
    """A label short enough to leave room for the plot (hover shows it whole)."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TransitsimError(f"report: {what} table lacks column(s) {', '.join(missing)}")


def ordered(values: pd.Series) -> list[Any]:
    """Distinct values in order of first appearance (deterministic, follows the input)."""
    return list(dict.fromkeys(values.tolist()))


def colours(configs: list[str]) -> dict[str, str]:
    """One colour per configuration, the same in every chart of the page."""
    return {config: PALETTE[index % len(PALETTE)] for index, config in enumerate(configs)}


def dropdown(fig: go.Figure, options: list[tuple[str, list[bool], dict[str, Any]]]) -> None:
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


def ms_per_step(
    timeline: pd.DataFrame, columns: list[str]
) -> tuple[list[str], list[str], dict[tuple[str, str], list[float]]]:
    """Mean milliseconds per step of each column, per (config, column), one value per network
    (weighted by the steps each row stands for; NaN where a network has no row of a config)."""
    weights = (
        timeline["interval_steps"].astype("float64")
        if "interval_steps" in timeline.columns
        else pd.Series(1.0, index=timeline.index)
    )
    frame = timeline.assign(_w=weights)
    for column in columns:
        frame[column] = frame[column].astype("float64").fillna(0.0) * frame["_w"]
    sums = frame.groupby(["network", "config"], sort=False)[[*columns, "_w"]].sum()
    networks, configs = ordered(timeline["network"]), ordered(timeline["config"])
    values = {}
    for config in configs:
        for column in columns:
            row = []
            for network in networks:
                key = (network, config)
                total = sums.loc[key, "_w"] if key in sums.index else 0.0
                row.append(1e3 * sums.loc[key, column] / total if total else math.nan)
            values[(config, column)] = row
    return networks, configs, values


def network_axis(
    fig: go.Figure, networks: list[str], names: dict[str, str], limit: int = 48, **where: int
) -> None:
    """A category axis keyed by the full network ids, each shown by its short name: bars of two
    networks whose shown names are alike stay two bars."""
    fig.update_yaxes(
        tickmode="array",
        tickvals=[text(n) for n in networks],
        ticktext=[text(shown) for shown in cut_apart([names[n] for n in networks], limit)],
        categoryorder="array",
        categoryarray=[text(n) for n in networks],
        **where,
    )
