"""hierarchical for many steps at once: its finishing time for a (steps, N) array of starts.

The three stages of `run_fast_hier` (stages.py), each vectorised over steps instead of simulated
step by step:

- reduce-scatter inside each group, on uniform ring edges (a = pre + transfer, c = a + post):
  worker j's last send is max over the members i != j+1 of start_i + ((j - i) mod n)(c - a),
  plus (n - 2) a + a: a sliding-window maximum, O(n) a step (van Herk / Gil-Werman blocks);
- the exchange across groups: each shared link serves its flows by processor sharing, and
  stragglers make one phase's flows meet the next's on it in nearly every step, so it is
  run_fast_hier's own event loop, compiled (fast/hierarchical/exchange_events.py), over the
  block's steps;
- the all-gather: max-plus linear from each worker's entry, d computed once by the ring
  recurrence in reverse.

Exact (to rounding) wherever it answers; None from `hier_form` where the network is not of this
shape (a pre-stage transform, non-uniform ring edges, different caps on a shared link).
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.hierarchical.exchange_events import exchange_events
from transitsim.network.fast.hierarchical.stages import (
    MessageTable,
    exchange_groups,
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
            sent, recv = self._exchange(ready.reshape(steps, -1), rings.shape)
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

    def _exchange(self, ready: np.ndarray, shape: tuple[int, int]):
        """The cross-group rings of every step by the compiled event loop: last sent, received."""
        steps = ready.shape[0]
        rings, members = shape
        pre = np.stack([p.pre for p in self.phases])
        bits = np.repeat([[p.bits] for p in self.phases], rings * members, axis=1)
        caps = np.array(
            [self.cap[np.argmax(self.group == g)] for g in range(len(self.capacity))], dtype=float
        )
        free, arrive = exchange_events(
            ready,
            members,
            pre,
            np.stack([p.dur for p in self.phases]),
            np.stack([p.post for p in self.phases]),
            bits,
            self.group,
            caps,
            np.asarray(self.capacity, dtype=float),
        )
        sent = free[:, -1].reshape(steps, rings, members)
        recv = np.roll(arrive[:, -1].reshape(steps, rings, members), 1, axis=2)
        return sent, recv


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


def _ag_d(stage: RingStage, table: MessageTable, phases: int | None = None) -> np.ndarray:
    """d of each member at the all-gather's entry: the ring recurrence in reverse.

    phases: the stage's phase count where only its first phase is kept (fast/hierarchical/lean.py:
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
    keeps one phase of each (the lean schedule of fast/hierarchical/lean.py).
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
