"""A researcher's PyTorch profiler (Kineto) trace, read step by step (issue 23, item 1).

Per `ProfilerStep#N` span of one rank's file: its wall time; every collective issued in it
(kind, bytes = element count x dtype size, group size, launch time); the communication time and
how much of it overlapped compute (hidden) or not (exposed); the optimiser's time; and when the
backward ran, so that each gradient bucket's launch can be placed in it.

Where the numbers come from, in the order tried (old and new profiler formats both occur):

- collectives: the backend's own op (`nccl:all_reduce`, `gloo:all_reduce`, one per collective,
  on the host); its size from its recorded shapes (`Input Dims` x `Input type`), else from the
  enclosing `record_param_comms` (`In msg nelems` x `dtype`, newer traces), else from the
  `c10d::` call that launched it. Traces with only `record_param_comms` carrying a `Collective
  name` use those. The launch time is that of the `c10d::` call (DDP's, on the autograd thread)
  when there is one: gloo runs the op itself later on a worker thread;
- communication, compute, hidden and exposed: on a GPU trace from the device's own timeline
  (kineto_device.py: each step a window of device time, communication kernels known by name or
  by the comm op that launched them, each class unioned over its streams); on a CPU-only trace
  the backend ops' own spans against the host ops of the threads that run no collective;
- backward: the `autograd::engine::evaluate_function` ops (on a GPU trace, the device time of
  the work they launched); update: `Optimizer.step#...` (likewise).

wall_s is the host's ProfilerStep span, the step the training loop measured; compute_s is it
less exposed communication and the optimiser step: what the worker would take with an
infinitely fast network. What could not be read is said in the notes, one line each; figures
that do not add up (exposed communication longer than the step, a GPU that ran far behind the
host) in the warnings.
"""

import dataclasses
import math
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from transitsim.base.errors import TransitsimError
from transitsim.traces.dtypes import element_size
from transitsim.traces.kineto_device import DeviceStep, DeviceTimeline, device_timeline
from transitsim.traces.kineto_events import (
    Event,
    enclosing_spans,
    is_gpu,
    overlap_length,
    read_raw_profile,
    step_spans,
    union_length,
)

