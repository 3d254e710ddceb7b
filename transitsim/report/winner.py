"""The winner map, the report's first chart: which configuration reaches each target first.

A 1-D sweep: time to target against the swept value, a line per configuration and a star on
the fastest, one chart per target (and per value of a held text parameter), all on the page at
once. A 2-D sweep: a heatmap per target of the fastest configuration at each grid point, with
its margin (runner-up time / best). Listed networks without a sweep: grouped bars per target.
"""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transitsim.analysis.verdict import winners
from transitsim.base import human
from transitsim.base.units import key_unit
from transitsim.report.common import NUMBER, network_names, ordered, short, text

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
    "extrapolated",
}
MAX_CHARTS = 6


def sweep_parameters(sweep: pd.DataFrame) -> list[str]:
    """Swept parameters a winner map can run along: numeric columns with two or more values."""
    params = []
    for column in sweep.columns:
        if column in RESULT_COLUMNS or not pd.api.types.is_numeric_dtype(sweep[column]):
            continue
        if pd.api.types.is_bool_dtype(sweep[column]):
            continue
        if sweep[column].dropna().nunique() >= 2:
            params.append(column)
    return params


def _groups(
    sweep: pd.DataFrame, held: list[str], targets: list[float]
) -> list[tuple[str, pd.DataFrame]]:
    """(chart title, rows) per target and held-parameter combination, at most MAX_CHARTS."""
    groups = []
    for target in targets:
        part = sweep[sweep["target"] == target]
        if part.empty:
            continue
        combos = part.groupby(held, sort=False, dropna=False) if held else [((), part)]
        for values, rows in combos:
            values = values if isinstance(values, tuple) else (values,)
            extra = ", ".join(f"{k} {human.param(k, v)}" for k, v in zip(held, values, strict=True))
            groups.append(
                (f"to loss {human.loss(target)}" + (f" · {extra}" if extra else ""), rows)
            )
    return groups[:MAX_CHARTS]


def _one_two_five(values: pd.Series) -> list[float]:
    """Log-axis ticks at 1, 2 and 5 of each decade the values span (labelled in full)."""
    low, high = float(values.min()), float(values.max())
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for digit in (1, 2, 5):
            tick = digit * 10.0**exponent
            if low / 1.5 <= tick <= high * 1.5:
                ticks.append(tick)
    return ticks


def _grid_shape(count: int) -> tuple[int, int]:
    """Rows and columns of panels: four (two targets, overlap off and on) fit one row, so the
    chart stays on the report's first screen; more wrap at three a row."""
    cols = count if count <= 4 else 3
    return math.ceil(count / cols), cols


def _line_map(
    sweep: pd.DataFrame,
    key: str,
    held: list[str],
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
) -> go.Figure:
    groups = _groups(sweep, held, targets)
    rows, cols = _grid_shape(len(groups))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[text(title) for title, _ in groups],
        horizontal_spacing=0.07,
        vertical_spacing=0.16,
    )
    shown: set[str] = set()
    for index, (_, part) in enumerate(groups):
        row, col = index // cols + 1, index % cols + 1
        for config in ordered(part["config"]):
            line = part[part["config"] == config].sort_values(key, kind="stable")
            name = labels.get(config, config)
            fig.add_trace(
                go.Scatter(
                    x=line[key],
                    y=line["time_to_target_s"],
                    mode="lines+markers",
                    name=text(short(name, 40)),
                    legendgroup=text(config),
                    showlegend=config not in shown,
                    line={"color": palette[config], "width": 2},
                    marker={"size": 7},
                    customdata=np.column_stack(
                        [
                            [human.param(key, v) for v in line[key]],
                            [human.seconds(v) for v in line["time_to_target_s"]],
                        ]
                    ),
                    hovertemplate=(
                        f"<b>{text(name)}</b><br>{text(key)} %{{customdata[0]}}"
                        "<br>time to target %{customdata[1]}<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
            shown.add(config)
        best = winners(part)
        by_network = part.drop_duplicates("network").set_index("network")[key]
        stars = [(by_network[w.network], w) for w in best if w.config is not None]
        stars.sort(key=lambda item: item[0])
        times = part.set_index(["network", "config"])["time_to_target_s"]
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in stars],
                y=[times[(w.network, w.config)] for _, w in stars],
                mode="markers",
                name="fastest",
                legendgroup="fastest",
                showlegend="fastest" not in shown,
                marker={
                    "symbol": "star",
                    "size": 15,
                    "color": "gold",
                    "line": {"color": "black", "width": 1},
                },
                customdata=np.column_stack(
                    [
                        [text(labels.get(w.config, w.config)) for _, w in stars],
                        [human.ratio(w.margin) for _, w in stars],
                    ]
                )
                if stars
                else None,
                hovertemplate=(
                    "fastest: <b>%{customdata[0]}</b><br>%{customdata[1]} ahead of the next"
                    "<extra></extra>"
                ),
            ),
            row=row,
            col=col,
        )
        shown.add("fastest")
        previous = None
        for x, w in stars:
            if previous is not None and w.config != previous:
                fig.add_vline(x=x, line={"dash": "dot", "color": "#444"}, row=row, col=col)
            previous = w.config
        values = part[key].dropna()
        log_x = bool((values > 0).all() and values.max() / values.min() >= 100)
        spent = part["time_to_target_s"].dropna()
        log_y = bool(len(spent) and (spent > 0).all() and spent.max() / spent.min() >= 10)
        ticks = sorted(values.unique())
        fig.update_xaxes(
            type="log" if log_x else "linear",
            title_text=text(key),
            tickvals=ticks if key_unit(key) and len(ticks) <= 12 else None,
            ticktext=[human.param(key, v) for v in ticks]
            if key_unit(key) and len(ticks) <= 12
            else None,
            exponentformat="SI",
            row=row,
            col=col,
        )
        y_ticks = _one_two_five(spent) if log_y else None
        fig.update_yaxes(
            type="log" if log_y else "linear",
            tickvals=y_ticks,
            ticktext=[human.seconds(v) for v in y_ticks] if y_ticks else None,
            title_text="time to target" if col == 1 else None,
            row=row,
            col=col,
        )
    fig.update_layout(
        height=420 if rows == 1 else 330 * rows,
        legend={"title": {"text": "configuration"}},
        hovermode="closest",
        margin={"t": 50, "b": 50},
    )
    return fig


