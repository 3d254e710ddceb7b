"""Streaming DiLoCo (H-s): a fragment's outer exchange overlaps the next τ inner steps.

The trace says it (docs/local-sgd.md): on a row with `outer_sync`, a fragment's exchange starts
when the step's inner update is done, and its outer update is applied at the end of step
`lands_step` = t + τ. Training does not wait for it in between: the τ inner steps compute while
the exchange is on the wire, and the landing step waits only for what is left of it.

So after the stepping, each sync row's exposed exchange comes off its step (the bytes stay
counted), and the landing row waits for max(0, X − the τ steps' time), X the exchange's own
time as the stepping simulated it (every worker starting it at the sync step's end). Two
exchanges in flight at once are each timed as if alone, and said so in the notes: inner steps
send nothing, so only another fragment's exchange can share the network with one.
"""

from typing import Any

import numpy as np

from transitsim.traces.format import Trace

SPLIT_FIGURES = ("transform_s", "wire_s", "wait_s")


def overlap_steps(trace: Trace) -> int:
    """τ of a streaming local-SGD trace (0: its exchanges do not overlap the inner steps)."""
    local_sgd = trace.meta.get("local_sgd") or {}
    tau = local_sgd.get("overlap_steps", 0)
    if not isinstance(tau, int) or isinstance(tau, bool) or tau <= 0:
        return 0
    if not {"outer_sync", "lands_step"} <= set(trace.steps.columns):
        return 0
    return tau


def stream_exchanges(rows: dict[str, Any], trace: Trace, notes: list[str]) -> None:
    """Move each sync row's exchange off its step, onto its landing step's wait (in place)."""
    tau = overlap_steps(trace)
    if tau == 0:
        return
    intervals = np.asarray(rows["interval_steps"], dtype=np.int64)
    if np.any(intervals != 1):
        notes.append("streaming exchanges not overlapped: the trace's rows stand for several steps")
        return
    figures = {
        name: np.asarray(rows[name], dtype=np.float64).copy()
        for name in ("step_s", "exchange_s", "exposed_s", "hidden_s", *SPLIT_FIGURES)
    }
    steps = np.asarray(rows["step"], dtype=np.int64)
    row_of_step = {int(step): i for i, step in enumerate(steps.tolist())}
    syncs = trace.steps["outer_sync"].to_numpy(dtype=bool)
    lands = trace.steps["lands_step"].to_numpy(dtype=np.int64)
    exchange = figures["exchange_s"].copy()
    in_flight: list[tuple[int, int]] = []  # (sync row, landing row) of each streamed exchange
    for i in np.flatnonzero(syncs).tolist():
        exposed = figures["exposed_s"][i]
        figures["step_s"][i] -= exposed
        taken = exposed
        for name in SPLIT_FIGURES:  # the exchange's own parts first, straggler waiting kept
            part = min(figures[name][i], taken)
            figures[name][i] -= part
            taken -= part
        figures["exposed_s"][i] = 0.0
        figures["hidden_s"][i] = exchange[i]
        in_flight.append((i, row_of_step.get(int(lands[i]), -1)))
    overlapping = 0
    for k, (i, j) in enumerate(in_flight):
        if j < 0:  # lands after the last step: nothing waits for it within the run
            continue
        overlapping += any(i2 < j and j2 > i for i2, j2 in in_flight[k + 1 :] if j2 >= 0)
        elapsed = float(figures["step_s"][i + 1 : j + 1].sum())
        left = max(exchange[i] - elapsed, 0.0)
        figures["hidden_s"][i] = exchange[i] - left
        if left > 0:
            for name in ("step_s", "wait_s", "exposed_s"):
                figures[name][j] += left
    for name, values in figures.items():
        rows[name] = values.tolist()
    rows["time_s"] = np.cumsum(figures["step_s"]).tolist()
    notes.append(
        f"streaming: each fragment's outer exchange overlaps the next {tau} inner steps; the "
        "landing step waits for what is left of it"
    )
    if overlapping:
        notes.append(
            f"streaming: {overlapping} exchange(s) were in flight together with another and are "
            "each timed as if alone (optimistic)"
        )
