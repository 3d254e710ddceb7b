"""Fair sharing of capacities by concurrent transfers, driven by SimPy (processor sharing).

Transfers are fluid flows over sets of resources. Whenever a flow starts or ends (or a link
goes down or comes back), the rates of the flows it shares resources with, transitively, are
recomputed by progressive filling (max-min fairness, as in SimGrid's LMM): all flows rise
together until a resource is full, the flows through it freeze, and the rest keep rising. On one
link this is processor sharing: two flows each get half. A flow's rate is in bits/s of its line
payload; a resource it crosses with weight w carries w bits per payload bit.

Flows whose rates do not change keep their projected finish untouched, and events are scheduled at
absolute times, so an uncontended transfer ends at exactly `start + bits / rate`: the same
floating-point number the per-phase recurrence (`fast/ring/recurrence.py`) computes. Callers pass
logical times explicitly; a flow that would end within rounding (`SETTLE_REL`) of a new flow's start
on a shared resource is settled at its projected finish first, so an overlap of a few ulps between
back-to-back transfers never turns into contention.

Parallel links (a bundle, `bundles`): a flow striped over a bundle crosses only its links that
are up, each with an even share (`Hop.bases` / links up). When one goes down or comes back, the
flows on the bundle are restriped at once with the bits they have left (failover); with every
link of the bundle down they keep their links and stand still, as on a single link.
"""

import math
from collections.abc import Callable, Iterable
from heapq import heappush

import numpy as np
import simpy
from simpy.events import NORMAL, URGENT

SETTLE_REL = 1e-12  # relative rounding slack between one transfer's end and the next's start


def settled(finish_s: float, time_s: float) -> bool:
    """Whether a transfer ending at finish_s is over by time_s, up to rounding.

    A stalled transfer (finish_s infinite: a link on its way is down) is never over: the slack
    is relative to the times, and inf <= inf would settle it at an infinite time.
    """
    return finish_s <= time_s + SETTLE_REL * max(abs(time_s), abs(finish_s)) and math.isfinite(
        finish_s
    )


def fair_shares(
    capacity: list[float], flows: list[tuple[tuple[int, ...], tuple[float, ...]]]
) -> tuple[list[float], list[int]]:
    """Max-min fair payload rates by progressive filling, and the resource that binds each.

    `flows` are (resources, weights). All unfrozen flows rise together; when a resource is full,
    the flows through it freeze at the current level. Resources of infinite capacity never bind
    (a flow crossing only those gets rate inf and binding -1). A lone flow gets
    min(capacity / weight).
    """
    remaining_cap: dict[int, float] = {}
    for resources, _ in flows:
        for r in resources:
            if math.isfinite(capacity[r]):
                remaining_cap[r] = capacity[r]
    rates = [0.0] * len(flows)
    binding = [-1] * len(flows)
    unfrozen = list(range(len(flows)))
    level = 0.0
    while unfrozen:
        load: dict[int, float] = {}
        for i in unfrozen:
            for r, w in zip(*flows[i], strict=True):
                if r in remaining_cap:
                    load[r] = load.get(r, 0.0) + w
        if not load:
            for i in unfrozen:
                rates[i] = math.inf
            break
        delta = min(remaining_cap[r] / load[r] for r in load)
        level += delta
        saturated = {r for r in load if remaining_cap[r] / load[r] <= delta}
        for r, weight in load.items():
            remaining_cap[r] = 0.0 if r in saturated else remaining_cap[r] - delta * weight
        still = []
        for i in unfrozen:
            hit = next((r for r in flows[i][0] if r in saturated), -1)
            if hit >= 0:
                rates[i], binding[i] = level, hit
            else:
                still.append(i)
        unfrozen = still
    return rates, binding


def fair_rates(
    capacity: list[float], flows: list[tuple[tuple[int, ...], tuple[float, ...]]]
) -> list[float]:
    """The max-min fair rates of `fair_shares` alone."""
    return fair_shares(capacity, flows)[0]


