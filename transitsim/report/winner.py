"""The winner map, the report's first chart: which configuration reaches each target first.

A 1-D sweep: time to target against the swept value, a line per configuration, error bars
where the summary has a seed interval, and a star on the fastest, one chart per target (and
per value of a held parameter such as overlap), all on the page at once. A 2-D sweep: a
heatmap per target of the fastest configuration at each grid point, with its margin
(winner_grid.py). Listed networks (with no sweep, or beside one, where the swept value is
empty): bars per target with the fastest marked (winner_bars.py), never an empty panel.
"""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.analysis.outcomes import CONTENDER_AXES, PLACED
from transitsim.analysis.verdict import Winner, winners
from transitsim.base import human
from transitsim.report.common import ordered, short, text
from transitsim.report.grid import panel_grid
from transitsim.report.names import axis_title, axis_unit, number
from transitsim.report.winner_bars import listed_bars
from transitsim.report.winner_grid import heatmap_map
from transitsim.report.winner_parts import (
    RESULT_COLUMNS,
    SWEEP_COLUMNS,
    groups,
    interval_bounds,
    interval_text,
    is_result,
    margin_text,
)

__all__ = [
    "RESULT_COLUMNS",
    "SWEEP_COLUMNS",
    "is_result",
    "listed_figure",
    "sweep_parameters",
    "winner_figure",
]


def sweep_parameters(sweep: pd.DataFrame) -> list[str]:
    """Swept parameters a winner map can run along: numeric columns with two or more values."""
    params = []
    for column in sweep.columns:
        if is_result(column) or not pd.api.types.is_numeric_dtype(sweep[column]):
            continue
        if pd.api.types.is_bool_dtype(sweep[column]):
            continue
        if sweep[column].dropna().nunique() >= 2:
            params.append(column)
    return params


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


def _stars(part: pd.DataFrame, key: str, divisor: float, labels: dict[str, str]) -> go.Scatter:
    """The leader at each swept value, as gold stars (hover: the point's outcome, from the
    decision table: a tie "B = A", or "C ~ H" where the intervals cannot separate them; meta:
    that outcome, so a dotted line marks where it changes, as the crossovers table does)."""
    best = winners(part)
    by_network = part.drop_duplicates("network").set_index("network")[key]
    at: dict[float, Winner] = {}  # one star a value: a point placed two ways is one point
    for w in best:
        x = by_network[w.network] / divisor
        if w.config is not None and (x not in at or _time(part, w) < _time(part, at[x])):
            at[x] = w
    stars = sorted(at.items(), key=lambda item: item[0])
    times = part.set_index(["network", "config"])["time_to_target_s"]
    return go.Scatter(
        x=[x for x, _ in stars],
        y=[times[(w.network, w.config)] for _, w in stars],
        mode="markers",
        name="fastest",
        legendgroup="fastest",
        marker={
            "symbol": "star",
            "size": 15,
            "color": "gold",
            "line": {"color": "black", "width": 1},
        },
        customdata=np.column_stack(
            [
                [text(_outcome_words(w, labels)) for _, w in stars],
                [margin_text(w.margin) for _, w in stars],
            ]
        )
        if stars
        else None,
        hovertemplate=("<b>%{customdata[0]}</b><br>next by mean: %{customdata[1]}<extra></extra>"),
        meta=[w.outcome or w.config for _, w in stars],
    )


def _time(part: pd.DataFrame, w: Winner) -> float:
    rows = part[(part["network"] == w.network) & (part["config"] == w.config)]
    return float(rows["time_to_target_s"].iloc[0])


def _lines(part: pd.DataFrame, labels: dict[str, str]) -> list[tuple[str, str, pd.DataFrame]]:
    """(legend key, name, rows) per line: a configuration, or a configuration placed one way
    where the sweep places it two ways (in-network-sum: E all-gathered and E summed at the
    switch on the same axes, as the verdict compares them)."""
    placed = [a for a in CONTENDER_AXES if a in part.columns and part[a].nunique() > 1]
    found = []
    for config in ordered(part["config"]):
        rows = part[part["config"] == config]
        name = labels.get(config, config)
        if not placed:
            found.append((config, name, rows))
            continue
        for values, group in rows.groupby(placed, sort=True, dropna=False):
            values = values if isinstance(values, tuple) else (values,)
            words = [
                PLACED.get((a, str(v)), f"{a} {v}") for a, v in zip(placed, values, strict=True)
            ]
            found.append((f"{config}|{values}", f"{name}, {' '.join(words)}", group))
    return found


def _outcome_words(w, labels: dict[str, str]) -> str:
    """A star's hover: "fastest: A", "tie: B = A", "leads, cannot separate: C ~ H"."""
    if not w.outcome or w.outcome == w.config:
        return f"fastest: {labels.get(w.config, w.config)}"
    if " = " in w.outcome:
        return f"tie: {w.outcome}"
    if " ~ " in w.outcome:
        return f"leads by mean, cannot separate: {w.outcome}"
    return f"fastest: {w.outcome}"


