"""A run's tables from its replayed timelines: the summary (time-to-loss per configuration,
network and target, with what each step's time mostly went to), the crossovers along a grid,
the report's link chart, and the per-run table of a replay without targets.

`transitsim run`, `transitsim replay` and `transitsim.simulate` all print or return these, so
the API and the CLI's CSV are one table.
"""

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from transitsim.analysis.decision import decide, in_winner_set
from transitsim.analysis.metrics import (
    METRIC_COLUMNS,
    SPLIT_COLUMNS,
    SUMMARY_COLUMNS,
    extrapolated_flags,
    time_to_target,
)
from transitsim.analysis.outcomes import CONTENDER_AXES

# Where a step's time goes, as the summary names it: GPU work, making the band (on the GPU or
# in the network), serialisation and flight on the wire, and waiting (stragglers, contention).
BOTTLENECK_PARTS = {
    "compute": ("compute_s", "update_s"),
    "transform": ("compress_s", "transform_s"),
    "wire": ("wire_s",),
    "wait": ("wait_s",),
}
LINKS_PER_NETWORK = 32  # busiest links shown in the report's utilisation chart (the rest named)


def is_number(value: Any) -> bool:
    """A grid value a crossover can run along: a number, not a bool."""
    return isinstance(value, int | float | np.number) and not isinstance(value, bool | np.bool_)


def no_summary() -> pd.DataFrame:
    return pd.DataFrame(columns=list(SUMMARY_COLUMNS))


def summarise(
    timeline: pd.DataFrame,
    params: list[str],
    targets: list[float],
    baseline: str | None,
    labels: dict[str, str],
) -> pd.DataFrame:
    """time_to_target per (config, network, grid parameters, target), plus the config's label,
    what a step's time mostly goes to on that network, and whether it is extrapolated."""
    split = [c for c in SPLIT_COLUMNS if c in timeline.columns]
    summary = time_to_target(timeline[[*METRIC_COLUMNS, *split, *params]], targets, baseline)
    summary.insert(1, "label", summary["config"].map(lambda c: labels.get(c, c)))
    parts = bottlenecks(timeline)
    keys = zip(summary["config"], summary["network"], strict=True)
    summary["bottleneck"] = [parts[key] for key in keys]
    summary["extrapolated"] = extrapolated_flags(summary, timeline)
    return summary


def bottlenecks(timeline: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (config, network): the largest of compute, transform, wire and wait, as a share of
    the mean step (over every step of every seed), e.g. "wire 71%"."""
    weights = timeline["interval_steps"].astype("float64")
    frame = pd.DataFrame({"config": timeline["config"], "network": timeline["network"]})
    for part, columns in BOTTLENECK_PARTS.items():
        frame[part] = sum(timeline[c].astype("float64").fillna(0.0) for c in columns) * weights
    totals = frame.groupby(["config", "network"], sort=False)[list(BOTTLENECK_PARTS)].sum()
    result = {}
    for key, row in totals.iterrows():
        total = float(row.sum())
        part = str(row.idxmax())
        result[key] = f"{part} {row[part] / total:.0%}" if total > 0 else "none"
    return result


def grid_crossovers(
    summary: pd.DataFrame, params: list[str], labels: dict[str, str] | None = None
) -> pd.DataFrame:
    """Along each numeric grid parameter with two or more values (the other keys held fixed;
    a placement axis is part of the point, not held): the outcome at each value, from the
    decision table's `winner` column (decision.py), and where it changes (changed: True at the
    first value of a new outcome), so the crossovers say what the verdict says."""
    if "winner" not in summary.columns:
        summary = decide(summary, params, labels or {})
    frames = []
    for param in params:
        column = summary[param]
        if not pd.api.types.is_float_dtype(column) or column.dropna().nunique() < 2:
            continue  # text and bool values (collective, aggregator) are held, not run along
        held = [c for c in params if c != param and c not in CONTENDER_AXES]
        points = summary.dropna(subset=[param])
        rows = []
        for fixed, sweep in points.groupby(["target", *held], sort=False, dropna=False):
            fixed = fixed if isinstance(fixed, tuple) else (fixed,)
            previous: dict[str, Any] | None = None
            for value, at in sweep.groupby(param, sort=True):
                row = {"parameter": param, "value": value}
                row |= dict(zip(["target", *held], fixed, strict=True))
                row |= _outcome_at(at)
                row["changed"] = previous is not None and row["winner"] != previous["winner"]
                row["previous_winner"] = previous["winner"] if previous else None
                row["previous_config"] = previous["best_config"] if previous else None
                previous = row
                rows.append(row)
        frames.append(pd.DataFrame(rows))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _outcome_at(at: pd.DataFrame) -> dict[str, Any]:
    """One point's outcome: the leader, its time, the winner text, and the first contender
    outside the winner set (by mean) with its time over the leader's."""
    ranked = at.dropna(subset=["time_to_target_s"]).sort_values(
        ["time_to_target_s", "config"], kind="stable"
    )
    leaders = ranked[ranked["call"].map(in_winner_set)]
    others = ranked[~ranked["call"].map(in_winner_set)]
    best = leaders.iloc[0] if len(leaders) else None
    after = others.iloc[0] if len(others) else None
    return {
        "winner": str(at["winner"].iloc[0]),
        "best_config": None if best is None else best["config"],
        "best_variant": None if best is None else best["variant"],
        "network": None if best is None else best["network"],
        "time_to_target_s": math.nan if best is None else best["time_to_target_s"],
        "runner_up_config": None if after is None else after["config"],
        "runner_up_ratio": (
            after["time_to_target_s"] / best["time_to_target_s"]
            if after is not None and best is not None
            else math.nan
        ),
    }


