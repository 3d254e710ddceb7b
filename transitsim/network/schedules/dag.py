"""Collectives as schedules: a DAG of messages, built phase by phase with numpy.

A message may start once (a) every message in its data dependencies has *arrived* at its
source, (b) the message in `after` (its sender's previous send, when sends are serial) has been
*sent* (its first hop is done), and (c) its source worker has started. Nothing else: the
timing comes from the routes and the sharing of links. Byte counts are floats: a ring splits the
payload into N equal chunks (no rounding), so closed forms hold exactly.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network.fabric import JOIN, LOCAL_XFORM, PLAIN, XFORM_PLUGGABLE, XFORM_SWITCH
from transitsim.network.limits import MAX_MESSAGES, MAX_WORKERS


@dataclass
class Schedule:
    """Messages 0..M-1 (arrays indexed by message), dependencies in CSR form."""

    workers: int
    src: np.ndarray  # node index (workers are 0..N-1)
    dst: np.ndarray
    kind: np.ndarray  # fabric kind (PLAIN, XFORM_*, LOCAL_XFORM, JOIN)
    nbytes: np.ndarray  # line-payload bytes, float
    after: np.ndarray  # message whose *send* must be done first, -1 none
    data_ptr: np.ndarray  # data deps of m: data_idx[data_ptr[m]:data_ptr[m + 1]] (must *arrive*)
    data_idx: np.ndarray
    counts: np.ndarray  # bool: its arrival is part of the destination worker's result

    def __len__(self) -> int:
        return len(self.src)

    def deps(self, m: int) -> np.ndarray:
        return self.data_idx[self.data_ptr[m] : self.data_ptr[m + 1]]

    def after_of(self, m: int) -> int:
        return int(self.after[m])

    def bytes_of(self, m: int) -> float:
        return float(self.nbytes[m])

    def last_into(self, worker: int, arrive_s: np.ndarray, finish_s: float) -> int | None:
        """The first result-bearing message that arrived at `worker` at `finish_s`, if any."""
        hits = np.flatnonzero((self.dst == worker) & self.counts & (arrive_s == finish_s))
        return int(hits[0]) if len(hits) else None


@dataclass(frozen=True)
class RingPlan:
    """A single ring over workers 0..N-1 in order, by index arithmetic instead of arrays.

    Messages: the pre-stage transforms 0..N-1 (when `pre`), then phase k of worker i at
    offset + k * N + i, sent to worker i + 1. The same numbering as `ring_allreduce` and
    `ring_allgather` build, so the fast path and the DES can be compared message by message.
    """

    workers: int
    phases: int
    chunk_bytes: float
    payload_bytes: float  # bytes of a pre-stage message
    first_kind: int = PLAIN
    pre: bool = False

    @property
    def offset(self) -> int:
        return self.workers if self.pre else 0

    @property
    def count(self) -> int:
        return self.offset + self.phases * self.workers

    def locate(self, m: int) -> tuple[int, int]:
        """(phase, worker) of message m; phase -1 for a pre-stage message."""
        if m < self.offset:
            return -1, m
        return divmod(m - self.offset, self.workers)

    def deps(self, m: int) -> list[int]:
        k, i = self.locate(m)
        if k < 0:
            return []
        if k == 0:
            return [i] if self.pre else []
        return [self.offset + (k - 1) * self.workers + (i - 1) % self.workers]

    def after_of(self, m: int) -> int:
        k, i = self.locate(m)
        return self.offset + (k - 1) * self.workers + i if k >= 1 else -1

    def bytes_of(self, m: int) -> float:
        return self.payload_bytes if m < self.offset else self.chunk_bytes

    def last_into(self, worker: int, arrive_s: np.ndarray, finish_s: float) -> int | None:
        """The message into `worker` that arrived at its finish, the lowest id first as
        Schedule.last_into takes it (with an inline transform an earlier phase can be the last
        to land, so every phase is a candidate)."""
        n = self.workers
        candidates = [worker] if self.pre else []
        candidates += [self.offset + k * n + (worker - 1) % n for k in range(self.phases)]
        return next((m for m in candidates if arrive_s[m] == finish_s), None)


def ring_plan(algo: str, workers: int, payload_bytes: int, transform: bool) -> RingPlan:
    """The RingPlan of ring_allreduce (pre-stage transform) or ring_allgather (inline)."""
    if algo == "ring_allreduce":
        return RingPlan(
            workers, 2 * (workers - 1), payload_bytes / workers, float(payload_bytes), pre=transform
        )
    kind = XFORM_PLUGGABLE if transform else PLAIN
    return RingPlan(workers, workers - 1, float(payload_bytes), float(payload_bytes), kind)


class ScheduleBuilder:
    """Collects batches of messages (one batch per phase) and makes a Schedule."""

    def __init__(self, workers: int):
        self.workers = workers
        self.count = 0
        self._batches: list[tuple] = []

    def add(self, src, dst, kind, nbytes, data=None, after=None, counts=True) -> np.ndarray:
        """Add a batch; `data` is (batch, d) of message ids (-1 = none). Returns the new ids."""
        src = np.atleast_1d(np.asarray(src, dtype=np.int64))
        size = len(src)
        dst = np.broadcast_to(np.asarray(dst, dtype=np.int64), (size,))
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=float), (size,))
        kind = np.broadcast_to(np.asarray(kind, dtype=np.int8), (size,))
        after = np.full(size, -1, np.int64) if after is None else np.broadcast_to(after, (size,))
        if data is None:
            data = np.full((size, 0), -1, np.int64)
        data = np.asarray(data, dtype=np.int64).reshape(size, -1)
        counts = np.broadcast_to(np.asarray(counts, dtype=bool), (size,))
        if self.count + size > MAX_MESSAGES:
            raise TransitsimError(
                f"this exchange on {self.workers:,} workers is a schedule of more than "
                f"{MAX_MESSAGES:,} messages: too big to simulate message by message; "
                "a ring (ring_allreduce, ring_allgather) or hierarchical on its fast path "
                f"takes up to {MAX_WORKERS:,} workers"
            )
        self._batches.append((src, dst, kind, nbytes, after, data, counts))
        ids = np.arange(self.count, self.count + size, dtype=np.int64)
        self.count += size
        return ids

    def build(self) -> Schedule:
        cols = list(zip(*self._batches, strict=True)) if self._batches else [[]] * 7
        cat = [np.concatenate(c) if len(c) else np.zeros(0) for c in cols[:5]]
        src, dst, kind, nbytes, after = cat
        present = [data >= 0 for data in cols[5]]
        lengths = [mask.sum(axis=1) for mask in present]
        data_ptr = np.zeros(len(src) + 1, dtype=np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=data_ptr[1:])
        pieces = [data[mask] for data, mask in zip(cols[5], present, strict=True)]
        data_idx = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        counts = np.concatenate(cols[6]) if len(cols[6]) else np.zeros(0, bool)
        return Schedule(
            self.workers,
            src.astype(np.int64),
            dst.astype(np.int64),
            kind.astype(np.int8),
            nbytes.astype(float),
            after.astype(np.int64),
            data_ptr,
            data_idx.astype(np.int64),
            counts.astype(bool),
        )


def add_rings(
    builder: ScheduleBuilder,
    rings: np.ndarray,
    phases: int,
    chunk_bytes: float,
    first_data: np.ndarray,
    first_after: np.ndarray,
    first_kind: int = PLAIN,
) -> np.ndarray:
    """Parallel rings (rows of `rings`, worker ids in ring order) for `phases` phases.

    Member j sends to member j+1. Phase k of member j needs its own phase k-1 sent and member
    j-1's phase k-1 arrived; phase 0 needs `first_data` arrived and `first_after` sent (per
    member, -1 = nothing). Returns ids shaped (phases, rings, members).
    """
    rings = np.asarray(rings, dtype=np.int64)
    count, members = rings.shape
    ids = np.zeros((phases, count, members), dtype=np.int64)
    dst = np.roll(rings, -1, axis=1)
    for k in range(phases):
        if k == 0:
            data, after, kind = first_data, first_after, first_kind
        else:
            data, after, kind = np.roll(ids[k - 1], 1, axis=1), ids[k - 1], PLAIN
        ids[k] = builder.add(
            rings.ravel(), dst.ravel(), kind, chunk_bytes, np.ravel(data), np.ravel(after)
        ).reshape(count, members)
    return ids


def _pre_stage(builder: ScheduleBuilder, payload_bytes: int, transform: bool) -> np.ndarray:
    """The own dense delta through the pluggable's transform and back (a pre-stage), or none."""
    workers = np.arange(builder.workers)
    if not transform:
        return np.full(builder.workers, -1, np.int64)
    return builder.add(workers, workers, LOCAL_XFORM, float(payload_bytes), counts=True)


