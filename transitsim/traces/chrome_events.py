"""One simulated step as Chrome trace-event JSON, to inspect in Perfetto (ui.perfetto.dev) or
chrome://tracing: which worker computed, which link carried what, and when.

Input is a plain table of intervals, so the simulator does not need to know this format:
`track` (a worker or link name), `name` (what happened), `start_s`, `end_s`; optionally
`process` (a group of tracks, e.g. "workers" / "links"), `category`, and any other columns,
which become the event's args.
"""

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from transitsim.base.atomic import write_text_atomic
from transitsim.base.errors import TransitsimError

REQUIRED_COLUMNS = ("track", "name", "start_s", "end_s")
_FIXED_COLUMNS = {*REQUIRED_COLUMNS, "process", "category"}


def _plain(value: Any) -> Any:
    """A JSON-safe scalar (numpy numbers to Python, NaN to null)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def trace_events(step_timeline: pd.DataFrame) -> dict[str, Any]:
    """The trace-event document: one complete ("X") event per interval, times in microseconds,
    named processes and threads (metadata events) so Perfetto shows readable track names."""
    missing = [c for c in REQUIRED_COLUMNS if c not in step_timeline.columns]
    if missing:
        raise TransitsimError(f"step timeline lacks column(s) {', '.join(missing)}")
    frame = step_timeline.reset_index(drop=True)
    start = frame["start_s"].astype("float64")
    end = frame["end_s"].astype("float64")
    bad = ~(start.map(math.isfinite) & end.map(math.isfinite)) | (end < start)
    if bad.any():
        row = int(bad.idxmax())
        raise TransitsimError(
            f"step timeline row {row}: needs finite start_s <= end_s, "
            f"got {frame.loc[row, 'start_s']!r}..{frame.loc[row, 'end_s']!r}"
        )
    processes = (
        frame["process"].astype(str) if "process" in frame else pd.Series(["step"] * len(frame))
    )
    tracks = frame["track"].astype(str)
    pids = {name: index + 1 for index, name in enumerate(dict.fromkeys(processes))}
    tids: dict[tuple[str, str], int] = {}
    for process, track in zip(processes, tracks, strict=True):
        tids.setdefault((process, track), len(tids) + 1)
    events: list[dict[str, Any]] = []
    for name, pid in pids.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
    for (process, track), tid in tids.items():
        pid = pids[process]
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}}
        )
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": tid},
            }
        )
    extra = [c for c in frame.columns if c not in _FIXED_COLUMNS]
    for index in range(len(frame)):
        process, track = processes.iloc[index], tracks.iloc[index]
        event = {
            "ph": "X",
            "name": str(frame["name"].iloc[index]),
            "cat": str(frame["category"].iloc[index]) if "category" in frame else "transitsim",
            "pid": pids[process],
            "tid": tids[(process, track)],
            "ts": float(start.iloc[index]) * 1e6,
            "dur": float(end.iloc[index] - start.iloc[index]) * 1e6,
        }
        if extra:
            event["args"] = {c: _plain(frame[c].iloc[index]) for c in extra}
        events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_trace_events(path: Path | str, step_timeline: pd.DataFrame) -> Path:
    """Write one step's timeline as Chrome trace-event JSON (open it in ui.perfetto.dev)."""
    document = trace_events(step_timeline)
    return write_text_atomic(path, json.dumps(document, separators=(",", ":")) + "\n")
