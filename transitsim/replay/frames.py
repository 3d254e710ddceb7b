"""Replay's outputs: the timeline frame (one row per trace row) and the run's link figures."""

from typing import Any

import numpy as np
import pandas as pd

from transitsim.network.spec import NetworkSpec
from transitsim.replay.step import Outcome
from transitsim.traces.format import Trace

TIMELINE_COLUMNS = [
    "run",
    "config",
    "variant",
    "network",
    "step",
    "val_loss",
    "train_loss",
    "compute_s",
    "compress_s",
    "transform_s",
    "wire_s",
    "wait_s",
    "update_s",
    "step_s",
    "time_s",
    "wire_bytes",
    "wan_bytes",
    "payload_bytes",
    "interval_steps",
    "algo",
    "extrapolated",
    "exchange_s",
    "exposed_s",
    "hidden_s",
    "overlap",
]


def timeline_frame(
    rows: dict[str, Any], trace: Trace, network: NetworkSpec, extrapolated: bool
) -> pd.DataFrame:
    """The timeline, its columns built once in TIMELINE_COLUMNS order (inserting them one by one
    cost a 3,000-step replay more than timing it)."""
    count = len(rows["step"])
    given = {
        "run": trace.name,
        "config": trace.config_name,
        "variant": trace.variant,
        "network": network.name,
        "val_loss": trace.steps["val_loss"].to_numpy(dtype=np.float64),
        "train_loss": trace.steps["train_loss"].to_numpy(dtype=np.float64),
        "extrapolated": np.full(count, extrapolated),
        "payload_bytes": np.asarray(rows["payload_bytes"], dtype=np.int64),
        "interval_steps": np.asarray(rows["interval_steps"], dtype=np.int64),
    }
    columns = {name: given[name] if name in given else rows[name] for name in TIMELINE_COLUMNS}
    return pd.DataFrame(columns, index=pd.RangeIndex(count))


def run_link_stats(
    uses: dict[int, tuple[Outcome, int]], trace: Trace, network: NetworkSpec, total_s: float
) -> pd.DataFrame:
    """Per link (resource): bytes and busy seconds summed over the run.

    utilisation = bytes carried / (rate x run time), busy_share = busy_s / run time: over the
    whole run, compute included, as the exchange figures are over the exchange.
    """
    outcomes = list(uses.values())
    first = outcomes[0][0].link_stats
    links = first["link"].to_numpy()
    busy_s = np.zeros(len(first))
    carried = np.zeros(len(first))
    for outcome, count in outcomes:
        stats = outcome.link_stats
        if not np.array_equal(stats["link"].to_numpy(), links):  # one network: same resources
            stats = stats.set_index("link").reindex(links).reset_index()
        busy_s += count * stats["busy_s"].to_numpy(dtype=np.float64)
        carried += count * stats["bytes"].to_numpy(dtype=np.float64)
    totals = first[["link", "kind", "rate_bps"]].copy()
    totals["busy_s"] = busy_s
    totals["bytes"] = carried
    rate_bps = totals["rate_bps"].to_numpy(dtype=np.float64)
    finite = np.isfinite(rate_bps) & (total_s > 0)
    totals["utilisation"] = np.where(
        finite, totals["bytes"] * 8.0 / np.where(finite, rate_bps * total_s, 1.0), 0.0
    )
    totals["busy_share"] = totals["busy_s"] / total_s if total_s > 0 else 0.0
    totals.insert(0, "run", trace.name)
    totals.insert(1, "network", network.name)
    return totals
