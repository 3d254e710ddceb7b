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
- communication time: the GPU's communication kernels (`ncclKernel_*`, `ncclDevKernel_*`) when
  the trace has GPU kernels, attributed to the step whose host launch (`correlation`) lies in
  its span; otherwise (CPU-only traces) the backend ops' own spans;
- compute: the other GPU kernels and copies, or on a CPU-only trace the host ops of the threads
  that run no collective;
- backward: the `autograd::engine::evaluate_function` ops; update: `Optimizer.step#...`.

compute_s of a step is its wall time less exposed communication and the optimiser step: what
the worker would take with an infinitely fast network. What could not be read is said in the
notes, one line each.
"""

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from transitsim.base.errors import TransitsimError
from transitsim.traces.kineto_events import (
    Event,
    RawProfile,
    is_gpu,
    overlap_length,
    read_raw_profile,
    step_spans,
    union_length,
)

US = 1e-6
DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
    "c10::half": 2, "bfloat16": 2, "c10::bfloat16": 2, "long int": 8, "long": 8, "int64": 8,
    "int": 4, "int32": 4, "short int": 2, "short": 2, "int16": 2, "signed char": 1, "char": 1,
    "int8": 1, "unsigned char": 1, "byte": 1, "uint8": 1, "bool": 1,
    "c10::complex<float>": 8, "complex<float>": 8, "c10::complex<double>": 16,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip
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


@dataclass
class StepTiming:
    """One ProfilerStep span of one rank, in seconds (offsets from the span's start)."""

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

    def bytes_of(self, kind: str) -> int:
        return sum(c.nbytes or 0 for c in self.collectives if c.kind == kind)

    def bucket_launches_s(self) -> list[float]:
        """Launch offsets (s from the span's start) of the step's all-reduces, in order."""
        return [
            (c.launch_us - self.start_us) * US for c in self.collectives if c.kind == "all_reduce"
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


def _dims_elements(dims: object) -> int | None:
    """Elements of one shape ([] is a scalar: 1), or of a nested TensorList of shapes."""
    if isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return math.prod(dims) if all(d >= 0 for d in dims) else None
    if isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims):
        parts = [_dims_elements(d) for d in dims]
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
        size = DTYPE_BYTES.get(kind.lower())
        nbytes = -1 if size is None or nbytes < 0 else nbytes + count * size
    if not tensors:
        return None, None
    return elements, (nbytes if nbytes >= 0 else None)


def _msg_size(args: dict) -> tuple[int | None, int | None]:
    """(elements, bytes) from record_param_comms' newer arguments (In msg nelems x dtype)."""
    count = args.get("In msg nelems")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return None, None
    size = DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
    return count, (None if size is None else count * size)


def _group(args: dict) -> int | None:
    size = args.get("Group size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def _ancestors(events: list[Event]) -> dict[int, list[Event]]:
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
    free = [e for e in launchers if id(e) not in anchored]  # gloo: launched on another thread
    used: set[int] = set()
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
        group = _group(op.args)
        launch = None
        for parent in reversed(ancestors[id(op)]):
            if parent.name == "record_param_comms":
                group = group or _group(parent.args)
                if nbytes is None:
                    count, size = _msg_size(parent.args)
                    elements, nbytes = elements or count, size
            elif parent.name.startswith("c10d::") and launch is None:
                launch = parent.ts
                if elements is None:
                    elements = _shape_size(parent.args)[0]
        if launch is None:
            match = next(
                (
                    e
                    for e in free
                    if id(e) not in used
                    and e.ts <= op.ts
                    and collective_kind(e.name) == kind
                    and (elements is None or _shape_size(e.args)[0] in (None, elements))
                ),
                None,
            )
            if match is not None:
                used.add(id(match))
                launch = match.ts
        unsized += nbytes is None and kind not in ("barrier",)
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
            )
        )
    if unsized:
        notes.append(
            f"{unsized} collective(s) without a readable size (profile with record_shapes=True, "
            "or a torch that records In msg nelems): left out of the payload"
        )
    return sorted(out, key=lambda c: c.launch_us)


def _span_of(spans: list[tuple[int, Event]], ts: float) -> int | None:
    """Index of the step span containing host time ts."""
    for index, (_, span) in enumerate(spans):
        if span.ts <= ts <= span.end:
            return index
    return None


