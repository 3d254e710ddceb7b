"""The verdict with and without overlap, side by side, for scenarios with an overlap axis.

A scenario with `overlap: [none, buckets]` replays every network twice (the overlapped copy named
"<network> +overlap"). Here the two are folded back together: per target and network, the
fastest configuration without overlap and with it, and whether the verdict changes; and per
configuration and network, how much of its exchange the backward hid.
"""

import math

import pandas as pd

OVERLAP_SUFFIX = " +overlap"
VERDICT_COLUMNS = [
    "target",
    "network",
    "fastest_without",
    "time_without_s",
    "fastest_with",
    "time_with_s",
    "changed",
    "baseline_hidden_share",
]
HIDING_COLUMNS = ["config", "network", "overlap", "exchange_s", "exposed_s", "hidden_s"]


def base_network(name: str) -> str:
    """The network a point of the overlap axis belongs to."""
    return name[: -len(OVERLAP_SUFFIX)] if name.endswith(OVERLAP_SUFFIX) else name


def has_overlap_axis(summary: pd.DataFrame) -> bool:
    return "overlap" in summary.columns and set(summary["overlap"].dropna()) >= {"none", "buckets"}


def exchange_hiding(timeline: pd.DataFrame) -> pd.DataFrame:
    """Per (config, network): the mean exchange time per step, what of it showed (exposed) and
    what the backward hid, weighted by the steps each row stands for."""
    weights = timeline["interval_steps"].astype("float64")
    frame = timeline[["config", "network", "overlap"]].copy()
    for column in ("exchange_s", "exposed_s", "hidden_s"):
        frame[column] = timeline[column].astype("float64") * weights
    frame["steps"] = weights
    sums = frame.groupby(["config", "network", "overlap"], sort=False).sum().reset_index()
    for column in ("exchange_s", "exposed_s", "hidden_s"):
        sums[column] = sums[column] / sums["steps"]
    return sums[HIDING_COLUMNS]


def _fastest(rows: pd.DataFrame) -> tuple[str | None, float]:
    """The outcome at one network (the decision table's `winner` text where the summary has
    it: decision.py, so this table says what the verdict says) and the leader's time."""
    ranked = rows.dropna(subset=["time_to_target_s"]).sort_values(
        ["time_to_target_s", "config"], kind="stable"
    )
    if ranked.empty:
        return None, math.nan
    if "winner" in ranked.columns:
        return str(ranked.iloc[0]["winner"]), float(ranked.iloc[0]["time_to_target_s"])
    return str(ranked.iloc[0]["config"]), float(ranked.iloc[0]["time_to_target_s"])


def overlap_verdicts(
    summary: pd.DataFrame, timeline: pd.DataFrame, baseline: set[str] | None = None
) -> pd.DataFrame:
    """Per target and network: the fastest configuration without and with overlap (the
    point's outcome, "B = A" for a tie, where the summary carries the decision's columns).

    baseline: the configs of the baseline; baseline_hidden_share is the share of their exchange
    (mean per step) that the backward hid on the overlapped copy (NaN without one). Empty when
    the summary has no overlap axis.
    """
    if not has_overlap_axis(summary):
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    hiding = exchange_hiding(timeline)
    frame = summary.assign(base=summary["network"].map(base_network))
    rows = []
    for (target, base), group in frame.groupby(["target", "base"], sort=False):
        without, time_without = _fastest(group[group["overlap"] == "none"])
        with_, time_with = _fastest(group[group["overlap"] == "buckets"])
        mine = hiding[
            (hiding["network"] == base + OVERLAP_SUFFIX) & hiding["config"].isin(baseline or ())
        ]
        exchange = float(mine["exchange_s"].mean()) if len(mine) else math.nan
        share = float(mine["hidden_s"].mean()) / exchange if exchange > 0 else math.nan
        rows.append(
            {
                "target": target,
                "network": base,
                "fastest_without": without,
                "time_without_s": time_without,
                "fastest_with": with_,
                "time_with_s": time_with,
                "changed": without != with_,
                "baseline_hidden_share": share,
            }
        )
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)
