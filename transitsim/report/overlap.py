"""Overlap in the report: how much of each exchange the backward hid, and the verdict without and
with overlap side by side.

Per network (a row) and configuration (a column): the exchange's mean milliseconds per step that
showed in the step (exposed) and that backward hid (hidden), from the timeline's exposed_s and
hidden_s. Without overlap nothing is hidden, so the bar is the whole exchange. The verdict table
folds a scenario's overlap axis back together (transitsim/analysis/overlap_verdict.py), as
`transitsim run` prints it; it is an HTML table, not a plotly one, so text is never clipped
(plotly's table cut the descenders of `ring_allreduce`) and it sorts like the summary.
"""

import pandas as pd
import plotly.graph_objects as go

from transitsim.analysis.overlap_verdict import has_overlap_axis, overlap_verdicts
from transitsim.base import human
from transitsim.report.common import esc, ms_per_step, network_axis, text
from transitsim.report.grid import column_height, column_scales, config_columns
from transitsim.report.names import network_names

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
    y = [text(n) for n in networks]  # keyed by the full id; the axis shows the short name
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
        fig.update_xaxes(
            title_text="exchange time per step (ms)" if col == 1 else None, row=1, col=col
        )
    if column_scales(fig, configs, values, list(HIDING_COLUMNS)):
        fig.update_xaxes(
            title_text="exchange time per step (ms), each column its own scale", row=1, col=1
        )
    network_axis(fig, networks, names)
    fig.update_layout(
        barmode="stack",
        height=column_height(fig, len(networks)),
        yaxis={"autorange": "reversed", "tickfont": {"size": 11}},
        legend={"title": {"text": "exchange time"}},
    )
    return fig


def overlap_verdict_table(
    summary: pd.DataFrame | None, timeline: pd.DataFrame, labels: dict[str, str]
) -> str | None:
    """Per target and network: the fastest configuration without and with overlap, as a
    sortable HTML table (None: the summary has no overlap axis)."""
    if summary is None or not len(summary) or not has_overlap_axis(summary):
        return None
    table = overlap_verdicts(summary, timeline)
    if table.empty:
        return None
    names = network_names(list(dict.fromkeys(str(n) for n in table["network"])))

    def name(config: object) -> str:
        return "none reaches it" if config is None else str(labels.get(config, config))

    def seconds(value: float) -> tuple[str, str]:
        return human.seconds(value), "" if pd.isna(value) else repr(float(value))

    rows = []
    for row in table.itertuples(index=False):
        cells = [
            (human.loss(float(row.target)), repr(float(row.target))),
            (names[str(row.network)], str(row.network)),
            (name(row.fastest_without), name(row.fastest_without)),
            seconds(row.time_without_s),
            (name(row.fastest_with), name(row.fastest_with)),
            seconds(row.time_with_s),
            ("yes" if row.changed else "no", "yes" if row.changed else "no"),
        ]
        rows.append(
            "<tr>"
            + "".join(
                f"<td data-v='{esc(value)}'"
                + (f" title='{esc(row.network)}'" if index == 1 else "")
                + (" class='names'" if index in NAME_COLUMNS else "")
                + f">{esc(shown)}</td>"
                for index, (shown, value) in enumerate(cells)
            )
            + "</tr>"
        )
    header = "".join(f"<th title='click to sort'>{esc(c)}</th>" for c in VERDICT_HEADINGS)
    return (
        f"<div class='wide'><table class='sortable' id='overlap-verdict-table'><thead><tr>"
        f"{header}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


# the columns of configuration names: a tie names several, so they wrap (the page's cells don't)
NAME_COLUMNS = (2, 4)
VERDICT_HEADINGS = (
    "target",
    "network",
    "fastest without overlap",
    "its time",
    "fastest with overlap",
    "its time with overlap",
    "verdict changes",
)