def _gpu_work(
    profile: RawProfile, spans: list[tuple[int, Event]]
) -> tuple[dict[int, list], dict[int, list]]:
    """Per step index: (comm kernel intervals, other GPU work intervals), by host launch."""
    launch_ts: dict[object, float] = {}
    for event in profile.events:
        if event.cat in ("cuda_runtime", "cuda_driver", "runtime") and "correlation" in event.args:
            launch_ts[event.args["correlation"]] = event.ts
    comm: dict[int, list] = defaultdict(list)
    work: dict[int, list] = defaultdict(list)
    for event in profile.events:
        if event.cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        index = _span_of(spans, launch_ts.get(event.args.get("correlation"), event.ts))
        if index is None:
            continue
        target = comm if event.name.lower().startswith("nccl") else work
        target[index].append((event.ts, event.end))
    return comm, work


def read_rank_profile(path: Path | str) -> RankProfile:
    """One rank's Kineto trace, step by step (TransitsimError, one line, when it is not one)."""
    raw = read_raw_profile(path)
    spans = step_spans(raw)
    notes: list[str] = []
    if raw.skipped:
        notes.append(f"{raw.skipped} event(s) without a time span skipped")
    host = [e for e in raw.events if not is_gpu(e)]
    ancestors = _ancestors(host)
    collectives = _collectives(host, ancestors, raw.world_size, notes)
    gpu = any(e.cat == "kernel" for e in raw.events)
    if gpu:
        comm_gpu, work_gpu = _gpu_work(raw, spans)
    backend_ops = [e for e in host if _BACKEND_OP.match(e.name) and collective_kind(e.name)]
    comm_threads = {(str(e.pid), str(e.tid)) for e in backend_ops}
    steps = []
    for index, (number, span) in enumerate(spans):
        inside = [e for e in host if span.ts <= e.ts and e.end <= span.end + 1.0]
        mine = [c for c in collectives if span.ts <= c.launch_us <= span.end]
        if gpu:
            comm, work = comm_gpu.get(index, []), work_gpu.get(index, [])
        else:
            comm = [  # clipped to the span: an op may run on past the step's end
                (max(e.ts, span.ts), min(e.end, span.end))
                for e in backend_ops
                if e.ts < span.end and e.end > span.ts
            ]
            work = [
                (e.ts, e.end)
                for e in inside
                if e.cat == "cpu_op"
                and (str(e.pid), str(e.tid)) not in comm_threads
                and not e.name.startswith(COMM_PREFIXES)
                and not any(a.name.startswith(COMM_PREFIXES) for a in ancestors[id(e)])
            ]
        update = union_length(
            [(e.ts, e.end) for e in inside if e.name.startswith("Optimizer.step#")]
        )
        backward = [e for e in inside if e.name.startswith("autograd::engine::evaluate_function")]
        comm_s = union_length(comm) * US
        hidden_s = min(overlap_length(comm, work) * US, comm_s)
        exposed_s = comm_s - hidden_s
        wall_s = span.dur * US
        steps.append(
            StepTiming(
                number=number,
                start_us=span.ts,
                wall_s=wall_s,
                compute_s=max(wall_s - exposed_s - update * US, 0.0),
                update_s=update * US,
                comm_s=comm_s,
                exposed_s=exposed_s,
                hidden_s=hidden_s,
                backward_start_s=(min(e.ts for e in backward) - span.ts) * US if backward else None,
                backward_end_s=(max(e.end for e in backward) - span.ts) * US if backward else None,
                collectives=mine,
            )
        )
    if not any(s.backward_start_s is not None for s in steps):
        notes.append("no autograd ops in the steps: no backward profile (bucket timing) read")
    if not collectives:
        notes.append("no collectives in the trace (nccl:*, gloo:*, record_param_comms)")
    if not any(s.update_s for s in steps):
        notes.append("no Optimizer.step# spans: the optimiser's time is counted as compute")
    return RankProfile(
        path=raw.path,
        rank=raw.rank,
        world_size=raw.world_size,
        backend=raw.backend,
        device=raw.device,
        gpu=gpu,
        steps=steps,
        notes=notes,
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
