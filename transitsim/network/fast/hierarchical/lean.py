"""hierarchical at 65,536 workers: one phase of each ring stage kept, the rest run again on demand.

hierarchical's schedule is 2 N (n - 1) + 2 (D - 1) N messages (N workers in D groups of n):
4.3e9 at 65,536 workers in 2 datacentres, over 100 GB for its arrays alone. Its two ring stages
inside the groups send one chunk size over the same edges in every phase, so a schedule with one
phase of each (and the exchange across groups whole: 2 (D - 1) N messages) holds every path,
transfer time and byte there is. Here the ring stages are timed phase by phase on per-edge
arrays, keeping each SEGMENT-th phase's ready times and, per worker, its latest arrival and the
earliest message that brought it; the critical-path walk runs a segment again from its
checkpoint when it reaches it (as fast/ring/lean.py does for one ring).

Messages keep the full schedule's numbering (`schedules.dag.hierarchical_layout`), so the deps,
own sends and last arrivals the walk follows are the full schedule's, and every time is computed
by the same operations in the same order as `run_fast_hier`: the result is the full fast path's
(tests/test_hier_lean.py). Used only where the full schedule would pass LEAN_MESSAGES, and there
without a pre-stage transform or link faults (those give the reason, and the DES then refuses the
size).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import assign_paths
from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.hierarchical.maxplus import HierForm, hier_form
from transitsim.network.fast.hierarchical.stages import (
    MessageTable,
    exchange_groups,
    exchange_stage,
    exclusive_reason,
    stage_reason,
)
from transitsim.network.fast.shared.not_exact import NotExact
from transitsim.network.schedules.dag import HierLayout, RingStage, Schedule, hierarchical_layout

# the full schedule's size past which it is lean: 32 Mi messages is about 5,800 workers in 2
# datacentres, so every hierarchical the DES is compared against keeps its full schedule
LEAN_MESSAGES = 1 << 25
SEGMENT = 256  # phases run again at a time: 3 x 256 x N floats (400 MB at 65,536)


def full_messages(groups_shape: tuple[int, int], pre_transform: bool) -> int:
    """Messages of hierarchical's full schedule for (D, n) groups."""
    count, members = groups_shape
    workers = count * members
    return workers * int(pre_transform) + 2 * workers * (members - 1) + 2 * (count - 1) * workers


def is_lean(groups_shape: tuple[int, int], pre_transform: bool) -> bool:
    return full_messages(groups_shape, pre_transform) > LEAN_MESSAGES


@dataclass
class _Stage:
    """One stage in the full numbering, and where its one kept phase (or all) is."""

    rings: np.ndarray  # (R, M) worker ids
    phases: int  # in the full schedule
    offset: int  # its first message id in the full schedule
    mini: RingStage  # its message ids in the lean schedule
    fixed: bool  # parallel rings of fixed-time transfers (not the exchange across groups)
    position: np.ndarray  # per worker: r * M + i, its place in `rings`

    @property
    def width(self) -> int:
        return self.rings.size

    def locate(self, m: int) -> tuple[int, int, int]:
        k, e = divmod(m - self.offset, self.width)
        r, i = divmod(e, self.rings.shape[1])
        return k, r, i

    def mini_id(self, k: int, r: int, i: int) -> int:
        return int(self.mini.ids[k if not self.fixed else 0, r, i])

    def last_sent_id(self, worker: int) -> int:
        return self.offset + (self.phases - 1) * self.width + int(self.position[worker])

    def last_recv_id(self, worker: int) -> int:
        r, i = divmod(int(self.position[worker]), self.rings.shape[1])
        members = self.rings.shape[1]
        return self.offset + (self.phases - 1) * self.width + r * members + (i - 1) % members


@dataclass
class LeanParts:
    """The lean schedule (one phase of each ring stage) and the full numbering over it."""

    schedule: Schedule
    layout: HierLayout
    path_ids: np.ndarray
    paths: list[Path]
    table: MessageTable
    stages: list[_Stage]
    reason: NotExact | None  # why the fast path would not be exact (None: it is)

    def form(self, fabric: Fabric) -> HierForm | None:
        """hierarchical's stage-vectorised form for many steps (fast/hierarchical/maxplus.py)."""
        if self.reason is not None:
            return None
        inside = [s.phases for s in self.stages if s.fixed] or None  # groups of one: none
        return hier_form(
            fabric, self.schedule, self.layout, self.path_ids, self.paths, self.table, inside
        )