US = 1e-6
_KIND_WORDS = (  # first match wins: reduce_scatter before reduce, all_gather before gather
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)
COMM_PREFIXES = ("nccl:", "gloo:", "c10d::", "record_param_comms", "ucc:", "mpi:")
_BACKEND_OP = re.compile(r"^(nccl|gloo|ucc|mpi):", re.IGNORECASE)
_OPTIMIZER = re.compile(r"^Optimizer\.step#(\w{1,60})\.step$")
# the element type in an NCCL reduction kernel's name: ncclKernel_AllReduce_RING_LL_Sum_float
_KERNEL_DTYPE = re.compile(r"_(?:Sum|Prod|Min|Max|Avg|PreMulSum|SumPostDiv)_(\w+?)(?:\(|$)")
KERNEL_DTYPE_BYTES = {
    "float": 4, "double": 8, "half": 2, "bf16": 2, "bfloat16": 2, "__nv_bfloat16": 2,
    "int8_t": 1, "uint8_t": 1, "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8,
    "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
REDUCING = ("all_reduce", "reduce_scatter", "reduce")
GRADIENT_KINDS = ("all_reduce", "all_gather")  # the exchange replayed: the first one a step has
HOST_AHEAD = 1.10  # GPU steps this much longer than the host's: the host ran ahead


def collective_kind(name: str) -> str | None:
    """all_reduce, all_gather, ... for a collective's name in any of its spellings, else None."""
    text = name.lower()
    text = text.split("::", 1)[1] if text.startswith("c10d::") else text.split(":", 1)[-1]
    text = text.replace("_", "")
    if text.startswith("wait") or not text:
        return None
    for word, kind in _KIND_WORDS:
        if word in text:
            return kind
    return None


@dataclass(frozen=True)
class Collective:
    """One collective issued in a step (host times in microseconds)."""

    kind: str
    name: str
    nbytes: int | None  # element count x dtype size; None: the trace does not say
    elements: int | None
    group_size: int | None
    launch_us: float
    end_us: float
    dtype_bytes: int | None = None  # bytes per element, where the trace says
    unknown_dtype: str | None = None  # an element type of no known size, where one made nbytes None
    ready_us: float | None = None  # GPU trace: when its inputs were done on the device
    run_us: tuple[float, float] | None = None  # when it ran: its kernels (GPU), its op (CPU)
    op: Event | None = field(default=None, compare=False, repr=False)  # the host op read


@dataclass
class StepTiming:
    """One ProfilerStep span of one rank, in seconds. Offsets (backward, bucket readiness) are
    from frame_start_us: the device window's start on a GPU trace, else the host span's."""

    number: int
    start_us: float
    wall_s: float
    compute_s: float
    update_s: float
    comm_s: float
    exposed_s: float
    hidden_s: float
    backward_start_s: float | None
    backward_end_s: float | None
    collectives: list[Collective] = field(default_factory=list)
    frame_start_us: float = 0.0
    compute_end_s: float = 0.0  # end of forward and backward in the frame
    device_s: float | None = None  # GPU trace: the step's window of device time
    gpu_compute_s: float | None = None  # GPU trace: the union of its non-communication work
    idle_s: float | None = None  # GPU trace: device time with nothing running

    waited_s: float = 0.0  # the step's end waited this long on the gradient exchange

    def bytes_of(self, kind: str) -> int:
        return sum(c.nbytes or 0 for c in self.collectives if c.kind == kind)

    def gradient_kind(self) -> str | None:
        """The gradient exchange's collective: its all-reduces, else its all-gathers."""
        return next((k for k in GRADIENT_KINDS if any(c.kind == k for c in self.collectives)), None)

    def bucket_ready_s(self) -> list[float]:
        """When each all-reduce's inputs were ready (s from frame_start_us), in launch order."""
        return [
            ((c.launch_us if c.ready_us is None else c.ready_us) - self.frame_start_us) * US
            for c in self.collectives
            if c.kind == "all_reduce"
        ]


@dataclass
class RankProfile:
    """One rank's file, read: its steps and what could not be read (one line each)."""

    path: Path
    rank: int | None
    world_size: int | None
    backend: str | None
    device: str
    gpu: bool
    steps: list[StepTiming]
    notes: list[str]
    warnings: list[str] = field(default_factory=list)  # figures that do not add up
    optimizer: str | None = None  # Optimizer.step#<name>.step, where the trace has one


def _dims_elements(dims: object, depth: int = 0) -> int | None:
    """Elements of one shape ([] is a scalar: 1), or of a nested TensorList of shapes (at most
    three lists deep: deeper is no shape torch records)."""
    if isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return math.prod(dims) if all(d >= 0 for d in dims) else None
    if depth < 2 and isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims):
        parts = [_dims_elements(d, depth + 1) for d in dims]
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]
    return None


def _shape_size(args: dict) -> tuple[int | None, int | None]:
    """(elements, bytes) from recorded shapes: the tensors among the inputs (Scalars, Nones and
    empty shapes of non-tensors skipped); bytes None when a tensor's dtype is unknown."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return None, None
    elements, nbytes, tensors = 0, 0, 0
    for shape, kind in zip(dims, types, strict=True):
        if not isinstance(kind, str) or kind in ("", "Scalar", "ScalarList", "None"):
            continue
        count = _dims_elements(shape)
        if count is None:
            return None, None
        tensors += 1
        elements += count
        size = element_size(kind)
        nbytes = -1 if size is None or nbytes < 0 else nbytes + count * size
    if not tensors:
        return None, None
    return elements, (nbytes if nbytes >= 0 else None)


def _msg_size(args: dict) -> tuple[int | None, int | None]:
    """(elements, bytes) from record_param_comms' newer arguments (In msg nelems x dtype)."""
    count = args.get("In msg nelems")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return None, None
    size = element_size(args.get("dtype"))
    return count, (None if size is None else count * size)