class ExactEnvironment(simpy.Environment):
    """A SimPy environment that schedules at absolute times and counts processed events."""

    def __init__(self, initial_time: float = 0.0):
        super().__init__(initial_time)
        self.processed = 0

    def at(
        self,
        time_s: float,
        callback: Callable[[simpy.Event], None] | None = None,
        urgent: bool = False,
    ) -> simpy.Event:
        """An event that fires at exactly `time_s` (not `now + (time_s - now)`, which may round).
        urgent: before every normal event of the same time, whenever it was scheduled."""
        event = simpy.Event(self)
        event._ok = True
        event._value = None
        if callback is not None:
            event.callbacks.append(callback)
        priority = URGENT if urgent else NORMAL
        heappush(self._queue, (max(time_s, self._now), priority, next(self._eid), event))
        return event

    def step(self) -> None:
        self.processed += 1
        super().step()


class Flow:
    """One transfer in progress over a set of resources."""

    __slots__ = (
        "resources",
        "weights",
        "remaining_bits",
        "rate",
        "t_ref",
        "finish",
        "version",
        "on_done",
        "alive",
        "stalled_s",
        "bound",
        "route",
    )

    def __init__(self, resources, weights, bits, now, on_done, route=None):
        self.resources = resources
        self.weights = weights
        self.route = route  # striped: (all resources, compiled weights, bases); else None
        self.remaining_bits = bits
        self.rate = -1.0  # not yet shared
        self.t_ref = now
        self.finish = math.inf
        self.version = 0
        self.on_done = on_done
        self.alive = True
        self.stalled_s = 0.0  # time spent at rate 0 (a link down on its way)
        self.bound = -1  # the resource that set its rate most recently


