"""hierarchical for many steps at once: its finishing time for a (steps, N) array of starts.

The three stages of `fast_hier`, each vectorised over steps instead of simulated step by step:

- reduce-scatter inside each group, on uniform ring edges (a = pre + transfer, c = a + post):
  worker j's last send is max over the members i != j+1 of start_i + ((j - i) mod n)(c - a),
  plus (n - 2) a + a: a sliding-window maximum, O(n) a step (van Herk / Gil-Werman blocks);
- the exchange across groups, phase by phase: each shared link serves its flows by processor
  sharing (equal sizes and caps: first in, first out), simulated event by event for every step
  at once. Where a phase's flows would still share a link with the next phase's in some step,
  that step's exchange is run by fast_hier's event loop instead (exact, a few ms);
- the all-gather: max-plus linear from each worker's entry, d computed once by the ring
  recurrence in reverse.

Exact (to rounding) wherever it answers; None from `hier_form` where the network is not of this
shape (a pre-stage transform, non-uniform ring edges, different caps on a shared link).
"""

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.hierarchical import (
    MessageTable,
    exchange_groups,
    exchange_stage,
    exclusive_reason,
    stage_reason,
)
from transitsim.network.schedules.dag import HierLayout, RingStage, Schedule


@dataclass(frozen=True)
class _Phase:
    """One phase of the exchange across groups, per flow (R * M of them, ring-major)."""

    pre: np.ndarray
    dur: np.ndarray
    post: np.ndarray
    bits: float


