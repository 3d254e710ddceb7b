"""The exact fast path for rings: the per-phase recurrence, numpy across all workers.

Worker i's phase k starts when it has sent its phase k-1 *and* its predecessor's phase k-1
chunk has arrived: ready_i(k) = max(free_i(k-1), arrive_{i-1}(k-1)). When no two transfers
ever share a resource at the same time, each transfer's duration is fixed by its route, and the
recurrence gives the same floating-point times as the per-transfer DES (same operations in the
same order: start + pre, + bits / rate, + post, hop by hop). One SimPy event per phase; O(N)
numpy work per phase instead of O(N) SimPy transfers, and no message DAG at all.

Exactness is checked, not assumed: a priori, different ring edges must use disjoint resources
a posteriori, a hop of phase k must not start before the same hop of phase k-1 ended (a slower
later hop under store-and-forward, or one held up by a link fault), and a pre-stage transform
must not overlap chunks arriving on the same host lanes (both up to rounding, as the DES
settles them). If any fails, the caller runs the DES instead. A link fault holds up the
transfers that cross the link while it is down (`fault_delay`): alone on their links, they
wait out the window as the DES's flows do. Edges that share only host endpoints (several ranks
a host) are timed here too where every phase runs in step (fast/shared/in_step.py): then each edge
takes bits over its in-step max-min rate, checked a posteriori.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing, unshared_timing
from transitsim.network.des.fluid import SETTLE_REL, ExactEnvironment
from transitsim.network.fabric import LOCAL_XFORM, PLAIN, Fabric, Path, Weights
from transitsim.network.fast.ring.lean import LEAN_MESSAGES, LeanRing, LeanTimes, next_ready
from transitsim.network.fast.shared.fault_delay import HopFaults, down_windows
from transitsim.network.fast.shared.in_step import HostShares
from transitsim.network.fast.shared.not_exact import NotExact
from transitsim.network.schedules.dag import RingPlan


@dataclass
class RingPaths:
    """The compiled paths of every ring edge i -> i+1 (first phase, later phases, pre-stage)."""

    first: list[Path]
    later: list[Path]
    pre: list[Path] | None

    def of(self, plan: RingPlan, m: int) -> Path:
        k, i = plan.locate(m)
        if k < 0:
            assert self.pre is not None
            return self.pre[i]
        return self.first[i] if k == 0 else self.later[i]


def ring_paths(fabric: Fabric, plan: RingPlan, weights: Weights) -> RingPaths:
    n = plan.workers
    first = [fabric.path(i, (i + 1) % n, plan.first_kind, weights) for i in range(n)]
    later = [fabric.path(i, (i + 1) % n, PLAIN, weights) for i in range(n)]
    pre = [fabric.path(i, i, LOCAL_XFORM, weights) for i in range(n)] if plan.pre else None
    return RingPaths(first, later, pre)


def _settled(finish: np.ndarray, time: np.ndarray) -> np.ndarray:
    """fluid.settled, elementwise: the DES lets such back-to-back transfers pass untouched."""
    return finish <= time + SETTLE_REL * np.maximum(np.abs(time), np.abs(finish))


def _hop_table(paths: list[Path], bits: float, hops: int) -> tuple[np.ndarray, ...]:
    """pre, duration, post per (edge, hop), padded with zeros (adding 0.0 changes nothing)."""
    edges = len(paths)
    pre, dur, post = (np.zeros((edges, hops)) for _ in range(3))
    for e, path in enumerate(paths):
        for h, hop in enumerate(path.hops):
            pre[e, h] = hop.pre_s
            dur[e, h] = bits / hop.rate_bps
            post[e, h] = hop.post_for(bits)
    return pre, dur, post


def disjoint_reason(fabric: Fabric, plan: RingPlan, paths: RingPaths) -> NotExact | None:
    """Why the recurrence cannot be exact for this ring a priori (None: it can be tried)."""
    if plan.phases == 0:
        return None
    used: set[int] = set()
    total = 0
    for i in range(plan.workers):
        resources = fabric.path_resources(paths.first[i]) | fabric.path_resources(paths.later[i])
        used |= resources
        total += len(resources)
    return None if len(used) == total else NotExact("ring edges share a resource (contention)")


class _Usage:
    """Where one kind of phase puts its bytes: flat (resource, edge, hop) triples."""

    def __init__(self, fabric: Fabric, paths: list[Path], bits: float):
        rows = [
            (r, e, h, w * bits / 8.0, hop.rate_bps * w / fabric.resources[r].rate_bps)
            for e, path in enumerate(paths)
            for h, hop in enumerate(path.hops)
            for r, w in zip(hop.resources, hop.weights, strict=True)
        ]
        columns = list(zip(*rows, strict=True)) or [()] * 5
        self.resource = np.array(columns[0], dtype=np.int64)
        self.edge = np.array(columns[1], dtype=np.int64)
        self.hop = np.array(columns[2], dtype=np.int64)
        self.carried = np.array(columns[3], dtype=float)
        self.share = np.array(columns[4], dtype=float)
        # busy once per resource a phase: edges sharing one (a host, in step) share its time
        _, first = np.unique(self.resource, return_index=True)
        self.once = np.sort(first)


def run_fast_ring(
    fabric: Fabric,
    plan: RingPlan,
    paths: RingPaths,
    start_s: np.ndarray,
    record: bool = False,
    faults: list[ResourceFault] | None = None,
    shares: HostShares | None = None,
    lean: bool | None = None,
) -> Timing | LeanRing | NotExact:
    """Evaluate a ring by the recurrence. Returns a Timing, or why it would not be exact.
    shares: the in-step rates of edges sharing host endpoints (no faults, no recording).
    lean: keep checkpoints, not every message's times (lean.py); None: past LEAN_MESSAGES."""
    n, phases, offset = plan.workers, plan.phases, plan.offset
    lean = plan.count > LEAN_MESSAGES if lean is None else lean
    if lean and record:
        return NotExact(f"utilisation over time of {plan.count:,} messages is recorded by the DES")
    stored = 0 if lean else plan.count  # lean: checkpoints (kept), one phase's stalls
    ready, free, arrive = (np.full(stored, np.nan) for _ in range(3))
    stall, stall0 = np.zeros(n if lean else plan.count), np.zeros(n if lean else plan.count)
    unshared = np.full(n, -1, dtype=np.int64)
    windows = down_windows(faults or [])
    busy = np.zeros(len(fabric.resources))
    carried = np.zeros(len(fabric.resources))
    sampled: list[tuple[np.ndarray, ...]] = []
    start = np.asarray(start_s, dtype=float)
    env = ExactEnvironment(float(start.min()))
    columns = np.arange(n)
    hops = max(len(p.hops) for p in paths.first + paths.later)
    real_hops = np.array([len(p.hops) for p in paths.later])  # the same count in every phase
    bits = plan.chunk_bytes * 8.0
    tables = (_hop_table(paths.first, bits, hops), _hop_table(paths.later, bits, hops))
    if shares is not None:  # one hop an edge, at the rate all edges share in step
        for table, rates in zip(tables, shares.rates, strict=True):
            table[1][:, 0] = bits / rates
    usages = (_Usage(fabric, paths.first, bits), _Usage(fabric, paths.later, bits))
    held = tuple(HopFaults(windows, _routes(p)) for p in (paths.first, paths.later))

    def account(usage: _Usage, table, phase_count: int) -> None:
        once = usage.once
        np.add.at(busy, usage.resource[once], phase_count * table[1][usage.edge, usage.hop][once])
        np.add.at(carried, usage.resource, phase_count * usage.carried)

    def sample(usage: _Usage, starts: list, ends: list) -> None:
        began = np.stack(starts)[usage.hop, usage.edge]
        ended = np.stack(ends)[usage.hop, usage.edge]
        sampled.append((usage.resource, began, usage.share))
        sampled.append((usage.resource, ended, np.zeros_like(usage.share)))

    def run_hops(
        t: np.ndarray, table, faulted: HopFaults, ids: slice | None, usage: _Usage | None
    ) -> tuple[np.ndarray, np.ndarray, list, list]:
        """Every edge's hops in turn; where a hop's links go down, its times held up, counted
        as stood still for the messages `ids` and busy for the links (as the DES counts)."""
        pre, dur, post = table
        starts, ends, stood = [], [], []
        sent = t
        for h in range(pre.shape[1]):
            t = t + pre[:, h]
            starts.append(t)
            began = t
            t = t + dur[:, h]
            if faulted:
                t, still = faulted.apply(h, began, t, dur[:, h])
                if still is not None:
                    stood.append((h, still))
                    if ids is not None:
                        stall[ids] += still
                        if h == 0:
                            stall0[ids] = still
            ends.append(t)
            if h == 0:
                sent = t
            t = t + post[:, h]
        if stood and usage is not None:
            still_by_hop = np.zeros((pre.shape[1], len(t)))
            for h, still in stood:
                still_by_hop[h] = still
            np.add.at(busy, usage.resource, still_by_hop[usage.hop, usage.edge])
        return sent, t, starts, ends

    failure: list[str] = []

    def rerun(k: int, now_ready: np.ndarray) -> tuple[np.ndarray, ...]:
        """Phase k again from its ready times, nothing counted (lean: the walk back's times)."""
        kind = 0 if k == 0 else 1
        stall[:], stall0[:] = 0.0, 0.0
        sent, arrived, _, _ = run_hops(now_ready, tables[kind], held[kind], slice(0, n), None)
        return sent, arrived, stall, stall0  # copied into the caller's window

    def shared_by(k: int) -> np.ndarray:
        return unshared if shares is None else shares.binding[min(k, 1)]

    kept = LeanTimes(plan, rerun, shared_by) if lean else None  # not on the hot path

    def phases_process():
        ring_ready = start
        pre_free = pre_start = None
        if plan.pre:  # the own transform first: dense out through it, band back in
            assert paths.pre is not None
            table = _hop_table(paths.pre, plan.payload_bytes * 8.0, 1)
            usage = _Usage(fabric, paths.pre, plan.payload_bytes * 8.0)
            faulted = HopFaults(windows, _routes(paths.pre))
            pre_free, pre_arrive, starts, ends = run_hops(start, table, faulted, slice(0, n), usage)
            pre_start = starts[0]
            if kept is not None:
                kept.keep_pre(start, pre_free, pre_arrive, stall, stall0)
            else:
                ready[:n], free[:n], arrive[:n] = start, pre_free, pre_arrive
            account(usage, table, 1)
            if record:
                sample(usage, starts, ends)
            ring_ready = pre_arrive
        previous_ends = sent = arrived = None
        for k in range(phases):
            kind = 0 if k == 0 else 1
            now_ready = ring_ready if k == 0 else next_ready(sent, arrived)
            ids = slice(0, n) if lean else slice(offset + k * n, offset + (k + 1) * n)
            if lean:
                stall[:], stall0[:] = 0.0, 0.0
            sent, arrived, starts, ends = run_hops(
                now_ready, tables[kind], held[kind], ids, usages[kind]
            )
            if shares is not None and not np.all(starts[0] == starts[0][0]):
                failure.append("ranks sharing a host do not start a phase together")
                return
            if previous_ends is not None:
                for h in range(1, hops):
                    real = h < real_hops
                    if not np.all(_settled(previous_ends[h][real], starts[h][real])):
                        failure.append("a later hop is slower than the first (contention)")
                        return
            if pre_free is not None:  # chunks arriving on lanes the own transform still uses
                last_start = np.stack(starts)[real_hops - 1, columns]
                last_end = np.stack(ends)[real_hops - 1, columns]
                into = np.roll(columns, -1)  # edge i lands at worker i + 1
                overlap = ~_settled(pre_free[into], last_start) & ~_settled(
                    last_end, pre_start[into]
                )
                if np.any(overlap):
                    failure.append("a chunk arrives while the own transform runs")
                    return
            if kept is not None:
                kept.keep_phase(k, now_ready, arrived)
            else:
                ready[ids], free[ids], arrive[ids] = now_ready, sent, arrived
            if record:
                sample(usages[kind], starts, ends)
            previous_ends = ends
            yield env.at(float(arrived.max()))

    env.process(phases_process())
    env.run()
    if failure:
        return NotExact(failure[0])
    if phases:
        account(usages[0], tables[0], 1)
    if phases > 1:
        account(usages[1], tables[1], phases - 1)
    if kept is not None:
        return LeanRing(kept, busy, carried, env.processed)
    samples = tuple(np.concatenate(c) for c in zip(*sampled, strict=True)) if sampled else None
    timing = unshared_timing(ready, free, arrive, env.processed, busy, carried, samples)
    if shares is not None:  # slowed by sharing its host: the DES names what set its rate
        for k in range(phases):
            timing.shared_by[offset + k * n : offset + (k + 1) * n] = shares.binding[min(k, 1)]
    if windows:
        timing.stall_s, timing.stall0_s = stall, stall0
    return timing