def _element_bytes(args: dict, elements: int | None, nbytes: int | None) -> int | None:
    """Bytes per element: from a size already read, else record_param_comms' dtype, else the
    first tensor's recorded type."""
    if elements and nbytes is not None:
        return nbytes // elements
    size = element_size(args.get("dtype"))
    if size is None and isinstance(args.get("Input type"), list):
        size = next((b for t in args["Input type"] if (b := element_size(t))), None)
    return size


def unknown_type(args: dict) -> str | None:
    """The first element type an op records (its `dtype`, else a tensor's `Input type`) that has
    no known size, else None."""
    names = [args.get("dtype")] if "dtype" in args else []
    if isinstance(args.get("Input type"), list):
        names += [t for t in args["Input type"] if t not in ("", "Scalar", "ScalarList", "None")]
    return next((str(n)[:60] for n in names if isinstance(n, str) and not element_size(n)), None)


def kernel_dtype_bytes(name: str) -> int | None:
    """Bytes per element from an NCCL reduction kernel's name (..._Sum_float: 4), else None."""
    match = _KERNEL_DTYPE.search(name)
    return KERNEL_DTYPE_BYTES.get(match.group(1).lower()) if match else None


def _group(args: dict) -> int | None:
    size = args.get("Group size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


class _Launchers:
    """The `c10d::` launches no backend op sits inside (gloo runs the op later on a worker
    thread), each handed to one op: the earliest unused one of the op's kind, started before it,
    whose element count is the op's or unknown. Queues by kind and by (kind, count), each read
    from its first unused entry, make every op's match O(1) amortised, not a scan of them all."""

    def __init__(self, launchers: list[Event]) -> None:  # in time order
        self.queues: dict[tuple, list[tuple[int, Event]]] = defaultdict(list)
        for position, event in enumerate(launchers):
            kind = collective_kind(event.name)
            self.queues[(kind,)].append((position, event))
            self.queues[(kind, _shape_size(event.args)[0])].append((position, event))
        self.heads: dict[tuple, int] = defaultdict(int)
        self.used: set[int] = set()

    def _first(self, key: tuple) -> tuple[int, Event] | None:
        queue, head = self.queues.get(key, []), self.heads[key]
        while head < len(queue) and queue[head][0] in self.used:
            head += 1
        self.heads[key] = head
        return queue[head] if head < len(queue) else None

    def take(self, kind: str, elements: int | None, before: float) -> Event | None:
        keys = [(kind,)] if elements is None else [(kind, elements), (kind, None)]
        heads = [h for h in map(self._first, keys) if h is not None and h[1].ts <= before]
        if not heads:
            return None
        position, event = min(heads, key=lambda h: h[0])
        self.used.add(position)
        return event


def _collectives(
    host: list[Event], ancestors: dict[int, list[Event]], world: int | None, notes: list[str]
) -> list[Collective]:
    """Every collective on the host side, once each, in launch order."""
    backend_ops = [e for e in host if _BACKEND_OP.match(e.name) and collective_kind(e.name)]
    launchers = [e for e in host if e.name.startswith("c10d::") and collective_kind(e.name)]
    if not backend_ops:
        rpcs = [e for e in host if e.name == "record_param_comms" and e.args.get("Collective name")]
        backend_ops = [e for e in rpcs if collective_kind(str(e.args["Collective name"]))]
    anchored = {
        id(a) for op in backend_ops for a in ancestors[id(op)] if a.name.startswith("c10d::")
    }
    free = _Launchers([e for e in launchers if id(e) not in anchored])  # gloo: on other threads
    out = []
    unsized = 0
    for op in backend_ops:
        is_rpc = op.name == "record_param_comms"
        kind = collective_kind(str(op.args["Collective name"]) if is_rpc else op.name)
        if kind is None:  # both lists hold only ops whose name gives a kind
            continue
        elements, nbytes = _shape_size(op.args)
        if is_rpc:
            elements, nbytes = _msg_size(op.args)
        dtype = _element_bytes(op.args, elements, nbytes)
        group = _group(op.args)
        launch = None
        for parent in reversed(ancestors[id(op)]):
            if parent.name == "record_param_comms":
                group = group or _group(parent.args)
                dtype = dtype or _element_bytes(parent.args, None, None)
                if nbytes is None:
                    count, size = _msg_size(parent.args)
                    elements, nbytes = elements or count, size
            elif parent.name.startswith("c10d::") and launch is None:
                launch = parent.ts
                if elements is None:
                    elements = _shape_size(parent.args)[0]
        if launch is None:
            match = free.take(kind, elements, op.ts)
            if match is not None:
                launch = match.ts
        unsized += nbytes is None and kind not in ("barrier",)
        unknown = None
        if nbytes is None:
            rpcs = [p.args for p in ancestors[id(op)] if p.name == "record_param_comms"]
            unknown = next(filter(None, map(unknown_type, [op.args, *rpcs])), None)
        out.append(
            Collective(
                kind=kind,
                name=op.name
                if op.name != "record_param_comms"
                else str(op.args["Collective name"]),
                nbytes=nbytes,
                elements=elements,
                group_size=group or world,
                launch_us=op.ts if launch is None else launch,
                end_us=op.end,
                dtype_bytes=dtype,
                run_us=(op.ts, op.end),
                unknown_dtype=unknown,
                op=op,
            )
        )
    if unsized:
        notes.append(
            f"{unsized} collective(s) without a readable size (recorded without "
            "record_shapes=True, by a torch that writes no In msg nelems)"
        )
    return sorted(out, key=lambda c: c.launch_us)


def _on_device(collective: Collective, device: DeviceTimeline) -> Collective:
    """The collective with its device readiness, and its dtype from its kernel's name where
    the host op did not say."""
    key = id(collective.op)
    dtype = collective.dtype_bytes
    if dtype is None and collective.kind in REDUCING and key in device.kernel_names:
        dtype = kernel_dtype_bytes(device.kernel_names[key])
    return dataclasses.replace(
        collective,
        ready_us=device.ready_us.get(key),
        dtype_bytes=dtype,
        run_us=device.kernel_us.get(key),
    )


class _ByStart:
    """Events in time order, found by the window they overlap: by bisection on their starts,
    reaching back the longest event's length (O(log n + found), not a scan of them all)."""

    def __init__(self, events: list[Event]) -> None:  # sorted by start
        self.events = events
        self.starts = [e.ts for e in events]
        self.longest = max((e.dur for e in events), default=0.0)

    def overlapping(self, start: float, end: float) -> list[Event]:
        first = bisect_left(self.starts, start - self.longest)
        last = bisect_left(self.starts, end)
        return [e for e in self.events[first:last] if e.end > start]


def _host_figures(
    span: Event, inside: list[Event], backend_ops: _ByStart, ancestors: dict, comm_threads: set
) -> tuple[float, float]:
    """CPU-only trace: (communication, hidden) of a step in microseconds, from the backend ops'
    spans (clipped to the step) against the host ops of the threads running no collective."""
    comm = [
        (max(e.ts, span.ts), min(e.end, span.end))
        for e in backend_ops.overlapping(span.ts, span.end)
    ]
    work = [
        (e.ts, e.end)
        for e in inside
        if e.cat == "cpu_op"
        and (str(e.pid), str(e.tid)) not in comm_threads
        and not e.name.startswith(COMM_PREFIXES)
        and not any(a.name.startswith(COMM_PREFIXES) for a in ancestors[id(e)])
    ]
    comm_us = union_length(comm)
    return comm_us, min(overlap_length(comm, work), comm_us)


def _device_step(
    number: int, span: Event, device: DeviceStep, host_update_us: float
) -> tuple[StepTiming, bool]:
    """A GPU trace's step: the host's measured wall, the device's figures; (step, whether the
    exposed communication had to be clamped to fit the step)."""
    wall = span.dur * US
    update = min((device.update_us if device.update_us is not None else host_update_us) * US, wall)
    comm = device.comm_us * US
    exposed = device.exposed_us * US
    clamped = exposed > wall - update + 1e-9
    exposed = min(exposed, wall - update)
    backward = device.backward_us
    offsets = (
        ((backward[0] - device.start_us) * US, (backward[1] - device.start_us) * US)
        if backward
        else (None, None)
    )
    timing = StepTiming(
        number=number,
        start_us=span.ts,
        wall_s=wall,
        compute_s=max(wall - exposed - update, 0.0),
        update_s=update,
        comm_s=comm,
        exposed_s=exposed,
        hidden_s=comm - exposed,
        backward_start_s=offsets[0],
        backward_end_s=offsets[1],
        frame_start_us=device.start_us,
        compute_end_s=offsets[1] or 0.0,
        device_s=device.length_us * US,
        gpu_compute_s=device.busy_us * US,
        idle_s=device.idle_us * US,
    )
    return timing, clamped


def waited_s(step: StepTiming) -> float:
    """How long the step's end waited on its gradient exchange: from the end of its backward
    (or its last bucket's readiness, whichever is later) to the end of its last gradient
    collective; 0 where the exchange finished first. What an overlapped replay adds to compute:
    communication beside an idle GPU (a host-bound step) or beside another collective is not
    waited for unless it delays that end."""
    kind = step.gradient_kind()
    mine = [c for c in step.collectives if c.kind == kind and c.run_us is not None]
    if not mine:
        return 0.0
    done = [c.ready_us for c in mine if c.ready_us is not None]
    if step.backward_end_s is not None:
        done.append(step.frame_start_us + step.backward_end_s / US)
    if not done:  # neither backward nor readiness: the exchange started when it was launched
        done = [max(c.launch_us for c in mine)]
    end = max(c.run_us[1] for c in mine)  # type: ignore[index]
    return min(max((end - max(done)) * US, 0.0), max(step.wall_s - step.update_s, 0.0))


def _charge_wait(step: StepTiming) -> None:
    """Set the step's wait on its exchange, and its compute to the rest of its wall time:
    wall = compute + waited + update, what replay's overlap model adds up."""
    step.waited_s = waited_s(step)
    step.compute_s = max(step.wall_s - step.update_s - step.waited_s, 0.0)


def _warnings(steps: list[StepTiming], clamped: list[int], gpu: bool) -> list[str]:
    """One line per kind of figure that does not add up."""
    out = []
    if clamped:
        listed = ", ".join(f"#{n}" for n in clamped)
        where = "the GPU's" if gpu else "the"
        out.append(
            f"{where} exposed communication and optimiser exceed the step's wall time in "
            f"step(s) {listed}: clamped to it, compute 0 there"
        )
    if not gpu:
        return out
    device = sum(s.device_s or 0.0 for s in steps) / len(steps)
    wall = sum(s.wall_s for s in steps) / len(steps)
    if device > HOST_AHEAD * wall:
        out.append(
            f"the GPU's steps (mean {device * 1e3:.4g} ms) are {device / wall - 1:.0%} longer "
            f"than the host's ({wall * 1e3:.4g} ms): the host launched ahead of the GPU, so a "
            "longer run would step at the GPU's pace; the trace keeps the host's measured step"
        )
    return out


def read_rank_profile(path: Path | str) -> RankProfile:
    """One rank's Kineto trace, step by step (TransitsimError, one line, when it is not one)."""
    raw = read_raw_profile(path)
    spans, notes = step_spans(raw)
    if raw.skipped:
        notes.append(f"{raw.skipped} event(s) without a time span skipped")
    host = [e for e in raw.events if not is_gpu(e)]
    ancestors = enclosing_spans(host)
    collectives = _collectives(host, ancestors, raw.world_size, notes)
    gpu = any(e.cat == "kernel" for e in raw.events)
    device = device_timeline(raw, spans, ancestors) if gpu else None
    if device is not None:
        notes.extend(device.notes)
        collectives = [_on_device(c, device) for c in collectives]
    backend_ops = [e for e in host if _BACKEND_OP.match(e.name) and collective_kind(e.name)]
    comm_threads = {(str(e.pid), str(e.tid)) for e in backend_ops}
    ops, host_starts = _ByStart(backend_ops), [e.ts for e in host]
    launches = [c.launch_us for c in collectives]  # in launch order
    steps, clamped = [], []
    for index, (number, span) in enumerate(spans):  # each step's events found by bisection
        first, last = bisect_left(host_starts, span.ts), bisect_right(host_starts, span.end + 1.0)
        inside = [e for e in host[first:last] if e.end <= span.end + 1.0]
        mine = collectives[bisect_left(launches, span.ts) : bisect_right(launches, span.end)]
        update = union_length(
            [(e.ts, e.end) for e in inside if e.name.startswith("Optimizer.step#")]
        )
        if device is not None:
            timing, clamp = _device_step(number, span, device.steps[index], update)
            timing.collectives = mine
            _charge_wait(timing)
            steps.append(timing)
            if clamp:
                clamped.append(number)
            continue
        backward = [e for e in inside if e.name.startswith("autograd::engine::evaluate_function")]
        comm_us, hidden_us = _host_figures(span, inside, ops, ancestors, comm_threads)
        wall_s = span.dur * US
        exposed_s = (comm_us - hidden_us) * US
        compute_s = max(wall_s - exposed_s - update * US, 0.0)
        if wall_s - exposed_s - update * US < -1e-9:
            clamped.append(number)
        steps.append(
            StepTiming(
                number=number,
                start_us=span.ts,
                wall_s=wall_s,
                compute_s=compute_s,
                update_s=update * US,
                comm_s=comm_us * US,
                exposed_s=exposed_s,
                hidden_s=hidden_us * US,
                backward_start_s=(min(e.ts for e in backward) - span.ts) * US if backward else None,
                backward_end_s=(max(e.end for e in backward) - span.ts) * US if backward else None,
                collectives=mine,
                frame_start_us=span.ts,
            )
        )
        _charge_wait(steps[-1])
        step = steps[-1]  # the backward's end, else the compute's (no autograd ops)
        step.compute_end_s = step.backward_end_s or step.compute_s
    warnings = _warnings(steps, clamped, device is not None)
    if not any(s.backward_start_s is not None for s in steps):
        notes.append("no autograd ops in the steps: no backward profile (bucket timing) read")
    if not collectives:
        notes.append("no collectives in the trace (nccl:*, gloo:*, record_param_comms)")
    if not any(s.update_s for s in steps):
        notes.append("no Optimizer.step# spans: the optimiser's time is counted as compute")
    optimizer = next((m.group(1) for e in host if (m := _OPTIMIZER.match(e.name))), None)
    return RankProfile(
        path=raw.path,
        rank=raw.rank,
        world_size=raw.world_size,
        backend=raw.backend,
        device=raw.device,
        gpu=gpu,
        steps=steps,
        notes=notes,
        warnings=warnings,
        optimizer=optimizer,
    )


def read_job_profiles(paths: list[Path | str]) -> list[RankProfile]:
    """Several ranks' files of one job (or one rank's): distinct ranks, one world size."""
    if not paths:
        raise TransitsimError("no profile given")
    profiles = [read_rank_profile(path) for path in paths]
    worlds = {p.world_size for p in profiles if p.world_size is not None}
    if len(worlds) > 1:
        raise TransitsimError(
            f"profiles of jobs of different sizes ({', '.join(map(str, sorted(worlds)))} ranks): "
            "give the files of one job"
        )
    ranks = [p.rank if p.rank is not None else i for i, p in enumerate(profiles)]
    if len(set(ranks)) != len(ranks):
        raise TransitsimError(
            f"two profiles of the same rank ({', '.join(str(p.path) for p in profiles)}): "
            "give each rank's file once"
        )
    for profile, rank in zip(profiles, ranks, strict=True):
        profile.rank = rank
    common = set.intersection(*({s.number for s in p.steps} for p in profiles))
    if not common:
        raise TransitsimError("the profiles share no ProfilerStep number: not one job's steps")
    return sorted(profiles, key=lambda p: p.rank or 0)