def link_utilisation(recorded: Iterable[tuple[str, str, pd.DataFrame | None]]) -> pd.DataFrame:
    """The report's link chart: per (network, run, one recorded step's events), the busiest links
    as a step function (utilisation from t0, back to 0 at t1). attrs["omitted"]: per
    "network|run", the quieter links left out, so the chart can name them."""
    rows = []
    omitted: dict[str, list[str]] = {}
    for network, run, events in recorded:
        if events is None:
            continue
        links = events[events["process"] == "links"]
        if links.empty:
            continue
        busy = (links["end_s"] - links["start_s"]) * links["utilisation"]
        totals = busy.groupby(links["track"], sort=False).sum()
        top = totals.nlargest(LINKS_PER_NETWORK)
        left = sorted(str(link) for link in totals.index if link not in top.index)
        if left:
            omitted[f"{network}|{run}"] = left
        for link in sorted(top.index):
            spans = links[links["track"] == link].sort_values("start_s", kind="stable")
            for start, end, share in spans[["start_s", "end_s", "utilisation"]].itertuples(
                index=False
            ):
                rows.append((network, run, link, start, share))
                rows.append((network, run, link, end, 0.0))
    frame = pd.DataFrame(rows, columns=["network", "run", "link", "t_s", "utilisation"])
    frame.attrs["omitted"] = omitted
    return frame


def runs_table(timeline: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """Per run without targets: steps, total and mean step time, final loss, bottleneck."""
    parts = bottlenecks(timeline)
    rows = []
    for (run, network), steps in timeline.groupby(["run", "network"], sort=False):
        last = steps.iloc[-1]
        config = str(last["config"])
        evaluated = steps["val_loss"].dropna()
        # the steps the rows stand for: a profile's steps numbered 15..17 are 3, not 17
        count = int(steps["interval_steps"].sum()) if "interval_steps" in steps else 0
        count = count or int(last["step"])
        rows.append(
            {
                "run": run,
                "label": labels.get(config, config),
                "network": network,
                "steps": count,
                "time_s": float(last["time_s"]),
                "step_s": float(last["time_s"]) / count,
                "final_val_loss": float(evaluated.iloc[-1]) if len(evaluated) else float("nan"),
                "wire_bytes": float(last["wire_bytes"]),
                "bottleneck": parts[(config, network)],
            }
        )
    return pd.DataFrame(rows)