def _heatmap(
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
    groups = _groups(sweep, held, targets)
    rows, cols = _grid_shape(len(groups))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[text(title) for title, _ in groups],
        horizontal_spacing=0.08,
        vertical_spacing=0.18,
    )
    configs = ordered(sweep["config"])
    index_of = {config: i for i, config in enumerate(configs)}
    scale = []
    for i, config in enumerate(configs):  # a stepped colour scale: one band per configuration
        low, high = i / len(configs), (i + 1) / len(configs)
        scale += [[low, palette[config]], [high, palette[config]]]
    for number, (_, part) in enumerate(groups):
        row, col = number // cols + 1, number % cols + 1
        xs = sorted(part[x_key].dropna().unique())
        ys = sorted(part[y_key].dropna().unique())
        z = np.full((len(ys), len(xs)), np.nan)
        labels_grid = np.full((len(ys), len(xs)), "none reach it", dtype=object)
        points = part.drop_duplicates("network").set_index("network")[[x_key, y_key]]
        for w in winners(part):
            if w.network not in points.index:
                continue
            xv, yv = points.loc[w.network]
            i, j = ys.index(yv), xs.index(xv)
            if w.config is None:
                continue
            z[i, j] = index_of[w.config]
            margin = "only one" if math.isnan(w.margin) else human.ratio(w.margin)
            labels_grid[i, j] = f"{text(short(labels.get(w.config, w.config), 18))}<br>{margin}"
        fig.add_trace(
            go.Heatmap(
                x=[human.param(x_key, v) for v in xs],
                y=[human.param(y_key, v) for v in ys],
                z=z,
                zmin=-0.5,
                zmax=len(configs) - 0.5,
                colorscale=scale,
                showscale=False,
                text=labels_grid,
                texttemplate="%{text}",
                textfont={"size": 11, "color": "white"},
                xgap=2,
                ygap=2,
                hovertemplate=(
                    f"{text(x_key)} %{{x}}<br>{text(y_key)} %{{y}}<br>fastest: %{{text}}"
                    "<extra></extra>"
                ),
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(title_text=text(x_key), type="category", row=row, col=col)
        fig.update_yaxes(title_text=text(y_key), type="category", row=row, col=col)
    for config in configs:  # legend entries: the heatmap has none of its own
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "square", "size": 14, "color": palette[config]},
                name=text(short(labels.get(config, config), 40)),
                showlegend=True,
            )
        )
    fig.update_layout(
        height=420 if rows == 1 else 340 * rows,
        legend={"title": {"text": "fastest (margin: runner-up / best)"}},
        margin={"t": 50, "b": 50},
        plot_bgcolor="#f3f3f3",
    )
    return fig


def _bars(
    summary: pd.DataFrame, targets: list[float], labels: dict[str, str], palette: dict[str, str]
) -> go.Figure:
    """Listed networks, no sweep: time to each target per network, a bar per configuration."""
    groups = [(f"to loss {human.loss(t)}", summary[summary["target"] == t]) for t in targets]
    groups = groups[:MAX_CHARTS]
    rows, cols = _grid_shape(len(groups))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[text(t) for t, _ in groups])
    names = network_names(ordered(summary["network"]))
    shown: set[str] = set()
    for number, (_, part) in enumerate(groups):
        row, col = number // cols + 1, number % cols + 1
        for config in ordered(part["config"]):
            bars = part[part["config"] == config]
            fig.add_trace(
                go.Bar(
                    y=[text(short(names[n], 36)) for n in bars["network"]],
                    x=bars["time_to_target_s"],
                    orientation="h",
                    name=text(short(labels.get(config, config), 40)),
                    legendgroup=text(config),
                    showlegend=config not in shown,
                    marker={"color": palette[config]},
                    hovertemplate=f"{text(labels.get(config, config))}: %{{x{NUMBER}}} s"
                    "<extra></extra>",
                ),
                row=row,
                col=col,
            )
            shown.add(config)
        fig.update_xaxes(title_text="time to target (s)", row=row, col=col)
    count = summary["network"].nunique()
    fig.update_layout(barmode="group", height=max(360, 120 + 28 * count * rows))
    return fig


def winner_figure(
    sweep: pd.DataFrame | None,
    summary: pd.DataFrame,
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
) -> tuple[go.Figure | None, str]:
    """The winner map for this run, and a one-line note on how to read it."""
    if sweep is not None and len(sweep):
        keys = sweep_parameters(sweep)
        params = [c for c in sweep.columns if c not in RESULT_COLUMNS]
        held = [p for p in params if p not in keys and sweep[p].nunique(dropna=False) > 1]
        if len(keys) == 1:
            note = "a star marks the fastest configuration at each value; dotted: where it changes"
            return _line_map(sweep, keys[0], held, targets, labels, palette), note
        if len(keys) >= 2:
            note = "each cell: the fastest configuration there, and how much faster than the next"
            return _heatmap(sweep, keys, held, targets, labels, palette), note
    if summary is not None and len(summary) and summary["time_to_target_s"].notna().any():
        return _bars(summary, targets, labels, palette), "time to each target on each network"
    return None, "no configuration reached a target"
