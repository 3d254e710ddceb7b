"""Which link is busy when: the report's link view, from the best data the run gives it.

- One recorded step (link_util: per link a step function of utilisation): a heatmap of links
  against time in the step, one (network, run) at a time, so links busy at once or in turn
  read at a glance (lines at 100 % drawn over each other did not).
- No recorded step, but per-link totals over the run (link_stats, e.g. networks of more than
  64 workers, whose steps are not recorded): the busy share of each of the busiest links.
- Neither: from the timeline, the share of each step its exchange kept the network busy
  (wire and wait time over step time), a row per network and a column per configuration.
"""

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.report.common import (
    PALETTE,
    dropdown,
    network_axis,
    ordered,
    short,
    text,
)
from transitsim.report.grid import column_height, config_columns
from transitsim.report.names import network_names

LINK_UTIL_COLUMNS = ("network", "link", "t_s", "utilisation")
LINK_STATS_COLUMNS = ("run", "network", "link", "busy_share")
TIME_BINS = 120  # columns of the heatmap: one step cut into this many equal spans
BUSIEST_LINKS = 16


def natural(name: str) -> list:
    """Sort key that puts h2 before h10 (link names number their hosts)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _binned(rows: pd.DataFrame, edges: np.ndarray) -> np.ndarray:
    """A link's mean utilisation in each span between edges: the step function
    (utilisation from each t_s to the next) integrated exactly over the span."""
    rows = rows.sort_values("t_s", kind="stable")
    times = rows["t_s"].to_numpy(dtype="float64")
    shares = rows["utilisation"].to_numpy(dtype="float64")
    if len(times) < 2:
        return np.zeros(len(edges) - 1)
    area = np.concatenate([[0.0], np.cumsum(shares[:-1] * np.diff(times))])
    at_edges = np.interp(edges, times, area, left=0.0, right=float(area[-1]))
    return np.diff(at_edges) / np.diff(edges)


def step_heatmap(link_util: pd.DataFrame, timeline: pd.DataFrame) -> tuple[go.Figure, int]:
    """Links x time in one recorded step, per (network, run) with a menu; and the most links
    one view shows (for the panel's height)."""
    omitted = dict(link_util.attrs.get("omitted", {}))  # quieter links the run left out
    runs = link_util["run"] if "run" in link_util else pd.Series("", index=link_util.index)
    keyed = link_util.assign(_run=runs.astype(str), network=link_util["network"].astype(str))
    names = network_names(ordered(timeline["network"].astype(str)) + ordered(keyed["network"]))
    views = list(dict.fromkeys(zip(keyed["network"], keyed["_run"], strict=True)))
    fig = go.Figure()
    options = []
    most = 1
    for number, (network, run) in enumerate(views):
        rows = keyed[(keyed["network"] == network) & (keyed["_run"] == run)]
        links = sorted(ordered(rows["link"].astype(str)), key=natural)
        most = max(most, len(links))
        low, high = float(rows["t_s"].min()), float(rows["t_s"].max())
        edges = np.linspace(low, high if high > low else low + 1e-9, TIME_BINS + 1)
        z = np.vstack([_binned(rows[rows["link"] == link], edges) for link in links])
        label = names.get(network, network) + (f" · step of {run}" if run else "")
        left = omitted.get(f"{network}|{run}", [])
        if left:  # every link shown, or the ones not shown named
            shown = ", ".join(left[:6]) + (f" and {len(left) - 6} more" if len(left) > 6 else "")
            label += f" · {len(links)} busiest links; not shown: {shown}"
        fig.add_trace(
            go.Heatmap(
                x=(edges[:-1] + edges[1:]) / 2 * 1e3,
                y=[text(short(link, 40)) for link in links],
                z=np.round(100 * z, 1),
                zmin=0,
                zmax=100,
                colorscale="Blues",
                colorbar={"title": {"text": "utilisation (%)", "side": "right"}},
                hovertemplate=(
                    "<b>%{y}</b><br>%{x:.4g} ms into the step<br>utilisation %{z:.0f} %"
                    "<extra></extra>"
                ),
                xgap=0,
                ygap=1,
                visible=number == 0,
                name=text(short(label, 60)),
            )
        )
        options.append((text(short(label, 200)), [i == number for i in range(len(views))], {}))
    first = options[0][0] if options else ""
    fig.update_layout(
        title={"text": first, "font": {"size": 13}} if len(views) == 1 else None,
        xaxis={"title": {"text": "time within the step (ms)"}},
        yaxis={"title": {"text": "link"}, "autorange": "reversed", "type": "category"},
    )
    dropdown(fig, options)
    return fig, most


def busy_share_bars(link_stats: pd.DataFrame, timeline: pd.DataFrame) -> tuple[go.Figure, int]:
    """The busiest links' busy share over the whole run, per network (a menu), a bar per
    configuration (mean over its seeds)."""
    config_of = dict(zip(timeline["run"].astype(str), timeline["config"].astype(str), strict=True))
    stats = link_stats.assign(
        config=link_stats["run"].astype(str).map(config_of).fillna(link_stats["run"].astype(str)),
        network=link_stats["network"].astype(str),
        link=link_stats["link"].astype(str),
    )
    palette = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(ordered(stats["config"]))}
    names = network_names(ordered(stats["network"]))
    fig = go.Figure()
    owners: list[str] = []
    networks = ordered(stats["network"])
    for network in networks:
        rows = stats[stats["network"] == network]
        share = rows.groupby(["link", "config"], sort=False)["busy_share"].mean().unstack()
        top = share.max(axis=1).nlargest(BUSIEST_LINKS).index.tolist()
        for config in ordered(rows["config"]):
            values = share.reindex(top)[config] if config in share else pd.Series(np.nan, top)
            fig.add_trace(
                go.Bar(
                    y=[text(link) for link in top],
                    x=100 * values.to_numpy(dtype="float64"),
                    orientation="h",
                    name=text(short(config, 40)),
                    legendgroup=text(config),
                    marker={"color": palette[config]},
                    visible=network == networks[0],
                    hovertemplate=(
                        f"%{{y}}<br>{text(config)}<br>busy %{{x:.3g}} % of the run<extra></extra>"
                    ),
                )
            )
            owners.append(network)
    fig.update_layout(
        barmode="group",
        xaxis={"title": {"text": "busy share of the run (%)"}, "ticksuffix": " %"},
        yaxis={"title": {"text": "link"}, "autorange": "reversed"},
        legend={"title": {"text": "configuration"}},
    )
    dropdown(fig, [(text(short(names[n], 90)), [o == n for o in owners], {}) for n in networks])
    return fig, BUSIEST_LINKS


