"""What every winner chart shares: which columns are results, the charts per target and held
value, and the seed interval of a time to target where the summary has one.

The summary may carry time_to_target_s_lo / _hi / _sd and `interval` (its kind: "t95",
"range" or "one seed"); where it does, charts draw error bars and the hover says the interval;
where it does not, they draw as before.
"""

import math

import numpy as np
import pandas as pd

from transitsim.base import human
from transitsim.report.names import held_phrase

SWEEP_COLUMNS = ("network", "config", "variant", "target", "time_to_target_s")
# Columns of a sweep/summary table that are results, not swept parameters.
RESULT_COLUMNS = {
    *SWEEP_COLUMNS,
    "label",
    "seeds",
    "reached",
    "steps_to_target",
    "bytes_to_target",
    "wan_bytes_to_target",
    "lan_bytes_to_target",
    "speedup_vs_baseline",
    "bottleneck",
    "extrapolated",
    "interval",
    "call",  # the decision table's call and outcome at the point (analysis/decision.py)
    "winner",
}
# Figures about a result (its spread over seeds, now or later) are results too.
RESULT_PREFIXES = (
    "time_to_target_s_",
    "steps_to_target_",
    "bytes_to_target_",
    "wan_bytes_to_target_",
    "lan_bytes_to_target_",
)
MAX_CHARTS = 8  # two targets x overlap off/on x a held switch setting
INTERVAL_NAMES = {"t95": "95 % t interval", "range": "range of the seeds"}


def margin_text(margin: float) -> str:
    """Runner-up time / best: "1.02x" (two decimals, so a near tie does not read "1x")."""
    if math.isnan(margin):
        return "only one reached it"
    return f"{margin:.2f}x" if margin < 10 else human.ratio(margin)


def is_result(column: str) -> bool:
    """A summary column that holds a result (not a grid parameter a chart runs along)."""
    return column in RESULT_COLUMNS or column.startswith(RESULT_PREFIXES)


def groups(
    rows: pd.DataFrame, held: list[str], targets: list[float]
) -> list[tuple[str, pd.DataFrame]]:
    """(chart title, rows) per target and held-parameter combination, at most MAX_CHARTS."""
    found = []
    for target in targets:
        part = rows[rows["target"] == target]
        if part.empty:
            continue
        combos = part.groupby(held, sort=False, dropna=False) if held else [((), part)]
        for values, chosen in combos:
            values = values if isinstance(values, tuple) else (values,)
            extra = [held_phrase(k, v) for k, v in zip(held, values, strict=True)]
            found.append((" · ".join([f"to loss {human.loss(target)}", *extra]), chosen))
    return found[:MAX_CHARTS]


INTERVAL_FIELDS = ("time_to_target_s_lo", "time_to_target_s_hi", "interval", "seeds")
KEYS = ["config", "network", "target"]


def with_intervals(sweep: pd.DataFrame | None, summary: pd.DataFrame | None) -> pd.DataFrame | None:
    """The sweep with the summary's seed intervals where the sweep was given without them
    (matched by configuration, network and target), so its charts can draw them."""
    if sweep is None or summary is None or not len(sweep) or not len(summary):
        return sweep
    missing = [c for c in INTERVAL_FIELDS if c in summary and c not in sweep]
    if "time_to_target_s_lo" not in missing or not all(k in summary for k in KEYS):
        return sweep
    extra = summary[[*KEYS, *missing]].drop_duplicates(KEYS)
    merged = sweep.merge(extra, on=KEYS, how="left", validate="many_to_one")
    merged.index = sweep.index
    return merged


def interval_bounds(rows: pd.DataFrame) -> tuple[pd.Series | None, pd.Series | None]:
    """(lo, hi) seconds per row where the summary has them, else (None, None); a row without a
    bound (not reached, or one seed) has its mean as both."""
    if "time_to_target_s_lo" not in rows or "time_to_target_s_hi" not in rows:
        return None, None
    mean = rows["time_to_target_s"].astype("float64")
    low = pd.to_numeric(rows["time_to_target_s_lo"], errors="coerce").fillna(mean)
    high = pd.to_numeric(rows["time_to_target_s_hi"], errors="coerce").fillna(mean)
    return low, high


def interval_text(rows: pd.DataFrame) -> list[str]:
    """Per row, what the hover adds after the time: " (95 % t interval 60.1 s–66.5 s, 3 seeds)";
    "" where there is no interval."""
    low, high = interval_bounds(rows)
    if low is None or high is None:
        return [""] * len(rows)
    kinds = rows["interval"] if "interval" in rows else pd.Series("", index=rows.index)
    seeds = rows["seeds"] if "seeds" in rows else pd.Series(np.nan, index=rows.index)
    shown = []
    for lo, hi, kind, count in zip(low, high, kinds.fillna(""), seeds, strict=True):
        shown.append(describe(lo, hi, str(kind), count))
    return shown


def describe(lo: float, hi: float, kind: str, seeds: object) -> str:
    """One interval for a hover or a table cell, "" when there is none to give."""
    if math.isnan(lo) or math.isnan(hi) or kind in ("", "one seed") or hi <= lo:
        return " (one seed)" if kind == "one seed" else ""
    name = INTERVAL_NAMES.get(kind, kind)
    number = pd.to_numeric(pd.Series([seeds]), errors="coerce").iloc[0]
    count = f", {int(number)} seeds" if pd.notna(number) else ""
    return f" ({name} {human.seconds(lo)}–{human.seconds(hi)}{count})"
