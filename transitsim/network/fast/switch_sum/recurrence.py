"""The exact fast path for in-network all-reduce on one switch: a recurrence over pieces.

Per piece j, across all workers at once: a worker sends piece j when it has sent piece j-1 (and,
with bounded slots, got the result of piece j - slots back); the aggregator has the sum when the
last contribution arrived (a max over workers); each port sends the result when it has it and
has sent the previous one. When every route is a single hop, workers' routes share nothing but
the aggregator, and the aggregator can sum every uplink at full rate at once, no transfer is ever
slowed by another, and the recurrence reproduces the per-transfer DES bit for bit (the same
operations in the same order). A link fault holds up the transfers crossing the link while it
is down (`fault_delay`); alone on their links, they wait out the window as the DES's flows do.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.des.engine import ResourceFault, Timing, fifo_rate, unshared_timing
from transitsim.network.des.fluid import ExactEnvironment
from transitsim.network.fabric import PLAIN, Fabric, Path, Weights
from transitsim.network.fast.shared.fault_delay import HopFaults, down_windows
from transitsim.network.fast.shared.in_step import HostShares
from transitsim.network.fast.shared.not_exact import NotExact


@dataclass(frozen=True)
class SwitchPlan:
    """schedule.switch_sum's messages by index arithmetic: for piece j, base = j * (2N + 1):
    uploads base + i, the aggregator's join base + N, results base + N + 1 + i."""

    workers: int
    aggregator: int  # node index of the summing switch
    sizes: tuple[float, ...]  # bytes of each piece
    kind: int  # of the uploads (PLAIN, XFORM_PLUGGABLE, XFORM_SWITCH)
    slots: int  # 0: unbounded
    down_factor: float  # result bytes per piece byte (2 with loopback of a switch transform)

    @property
    def stride(self) -> int:
        return 2 * self.workers + 1

    @property
    def count(self) -> int:
        return len(self.sizes) * self.stride

    def locate(self, m: int) -> tuple[int, str, int]:
        """(piece, role, worker): role "up", "join" or "down"."""
        j, r = divmod(m, self.stride)
        n = self.workers
        if r < n:
            return j, "up", r
        return (j, "join", -1) if r == n else (j, "down", r - n - 1)

    def up(self, j: int, i: int) -> int:
        return j * self.stride + i

    def down(self, j: int, i: int) -> int:
        return j * self.stride + self.workers + 1 + i

    def deps(self, m: int) -> list[int]:
        j, role, i = self.locate(m)
        if role == "up":
            return [self.down(j - self.slots, i)] if self.slots and j >= self.slots else []
        if role == "join":
            return [self.up(j, w) for w in range(self.workers)]
        return [j * self.stride + self.workers]

    def after_of(self, m: int) -> int:
        j, role, i = self.locate(m)
        if j == 0 or role == "join":
            return -1
        return self.up(j - 1, i) if role == "up" else self.down(j - 1, i)

    def bytes_of(self, m: int) -> float:
        j, role, _ = self.locate(m)
        if role == "join":
            return 0.0
        return self.sizes[j] * (self.down_factor if role == "down" else 1.0)

    def last_into(self, worker: int, arrive_s: np.ndarray, finish_s: float) -> int | None:
        if not self.sizes:
            return None
        m = self.down(len(self.sizes) - 1, worker)
        return m if arrive_s[m] == finish_s else None


@dataclass
class SwitchPaths:
    ups: list[Path]
    downs: list[Path]

    def of(self, plan: SwitchPlan, m: int) -> Path | None:
        _, role, i = plan.locate(m)
        if role == "join":
            return None
        return self.ups[i] if role == "up" else self.downs[i]


def switch_paths(fabric: Fabric, plan: SwitchPlan, weights: Weights) -> SwitchPaths:
    ups = [fabric.path(i, plan.aggregator, plan.kind, weights) for i in range(plan.workers)]
    downs = [fabric.path(plan.aggregator, i, PLAIN, weights) for i in range(plan.workers)]
    return SwitchPaths(ups, downs)