def ring_allreduce(workers: int, payload_bytes: int, pre_transform: bool) -> Schedule:
    """Reduce-scatter then all-gather around one ring: 2(N-1) phases of payload/N bytes."""
    builder = ScheduleBuilder(workers)
    pre = _pre_stage(builder, payload_bytes, pre_transform)
    phases = 2 * (workers - 1)
    ring = np.arange(workers)[None, :]
    add_rings(builder, ring, phases, payload_bytes / workers, pre[None], np.full((1, workers), -1))
    return builder.build()


def ring_allgather(workers: int, payload_bytes: int, inline_transform: bool) -> Schedule:
    """Each worker's payload travels N-1 hops around the ring; only its first hop transforms."""
    builder = ScheduleBuilder(workers)
    phases = workers - 1
    none = np.full((1, workers), -1)
    kind = XFORM_PLUGGABLE if inline_transform else PLAIN
    ring = np.arange(workers)[None, :]
    add_rings(builder, ring, phases, float(payload_bytes), none, none, first_kind=kind)
    return builder.build()


@dataclass(frozen=True)
class RingStage:
    """One stage of parallel rings: rings (R, M) of worker ids, message ids (phases, R, M)."""

    rings: np.ndarray
    ids: np.ndarray
    chunk_bytes: float
    rendezvous: bool  # phase 0 also waits for its receiver's last message of the stage before
    across: bool  # the rings cross groups (their flows may share the WAN or rack uplinks)


