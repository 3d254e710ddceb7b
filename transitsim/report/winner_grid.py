"""A 2-D sweep's winner map: per target (and held value), a heatmap of the fastest
configuration at each grid point, coloured by configuration, with a short tag and its margin
(runner-up time / best) in each cell. Axes are named for people, in one unit each.
"""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.analysis.outcomes import DEFAULT_TIE_MARGIN
from transitsim.analysis.uncertainty import overlaps
from transitsim.analysis.verdict import Winner, winners
from transitsim.report.common import ordered, short, text
from transitsim.report.grid import panel_grid
from transitsim.report.names import axis_title, config_tags, value_text
from transitsim.report.winner_parts import groups, margin_text


def heatmap_map(
    sweep: pd.DataFrame,
    keys: list[str],
    held: list[str],
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
) -> go.Figure:
    """Fastest configuration per (x, y) grid point, coloured by configuration, margin as text."""
    x_key, y_key = keys[0], keys[1]
    held = held + keys[2:]
    found = groups(sweep, held, targets)
    fig, _, cols = panel_grid([title for title, _ in found], row_px=300, horizontal_spacing=0.06)
    configs = ordered(sweep["config"])
    variants = dict(zip(sweep["config"], sweep["variant"].astype(str), strict=True))
    tags = config_tags(configs, labels, variants)
    index_of = {config: i for i, config in enumerate(configs)}
    scale = []
    for i, config in enumerate(configs):  # a stepped colour scale: one band per configuration
        low, high = i / len(configs), (i + 1) / len(configs)
        scale += [[low, palette[config]], [high, palette[config]]]
    x_all = sweep[x_key].dropna().astype(float).tolist()
    y_all = sweep[y_key].dropna().astype(float).tolist()
    for number, (_, part) in enumerate(found):
        row, col = number // cols + 1, number % cols + 1
        xs = sorted(part[x_key].dropna().unique())
        ys = sorted(part[y_key].dropna().unique())
        z = np.full((len(ys), len(xs)), np.nan)
        cells = np.full((len(ys), len(xs)), "none<br>reach it", dtype=object)
        hover = np.full((len(ys), len(xs)), "none reaches it", dtype=object)
        points = part.drop_duplicates("network").set_index("network")[[x_key, y_key]]
        for w in winners(part):
            if w.network not in points.index or w.config is None:
                continue
            xv, yv = points.loc[w.network]
            i, j = ys.index(yv), xs.index(xv)
            z[i, j] = index_of[w.config]
            margin = "only one" if math.isnan(w.margin) else margin_text(w.margin)
            cells[i, j], hover[i, j] = _cell(w, part, tags, labels, margin)
        fig.add_trace(
            go.Heatmap(
                x=[value_text(x_key, v, x_all) for v in xs],
                y=[value_text(y_key, v, y_all) for v in ys],
                z=z,
                zmin=-0.5,
                zmax=len(configs) - 0.5,
                colorscale=scale,
                showscale=False,
                text=cells,
                customdata=hover,
                texttemplate="%{text}",
                textfont={"size": 11, "color": "white"},
                xgap=2,
                ygap=2,
                hovertemplate=(
                    f"{text(axis_title(x_key, x_all))} %{{x}}<br>{text(axis_title(y_key, y_all))}"
                    " %{y}<br>fastest: %{customdata}<extra></extra>"
                ),
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(
            title_text=text(axis_title(x_key, x_all)), type="category", row=row, col=col
        )
        fig.update_yaxes(
            title_text=text(axis_title(y_key, y_all)) if col == 1 else None,
            type="category",
            row=row,
            col=col,
        )
    for config in configs:  # legend entries: the heatmap has none of its own
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "square", "size": 14, "color": palette[config]},
                name=text(f"{tags[config]}: {short(labels.get(config, config), 36)}")
                if tags[config] != labels.get(config, config).split(" ", 1)[0]
                else text(short(labels.get(config, config), 40)),
                showlegend=True,
            )
        )
    fig.update_layout(
        legend={"title": {"text": "fastest (margin: runner-up / best)"}},
        plot_bgcolor="#f3f3f3",
    )
    return fig


def _cell(
    w: Winner, part: pd.DataFrame, tags: dict[str, str], labels: dict[str, str], margin: str
) -> tuple[str, str]:
    """A cell's text and hover from the decision table's call (analysis/decision.py): the
    leader's tag, "tie" where another is within the tie margin, "?" where another's interval
    overlaps and the means are far apart (cannot separate), and the margin to the next."""
    tag = text(tags[w.config])
    if w.call == "ties":
        return f"{tag} tie<br>{margin}", f"{text(w.outcome)}: a tie (within the tie margin)"
    if " ~ " in w.outcome:
        return (
            f"{tag} ?<br>{margin}",
            f"{text(w.outcome)}: leads by mean; the intervals overlap, cannot separate",
        )
    if not w.call and (w.margin < 1 + DEFAULT_TIE_MARGIN or _intervals_overlap(part, w.network)):
        name = text(labels.get(w.config, w.config))  # a summary without the decision's columns
        return f"{tag} tie<br>{margin}", f"{name} ties ({margin} to the next)"
    return (
        f"{tag}<br>{margin}",
        f"{text(labels.get(w.config, w.config))}, {margin} ahead of the next",
    )


def _intervals_overlap(part: pd.DataFrame, network: str) -> bool:
    """Whether any other configuration's seed interval overlaps the fastest's at `network` (the
    verdict's other tie rule, outcomes.overlaps, against every contender, not the runner-up by
    mean alone: a wide interval behind it ties too); False where the summary has no intervals."""
    if not {"time_to_target_s_lo", "time_to_target_s_hi"} <= set(part.columns):
        return False
    rows = part[part["network"] == network].dropna(subset=["time_to_target_s"])
    rows = rows.drop_duplicates("config").sort_values("time_to_target_s", kind="stable")
    if len(rows) < 2:
        return False
    best = rows.iloc[0]
    if pd.isna(best["time_to_target_s_lo"]) or pd.isna(best["time_to_target_s_hi"]):
        return False
    own = (float(best["time_to_target_s_lo"]), float(best["time_to_target_s_hi"]))
    others = rows.iloc[1:].dropna(subset=["time_to_target_s_lo", "time_to_target_s_hi"])
    return any(
        overlaps(own, (float(lo), float(hi)))
        for lo, hi in zip(others["time_to_target_s_lo"], others["time_to_target_s_hi"], strict=True)
    )
