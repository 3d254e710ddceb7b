"""The evidence under the verdict: loss curves, the steps ladder, where a step's time goes.

Loss against simulated time and against wire bytes: per configuration the mean over its seeds
with a band from the lowest to the highest seed, the targets drawn as dashed lines, one network
at a time (a menu). The step-time breakdown has one row per network and one column per
configuration, so it stays legible at 50+ networks; its rows are keyed by the full network id
(names.py shortens them for the axis only), so two networks never stack into one bar.
"""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.base import human
from transitsim.report.common import (
    NUMBER,
    dropdown,
    ms_per_step,
    network_axis,
    ordered,
    short,
    text,
)
from transitsim.report.grid import column_height, column_scales, config_columns
from transitsim.report.names import network_names

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


def _seed_curves(rows: pd.DataFrame, x: str) -> pd.DataFrame:
    """Per evaluated step: mean x, mean / min / max val loss over the config's seeds."""
    finite = rows[np.isfinite(rows["val_loss"].astype(float))]
    grouped = finite.groupby("step", sort=True)
    return pd.DataFrame(
        {
            "x": grouped[x].mean(),
            "mean": grouped["val_loss"].mean(),
            "low": grouped["val_loss"].min(),
            "high": grouped["val_loss"].max(),
            "seeds": grouped["run"].nunique(),
        }
    ).reset_index()


def _fill(colour: str) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.18)"


def loss_figure(
    timeline: pd.DataFrame,
    x: str,
    x_title: str,
    labels: dict[str, str],
    palette: dict[str, str],
    targets: list[float],
    scale: float = 1.0,
    log_x: bool = False,
) -> go.Figure:
    """Validation loss against `x` (divided by `scale`), mean and band over seeds, per network."""
    evaluated = timeline[timeline["val_loss"].notna()].copy()
    evaluated[x] = evaluated[x].astype(float) / scale
    networks = ordered(timeline["network"])
    names = network_names(networks)
    fig = go.Figure()
    owners: list[str] = []
    for network in networks:
        on_network = evaluated[evaluated["network"] == network]
        for config in ordered(on_network["config"]):
            curve = _seed_curves(on_network[on_network["config"] == config], x)
            if curve.empty:
                continue
            colour = palette[config]
            seeds = int(curve["seeds"].max())
            name = labels.get(config, config)
            if seeds > 1:
                fig.add_trace(
                    go.Scatter(
                        x=np.concatenate([curve["x"], curve["x"][::-1]]),
                        y=np.concatenate([curve["high"], curve["low"][::-1]]),
                        fill="toself",
                        fillcolor=_fill(colour),
                        line={"width": 0},
                        hoverinfo="skip",
                        showlegend=False,
                        legendgroup=text(config),
                        visible=network == networks[0],
                        name=text(short(name, 40)) + " band",
                    )
                )
                owners.append(network)
            fig.add_trace(
                go.Scatter(
                    x=curve["x"],
                    y=curve["mean"],
                    mode="lines+markers",
                    name=text(short(name, 40)) + (f" (mean of {seeds})" if seeds > 1 else ""),
                    legendgroup=text(config),
                    visible=network == networks[0],
                    line={"color": colour, "width": 2},
                    marker={"size": 5},
                    customdata=np.column_stack([curve["step"], curve["low"], curve["high"]]),
                    hovertemplate=(
                        f"<b>{text(name)}</b><br>step %{{customdata[0]}}<br>{text(x_title)} "
                        f"%{{x{NUMBER}}}<br>val loss %{{y:.4f}} (seeds %{{customdata[1]:.4f}}"
                        "–%{customdata[2]:.4f})<extra></extra>"
                    ),
                )
            )
            owners.append(network)
    finite = evaluated["val_loss"].astype(float)
    finite = finite[np.isfinite(finite)]
    y_range = None
    if len(finite) and targets:  # diverged runs would squash every other curve
        low = float(min(finite.min(), min(targets)))
        high = float(min(finite.max(), max(targets) + 2.5 * (max(targets) - low) + 0.1))
        y_range = [low - 0.05 * (high - low), high + 0.05 * (high - low)]
    for target in targets:
        fig.add_hline(
            y=target,
            line={"dash": "dash", "color": "#555", "width": 1},
            annotation_text=f"target {human.loss(target)}",
            annotation_position="top right",
        )
    fig.update_layout(
        xaxis={
            "title": {"text": text(x_title)},
            "type": "log" if log_x else "linear",
            "dtick": "D2" if log_x else None,
        },
        yaxis={"title": {"text": "validation loss"}, "range": y_range},
        legend={"title": {"text": "configuration (band: lowest to highest seed)"}},
        hovermode="closest",
    )
    dropdown(fig, [(text(names[n]), [o == n for o in owners], {}) for n in networks])
    return fig