@dataclass(frozen=True)
class HierLayout:
    """Where hierarchical's messages are: the pre-stage ids (or None) and its three stages."""

    pre: np.ndarray | None
    stages: tuple[RingStage, ...]


def hierarchical(groups: np.ndarray, payload_bytes: int, pre_transform: bool) -> Schedule:
    """Ring of rings: reduce-scatter inside each group, all-reduce each shard across groups
    (one ring per shard, through the WAN), all-gather inside each group.

    `groups` is (D, n): D groups of n workers (datacentres or racks).
    """
    return hierarchical_layout(groups, payload_bytes, pre_transform)[0]


def hierarchical_layout(
    groups: np.ndarray, payload_bytes: int, pre_transform: bool, ring_phases: int | None = None
) -> tuple[Schedule, HierLayout]:
    """hierarchical's Schedule, and where its stages' messages are (for the fast path).

    ring_phases: at most this many phases of the two ring stages inside the groups (the lean form,
    fast/hierarchical/lean.py, keeps one: every phase sends the same chunk over the same edges).
    Between stages a worker is sent the next stage's first chunk only once it has received its last
    chunk of the stage before (its receive is posted: a rendezvous, as NCCL's and MPI's
    large-message protocols have), so the stages of one worker never share its links.
    """
    groups = np.asarray(groups, dtype=np.int64)
    count, members = groups.shape
    workers = count * members
    builder = ScheduleBuilder(workers)
    pre = _pre_stage(builder, payload_bytes, pre_transform)
    last_recv = pre.copy()  # per worker: the last message it received (or -1)
    last_sent = np.full(workers, -1, np.int64)
    stages = []

    def run(rings: np.ndarray, phases: int, chunk: float, rendezvous: bool, across=False) -> None:
        if phases == 0:
            return
        data = last_recv[rings][..., None]
        if rendezvous:
            receivers = np.roll(rings, -1, axis=1)
            data = np.stack([last_recv[rings], last_recv[receivers]], axis=-1)
        ids = add_rings(builder, rings, phases, chunk, data, last_sent[rings])
        last_sent[rings] = ids[-1]
        last_recv[rings] = np.roll(ids[-1], 1, axis=1)
        stages.append(RingStage(rings, ids, chunk, rendezvous, across))

    shard = payload_bytes / members
    inside = members - 1 if ring_phases is None else min(members - 1, ring_phases)
    run(groups, inside, shard, False)
    run(groups.T.copy(), 2 * (count - 1), shard / count, True, across=True)
    run(groups, inside, shard, True)
    return builder.build(), HierLayout(pre if pre_transform else None, tuple(stages))


def piece_sizes(payload_bytes: int, piece: int) -> tuple[float, ...]:
    """Pieces of `piece` bytes, the last one what is left (one empty piece for no payload)."""
    sizes = [float(piece)] * (payload_bytes // piece)
    if payload_bytes % piece or not sizes:
        sizes.append(float(payload_bytes % piece))
    return tuple(sizes)


def switch_sum(
    workers: int,
    aggregator: int,
    sizes: tuple[float, ...],
    kind: int,
    slots: int,
    loopback: bool,
) -> Schedule:
    """In-network all-reduce: pieces up to the aggregator, one sum per piece back down.

    The payload is cut into `sizes` pieces (slot-sized, or one packet each). A worker sends
    its pieces back to back; with `slots` bounded it sends piece j only after the result of piece
    j - slots came back (the slot is free again: SwitchML-style self-clocking). The aggregator
    sends each result once per worker, serially per port; with a transform at the switch and
    loopback, each worker also gets its own transformed piece back (twice the bytes down).
    """
    builder = ScheduleBuilder(workers)
    hosts = np.arange(workers)
    down_factor = 2.0 if (loopback and kind == XFORM_SWITCH) else 1.0
    up_ids: list[np.ndarray] = []
    down_ids: list[np.ndarray] = []
    for j, size in enumerate(sizes):
        window = down_ids[j - slots][:, None] if slots > 0 and j >= slots else None
        up = builder.add(
            hosts, aggregator, kind, size, window, up_ids[j - 1] if j else None, counts=False
        )
        join = builder.add(aggregator, aggregator, JOIN, 0.0, up[None, :], counts=False)
        down = builder.add(
            np.full(workers, aggregator),
            hosts,
            PLAIN,
            size * down_factor,
            np.full((workers, 1), join[0]),
            down_ids[j - 1] if j else None,
        )
        up_ids.append(up)
        down_ids.append(down)
    return builder.build()