@dataclass
class HierForm:
    groups: np.ndarray  # (D, n) worker ids
    rs: tuple[float, float, int] | None  # (a, c, phases) of the uniform reduce-scatter
    cross_rings: np.ndarray | None  # (R, M) worker ids of the exchange's rings
    phases: list[_Phase]
    group: np.ndarray  # per flow: its shared link group (-1: none)
    cap: np.ndarray  # per flow: its own rate
    capacity: list[float]
    ag: tuple[np.ndarray, RingStage] | None  # (d of each member (D, n), the stage)

    def finish_s(self, start_s: np.ndarray) -> np.ndarray:
        """The last finishing time of each step; start_s is (steps, N)."""
        start = np.atleast_2d(np.asarray(start_s, dtype=float))
        steps, workers = start.shape
        last_recv = np.full((steps, workers), -np.inf)
        last_sent = np.full((steps, workers), -np.inf)
        if self.rs is not None:
            sent, recv = _uniform_ring(start[:, self.groups], *self.rs)
            last_sent[:, self.groups] = sent
            last_recv[:, self.groups] = recv
        if self.cross_rings is not None:
            rings = self.cross_rings
            ready = np.maximum(
                np.maximum(start[:, rings], last_recv[:, rings]), last_sent[:, rings]
            )
            ready = np.maximum(ready, last_recv[:, np.roll(rings, -1, axis=1)])
            sent, recv, ok = self._exchange(ready.reshape(steps, -1), rings.shape)
            for s in np.flatnonzero(~ok).tolist():  # phases met on a link: events, this step
                sent[s], recv[s] = self._exchange_events(ready[s])
            last_sent[:, rings] = sent
            last_recv[:, rings] = recv
        finish = np.maximum(start.max(axis=1), last_recv.max(axis=1))
        if self.ag is not None:
            d, stage = self.ag
            rings = stage.rings
            ready = np.maximum(
                np.maximum(start[:, rings], last_recv[:, rings]), last_sent[:, rings]
            )
            ready = np.maximum(ready, last_recv[:, np.roll(rings, -1, axis=1)])
            finish = np.maximum(finish, (ready + d).reshape(steps, -1).max(axis=1))
        return finish

    def _exchange_events(self, ready: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step's exchange by fast_hier's event loop (phases sharing a link, exactly)."""
        rings, members = ready.shape
        phases = len(self.phases)
        ids = np.arange(phases * rings * members).reshape(phases, rings, members)
        stage = RingStage(self.cross_rings, ids, 0.0, True, True)
        table = SimpleNamespace(
            pre=np.concatenate([p.pre for p in self.phases]),
            dur=np.concatenate([p.dur for p in self.phases]),
            post=np.concatenate([p.post for p in self.phases]),
            bits=np.repeat([p.bits for p in self.phases], rings * members),
        )
        flows = SimpleNamespace(group=self.group, cap=self.cap, capacity=self.capacity)
        timing = tuple(np.full(ids.size, np.nan) for _ in range(3))
        exchange_stage(ready, stage, table, flows, timing, np.zeros(len(self.capacity)))
        _, free_s, arrive_s = timing
        return free_s[ids[-1]], np.roll(arrive_s[ids[-1]], 1, axis=1)

    def _exchange(self, ready: np.ndarray, shape: tuple[int, int]):
        """The cross-group rings, phase by phase; returns last sent, last received, exact."""
        steps, flows = ready.shape
        rings, members = shape
        exact = np.ones(steps, dtype=bool)
        busy_until = np.full((steps, len(self.capacity)), -np.inf)
        free = arrive = None
        for k, phase in enumerate(self.phases):
            if k > 0:
                nxt = np.roll(arrive.reshape(steps, rings, members), 1, axis=2).reshape(steps, -1)
                ready = np.maximum(free, nxt)
            begin = ready + phase.pre
            free = np.empty_like(begin)
            fixed = self.group < 0
            free[:, fixed] = begin[:, fixed] + phase.dur[fixed]
            for g, capacity in enumerate(self.capacity):
                members_g = np.flatnonzero(self.group == g)
                arrivals = begin[:, members_g]
                exact &= arrivals.min(axis=1) >= busy_until[:, g]  # the last phase has left
                free[:, members_g] = _shared(arrivals, phase.bits, self.cap[members_g[0]], capacity)
                busy_until[:, g] = free[:, members_g].max(axis=1)
            arrive = free + phase.post
        sent = free.reshape(steps, rings, members)
        recv = np.roll(arrive.reshape(steps, rings, members), 1, axis=2)
        return sent, recv, exact


def _uniform_ring(start: np.ndarray, a: float, c: float, phases: int):
    """Last send and last arrival per member of parallel uniform rings (steps, D, n)."""
    n = start.shape[-1]
    delta = c - a
    index = np.arange(2 * n)
    y = np.concatenate([start, start], axis=-1) - index * delta  # unrolled: member i at i, i + n
    window = phases  # m = 0 .. phases - 1 members back
    best = _sliding_max(y, window)  # best[..., j] = max over y[j - window + 1 .. j]
    j = np.arange(n, 2 * n)
    ready_last = best[..., j] + j * delta + (phases - 1) * a
    sent = ready_last + a
    recv = np.roll(ready_last + c, 1, axis=-1)
    return sent, recv


def _sliding_max(y: np.ndarray, window: int) -> np.ndarray:
    """best[..., j] = max(y[..., j - window + 1 : j + 1]) for j >= window - 1 (blocks of window)."""
    length = y.shape[-1]
    blocks = -(-length // window)
    padded = np.full((*y.shape[:-1], blocks * window), -np.inf)
    padded[..., :length] = y
    shaped = padded.reshape(*y.shape[:-1], blocks, window)
    prefix = np.maximum.accumulate(shaped, axis=-1).reshape(padded.shape)
    suffix = np.maximum.accumulate(shaped[..., ::-1], axis=-1)[..., ::-1].reshape(padded.shape)
    best = np.full(y.shape, -np.inf)
    j = np.arange(window - 1, length)
    best[..., j] = np.maximum(suffix[..., j - window + 1], prefix[..., j])
    return best


def _shared(arrive: np.ndarray, bits: float, cap: float, capacity: float) -> np.ndarray:
    """Departures of equal flows on one link by processor sharing, every step at once.

    Equal sizes and rates: flows leave in the order they came. Rates min(cap, C / k).
    """
    steps, flows = arrive.shape
    order = np.argsort(arrive, axis=1, kind="stable")
    sorted_arrive = np.take_along_axis(arrive, order, axis=1)
    rows = np.arange(steps)
    t = sorted_arrive[:, 0].copy()
    served = np.zeros(steps)
    active = np.zeros(steps, dtype=np.int64)
    came = np.zeros(steps, dtype=np.int64)
    went = np.zeros(steps, dtype=np.int64)
    target = np.zeros((steps, flows))
    leave = np.zeros((steps, flows))
    for _ in range(2 * flows):
        rate = np.where(active > 0, np.minimum(cap, capacity / np.maximum(active, 1)), 0.0)
        next_in = np.where(came < flows, sorted_arrive[rows, np.minimum(came, flows - 1)], np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            left = target[rows, np.minimum(went, flows - 1)] - served
            next_out = np.where(active > 0, t + np.maximum(left, 0.0) / rate, np.inf)
        out = next_out <= next_in  # a flow that ends as another starts leaves first
        now = np.where(out, next_out, next_in)
        served = served + np.where(active > 0, rate * (now - t), 0.0)
        t = now
        arriving = ~out
        target[rows[arriving], came[arriving]] = served[arriving] + bits
        leave[rows[out], went[out]] = t[out]
        active += arriving.astype(np.int64) - out
        came += arriving
        went += out
    free = np.empty_like(leave)
    np.put_along_axis(free, order, leave, axis=1)
    return free


def _ag_d(stage: RingStage, table: MessageTable, phases: int | None = None) -> np.ndarray:
    """d of each member at the all-gather's entry: the ring recurrence in reverse.

    phases: the stage's phase count where only its first phase is kept (fast/hier_lean.py:
    every phase the same edges and chunk); equal edges then take one number a phase.
    """
    if phases is not None:
        ids = stage.ids[0]
        a = table.pre[ids] + table.dur[ids]
        c = a + table.post[ids]
        if np.all(a == a.flat[0]) and np.all(c == c.flat[0]):
            a0, c0 = float(a.flat[0]), float(c.flat[0])
            t = c0
            for _ in range(phases - 1):
                t = max(a0 + t, c0 + t)
            return np.full(ids.shape, t)
        tail = c
        for _ in range(phases - 1):
            tail = np.maximum(a + tail, c + np.roll(tail, -1, axis=1))
        return tail
    tail = None
    for k in range(stage.ids.shape[0] - 1, -1, -1):
        ids = stage.ids[k]
        a = table.pre[ids] + table.dur[ids]
        c = a + table.post[ids]
        tail = c if tail is None else np.maximum(a + tail, c + np.roll(tail, -1, axis=1))
    return tail


def hier_form(
    fabric: Fabric,
    schedule: Schedule,
    layout: HierLayout,
    path_ids: np.ndarray,
    paths: list[Path],
    table: MessageTable,
    inside_phases: list[int] | None = None,
) -> HierForm | None:
    """The vectorised form of this hierarchical exchange, or None where it does not apply.

    inside_phases: the reduce-scatter's and the all-gather's phase counts where the schedule
    keeps one phase of each (the lean schedule of fast/hier_lean.py).
    """
    if layout.pre is not None:
        return None
    groups = None
    rs = cross_rings = ag = None
    phases: list[_Phase] = []
    group = cap = np.zeros(0)
    capacity: list[float] = []
    for stage in layout.stages:
        if stage.across:
            flows = exchange_groups(fabric, stage, paths, path_ids)
            if flows.reason is not None or exclusive_reason(layout, paths, path_ids, flows):
                return None
            cross_rings = stage.rings
            group, cap, capacity = flows.group, flows.cap, flows.capacity
            for k in range(stage.ids.shape[0]):
                ids = stage.ids[k].ravel()
                phases.append(
                    _Phase(
                        table.pre[ids], table.dur[ids], table.post[ids], float(table.bits[ids[0]])
                    )
                )
            continue
        if stage_reason(fabric, stage, paths, path_ids) is not None:
            return None
        if not stage.rendezvous:  # the reduce-scatter
            ids = stage.ids
            a = table.pre[ids] + table.dur[ids]
            c = a + table.post[ids]
            if not (np.all(a == a.flat[0]) and np.all(c == c.flat[0])):
                return None
            count = ids.shape[0] if inside_phases is None else inside_phases[0]
            rs = (float(a.flat[0]), float(c.flat[0]), count)
            groups = stage.rings
        else:
            ag = (_ag_d(stage, table, inside_phases and inside_phases[1]), stage)
    if groups is None:
        groups = layout.stages[-1].rings if ag is not None else np.zeros((0, 0), dtype=np.int64)
    return HierForm(groups, rs, cross_rings, phases, group, cap, capacity, ag)