def _bracket(before: float, first: float) -> str:
    """The evaluations either side of a crossing, for a bar's hover."""
    if math.isnan(first):
        return "not every seed reached it"
    return f"evaluated above it at {before:,.0f}, at or below at {first:,.0f} (mean over seeds)"


def ladder_figure(ladder: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Steps to each target per config (grouped bars); 'not reached' unless every seed was.

    A bar is where the loss crossed the target, interpolated between evaluations (the summary's
    steps_to_target); its whisker spans the evaluations either side, the last above and the first
    at or below (the published ladder's figure), since the step is known only to within them.
    A ladder without the crossing columns shows the first evaluation at or below."""
    fig = go.Figure()
    configs = ordered(ladder["config"])
    for target in ordered(ladder["target"]):
        rows = ladder[ladder["target"] == target].set_index("config").reindex(configs)
        first = rows["steps"].astype("float64")
        steps = rows["steps_crossed"].astype("float64") if "steps_crossed" in rows else first
        before = rows["steps_before"].astype("float64") if "steps_before" in rows else steps
        seeds = rows["seeds"] if "seeds" in rows else pd.Series(1, index=rows.index)
        shown = [
            human.steps(s, int(n)) if not math.isnan(s) else "not<br>reached"  # fits its bar
            for s, n in zip(steps, seeds.fillna(1), strict=True)
        ]
        names = [text(labels.get(c, c)) for c in configs]
        wire = rows["wire_bytes"] if "wire_bytes" in rows else pd.Series(np.nan, index=rows.index)
        fig.add_trace(
            go.Bar(
                x=[text(c) for c in configs],
                y=steps.fillna(0.0),
                name=text(f"to {human.loss(float(target))}"),
                text=shown,
                textposition="outside",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (first - steps).fillna(0.0).clip(lower=0.0),
                    "arrayminus": (steps - before).fillna(0.0).clip(lower=0.0),
                    "thickness": 1,
                    "width": 3,
                },
                customdata=np.column_stack(
                    [
                        [s.replace("<br>", " ") for s in shown],
                        [human.size(v) for v in wire],
                        names,
                        [_bracket(b, f) for b, f in zip(before, first, strict=True)],
                    ]
                ),
                hovertemplate=(
                    f"<b>%{{customdata[2]}}</b><br>target {text(human.loss(float(target)))}"
                    "<br>crossed at step %{customdata[0]}<br>%{customdata[3]}"
                    "<br>wire bytes per worker %{customdata[1]}<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(
        tickmode="array",
        tickvals=[text(c) for c in configs],
        ticktext=[text(short(labels.get(c, c))) for c in configs],
    )
    fig.update_layout(
        barmode="group",
        xaxis={"title": {"text": "configuration"}},
        yaxis={"title": {"text": "optimiser steps to reach the target"}},
        legend={"title": {"text": "validation loss"}},
        margin={"t": 50},
    )
    return fig


def breakdown_figure(timeline: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Mean milliseconds per step in each component: a row per network, a column per config."""
    present = [(column, name) for column, name in COMPONENTS if column in timeline.columns]
    networks, configs, values = ms_per_step(timeline, [c for c, _ in present])
    names = network_names(networks)
    fig = config_columns(configs, labels)
    y = [text(n) for n in networks]  # keyed by the full id; the axis shows the short name
    for col, config in enumerate(configs, start=1):
        for column, name in present:
            fig.add_trace(
                go.Bar(
                    y=y,
                    x=values[(config, column)],
                    orientation="h",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    marker={"color": COMPONENT_COLOURS[name]},
                    hovertemplate=(
                        f"%{{y}}<br>{text(labels.get(config, config))}<br>{name}: "
                        "%{x:.4g} ms per step<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="time per step (ms)" if col == 1 else None, row=1, col=col)
    if column_scales(fig, configs, values, [c for c, _ in present]):
        fig.update_xaxes(title_text="time per step (ms), each column its own scale", row=1, col=1)
    network_axis(fig, networks, names)
    fig.update_layout(
        barmode="stack",
        height=column_height(fig, len(networks)),
        yaxis={"autorange": "reversed", "tickfont": {"size": 11}},
        legend={"title": {"text": "component"}},
    )
    return fig
