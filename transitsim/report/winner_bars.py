"""Listed networks (no swept value): time to each target per network, a bar per configuration,
the fastest marked with a star and a black outline, error bars where the summary has a seed
interval. Bars are keyed by the full network id; the axis shows its short name.
"""

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.analysis.decision import in_winner_set
from transitsim.analysis.verdict import winners
from transitsim.base import human
from transitsim.report.common import network_axis, ordered, short, text
from transitsim.report.grid import panel_grid
from transitsim.report.names import network_names
from transitsim.report.winner_parts import groups, interval_bounds, interval_text

BAR_PX = 11  # one bar's height


BAR_MARKS = {"leads": "★", "ties": "★ tie", "cannot separate": "~"}
CALL_WORDS = {
    "leads": "fastest here",
    "ties": "tied for fastest here",
    "cannot separate": "its interval overlaps the leader's: cannot separate",
}


def listed_bars(
    rows: pd.DataFrame,
    held: list[str],
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
    networks_of_run: list[str] | None = None,
) -> go.Figure:
    """A chart per target (and held value, e.g. overlap): per network a bar per configuration.
    networks_of_run: every network of the run, so names say what tells these apart there."""
    found = groups(rows, held, targets)
    configs = ordered(rows["config"])
    most = max((part["network"].nunique() for _, part in found), default=1)
    fig, _, cols = panel_grid(
        [title for title, _ in found],
        row_px=max(230, 70 + BAR_PX * most * len(configs) + 12 * most),
        max_cols=2,
        horizontal_spacing=0.22,
    )
    names = network_names(networks_of_run or ordered(rows["network"].astype(str)))
    shown: set[str] = set()
    for number, (_, part) in enumerate(found):
        row, col = number // cols + 1, number % cols + 1
        networks = ordered(part["network"].astype(str))
        best = {w.network: w for w in winners(part)}
        for config in configs:
            bars = part[part["config"] == config].set_index("network").reindex(networks)
            mean = bars["time_to_target_s"].astype("float64")
            low, high = interval_bounds(bars.reset_index())
            if "call" in bars.columns:  # the decision table's call (analysis/decision.py)
                calls = bars["call"].fillna("").astype(str).tolist()
            else:
                calls = [
                    "leads" if best.get(n) is not None and best[n].config == config else ""
                    for n in networks
                ]
            fastest = [in_winner_set(c) for c in calls]
            fig.add_trace(
                go.Bar(
                    y=[text(n) for n in networks],
                    x=mean.fillna(0.0),
                    orientation="h",
                    name=text(short(labels.get(config, config), 40)),
                    legendgroup=text(config),
                    showlegend=config not in shown,
                    marker={
                        "color": palette[config],
                        "line": {
                            "color": "black",
                            "width": [2.5 if f else 0 for f in fastest],
                        },
                    },
                    text=[
                        BAR_MARKS.get(c, "") or ("not reached" if np.isnan(v) else "")
                        for c, v in zip(calls, mean, strict=True)
                    ],
                    textposition="outside",
                    textfont={
                        "size": [17 if f else 10 for f in fastest],
                        "color": ["#B8860B" if f else "#666" for f in fastest],
                    },
                    cliponaxis=False,
                    error_x={
                        "type": "data",
                        "symmetric": False,
                        "array": (high.to_numpy() - mean.to_numpy()).clip(0).tolist(),
                        "arrayminus": (mean.to_numpy() - low.to_numpy()).clip(0).tolist(),
                        "thickness": 1.2,
                        "width": 3,
                        "color": "#333",
                    }
                    if low is not None and high is not None
                    else None,
                    customdata=np.column_stack(
                        [
                            [human.seconds(v) for v in mean],
                            interval_text(bars.reset_index()),
                            [CALL_WORDS.get(c, "") for c in calls],
                        ]
                    ),
                    hovertemplate=(
                        f"%{{y}}<br><b>{text(labels.get(config, config))}</b>: "
                        "%{customdata[0]}%{customdata[1]}<br>%{customdata[2]}<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
            shown.add(config)
        network_axis(fig, networks, names, limit=36, row=row, col=col)
        fig.update_yaxes(autorange="reversed", row=row, col=col)
        spent = part["time_to_target_s"].dropna()
        log_x = bool(len(spent) and (spent > 0).all() and spent.max() / spent.min() > 10)
        fig.update_xaxes(
            title_text="time to target (s)" + (", log scale" if log_x else ""),
            type="log" if log_x else "linear",
            row=row,
            col=col,
        )
    fig.update_layout(barmode="group", legend={"title": {"text": "configuration"}})
    return fig