def _line_map(
    sweep: pd.DataFrame,
    key: str,
    held: list[str],
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
) -> go.Figure:
    found = groups(sweep, held, targets)
    fig, _, cols = panel_grid([title for title, _ in found])
    unit, divisor = axis_unit(key, sweep[key].dropna().astype(float).tolist())
    shown: set[str] = set()
    for index, (_, part) in enumerate(found):
        previous = ""
        row, col = index // cols + 1, index % cols + 1
        for legend, name, rows in _lines(part, labels):
            line = rows.sort_values(key, kind="stable")
            config = str(line["config"].iloc[0])
            dash = "dash" if legend != config and legend.rsplit("|", 1)[0] == previous else "solid"
            previous = legend.rsplit("|", 1)[0]
            mean = line["time_to_target_s"].astype("float64")
            low, high = interval_bounds(line)
            spread = low is not None and bool(((high - low) > 0).any())
            fig.add_trace(
                go.Scatter(
                    x=line[key].astype("float64") / divisor,
                    y=mean,
                    mode="lines+markers",
                    name=text(short(name, 60)),
                    legendgroup=text(legend),
                    showlegend=legend not in shown,
                    line={"color": palette[config], "width": 2, "dash": dash},
                    marker={"size": 7},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": (high - mean).clip(lower=0).fillna(0.0).tolist(),
                        "arrayminus": (mean - low).clip(lower=0).fillna(0.0).tolist(),
                        "thickness": 1.3,
                        "width": 4,
                        "color": palette[config],
                    }
                    if spread
                    else None,
                    customdata=np.column_stack(
                        [
                            [human.param(key, v) for v in line[key]],
                            [human.seconds(v) for v in mean],
                            interval_text(line),
                        ]
                    ),
                    hovertemplate=(
                        f"<b>{text(name)}</b><br>{text(axis_title(key, []))} %{{customdata[0]}}"
                        "<br>time to target %{customdata[1]}%{customdata[2]}<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
            shown.add(legend)
        stars = _stars(part, key, divisor, labels)
        stars.showlegend = "fastest" not in shown
        fig.add_trace(stars, row=row, col=col)
        shown.add("fastest")
        previous = None
        for x, config in zip(stars.x, stars.meta, strict=True):
            if previous is not None and config != previous and math.isfinite(x):
                fig.add_vline(x=x, line={"dash": "dot", "color": "#444"}, row=row, col=col)
            previous = config
        values = part[key].dropna().astype("float64")
        log_x = bool((values > 0).all() and values.max() / values.min() >= 100)
        spent = part["time_to_target_s"].dropna()
        log_y = bool(len(spent) and (spent > 0).all() and spent.max() / spent.min() >= 10)
        ticks = sorted(values.unique() / divisor)
        fig.update_xaxes(
            type="log" if log_x else "linear",
            title_text=text(axis_title(key, values.tolist())),
            tickvals=ticks if len(ticks) <= 12 else None,
            ticktext=[number(v) for v in ticks] if len(ticks) <= 12 else None,
            ticksuffix=" %" if unit == "%" and len(ticks) > 12 else None,
            row=row,
            col=col,
        )
        y_ticks = _one_two_five(spent) if log_y else None
        fig.update_yaxes(
            type="log" if log_y else "linear",
            tickvals=y_ticks,
            ticktext=[number(v) for v in y_ticks] if y_ticks else None,
            title_text="time to target (s)" if col == 1 else None,
            row=row,
            col=col,
        )
    fig.update_layout(legend={"title": {"text": "configuration"}}, hovermode="closest")
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
        if keys:
            points = sweep.dropna(subset=keys, how="any")
            params = [c for c in points.columns if not is_result(c)]
            held = [  # a placement is a line of its own, on the same axes (_lines)
                p
                for p in params
                if p not in keys and p not in CONTENDER_AXES and points[p].nunique(dropna=False) > 1
            ]
            bars = " (bars: seed interval)" if "time_to_target_s_lo" in sweep else ""
            if len(keys) == 1:
                note = (
                    "a star marks the fastest configuration at each value; dotted: where it "
                    f"changes{bars}"
                )
                return _line_map(points, keys[0], held, targets, labels, palette), note
            note = "each cell: the fastest configuration there, and how much faster than the next"
            return heatmap_map(points, keys, held, targets, labels, palette), note
    rows = summary if sweep is None or not len(sweep) else sweep
    if rows is not None and len(rows) and rows["time_to_target_s"].notna().any():
        held = [c for c in rows.columns if not is_result(c) and rows[c].nunique() > 1]
        figure = listed_bars(rows, held, targets, labels, palette)
        return figure, "time to each target on each network; ★ and a black outline: the fastest"
    return None, "no configuration reached a target"


def listed_figure(
    sweep: pd.DataFrame | None,
    targets: list[float],
    labels: dict[str, str],
    palette: dict[str, str],
) -> go.Figure | None:
    """Beside a sweep: the networks listed one by one (no swept value), as bars per target with
    the fastest marked; None when the sweep has none or nothing reached a target there."""
    if sweep is None or not len(sweep):
        return None
    keys = sweep_parameters(sweep)
    if not keys:
        return None
    listed = sweep[sweep[keys].isna().all(axis=1)]
    if listed.empty or not listed["time_to_target_s"].notna().any():
        return None
    held = [
        c
        for c in listed.columns
        if not is_result(c)
        and c not in keys
        and listed[c].notna().any()
        and listed[c].nunique() > 1
    ]
    everything = ordered(sweep["network"].astype(str))
    return listed_bars(listed, held, targets, labels, palette, everything)
