"""A ring's per-message times without keeping them all: checkpoints, recomputed on demand.

`outcome.critical_path` walks back from the last result through per-message times, so the fast
ring keeps ready, free and arrive for every message: 2 (N - 1) N of them, 34 GB an array at
65,536 workers. Past `LEAN_MESSAGES` the ring keeps instead each `SEGMENT`-th phase's ready
times (all a phase needs to be run again) and, per worker, its latest arrival and the earliest
message that brought it (what `RingPlan.last_into` picks). The walk back visits one message a
phase, last phase first, so each segment is run again once, from its checkpoint, when the walk
reaches it: one more pass over the phases in all, and the same floating-point times (the same
operations in the same order), hence the same breakdown as the full ring's.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transitsim.network.schedules.dag import RingPlan


def next_ready(sent: np.ndarray, arrived: np.ndarray) -> np.ndarray:
    """When each worker's next phase can start: its own send done and what edge i - 1
    delivered (np.roll(arrived, 1) without its per-call overhead)."""
    return np.maximum(sent, np.concatenate((arrived[-1:], arrived[:-1])))


# 2 (N - 1) N messages of an all-reduce: 32 Mi is N = 4,096, the largest network of earlier
# rounds, so every ring the DES is compared against keeps all its times
LEAN_MESSAGES = 1 << 25
SEGMENT = 256  # phases run again at a time: 256 x 5 arrays x N floats (640 MB at 65,536)

# phase k's ready times -> its (free, arrive, stall, stall0), run again without side effects
Rerun = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
_FIELDS = ("ready_s", "free_s", "arrive_s", "stall_s", "stall0_s")


class LeanTimes:
    """What the first pass keeps, and per-message times recomputed from it (module doc)."""

    def __init__(self, plan: RingPlan, rerun: Rerun, shared_by: Callable[[int], np.ndarray]):
        n = plan.workers
        self.plan, self.rerun, self.shared_of = plan, rerun, shared_by
        self.checkpoints: dict[int, np.ndarray] = {}
        self.pre: tuple[np.ndarray, ...] | None = None
        self.best_s = np.full(n, -np.inf)  # per worker: its latest arrival so far
        self.best_id = np.full(n, -1, dtype=np.int64)  # ... the earliest message bringing it
        self.into_ids = (np.arange(n, dtype=np.int64) - 1) % n  # edge i - 1 lands at worker i
        self.window_from = -1
        self.window: np.ndarray | None = None  # (field, phase in segment, edge)

    def keep_pre(self, *times: np.ndarray) -> None:
        """The pre-stage's ready, free, arrive, stall, stall0 (N messages, into themselves)."""
        self.pre = tuple(np.array(t, dtype=float) for t in times)
        self.best_s[:] = self.pre[2]
        self.best_id[:] = np.arange(self.plan.workers)

    def keep_phase(self, k: int, ready: np.ndarray, arrive: np.ndarray) -> None:
        """Phase k of the first pass: a checkpoint every SEGMENT phases, and the finishes."""
        if k % SEGMENT == 0:
            self.checkpoints[k] = np.array(ready, dtype=float)
        into = np.concatenate((arrive[-1:], arrive[:-1]))  # edge i lands at worker i + 1
        later = into > self.best_s  # strictly: the earliest message keeps a tie
        np.copyto(self.best_s, into, where=later)
        first = self.plan.offset + k * self.plan.workers
        np.copyto(self.best_id, self.into_ids + first, where=later)

    def finish_s(self, start_s: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(start_s, dtype=float), self.best_s)

    def value(self, field: int, m: int) -> float:
        plan = self.plan
        if m < plan.offset:
            assert self.pre is not None
            return float(self.pre[field][m])
        k, i = plan.locate(m)
        begin = k - k % SEGMENT
        if begin != self.window_from:
            self._run_segment(begin)
        assert self.window is not None
        return float(self.window[field, k - begin, i])

    def _run_segment(self, begin: int) -> None:
        """Phases begin.. again from the checkpoint, keeping every time of the segment."""
        end = min(begin + SEGMENT, self.plan.phases)
        if self.window is None:  # one buffer for every segment: fresh pages cost more
            self.window = np.empty((len(_FIELDS), SEGMENT, self.plan.workers))
        window = self.window
        ready = self.checkpoints[begin]
        for k in range(begin, end):
            row = window[:, k - begin]
            row[0] = ready
            row[1], row[2], row[3], row[4] = self.rerun(k, ready)
            ready = next_ready(row[1], row[2])
        self.window_from = begin


class _Column:
    """timing.<field>[m] for one message, as outcome.critical_path reads it."""

    def __init__(self, get: Callable[[int], float]):
        self.get = get

    def __getitem__(self, m: int) -> float:
        return self.get(int(m))


class LeanTiming:
    """The Timing fields critical_path and the link figures read, answered from a LeanRing."""

    def __init__(self, ring: "LeanRing"):
        times = ring.times
        for index, name in enumerate(_FIELDS):
            setattr(self, name, _Column(lambda m, index=index: times.value(index, m)))
        self.shared_by = _Column(lambda m: _shared(times, m))
        self.events, self.busy_s, self.bytes = ring.events, ring.busy_s, ring.bytes
        self.samples = None  # utilisation over time is recorded by the DES


def _shared(times: LeanTimes, m: int) -> int:
    if m < times.plan.offset:
        return -1
    k, i = times.plan.locate(m)
    return int(times.shared_of(k)[i])


@dataclass
class LeanDag:
    """The RingPlan, with last_into answered from the first pass's per-worker finishes."""

    plan: RingPlan
    times: LeanTimes

    def deps(self, m: int) -> list[int]:
        return self.plan.deps(m)

    def after_of(self, m: int) -> int:
        return self.plan.after_of(m)

    def bytes_of(self, m: int) -> float:
        return self.plan.bytes_of(m)

    def last_into(self, worker: int, arrive_s, finish_s: float) -> int | None:
        found = self.times.best_s[worker] == finish_s and self.times.best_id[worker] >= 0
        return int(self.times.best_id[worker]) if found else None


@dataclass
class LeanRing:
    """A ring timed without per-message times: what its result needs."""

    times: LeanTimes
    busy_s: np.ndarray
    bytes: np.ndarray
    events: int