def lean_parts(fabric: Fabric, groups: np.ndarray, payload_bytes: int, weights) -> LeanParts:
    """The lean schedule of hierarchical on `groups` (no pre-stage transform), its paths, and
    why the fast path would not be exact there (as `run_fast_hier` checks it)."""
    schedule, layout = hierarchical_layout(groups, payload_bytes, False, ring_phases=1)
    path_ids, paths = assign_paths(fabric, schedule, weights)
    table = MessageTable(schedule, path_ids, paths)
    members = groups.shape[1]
    stages: list[_Stage] = []
    offset = 0
    reason = None
    for stage in layout.stages:
        phases = stage.ids.shape[0] if stage.across else members - 1
        position = np.empty(stage.rings.size, dtype=np.int64)
        position[stage.rings.ravel()] = np.arange(stage.rings.size)
        stages.append(_Stage(stage.rings, phases, offset, stage, not stage.across, position))
        offset += phases * stage.rings.size
        if stage.across:
            flows = exchange_groups(fabric, stage, paths, path_ids)
            reason = reason or flows.reason or exclusive_reason(layout, paths, path_ids, flows)
        else:
            reason = reason or stage_reason(fabric, stage, paths, path_ids)
    return LeanParts(schedule, layout, path_ids, paths, table, stages, reason)


_PARTS: dict[tuple, LeanParts] = {}


def cached_parts(key: tuple, fabric: Fabric, groups, payload_bytes: int, weights) -> LeanParts:
    """lean_parts, built once per network and exchange (`key`)."""
    parts = _PARTS.get(key)
    if parts is None:
        if len(_PARTS) >= 4:
            _PARTS.pop(next(iter(_PARTS)))
        parts = _PARTS[key] = lean_parts(fabric, groups, payload_bytes, weights)
    return parts


def _roll1(x: np.ndarray) -> np.ndarray:
    """np.roll(x, 1, axis=1) without its per-call overhead: what member i - 1 sent lands at i."""
    return np.concatenate((x[:, -1:], x[:, :-1]), axis=1)


