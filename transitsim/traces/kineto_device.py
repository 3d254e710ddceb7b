"""A Kineto trace's steps as the GPU ran them (issue 42, item 3): the device's own timeline.

The host launches work and runs on; the GPU runs it later, sometimes a whole step later (a queue
of launched kernels), and its communication kernels run on streams of their own, beside compute
and beside each other. Figures read from the host span (kernels attributed to the span that
launched them, added up stream by stream) then count one step's kernels in another's time and
can exceed the step. Here each step is a window of device time instead:

- the GPU's own `ProfilerStep#N` annotations (`gpu_user_annotation`) where every step has one
  that covers the work its host step launched; else from the first GPU work launched in host
  step N (by the launch's `correlation`, or the `ac2g` flow arrow) to the first of step N+1 (the
  last step: to the end of its last work). Annotations that cover nothing (some ROCm traces
  write 0.02 ms ones) are said and ignored;
- every GPU event (kernel, copy, memset) clipped to the window, whoever launched it: a kernel
  launched before the profile began still took device time in the window;
- communication: the NCCL/RCCL kernels by name, or any GPU work launched from inside a
  `record_param_comms` or backend (`nccl:*`...) op (RCCL names every kernel
  `ncclDevKernel_Generic`); the rest is compute;
- each class's intervals are unioned over its streams before the two are compared: hidden =
  communication overlapping compute, exposed = the rest of it, idle = neither ran. So exposed
  never exceeds the window.
"""

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field

from transitsim.traces.kineto_events import (
    STEP_NAME,
    Event,
    RawProfile,
    correlation_of,
    ms_range,
    overlap_length,
    union_length,
)

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "runtime")
COMM_KERNEL = re.compile(r"^(void\s+)?[nr]ccl", re.IGNORECASE)
COMM_OP = re.compile(r"^((nccl|rccl|gloo|ucc|mpi):|record_param_comms$)", re.IGNORECASE)
OPTIMIZER_OP = re.compile(r"^Optimizer\.step#")
BACKWARD_OP = "autograd::engine::evaluate_function"
COVERED = 0.5  # a GPU step annotation must hold this share of its step's launched busy time
ADJACENT_US = 1000.0  # host steps closer than this (or 1 % of a step) follow each other


def is_comm_op(name: str) -> bool:
    """A host op whose GPU work is communication: record_param_comms or a backend's op."""
    return bool(COMM_OP.match(name))


@dataclass
class Work:
    """One GPU event and what launched it (None: the launch is not in the trace)."""

    event: Event
    launch_us: float | None
    comm: bool
    comm_ops: tuple[int, ...] = ()  # ids of the host comm ops enclosing its launch
    optimizer: bool = False
    backward: bool = False


@dataclass
class DeviceStep:
    """One step's window of device time and what ran in it (microseconds, absolute)."""

    start_us: float
    end_us: float
    comm_us: float
    busy_us: float  # compute: the union of non-communication work
    hidden_us: float
    idle_us: float
    update_us: float | None  # GPU work launched by Optimizer.step#; None: none on the GPU
    backward_us: tuple[float, float] | None  # first start, last end of backward's GPU work

    @property
    def exposed_us(self) -> float:
        return self.comm_us - self.hidden_us

    @property
    def length_us(self) -> float:
        return self.end_us - self.start_us


@dataclass
class DeviceTimeline:
    """Every step's device window, and per host comm op (by id) its device figures."""

    steps: list[DeviceStep]
    ready_us: dict[int, float] = field(default_factory=dict)  # inputs done on the device
    kernel_names: dict[int, str] = field(default_factory=dict)  # its first comm kernel's name
    kernel_us: dict[int, tuple[float, float]] = field(default_factory=dict)  # its kernels ran
    notes: list[str] = field(default_factory=list)


