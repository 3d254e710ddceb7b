"""Processor sharing on shared links, for the fast paths whose flows meet on a WAN.

Where the flows crossing a shared set of links all have one and the same cap of their own,
max-min fairness on that set is processor sharing: k flows each get min(cap, C / k). Every flow
on a set then has the same rate at every instant, so one number per set, the bits each flow has
been served, times them all: a flow is done when the served bits reach its target (served when
it joined + its bits), and only the flow with the least target can depart next.
`stages.py` (the hierarchical exchange) drives it from its own event loop; a set that
goes down (a link fault) stops all its flows until it is back. (The trees' halves share each
rank's links per transfer, with rates that differ within a link: fast/trees/split.py.)
"""

import heapq
from collections.abc import Callable, Hashable, Sequence
from typing import Any


def overlap_s(begin: float, end: float, windows: Sequence[tuple[float, float]]) -> float:
    """How long [begin, end] lies inside the windows (a shared flow stands still there)."""
    return sum(max(0.0, min(end, b) - max(begin, a)) for a, b in windows)


class ProcessorSharing:
    """The flows on each shared set: joining, departing and the set going down or up.

    Departures are pushed onto the caller's event heap as (time, seq, depart_kind, set,
    version); a popped one whose version is stale is ignored by `depart`. `busy[g]` gains each
    span in which set g carried a flow (stood still or not, as the DES counts it)."""

    def __init__(
        self,
        capacity: Sequence[float],
        cap: Sequence[float],
        events: list[tuple[float, int, int, int, int]],
        seq: Callable[[], int],
        depart_kind: int,
        busy: Any,
    ):
        count = len(capacity)
        self.capacity, self.cap = capacity, cap
        self.events, self.seq, self.depart_kind, self.busy = events, seq, depart_kind, busy
        self.active = [0] * count
        self.served = [0.0] * count  # bits each flow on the set has been served so far
        self.since = [0.0] * count
        self.rate = [0.0] * count
        self.version = [0] * count
        self.busy_from = [0.0] * count
        self.is_down = [False] * count
        self.targets: list[list[tuple[float, Hashable]]] = [[] for _ in range(count)]

    def push_windows(self, windows: Sequence[Sequence[tuple[float, float]]], kind: int) -> None:
        """Events (time, seq, kind, set, 1 down / 0 up) for each set's down windows. Pushed
        before any flow's, so at a tie the link changes first (as the DES orders them)."""
        for g, spans in enumerate(windows):
            for begin, end in spans:
                heapq.heappush(self.events, (begin, self.seq(), kind, g, 1))
                heapq.heappush(self.events, (end, self.seq(), kind, g, 0))

    def start(self, g: int, t: float, bits: float, key: Hashable) -> None:
        """Flow `key` of `bits` joins set g at t."""
        self._advance(g, t)
        if self.active[g] == 0:
            self.busy_from[g] = t
        self.active[g] += 1
        heapq.heappush(self.targets[g], (self.served[g] + bits, key))
        self._reshare(g, t)

    def depart(self, g: int, t: float, version: int) -> Hashable | None:
        """The flow that departs set g at t (None: the event was stale)."""
        if version != self.version[g]:
            return None
        self._advance(g, t)
        _, key = heapq.heappop(self.targets[g])
        self.active[g] -= 1
        if self.active[g] == 0:
            self.busy[g] += t - self.busy_from[g]
        self._reshare(g, t)
        return key

    def set_down(self, g: int, t: float, down: bool) -> None:
        """Set g goes down (capacity 0: its flows stand still) or comes back at t."""
        self._advance(g, t)
        self.is_down[g] = down
        self._reshare(g, t)

    def _advance(self, g: int, t: float) -> None:
        self.served[g] += self.rate[g] * (t - self.since[g])
        self.since[g] = t

    def _reshare(self, g: int, t: float) -> None:
        self.version[g] += 1
        if self.active[g] == 0 or self.is_down[g]:  # nothing on it, or down: nothing departs
            self.rate[g] = 0.0
            return
        self.rate[g] = min(self.cap[g], self.capacity[g] / float(self.active[g]))
        left = max(self.targets[g][0][0] - self.served[g], 0.0)
        departs = (t + left / self.rate[g], self.seq(), self.depart_kind, g, self.version[g])
        heapq.heappush(self.events, departs)