def exchange_share_bars(timeline: pd.DataFrame, labels: dict[str, str]) -> go.Figure | None:
    """Per network and configuration: the share of a step the exchange kept the network busy,
    (wire + wait) / step time, weighted by the steps each row stands for (None: the timeline
    has no step or wire times to say it from)."""
    if "step_s" not in timeline or not any(c in timeline for c in ("wire_s", "wait_s")):
        return None
    weights = (
        timeline["interval_steps"].astype("float64")
        if "interval_steps" in timeline.columns
        else pd.Series(1.0, index=timeline.index)
    )
    busy = sum(
        timeline[c].astype("float64").fillna(0.0) for c in ("wire_s", "wait_s") if c in timeline
    )
    frame = pd.DataFrame(
        {
            "network": timeline["network"].astype(str),
            "config": timeline["config"].astype(str),
            "busy": busy * weights,
            "step": timeline["step_s"].astype("float64").fillna(0.0) * weights,
        }
    )
    sums = frame.groupby(["network", "config"], sort=False)[["busy", "step"]].sum()
    networks, configs = ordered(frame["network"]), ordered(frame["config"])
    names = network_names(networks)
    fig = config_columns(configs, labels)
    for col, config in enumerate(configs, start=1):
        shares = []
        for network in networks:
            key = (network, config)
            step = sums.loc[key, "step"] if key in sums.index else 0.0
            shares.append(100 * sums.loc[key, "busy"] / step if step > 0 else np.nan)
        fig.add_trace(
            go.Bar(
                y=[text(n) for n in networks],
                x=shares,
                orientation="h",
                name="network busy",
                showlegend=False,
                marker={"color": "#F58518"},
                hovertemplate=(
                    f"%{{y}}<br>{text(labels.get(config, config))}<br>exchange on the wire "
                    "%{x:.3g} % of the step<extra></extra>"
                ),
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(
            title_text="share of the step (%)" if col == 1 else None,
            range=[0, 108],
            tickvals=[0, 50, 100],
            row=1,
            col=col,
        )
    network_axis(fig, networks, names)
    fig.update_layout(
        height=column_height(fig, len(networks)),
        yaxis={"autorange": "reversed", "tickfont": {"size": 11}},
    )
    return fig