def _work(profile: RawProfile, ancestors: dict[int, list[Event]]) -> list[Work]:
    """Every GPU event with its launch time and class, in start order."""
    launches: dict[int | str, Event] = {}
    for event in profile.events:
        if event.cat in LAUNCH_CATS:
            key = correlation_of(event, profile)
            if key is not None:
                launches.setdefault(key, event)
    out = []
    for event in profile.events:
        if event.cat not in GPU_WORK:
            continue
        key = correlation_of(event, profile)
        launch = launches.get(key) if key is not None else None
        parents = ancestors.get(id(launch), []) if launch is not None else []
        comm_ops = tuple(id(p) for p in parents if is_comm_op(p.name))
        launch_us = launch.ts if launch is not None else profile.flow_starts.get(key)  # type: ignore[arg-type]
        out.append(
            Work(
                event=event,
                launch_us=launch_us,
                comm=bool(COMM_KERNEL.match(event.name)) or bool(comm_ops),
                comm_ops=comm_ops,
                optimizer=any(OPTIMIZER_OP.match(p.name) for p in parents),
                backward=any(p.name.startswith(BACKWARD_OP) for p in parents),
            )
        )
    return out


def _launched_by_step(work: list[Work], spans: list[tuple[int, Event]]) -> list[list[Work]]:
    """The GPU work each host step launched."""
    starts = [span.ts for _, span in spans]
    out: list[list[Work]] = [[] for _ in spans]
    for item in work:
        if item.launch_us is None:
            continue
        index = bisect.bisect_right(starts, item.launch_us) - 1
        if index >= 0 and item.launch_us <= spans[index][1].end:
            out[index].append(item)
    return out


def _annotation_windows(
    profile: RawProfile, spans: list[tuple[int, Event]], launched: list[list[Work]], notes: list
) -> list[tuple[float, float]] | None:
    """The GPU's own ProfilerStep annotations as windows, where each step has one covering its
    launched work; None (with a note when there were some) otherwise."""
    marks: dict[int, Event] = {}
    count = 0
    for event in profile.events:
        match = STEP_NAME.match(event.name)
        if match and event.cat == "gpu_user_annotation":
            count += 1
            number = int(match.group(1))
            if number not in marks or event.dur > marks[number].dur:
                marks[number] = event
    if not count:
        return None
    windows = []
    for (number, _), mine in zip(spans, launched, strict=True):
        mark = marks.get(number)
        busy = [(w.event.ts, w.event.end) for w in mine]
        inside = overlap_length(busy, [(mark.ts, mark.end)]) if mark is not None else 0.0
        if mark is None or not busy or inside < COVERED * union_length(busy):
            notes.append(
                f"{count} GPU ProfilerStep annotation(s) of "
                f"{ms_range([e.dur for e in marks.values()])} do not cover their steps' kernels: "
                "ignored; each device step starts at the first work its host step launched on "
                "the busiest stream"
            )
            return None
        windows.append((mark.ts, mark.end))
    notes.append("device steps: the GPU's own ProfilerStep annotations")
    return windows


def _main_stream(launched: list[list[Work]]) -> tuple[str, str] | None:
    """The stream with the most compute time among the steps' work: the one whose first kernel
    of a step starts the step (a data loader's copies for the next step, on a stream of their
    own, start while the last step still computes)."""
    busy: dict[tuple[str, str], float] = defaultdict(float)
    for mine in launched:
        for w in mine:
            if not w.comm:
                busy[_stream(w.event)] += w.event.dur
    return max(busy, key=lambda k: busy[k]) if busy else None


def _stream(event: Event) -> tuple[str, str]:
    return (str(event.pid), str(event.tid))


def _launch_windows(
    spans: list[tuple[int, Event]], launched: list[list[Work]]
) -> list[tuple[float, float]]:
    """From the first work each host step launched on the main stream (any stream where it
    launched none there) to that of the next step (when the host steps follow each other), else
    to the end of its own last work; a step that launched nothing on the GPU keeps its host
    span."""
    main = _main_stream(launched)
    firsts = []
    for mine in launched:
        on_main = [w.event.ts for w in mine if _stream(w.event) == main]
        firsts.append(min(on_main or [w.event.ts for w in mine], default=None))
    windows = []
    for index, ((_, span), mine) in enumerate(zip(spans, launched, strict=True)):
        first = firsts[index]
        if first is None:
            windows.append((span.ts, span.end))
            continue
        end = max(w.event.end for w in mine)
        if index + 1 < len(spans):
            following = spans[index + 1][1]
            nxt = firsts[index + 1]
            if nxt is not None and following.ts - span.end <= max(ADJACENT_US, 0.01 * span.dur):
                end = nxt
        windows.append((first, max(first, end)))
    for index in range(1, len(windows)):  # never two steps in one stretch of device time
        start, end = windows[index]
        start = max(start, windows[index - 1][1])
        windows[index] = (start, max(start, end))
    return windows