class LeanHier:
    """One exchange timed lean: per-worker finishes, and per-message times on demand."""

    def __init__(self, fabric: Fabric, parts: LeanParts, start_s: np.ndarray):
        self.parts = parts
        table = parts.table
        workers = parts.schedule.workers
        count = len(parts.schedule)
        self.mini_times = tuple(np.full(count, np.nan) for _ in range(3))  # ready, free, arrive
        self.mini_shared = np.full(count, -1, dtype=np.int64)
        self.checkpoints: list[dict[int, np.ndarray]] = []
        self.window_key: tuple[int, int] | None = None
        self.window: np.ndarray | None = None
        self.best_s = np.full(workers, -np.inf)  # per worker: its latest arrival
        self.best_id = np.full(workers, -1, dtype=np.int64)  # ... the earliest message bringing it
        self.busy_s = np.zeros(len(fabric.resources))
        self.bytes = np.zeros(len(fabric.resources))
        self.events = sum(s.phases for s in parts.stages) + 1
        self.samples = None
        start = np.asarray(start_s, dtype=float)
        last_recv = np.full(workers, -np.inf)
        last_sent = np.full(workers, -np.inf)
        busy_shared = np.zeros(0)
        flows = None
        for stage in parts.stages:
            rings = stage.rings
            ready0 = np.maximum(np.maximum(start[rings], last_recv[rings]), last_sent[rings])
            if stage.mini.rendezvous:
                ready0 = np.maximum(ready0, last_recv[np.roll(rings, -1, axis=1)])
            if stage.fixed:
                sent, into, best, best_id = self._ring_pass(stage, table, ready0)
            else:
                flows = exchange_groups(fabric, stage.mini, parts.paths, parts.path_ids)
                busy_shared = np.zeros(len(flows.capacity))
                sent, into, best, best_id = self._exchange_pass(
                    stage, table, flows, ready0, busy_shared
                )
            last_sent[rings] = sent
            last_recv[rings] = into
            later = best > self.best_s[rings]  # strictly: an earlier stage keeps a tie
            self.best_s[rings] = np.where(later, best, self.best_s[rings])
            self.best_id[rings] = np.where(later, best_id, self.best_id[rings])
        self._usage(fabric, flows, busy_shared)

    def finish_s(self, start_s: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(start_s, dtype=float), self.best_s)

    def _ring_pass(self, stage: _Stage, table: MessageTable, ready0: np.ndarray) -> tuple:
        """The ring recurrence of `_ring_stage`, keeping checkpoints and per-member finishes."""
        ids = stage.mini.ids[0]
        pre, dur, post = table.pre[ids], table.dur[ids], table.post[ids]
        checkpoints: dict[int, np.ndarray] = {}
        self.checkpoints.append(checkpoints)
        best = np.full(ids.shape, -np.inf)
        first = np.zeros(ids.shape, dtype=np.int64)
        ready = ready0
        free = into = ready0
        for k in range(stage.phases):
            if k % SEGMENT == 0:
                checkpoints[k] = np.array(ready)
            began = ready + pre
            free = began + dur
            arrive = free + post
            into = _roll1(arrive)
            later = into > best  # strictly: the earliest message keeps a tie
            np.copyto(best, into, where=later)
            np.copyto(first, k, where=later)
            ready = np.maximum(free, into)
        members = ids.shape[1]
        edge = np.arange(ids.size).reshape(ids.shape)
        sender = edge - np.arange(members) + (np.arange(members) - 1) % members
        return free, into, best, stage.offset + first * stage.width + sender

    def _exchange_pass(self, stage, table, flows, ready0, busy_shared) -> tuple:
        """The exchange across groups on the lean schedule's messages (all of them kept)."""
        self.checkpoints.append({})
        slowed = exchange_stage(ready0, stage.mini, table, flows, self.mini_times, busy_shared)
        _, free_s, arrive_s = self.mini_times
        ids = stage.mini.ids
        flows.mark_slowed(ids, slowed, self.mini_shared)  # who was slowed by sharing
        into = _roll1(arrive_s[ids[-1]])
        arrivals = np.stack([_roll1(arrive_s[ids[k]]) for k in range(stage.phases)])
        first = np.argmax(arrivals == arrivals.max(axis=0), axis=0)  # the earliest at the max
        members = ids.shape[2]
        edge = np.arange(ids[0].size).reshape(ids.shape[1:])
        sender = edge - np.arange(members) + (np.arange(members) - 1) % members
        best = arrivals.max(axis=0)
        return free_s[ids[-1]], into, best, stage.offset + first * stage.width + sender

    def _usage(self, fabric: Fabric, flows, busy_shared: np.ndarray) -> None:
        """Bytes each resource carried and its busy time, as `hierarchical._usage` sums them:
        a ring stage's one kept phase counts `phases` times."""
        parts = self.parts
        table = parts.table
        ready_s, free_s, _ = self.mini_times
        for stage in parts.stages:
            ids = stage.mini.ids.ravel()
            if stage.fixed:
                span = table.dur[ids] * stage.phases
                carried = parts.schedule.nbytes[ids] * stage.phases
            else:
                span = free_s[ids] - (ready_s[ids] + table.pre[ids])
                carried = parts.schedule.nbytes[ids]
            for m, moved, busy in zip(ids.tolist(), carried.tolist(), span.tolist(), strict=True):
                p = int(parts.path_ids[m])
                if p < 0:
                    continue
                hop = parts.paths[p].hops[0]
                for r, w in zip(hop.resources, hop.weights, strict=True):
                    self.bytes[r] += w * moved
                    self.busy_s[r] += busy
        if flows is not None:
            for group, resources in enumerate(flows.resources):
                for r in resources:
                    self.busy_s[r] = busy_shared[group]

    # per-message times for the critical-path walk

    def where(self, m: int) -> tuple[int, int, int, int]:
        for index, stage in enumerate(self.parts.stages):
            if m < stage.offset + stage.phases * stage.width:
                return (index, *stage.locate(m))
        raise IndexError(m)

    def value(self, field: int, m: int) -> float:
        s, k, r, i = self.where(m)
        stage = self.parts.stages[s]
        if not stage.fixed:
            return float(self.mini_times[field][stage.mini_id(k, r, i)])
        begin = k - k % SEGMENT
        if self.window_key != (s, begin):
            self._run_segment(s, begin)
        assert self.window is not None
        return float(self.window[field, k - begin, r, i])

    def _run_segment(self, s: int, begin: int) -> None:
        """Phases begin.. of ring stage s again from their checkpoint, every time kept."""
        stage = self.parts.stages[s]
        table = self.parts.table
        ids = stage.mini.ids[0]
        pre, dur, post = table.pre[ids], table.dur[ids], table.post[ids]
        shape = (3, SEGMENT, *ids.shape)
        if self.window is None or self.window.shape != shape:
            self.window = np.empty(shape)
        ready = self.checkpoints[s][begin]
        for k in range(begin, min(begin + SEGMENT, stage.phases)):
            row = self.window[:, k - begin]
            began = ready + pre
            free = began + dur
            arrive = free + post
            row[0], row[1], row[2] = ready, free, arrive
            ready = np.maximum(free, _roll1(arrive))
        self.window_key = (s, begin)

    def shared_of(self, m: int) -> int:
        s, k, r, i = self.where(m)
        stage = self.parts.stages[s]
        return -1 if stage.fixed else int(self.mini_shared[stage.mini_id(k, r, i)])

    def path_of(self, m: int) -> Path | None:
        s, k, r, i = self.where(m)
        p = int(self.parts.path_ids[self.parts.stages[s].mini_id(k, r, i)])
        return self.parts.paths[p] if p >= 0 else None


