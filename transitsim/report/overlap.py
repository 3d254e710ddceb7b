"""Overlap in the report: how much of each exchange the backward hid, and the verdict without and
with overlap side by side.

Per network (a row) and configuration (a column): the exchange's mean milliseconds per step that
showed in the step (exposed) and that backward hid (hidden), from the timeline's exposed_s and
hidden_s. Without overlap nothing is hidden, so the bar is the whole exchange. The verdict table
folds a scenario's overlap axis back together (transitsim/analysis/overlap_verdict.py), as
`transitsim run` prints it.
"""

import pandas as pd
import plotly.graph_objects as go

from transitsim.analysis.overlap_verdict import has_overlap_axis, overlap_verdicts
from transitsim.base import human
from transitsim.report.common import config_columns, ms_per_step, network_names, short, text

HIDING_COLUMNS = ("exposed_s", "hidden_s")
HIDING_PARTS = (
    ("exposed_s", "exposed (in the step)", "#F58518"),
    ("hidden_s", "hidden by backward", "#4C78A8"),
)


def has_hiding(timeline: pd.DataFrame) -> bool:
    return all(column in timeline.columns for column in HIDING_COLUMNS)


def hiding_figure(timeline: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Exposed and hidden exchange ms per step: a row per network, a column per configuration."""
    networks, configs, values = ms_per_step(timeline, list(HIDING_COLUMNS))
    names = network_names(networks)
    fig = config_columns(configs, labels)
    y = [text(short(names[n], 48)) for n in networks]
    for col, config in enumerate(configs, start=1):
        per_step = {column: values[(config, column)] for column, _, _ in HIDING_PARTS}
        exchange = [e + h for e, h in zip(per_step["exposed_s"], per_step["hidden_s"], strict=True)]
        hidden_share = [
            f"{h / x:.0%}" if x > 0 else "–"
            for h, x in zip(per_step["hidden_s"], exchange, strict=True)
        ]
        for column, name, colour in HIDING_PARTS:
            fig.add_trace(
                go.Bar(
                    y=y,
                    x=per_step[column],
                    orientation="h",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    marker={"color": colour},
                    customdata=hidden_share,
                    hovertemplate=(
                        f"%{{y}}<br>{text(labels.get(config, config))}<br>{name}: "
                        "%{x:.4g} ms per step<br>hidden share of the exchange "
                        "%{customdata}<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="exchange ms per step" if col == 1 else None, row=1, col=col)
    for col in range(2, len(configs) + 1):
        fig.update_xaxes(matches="x", row=1, col=col)
    fig.update_layout(
        barmode="stack",
        height=max(320, 160 + 22 * len(networks)),
        yaxis={"autorange": "reversed", "tickfont": {"size": 11}},
        legend={"title": {"text": "exchange time"}},
        margin={"t": 40},
    )
    return fig


def overlap_verdict_figure(
    summary: pd.DataFrame | None, timeline: pd.DataFrame, labels: dict[str, str]
) -> go.Figure | None:
    """Per target and network: the fastest configuration without and with overlap (None: the
    summary has no overlap axis)."""
    if summary is None or not len(summary) or not has_overlap_axis(summary):
        return None
    table = overlap_verdicts(summary, timeline)
    if table.empty:
        return None

    def name(config: object) -> str:
        return "none reaches it" if config is None else text(labels.get(config, config))

    columns = {
        "target": [human.loss(float(t)) for t in table["target"]],
        "network": [text(n) for n in table["network"]],
        "fastest without overlap": [name(c) for c in table["fastest_without"]],
        "its time": [human.seconds(t) for t in table["time_without_s"]],
        "fastest with overlap": [name(c) for c in table["fastest_with"]],
        "its time with": [human.seconds(t) for t in table["time_with_s"]],
        "verdict changes": ["yes" if c else "no" for c in table["changed"]],
    }
    fig = go.Figure(
        go.Table(
            columnwidth=[1, 4, 3, 1.4, 3, 1.4, 1.4],
            header={"values": [f"<b>{c}</b>" for c in columns], "align": "left"},
            cells={"values": list(columns.values()), "align": "left"},
        )
    )
    fig.update_layout(height=min(160 + 28 * len(table), 1400), margin={"t": 10, "b": 10})
    return fig
