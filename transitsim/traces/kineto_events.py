"""A Kineto trace's events as arrays: the JSON `torch.profiler` writes, read without its tools.

`export_chrome_trace` and `tensorboard_trace_handler` write one JSON object per rank (often
gzipped): `traceEvents` (Chrome trace events: complete "X" events with `ts` and `dur` in
microseconds, `cat`, `pid`, `tid`, `args`) and a few top-level keys (`distributedInfo` with the
rank, world size and backend; `deviceProperties` with the GPUs). Only complete events carry the
time spans read here, and the `ac2g` flow arrows that tie a GPU event to its host launch where
the event lacks a `correlation`; counters and metadata are skipped. `ijson` (yajl, in C) reads
the file as a stream, one event at a time, so memory grows with the events kept, never with the
file: a 1 MB .json.gz can hold a GB of JSON (Holistic Trace Analysis and Perfetto's trace
processor read it too, but each brings a large dependency, and the second a binary of its own,
for what is a list of spans).

Everything wrong with the file is one TransitsimError line naming it: not JSON, not a trace,
no ProfilerStep spans, numbers that are not numbers.
"""

import contextlib
import gzip
import itertools
import math
import re
import zlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.base.reading import open_regular_file

MAX_PROFILE_BYTES = 1 << 31  # 2 GiB of JSON: a few steps of a large job, not /dev/zero
# Complete events kept from one file: the largest real per-rank trace in shared/ has 0.2 M; each
# kept event costs about 1 KB of memory, so this bounds a profile's memory near 4 GB.
MAX_EVENTS = 4_000_000
HEADER_KEYS = ("distributedInfo", "deviceProperties")
STEP_NAME = re.compile(r"^ProfilerStep#(\d{1,12})$")
OVERLAP_SLACK_US = 1.0  # consecutive step spans may share a rounded microsecond
# Events that run on a GPU (their pid is a device); the rest ran on the host.
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})