class _Column:
    """timing.<field>[m] for one message, as outcome.critical_path reads it."""

    def __init__(self, get: Callable[[int], float]):
        self.get = get

    def __getitem__(self, m: int) -> float:
        return self.get(int(m))


class LeanHierTiming:
    """The Timing fields critical_path and the link figures read, answered from a LeanHier."""

    def __init__(self, lean: LeanHier):
        for index, name in enumerate(("ready_s", "free_s", "arrive_s")):
            setattr(self, name, _Column(lambda m, index=index: lean.value(index, m)))
        self.stall_s = self.stall0_s = _Column(lambda m: 0.0)  # no faults on the lean path
        self.shared_by = _Column(lean.shared_of)
        self.events, self.busy_s, self.bytes = lean.events, lean.busy_s, lean.bytes
        self.samples = None


@dataclass
class LeanHierDag:
    """The full schedule's deps, own sends, sizes and last arrivals, by arithmetic."""

    lean: LeanHier

    def deps(self, m: int) -> list[int]:
        stages = self.lean.parts.stages
        s, k, r, i = self.lean.where(m)
        stage = stages[s]
        members = stage.rings.shape[1]
        if k > 0:
            return [stage.offset + (k - 1) * stage.width + r * members + (i - 1) % members]
        if s == 0:
            return []
        before = stages[s - 1]
        found = [before.last_recv_id(int(stage.rings[r, i]))]
        if stage.mini.rendezvous:
            found.append(before.last_recv_id(int(stage.rings[r, (i + 1) % members])))
        return found

    def after_of(self, m: int) -> int:
        stages = self.lean.parts.stages
        s, k, r, i = self.lean.where(m)
        stage = stages[s]
        if k > 0:
            return stage.offset + (k - 1) * stage.width + r * stage.rings.shape[1] + i
        return stages[s - 1].last_sent_id(int(stage.rings[r, i])) if s > 0 else -1

    def bytes_of(self, m: int) -> float:
        s, k, r, i = self.lean.where(m)
        return float(self.lean.parts.schedule.nbytes[self.lean.parts.stages[s].mini_id(k, r, i)])

    def last_into(self, worker: int, arrive_s, finish_s: float) -> int | None:
        found = self.lean.best_s[worker] == finish_s and self.lean.best_id[worker] >= 0
        return int(self.lean.best_id[worker]) if found else None


def line_bytes_lean(parts: LeanParts) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each worker sends onto and receives from the line: a kept ring phase `phases`
    times (`outcome.line_bytes` of the full schedule)."""
    schedule = parts.schedule
    send = np.array([p.send_factor for p in parts.paths] + [0.0])[parts.path_ids]
    recv = np.array([p.recv_factor for p in parts.paths] + [0.0])[parts.path_ids]
    sent = np.zeros(schedule.workers)
    received = np.zeros(schedule.workers)
    for stage in parts.stages:
        ids = stage.mini.ids.ravel()
        times = stage.phases if stage.fixed else 1
        np.add.at(sent, schedule.src[ids], schedule.nbytes[ids] * send[ids] * times)
        np.add.at(received, schedule.dst[ids], schedule.nbytes[ids] * recv[ids] * times)
    return sent, received


def time_lean(fabric: Fabric, parts: LeanParts, start_s: np.ndarray, faults) -> tuple | NotExact:
    """(dag, path_of, timing, start, finish, sent, received) of one lean exchange (what
    `exchange._result` takes), or why it would not be exact."""
    if parts.reason is not None:
        return parts.reason
    if faults:
        return NotExact(
            f"link faults on hierarchical past {LEAN_MESSAGES:,} messages "
            "(its lean form times fault-free exchanges)"
        )
    lean = LeanHier(fabric, parts, start_s)
    sent, received = line_bytes_lean(parts)
    timing = LeanHierTiming(lean)
    start = np.asarray(start_s, dtype=float)
    return LeanHierDag(lean), lean.path_of, timing, start, lean.finish_s(start), sent, received