def switch_reason(fabric: Fabric, plan: SwitchPlan, paths: SwitchPaths) -> NotExact | None:
    """Why the recurrence would not be exact (None: it is)."""
    every = paths.ups + paths.downs
    if any(len(p.hops) != 1 for p in every):
        return NotExact("routes of more than one hop (store-and-forward through several switches)")
    aggregator = {
        r
        for p in paths.ups
        for r in fabric.path_resources(p)
        if fabric.resources[r].kind == "aggregator"
    }
    used: set[int] = set()
    total = 0
    for path in every:
        resources = fabric.path_resources(path) - aggregator
        used |= resources
        total += len(resources)
    if len(used) != total:
        return NotExact("workers' routes share a resource (contention)")
    if aggregator:
        rates = {p.hops[0].rate_bps for p in paths.ups}
        capacity = fabric.resources[next(iter(aggregator))].rate_bps
        if len(rates) != 1 or plan.workers * rates.pop() > capacity:
            return NotExact("the aggregator's summing rate can bind")
    return None


def run_fast_switch(
    fabric: Fabric,
    plan: SwitchPlan,
    paths: SwitchPaths,
    start_s: np.ndarray,
    faults: list[ResourceFault] | None = None,
    shares: HostShares | None = None,
) -> Timing | NotExact:
    """Evaluate the in-network all-reduce piece by piece (call switch_reason first), or say why
    it would not be exact. shares: the in-step rates of workers sharing host endpoints (no
    faults): then every piece's uploads, and its results, must start together."""
    n = plan.workers
    ready, free, arrive = (np.full(plan.count, np.nan) for _ in range(3))
    windows = down_windows(faults or [])
    stall = np.zeros(plan.count)
    busy = np.zeros(len(fabric.resources))
    carried = np.zeros(len(fabric.resources))
    start = np.asarray(start_s, dtype=float)
    env = ExactEnvironment(float(start.min()))
    up_hops = [p.hops[0] for p in paths.ups]
    down_hops = [p.hops[0] for p in paths.downs]
    up_pre = np.array([h.pre_s for h in up_hops])
    dn_pre = np.array([h.pre_s for h in down_hops])
    up_rate = np.array([h.rate_bps for h in up_hops])
    dn_rate = np.array([h.rate_bps for h in down_hops])
    if shares is not None:
        up_rate, dn_rate = shares.rates
    apart: list[str] = []
    workers = np.arange(n)
    up_held = HopFaults(windows, [[h.resources] for h in up_hops])
    down_held = HopFaults(windows, [[h.resources] for h in down_hops])

    def send(t: np.ndarray, work: np.ndarray, held: HopFaults, ids: np.ndarray) -> np.ndarray:
        ended = t + work
        if held:
            ended, still = held.apply(0, t, ended, work)
            if still is not None:
                stall[ids] = still
        return ended

    shared = {r for h in up_hops for r in h.resources if fabric.resources[r].kind == "aggregator"}
    shared_spans: list[tuple[np.ndarray, np.ndarray]] = []

    # per direction: the bytes and each hop's busy time summed over pieces, applied once at the
    # end (a Python loop over hops per piece cost ~3 s a step at 1,024 workers in 4 KiB pieces)
    totals = {id(up_hops): [0.0, np.zeros(n)], id(down_hops): [0.0, np.zeros(n)]}

    def account(hops, nbytes: float, began: np.ndarray, ended: np.ndarray) -> None:
        total = totals[id(hops)]
        total[0] += nbytes
        total[1] += ended - began
        if shared and hops is up_hops:
            shared_spans.append((began, ended))

    def settle_accounts() -> None:
        once: set[int] = set()  # a host side shared in step is busy while any of its users is
        for hops in (up_hops, down_hops):
            nbytes, spans = totals[id(hops)]
            for hop, span in zip(hops, spans.tolist(), strict=True):
                for r, w in zip(hop.resources, hop.weights, strict=True):
                    carried[r] += w * nbytes
                    if r not in shared and r not in once:
                        busy[r] += span
                        if shares is not None:
                            once.add(r)

    post_cache: dict[tuple[int, float], np.ndarray] = {}

    def posts(hops, nbytes: float) -> np.ndarray:
        key = (id(hops), nbytes)
        if key not in post_cache:
            post_cache[key] = np.array([h.post_for(nbytes * 8.0) for h in hops])
        return post_cache[key]

    up_fifo = np.array([fifo_rate(fabric, i, plan.aggregator, p) for i, p in enumerate(paths.ups)])
    dn_fifo = np.array(
        [fifo_rate(fabric, plan.aggregator, i, p) for i, p in enumerate(paths.downs)]
    )
    up_post = np.array([h.post_s for h in up_hops])
    dn_post = np.array([h.post_s for h in down_hops])
    behind: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per direction: (hold, arrival)

    def in_order(hops, fifo, post_s, nbytes: float, own: np.ndarray) -> np.ndarray:
        """des.engine.fifo_arrival for one piece of every worker: never before the piece
        before it on a store-and-forward route, whose hold may be longer."""
        if not fifo.any():
            return own
        hold = posts(hops, nbytes) - post_s
        previous = behind.get(id(hops))
        arrived = own
        if previous is not None:
            with np.errstate(divide="ignore"):
                after = previous[1] + nbytes * 8.0 / fifo
            arrived = np.where((fifo > 0) & (hold < previous[0]) & (after > own), after, own)
        behind[id(hops)] = (hold, arrived)
        return arrived

    def pieces():
        up_sent = down_sent = None
        for j, size in enumerate(plan.sizes):
            up_ids = j * plan.stride + workers
            join = j * plan.stride + n
            down_ids = join + 1 + workers
            if j == 0:
                t = start
            else:
                t = up_sent
                if plan.slots and j >= plan.slots:
                    t = np.maximum(t, arrive[down_ids - plan.slots * plan.stride])
            ready[up_ids] = t
            t = t + up_pre
            began = t
            if shares is not None and not np.all(began == began[0]):
                apart.append("workers sharing a host do not send a piece together")
                return
            t = send(t, size * 8.0 / up_rate, up_held, up_ids)
            up_sent = free[up_ids] = t
            account(up_hops, size, began, t)
            arrive[up_ids] = in_order(up_hops, up_fifo, up_post, size, t + posts(up_hops, size))
            summed = float(arrive[up_ids].max())
            ready[join] = free[join] = arrive[join] = summed
            t = np.full(n, summed) if j == 0 else np.maximum(summed, down_sent)
            ready[down_ids] = t
            nbytes = size * plan.down_factor
            t = t + dn_pre
            began = t
            if shares is not None and not np.all(began == began[0]):
                apart.append("results for workers sharing a host do not leave together")
                return
            t = send(t, nbytes * 8.0 / dn_rate, down_held, down_ids)
            down_sent = free[down_ids] = t
            account(down_hops, nbytes, began, t)
            arrive[down_ids] = in_order(
                down_hops, dn_fifo, dn_post, nbytes, t + posts(down_hops, nbytes)
            )
            yield env.at(float(arrive[down_ids].max()))

    env.process(pieces())
    env.run()
    if apart:
        return NotExact(apart[0])
    settle_accounts()
    if shared_spans:  # the aggregator is busy while any upload runs: the union of their spans
        began, ended = (np.concatenate(c) for c in zip(*shared_spans, strict=True))
        order = np.argsort(began, kind="stable")
        began, ended = began[order], np.maximum.accumulate(ended[order])
        gaps = np.maximum(began[1:] - ended[:-1], 0.0).sum()
        for r in shared:
            busy[r] = ended[-1] - began[0] - gaps
    timing = unshared_timing(ready, free, arrive, env.processed, busy, carried, None)
    if windows:
        timing.stall_s = timing.stall0_s = stall  # one hop: the first is the whole
    if shares is not None:  # slowed by sharing its host: the DES names what set its rate
        for j in range(len(plan.sizes)):
            base = j * plan.stride
            timing.shared_by[base : base + n] = shares.binding[0]
            timing.shared_by[base + n + 1 : base + 2 * n + 1] = shares.binding[1]
    return timing


def switch_finish(plan: SwitchPlan, timing: Timing, start_s: np.ndarray) -> np.ndarray:
    """Per worker: when the result of the last piece arrived."""
    if not plan.sizes:  # one worker, nothing to sum
        return np.asarray(start_s, dtype=float).copy()
    last = plan.down(len(plan.sizes) - 1, 0)
    return np.maximum(np.asarray(start_s, dtype=float), timing.arrive_s[last : last + plan.workers])


def switch_line_bytes(plan: SwitchPlan, paths: SwitchPaths) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each worker sends onto and receives from the line."""
    total = sum(plan.sizes)
    sent = np.array([p.send_factor for p in paths.ups]) * total
    received = np.array([p.recv_factor for p in paths.downs]) * total * plan.down_factor
    return sent, received