def _routes(paths: list[Path]) -> list[list[tuple[int, ...]]]:
    return [[hop.resources for hop in path.hops] for path in paths]


def ring_finish(plan: RingPlan, timing: Timing, start_s: np.ndarray) -> np.ndarray:
    """Per worker: the latest of every chunk arriving into it (and its own pre-stage result),
    else its start, as the DES counts it (outcome.finish_times).

    Not only the last phase's chunk: with an inline transform that has latency, the first
    phase (through the transform) can land after a later, plain one.
    """
    finish = np.asarray(start_s, dtype=float).copy()
    n = plan.workers
    if plan.pre:
        finish = np.maximum(finish, timing.arrive_s[:n])
    if plan.phases:
        phases = timing.arrive_s[plan.offset : plan.offset + plan.phases * n].reshape(-1, n)
        finish = np.maximum(finish, np.roll(phases.max(axis=0), 1))  # edge i lands at i + 1
    return finish


def ring_line_bytes(plan: RingPlan, paths: RingPaths) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each worker sends onto and receives from the line over the whole ring."""
    if plan.phases == 0:
        return np.zeros(plan.workers), np.zeros(plan.workers)
    first_send = np.array([p.send_factor for p in paths.first])
    later_send = np.array([p.send_factor for p in paths.later])
    first_recv = np.array([p.recv_factor for p in paths.first])
    later_recv = np.array([p.recv_factor for p in paths.later])
    chunk, rest = plan.chunk_bytes, plan.phases - 1
    sent = chunk * first_send + rest * chunk * later_send
    received = np.roll(chunk * first_recv + rest * chunk * later_recv, 1)
    return sent, received