@dataclass(frozen=True)
class Event:
    """One complete ("X") event: times in microseconds, as the trace writes them."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def contains(self, other: "Event", slack: float = 0.0) -> bool:
        """Whether `other` lies inside this span (same thread is the caller's business)."""
        return self.ts - slack <= other.ts and other.end <= self.end + slack


@dataclass
class RawProfile:
    """One rank's file: its complete events and what its header says about the job."""

    path: Path
    events: list[Event]
    rank: int | None
    world_size: int | None
    backend: str | None
    device: str
    skipped: int = 0  # complete events without a usable time span
    # ac2g flow arrows: launch id -> host launch time ("s"), and (pid, tid, ts) of the GPU
    # event an arrow ends on -> its id ("f"); only read where an event has no correlation
    flow_starts: dict[int | str, float] = field(default_factory=dict)
    flow_ends: dict[tuple[str, str, float], int | str] = field(default_factory=dict)


class _Bounded:
    """The JSON text as ijson reads it, refused past MAX_PROFILE_BYTES (a gzip bomb)."""

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle, self.path, self.total = handle, path, 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.handle.read(size)
        self.total += len(chunk)
        if self.total > MAX_PROFILE_BYTES:
            raise TransitsimError(f"{self.path}: more than {MAX_PROFILE_BYTES:,} bytes of JSON")
        return chunk


@contextlib.contextmanager
def _json_text(path: Path) -> Iterator[_Bounded]:
    """The file's JSON text as a stream, gunzipped when it is gzip (by its magic, not its name);
    a broken file is one line (a JSON error is the caller's to name)."""
    with open_regular_file(path, MAX_PROFILE_BYTES, "profiler trace") as handle:  # no FIFO
        gzipped = handle.read(2) == b"\x1f\x8b"
        handle.seek(0)
        try:
            if gzipped:
                with gzip.GzipFile(fileobj=handle) as unzipped:
                    yield _Bounded(unzipped, path)  # type: ignore[arg-type]
            else:
                yield _Bounded(handle, path)
        except (OSError, EOFError, zlib.error) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "broken gzip"
            raise TransitsimError(f"{path}: cannot read the profile ({reason})") from None
        except (ijson.JSONError, ValueError) as exc:  # ValueError: ijson on a few kinds of junk
            reason = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else "broken"
            raise TransitsimError(
                f"{path}: not a profiler trace (not JSON: {reason}; torch.profiler writes JSON "
                "or .json.gz)"
            ) from None


def _header_values(path: Path) -> tuple[str, dict[str, Any]]:
    """The document's kind ("object", "array" or "other") and the values of its HEADER_KEYS:
    read token by token up to its `traceEvents` (torch.profiler writes them first), and a key
    not seen by then looked for after the events by ijson's C parser."""
    found: dict[str, Any] = {}
    with _json_text(path) as text:
        tokens = ijson.parse(text, use_float=True)
        first = next(tokens, None)
        if first is None or first[1] != "start_map":
            return ("array" if first is not None and first[1] == "start_array" else "other"), {}
        key, builder, depth = None, None, 0
        for prefix, event, value in tokens:
            if builder is not None:
                builder.event(event, value)
                depth += (event in ("start_map", "start_array")) - (
                    event in ("end_map", "end_array")
                )
                if depth == 0:
                    found[str(key)], builder = builder.value, None
            elif prefix == "" and event == "map_key":
                key = value
            elif prefix == key and key in HEADER_KEYS:
                builder, depth = ijson.ObjectBuilder(), 0
                builder.event(event, value)
                depth = int(event in ("start_map", "start_array"))
                if depth == 0:
                    found[str(key)], builder = builder.value, None
            elif prefix == "traceEvents" and key == "traceEvents" and event == "start_array":
                found["traceEvents"] = True
                break
    for missing in (k for k in HEADER_KEYS if "traceEvents" in found and k not in found):
        with _json_text(path) as text:  # after the events, if anywhere: a pass in C
            for value in ijson.items(text, missing, use_float=True):
                found[missing] = value  # the last of repeated keys, as json.loads keeps
    return "object", found


def _events(path: Path, prefix: str) -> Iterator[Any]:
    """The items of the document's event list, one at a time (memory: one event, not the file)."""
    with _json_text(path) as text:
        yield from ijson.items(text, prefix, use_float=True)


def _number(value: Any) -> float | None:
    """A finite number, or None (bools, text, NaN and inf are not times)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _header(document: dict[str, Any]) -> tuple[int | None, int | None, str | None, str]:
    info = document.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    rank, world = _whole(info.get("rank")), _whole(info.get("world_size"))
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    devices = document.get("deviceProperties")
    device = "cpu"
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        device = str(devices[0].get("name") or "gpu")
    return rank, world, backend, device[:80]


def read_raw_profile(path: Path | str) -> RawProfile:
    """Read one rank's Kineto trace (JSON or gzipped JSON) into its complete events, streamed:
    memory grows with the events kept (at most MAX_EVENTS), not with the file."""
    path = Path(path)
    if not path.exists():
        raise TransitsimError(f"{path}: no such file")
    kind, header = _header_values(path)
    if kind == "other":
        raise TransitsimError(f"{path}: not a profiler trace (no 'traceEvents' list)")
    events: list[Event] = []
    skipped = 0
    starts: dict[int | str, float] = {}
    ends: dict[tuple[str, str, float], int | str] = {}
    listed = 0
    for raw in _events(path, "item" if kind == "array" else "traceEvents.item"):
        listed += 1
        if not isinstance(raw, dict):
            raise TransitsimError(f"{path}: not a profiler trace (an event is not an object)")
        flow = raw.get("ph") in ("s", "f") and raw.get("cat") == "ac2g"
        if (flow or raw.get("ph") == "X") and len(events) + len(starts) + len(ends) >= MAX_EVENTS:
            raise TransitsimError(
                f"{path}: more than {MAX_EVENTS:,} complete events and flow arrows: profile "
                "fewer steps (torch.profiler's schedule: active=N)"
            )
        if flow:
            _flow(raw, starts, ends)
            continue
        if raw.get("ph") != "X":
            continue
        ts, dur = _number(raw.get("ts")), _number(raw.get("dur"))
        name = raw.get("name")
        if ts is None or dur is None or dur < 0 or not isinstance(name, str):
            skipped += 1
            continue
        args = raw.get("args")
        events.append(
            Event(
                name=name,
                cat=str(raw.get("cat") or ""),
                ts=ts,
                dur=dur,
                pid=raw.get("pid"),
                tid=raw.get("tid"),
                args=args if isinstance(args, dict) else {},
            )
        )
    if kind == "object" and not listed and "traceEvents" not in header:
        raise TransitsimError(f"{path}: not a profiler trace (no 'traceEvents' list)")
    events.sort(key=lambda e: (e.ts, -e.dur))
    rank, world, backend, device = _header(header)
    if device == "cpu" and any(e.cat == "kernel" for e in events):
        device = "gpu"  # GPU kernels, but no deviceProperties to name the GPU
    if world is not None and not 1 <= world <= 10**7:
        raise TransitsimError(f"{path}: distributedInfo.world_size {world} is not a job size")
    return RawProfile(path, events, rank, world, backend, device, skipped, starts, ends)


def _flow(raw: dict[str, Any], starts: dict, ends: dict) -> None:
    """One ac2g arrow end, kept where its id and time are usable (else ignored: it is a hint)."""
    key, ts = raw.get("id"), _number(raw.get("ts"))
    if ts is None or isinstance(key, bool) or not isinstance(key, int | str):
        return
    if raw["ph"] == "s":
        starts[key] = ts
    else:
        ends[(str(raw.get("pid")), str(raw.get("tid")), ts)] = key


def correlation_of(event: Event, profile: RawProfile) -> int | str | None:
    """The launch id tying a GPU event (or a host launch) to the other side: its `correlation`
    argument, else the ac2g arrow ending on it; None when neither is usable."""
    key = event.args.get("correlation")
    if isinstance(key, int | str) and not isinstance(key, bool):
        return key
    return profile.flow_ends.get((str(event.pid), str(event.tid), event.ts))


def enclosing_spans(events: list[Event]) -> dict[int, list[Event]]:
    """For each host event (by id), the spans enclosing it on its own thread, outermost first."""
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for event in events:
        by_thread[(str(event.pid), str(event.tid))].append(event)
    out: dict[int, list[Event]] = {}
    for thread_events in by_thread.values():
        stack: list[Event] = []
        for event in thread_events:  # sorted by (ts, -dur)
            while stack and not stack[-1].contains(event):
                stack.pop()
            out[id(event)] = list(stack)
            stack.append(event)
    return out


def is_gpu(event: Event) -> bool:
    return event.cat in GPU_CATS


def step_spans(profile: RawProfile) -> tuple[list[tuple[int, Event]], list[str]]:
    """(N, span) of every `ProfilerStep#N` on the host, in time order, and a note per kind of
    span dropped: zero-length ones, and repeats of a number that are the same span again or a
    sliver (at most 5 %) of the longest (some profilers write both). Two full spans of one
    number, or none at all, are one line."""
    by_number: dict[int, list[Event]] = defaultdict(list)
    zero = 0
    for event in profile.events:
        match = STEP_NAME.match(event.name)
        if match and not is_gpu(event):
            if event.dur <= 0:
                zero += 1
            else:
                by_number[int(match.group(1))].append(event)
    if not by_number:
        raise TransitsimError(
            f"{profile.path}: no ProfilerStep#N spans (profile with torch.profiler's schedule "
            "and call prof.step() once per training step)"
        )
    spans, twins, slivers = [], 0, []
    for number, found in by_number.items():
        longest = max(found, key=lambda e: e.dur)
        for other in found:
            if other is longest:
                continue
            if other.ts == longest.ts and other.dur == longest.dur:
                twins += 1
            elif other.dur <= 0.05 * longest.dur:
                slivers.append(other.dur)
            else:
                raise TransitsimError(
                    f"{profile.path}: ProfilerStep numbers repeat: not one rank's file"
                )
        spans.append((number, longest))
    spans, enclosing = _innermost(sorted(spans, key=lambda item: (item[1].ts, -item[1].dur)))
    for (first, a), (second, b) in itertools.pairwise(spans):
        if a.end - b.ts > OVERLAP_SLACK_US:
            raise TransitsimError(
                f"{profile.path}: ProfilerStep#{first} and ProfilerStep#{second} overlap by "
                f"{ms_range([a.end - b.ts])}: steps follow each other, so this is not one "
                "rank's profile as torch.profiler writes it"
            )
    notes = []
    if enclosing:
        listed = ", ".join(f"#{n}" for n in enclosing[:5]) + (", ..." if len(enclosing) > 5 else "")
        notes.append(
            f"{len(enclosing)} ProfilerStep span(s) enclosing other steps' spans dropped "
            f"({listed}): each collective counted once, in the innermost step"
        )
    if zero:
        notes.append(f"{zero} zero-length ProfilerStep span(s) dropped")
    if twins:
        notes.append(f"{twins} ProfilerStep span(s) written twice: the copies dropped")
    if slivers:
        notes.append(
            f"{len(slivers)} ProfilerStep span(s) of {ms_range(slivers)} beside their step's "
            "full span dropped"
        )
    return spans, notes


def _innermost(spans: list[tuple[int, Event]]) -> tuple[list[tuple[int, Event]], list[int]]:
    """The spans (sorted by start, longest first) less those that enclose the next one, which
    hold other steps (a span around the whole loop, nested steps); and the numbers dropped."""
    kept, dropped = [], []
    for index, (number, span) in enumerate(spans):
        following = spans[index + 1][1] if index + 1 < len(spans) else None
        if following is not None and span.contains(following):
            dropped.append(number)
        else:
            kept.append((number, span))
    return kept, dropped


def ms_range(durations_us: list[float]) -> str:
    """ "0.016-0.018 ms" (or "0.02 ms") for a few spans' durations in microseconds."""
    low, high = f"{min(durations_us) / 1e3:.3g}", f"{max(durations_us) / 1e3:.3g}"
    return f"{low} ms" if low == high else f"{low}-{high} ms"


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    return sum(b - a for a, b in merge(intervals))


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The intervals' union as disjoint sorted intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def overlap_length(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> float:
    """Length of the intersection of two unions of intervals."""
    a, b = merge(first), merge(second)
    if not a or not b:
        return 0.0
    starts = np.array([s for s, _ in b])
    ends = np.array([e for _, e in b])
    total = 0.0
    for s, e in a:
        lo = np.searchsorted(ends, s, side="right")
        hi = np.searchsorted(starts, e, side="left")
        if hi > lo:
            total += float(np.sum(np.minimum(ends[lo:hi], e) - np.maximum(starts[lo:hi], s)))
    return total