class FluidEngine:
    """Flows over shared resources with max-min fair rates, recomputed at every change."""

    def __init__(
        self,
        env: ExactEnvironment,
        capacities_bps: np.ndarray,
        record: bool = False,
        greedy: dict[int, int] | None = None,
        bundles: dict[int, tuple[int, ...]] | None = None,
    ):
        self.env = env
        self.bundles = dict(bundles or {})  # per resource of parallel links: its bundle
        self.capacity = [float(c) for c in capacities_bps]
        # per resource: greedy background flows that always have data and take their max-min
        # share beside the training flows (never finish, carry no training bytes)
        self.greedy = dict(greedy or {})
        count = len(self.capacity)
        # insertion-ordered (dicts, not sets of id-hashed flows): ties in the sharing, and so the
        # binding resource each flow reports, come out the same on every run
        self.flows_on: list[dict[Flow, None]] = [{} for _ in range(count)]
        self.busy_s = [0.0] * count
        self.busy_since = [0.0] * count
        self.bytes = [0.0] * count
        self.record = record
        self.samples: list[tuple[int, float, float]] = []  # (resource, time, utilisation)
        self._last_util = [0.0] * count

    # --- public -------------------------------------------------------------------------------

    def start(
        self,
        resources: tuple[int, ...],
        weights: tuple[float, ...],
        bits: float,
        on_done: Callable[[float, float, int], None],
        time_s: float | None = None,
        bases: tuple[float, ...] = (),
    ) -> Flow:
        """Begin a transfer of `bits` payload bits at logical time `time_s` (>= now, default now).

        `on_done(t, stalled_s, bound)` runs when its last bit is sent: t is that exact time,
        stalled_s how long it was stopped by a fault, bound the resource that last set its rate.
        bases: striped over parallel links (`Hop.bases`): it crosses only those that are up."""
        now = self.env.now if time_s is None else time_s
        for r in resources:  # transfers over by now (to rounding) leave before this one joins
            for other in [f for f in self.flows_on[r] if settled(f.finish, now)]:
                self._complete(other)
        route = None
        if bases:
            route = (resources, weights, bases)
            resources, weights = self._striped(route, None)
        flow = Flow(resources, weights, bits, now, on_done, route)
        for r, w in zip(resources, weights, strict=True):
            if not self.flows_on[r]:
                self.busy_since[r] = self.env.now
            self.flows_on[r][flow] = None
            self.bytes[r] += w * bits / 8.0
        self._share(resources)
        return flow

    def set_capacity(self, resource: int, rate_bps: float) -> None:
        """Change a resource's capacity now (a link going down or coming back)."""
        was_up = self.capacity[resource] > 0
        self.capacity[resource] = rate_bps
        bundle = self.bundles.get(resource)
        if bundle is not None and was_up != (rate_bps > 0):
            self._restripe(bundle)
        elif self.flows_on[resource]:
            self._share((resource,))

    def set_capacities(self, changes: list[tuple[int, float]]) -> None:
        """Changes that take effect at one instant; parallel links restriped once after all of
        them (a fault on a whole bundle stops its flows where they are, on every link)."""
        if not any(r in self.bundles for r, _ in changes):
            for r, rate_bps in changes:
                self.set_capacity(r, rate_bps)
            return
        toggled: dict[tuple[int, ...], None] = {}
        seeds = []
        for r, rate_bps in changes:
            was_up = self.capacity[r] > 0
            self.capacity[r] = rate_bps
            bundle = self.bundles.get(r)
            if bundle is not None and was_up != (rate_bps > 0):
                toggled[bundle] = None
            elif self.flows_on[r]:
                seeds.append(r)
        for bundle in toggled:
            self._restripe(bundle)
        if seeds:
            self._share(seeds)

    def close(self) -> None:
        """Account busy time of resources still in use (none after a complete run)."""
        now = self.env.now
        for r, flows in enumerate(self.flows_on):
            if flows:
                self.busy_s[r] += now - self.busy_since[r]
                self.busy_since[r] = now

    # --- internals ----------------------------------------------------------------------------

    def _striped(self, route: tuple, current: tuple | None) -> tuple[tuple, tuple]:
        """A striped flow's resources and weights now: each bundle's links that are up with an
        even share; a bundle with none up keeps what it had (all of it, for a new flow)."""
        resources, weights, bases = route
        up: dict[tuple[int, ...], int] = {}
        for r in resources:
            bundle = self.bundles.get(r)
            if bundle is not None and bundle not in up:
                up[bundle] = sum(1 for b in bundle if self.capacity[b] > 0)
        held = set(current[0]) if current is not None else set(resources)
        kept_r, kept_w = [], []
        for r, w, base in zip(resources, weights, bases, strict=True):
            bundle = self.bundles.get(r)
            if bundle is None:
                kept_r.append(r)
                kept_w.append(w)
            elif up[bundle] == len(bundle):
                kept_r.append(r)
                kept_w.append(w)  # the compiled share, bit for bit
            elif up[bundle] == 0:
                if r in held:
                    kept_r.append(r)
                    kept_w.append(w if current is None else current[1][current[0].index(r)])
            elif self.capacity[r] > 0:
                kept_r.append(r)
                kept_w.append(base / up[bundle] if up[bundle] > 1 else base)
        return tuple(kept_r), tuple(kept_w)

    def _restripe(self, bundle: tuple[int, ...]) -> None:
        """Move the flows striped over `bundle` onto its links that are up, with the bits they
        have left (their bytes move with them)."""
        now = self.env.now
        flows: dict[Flow, None] = {}
        for r in bundle:
            flows.update(self.flows_on[r])
        seeds = set(bundle)
        for flow in flows:
            if flow.route is None:
                continue
            resources, weights = self._striped(flow.route, (flow.resources, flow.weights))
            if resources == flow.resources and weights == flow.weights:
                continue
            elapsed = now - flow.t_ref
            if flow.rate > 0 and elapsed > 0:
                flow.remaining_bits = max(0.0, flow.remaining_bits - flow.rate * elapsed)
            elif flow.rate == 0 and elapsed > 0:
                flow.stalled_s += elapsed
            flow.t_ref = max(now, flow.t_ref)
            flow.rate = -1.0  # shared afresh below
            left = flow.remaining_bits / 8.0
            for r, w in zip(flow.resources, flow.weights, strict=True):
                self.bytes[r] -= w * left
                if r not in resources:
                    self.flows_on[r].pop(flow, None)
                    if not self.flows_on[r]:
                        self.busy_s[r] += now - self.busy_since[r]
            for r, w in zip(resources, weights, strict=True):
                self.bytes[r] += w * left
                if not self.flows_on[r]:
                    self.busy_since[r] = now
                self.flows_on[r][flow] = None
            seeds.update(flow.resources)
            flow.resources, flow.weights = resources, weights
        busy = [r for r in seeds if self.flows_on[r]]
        if busy:
            self._share(busy)
        if self.record:
            for r in seeds:
                self._sample(r, now)

    def _component(self, seeds: Iterable[int]) -> tuple[list[Flow], set[int]]:
        """Flows connected to the seed resources through shared resources (transitively)."""
        resources = set(seeds)
        stack = sorted(resources)
        flows: dict[Flow, None] = {}
        while stack:
            for flow in self.flows_on[stack.pop()]:
                if flow not in flows:
                    flows[flow] = None
                    for r in flow.resources:
                        if r not in resources:
                            resources.add(r)
                            stack.append(r)
        return list(flows), resources

    def _fill(self, flows: list[Flow]) -> tuple[list[float], list[int]]:
        shared = [(f.resources, f.weights) for f in flows]
        if self.greedy:
            used = dict.fromkeys(r for f in flows for r in f.resources if r in self.greedy)
            for r in used:
                shared += [((r,), (1.0,))] * self.greedy[r]
        rates, binding = fair_shares(self.capacity, shared)
        return rates[: len(flows)], binding[: len(flows)]

    def _share(self, seeds: Iterable[int]) -> None:
        now = self.env.now
        flows, resources = self._component(seeds)
        rates, binding = self._fill(flows)
        for flow, rate, bound in zip(flows, rates, binding, strict=True):
            if bound >= 0 and rate > 0:
                flow.bound = bound
            if rate == flow.rate:
                continue  # unchanged: keep the projected finish bit for bit
            elapsed = now - flow.t_ref
            if flow.rate > 0 and elapsed > 0:
                flow.remaining_bits = max(0.0, flow.remaining_bits - flow.rate * elapsed)
            elif flow.rate == 0 and elapsed > 0:
                flow.stalled_s += elapsed
            base = max(now, flow.t_ref)  # a new flow may start a rounding step after `now`
            flow.rate = rate
            flow.t_ref = base
            flow.version += 1
            if flow.remaining_bits <= 0.0:
                flow.finish = base
            elif rate <= 0.0:
                flow.finish = math.inf
                continue
            else:
                flow.finish = base + flow.remaining_bits / rate
            version = flow.version
            self.env.at(flow.finish, lambda _e, f=flow, v=version: self._due(f, v))
        if self.record:
            for r in resources:
                self._sample(r, now)

    def _due(self, flow: Flow, version: int) -> None:
        if flow.alive and flow.version == version:
            self._complete(flow)

    def _complete(self, flow: Flow) -> None:
        if not flow.alive:
            return
        now = self.env.now
        flow.alive = False
        flow.version += 1
        busy = []
        for r in flow.resources:
            self.flows_on[r].pop(flow, None)
            if self.flows_on[r]:
                busy.append(r)
            else:
                self.busy_s[r] += now - self.busy_since[r]
                if self.record:
                    self._sample(r, now)
        if busy:
            self._share(busy)
        flow.on_done(max(flow.finish, now), flow.stalled_s, flow.bound)

    def _sample(self, r: int, now: float) -> None:
        """Record resource r's utilisation from now on, when it changed."""
        capacity = self.capacity[r]
        used_bps = 0.0
        for flow in self.flows_on[r]:
            if flow.rate > 0:
                used_bps += flow.rate * flow.weights[flow.resources.index(r)]
        used = used_bps / capacity if math.isfinite(capacity) and capacity > 0 else 0.0
        if used != self._last_util[r]:
            self._last_util[r] = used
            self.samples.append((r, now, used))
