"""One step as intervals, for the report's link chart and Perfetto: each worker's compute,
compression, exchange and update, and each link's busy spells.

The last step of a replay is simulated once more with link use recorded. Straggler jitter is
left out (one representative step); fixed per-worker factors are kept. Networks of more than
MAX_RECORDED_WORKERS workers are not recorded: millions of intervals make a chart nobody reads.
"""

from typing import Any

import numpy as np
import pandas as pd

from transitsim.network import Exchange, simulate_exchange
from transitsim.replay.compute import Stragglers
from transitsim.replay.request import ReplayRequest

MAX_RECORDED_WORKERS = 64
STEP_EVENT_COLUMNS = ["process", "track", "name", "start_s", "end_s", "utilisation"]


def last_step_events(
    request: ReplayRequest, exchange: Exchange, timeline: pd.DataFrame
) -> pd.DataFrame | None:
    """The timeline's last step with `exchange` (as replay decided it) re-simulated with link
    use recorded; None on networks larger than MAX_RECORDED_WORKERS."""
    workers = request.network.workers
    if workers > MAX_RECORDED_WORKERS:
        return None
    row = timeline.iloc[-1]
    stragglers = request.stragglers or Stragglers(distribution="none")
    factors = stragglers.factors(workers)
    compute_s = float(row["compute_s"]) * factors / float(factors.min())
    ready_s = compute_s + float(row["compress_s"])
    # the last step's start on the replay clock, for link backgrounds that change in time
    clock_s = float(row["time_s"]) - float(row["step_s"])
    result = simulate_exchange(
        request.network, exchange, start_s=ready_s, record_utilisation=True, clock_s=clock_s
    )
    update_s = float(row["update_s"])
    rows: list[dict[str, Any]] = []
    for worker in range(workers):
        track = f"worker {worker}"
        spans = [
            ("compute", 0.0, compute_s[worker]),
            ("compress", compute_s[worker], ready_s[worker]),
            ("exchange", ready_s[worker], float(result.finish_s[worker])),
            ("update", float(result.finish_s[worker]), float(result.finish_s[worker]) + update_s),
        ]
        for name, start, end in spans:
            if end > start:
                rows.append(
                    {"process": "workers", "track": track, "name": name}
                    | {"start_s": start, "end_s": end, "utilisation": np.nan}
                )
    util = result.utilisation  # None where nothing was exchanged (one worker): no busy links
    if util is None:
        util = pd.DataFrame(columns=["link", "t0_s", "t1_s", "utilisation"])
    for link, t0, t1, share in util[["link", "t0_s", "t1_s", "utilisation"]].itertuples(
        index=False
    ):
        rows.append(
            {"process": "links", "track": link, "name": "busy"}
            | {"start_s": float(t0), "end_s": float(t1), "utilisation": float(share)}
        )
    return pd.DataFrame(rows, columns=STEP_EVENT_COLUMNS)