def _step(work: list[Work], window: tuple[float, float], own: set[int]) -> DeviceStep:
    """What ran in one window; backward and optimiser from the work the step launched (own:
    their ids), not a previous step's tail."""
    start, end = window
    comm, busy, update, backward = [], [], [], []
    for item in work:
        lo, hi = max(item.event.ts, start), min(item.event.end, end)
        if hi <= lo:
            continue
        (comm if item.comm else busy).append((lo, hi))
        if item.comm or id(item) not in own:
            continue
        if item.optimizer:
            update.append((lo, hi))
        if item.backward:
            backward.append((lo, hi))
    comm_us, busy_us = union_length(comm), union_length(busy)
    return DeviceStep(
        start_us=start,
        end_us=end,
        comm_us=comm_us,
        busy_us=busy_us,
        hidden_us=min(overlap_length(comm, busy), comm_us),
        idle_us=max(end - start - union_length(comm + busy), 0.0),
        update_us=union_length(update) if update else None,
        backward_us=(min(a for a, _ in backward), max(b for _, b in backward))
        if backward
        else None,
    )


def _in_window(work: list[Work], starts: list[float], longest: float, window: tuple) -> list[Work]:
    """The work overlapping a window (work sorted by start; longest: the longest event)."""
    lo = bisect.bisect_left(starts, window[0] - longest)
    hi = bisect.bisect_left(starts, window[1])
    return [w for w in work[lo:hi] if w.event.end > window[0]]


def _ready(
    work: list[Work],
) -> tuple[dict[int, float], dict[int, str], dict[int, tuple[float, float]]]:
    """Per host comm op: when its inputs were done on the device (the latest end of the compute
    launched before it: a stream runs its work in launch order), its first kernel's name, and
    when its kernels ran (first start, last end)."""
    compute = sorted((w.launch_us, w.event.end) for w in work if not w.comm and w.launch_us)
    launch_times = [t for t, _ in compute]
    done, latest = [], float("-inf")
    for _, end in compute:
        latest = max(latest, end)
        done.append(latest)
    first: dict[int, Work] = {}
    ran: dict[int, tuple[float, float]] = {}
    for item in work:
        for op in item.comm_ops:
            if op not in first or item.event.ts < first[op].event.ts:
                first[op] = item
            lo, hi = ran.get(op, (item.event.ts, item.event.end))
            ran[op] = (min(lo, item.event.ts), max(hi, item.event.end))
    ready, names = {}, {}
    for op, item in first.items():
        names[op] = item.event.name
        before = bisect.bisect_left(launch_times, item.launch_us or 0.0)
        ready[op] = min(done[before - 1], item.event.ts) if before else item.event.ts
    return ready, names, ran


def device_timeline(
    profile: RawProfile, spans: list[tuple[int, Event]], ancestors: dict[int, list[Event]]
) -> DeviceTimeline:
    """The device windows of the host steps `spans` and what ran in each."""
    work = sorted(_work(profile, ancestors), key=lambda w: w.event.ts)
    launched = _launched_by_step(work, spans)
    notes: list[str] = []
    windows = _annotation_windows(profile, spans, launched, notes) or _launch_windows(
        spans, launched
    )
    starts = [w.event.ts for w in work]
    longest = max((w.event.dur for w in work), default=0.0)
    steps = [
        _step(_in_window(work, starts, longest, window), window, {id(w) for w in mine})
        for window, mine in zip(windows, launched, strict=True)
    ]
    unlaunched = sum(1 for w in work if w.launch_us is None and w.event.ts >= windows[0][0])
    if unlaunched:
        notes.append(
            f"{unlaunched} GPU event(s) without their host launch in the trace: timed where "
            "they ran, classed by name"
        )
    by_kind: dict[str, int] = defaultdict(int)
    for w in work:
        if w.comm and not COMM_KERNEL.match(w.event.name):
            by_kind[w.event.name[:40]] += 1
    if by_kind:
        named = ", ".join(f"{n} x {name}" for name, n in sorted(by_kind.items()))
        notes.append(f"communication by its launching op, not its kernel's name: {named}")
    ready, names, ran = _ready(work)
    return DeviceTimeline(
        steps=steps, ready_us=ready, kernel_names=names, kernel_us=ran, notes=notes
    )
