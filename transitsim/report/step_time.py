"""The first chart when no target was reached or none asked (a bring-your-own replay, issue 43):
the predicted mean step time of each configuration on each network it was replayed on, which
is the what-if a user came for, instead of a panel saying that nothing reached a target. Where
the trace came from a profiled job (`traces import --profile`), the step that job measured is
drawn and written beside the predicted ones, each network's prediction as a multiple of it."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transitsim.base import human
from transitsim.report.common import network_axis, ordered, short, text
from transitsim.report.names import network_names


def mean_step_times(timeline: pd.DataFrame) -> pd.DataFrame:
    """Per (config, network): the mean simulated step (each row weighted by the steps it
    stands for) and its exposed exchange share."""
    weights = timeline["interval_steps"].astype("float64")
    frame = timeline[["config", "network"]].assign(
        step=timeline["step_s"].astype("float64") * weights,
        wire=(timeline["wire_s"].astype("float64") + timeline["wait_s"].astype("float64"))
        * weights,
        steps=weights,
    )
    sums = frame.groupby(["config", "network"], sort=False).sum().reset_index()
    sums["step_s"] = sums["step"] / sums["steps"]
    sums["exchange_share"] = sums["wire"] / sums["step"]
    return sums[["config", "network", "step_s", "exchange_share"]]


MAX_NAMED = 6  # networks a configuration's sentence names before "and N more"


def step_time_sentences(
    timeline: pd.DataFrame, labels: dict[str, str], measured: dict[str, float]
) -> list[str]:
    """Per configuration: the step its profiled job measured (where known) and the predicted
    step on each network it was replayed on, as a multiple of the measured one."""
    table = mean_step_times(timeline)
    sentences = []
    for config in ordered(table["config"]):
        rows = table[table["config"] == config]
        mine = measured.get(config)
        parts = []
        for network, step_s in zip(rows["network"].astype(str), rows["step_s"], strict=True):
            ratio = f" ({step_s / mine:.2f}x measured)" if mine else ""
            parts.append(f"on {network} {human.seconds(step_s)}{ratio}")  # the id typed
        more = len(parts) - MAX_NAMED
        listed = "; ".join(parts[:MAX_NAMED]) + (f"; and {more} more" if more > 0 else "")
        head = labels.get(config, config)
        if mine:
            head += f": measured {human.seconds(mine)} a step on the profiled job, predicted"
        else:
            head += ": predicted (no measured step: not a profiled trace)"
        sentences.append(f"{head} {listed}")
    return sentences


def step_time_figure(
    timeline: pd.DataFrame,
    labels: dict[str, str],
    palette: dict[str, str],
    measured: dict[str, float] | None = None,
) -> go.Figure:
    """A bar per configuration and network: its predicted mean step time; a dotted line at the
    step its profiled job measured, where known."""
    table = mean_step_times(timeline)
    networks = ordered(table["network"].astype(str))
    names = network_names(networks)
    fig = go.Figure()
    for config in ordered(table["config"]):
        rows = table[table["config"] == config].set_index("network").reindex(networks)
        seconds = rows["step_s"].to_numpy(dtype="float64")
        fig.add_trace(
            go.Bar(
                y=[text(n) for n in networks],
                x=seconds,
                orientation="h",
                name=text(short(labels.get(config, config), 40)),
                marker={"color": palette[config]},
                text=[human.seconds(v) if np.isfinite(v) else "" for v in seconds],
                textposition="outside",
                cliponaxis=False,
                customdata=[f"{v:.0%}" for v in rows["exchange_share"].fillna(0.0)],
                hovertemplate=(
                    f"%{{y}}<br><b>{text(labels.get(config, config))}</b>: predicted step "
                    "%{text}<br>exchange (wire and wait): %{customdata} of it<extra></extra>"
                ),
            )
        )
    for config in ordered(table["config"]):
        mine = (measured or {}).get(config)
        if mine:
            fig.add_vline(
                x=mine,
                line={"dash": "dot", "color": palette[config], "width": 2},
                annotation_text=text(f"measured {short(labels.get(config, config), 30)}: "
                                     f"{human.seconds(mine)}"),
                annotation_position="top",
            )  # fmt: skip
    network_axis(fig, networks, names, limit=36)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(
        barmode="group",
        xaxis={"title": {"text": "predicted mean step time (s)"}},
        legend={"title": {"text": "configuration"}},
        height=max(260, 90 + 28 * len(networks) * max(1, table["config"].nunique())),
    )
    return fig
