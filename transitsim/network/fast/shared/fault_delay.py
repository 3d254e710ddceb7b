"""Link faults on the fast paths: a transfer alone on its links waits out their down windows.

The fluid DES stops a flow whose route crosses a resource at capacity 0 and resumes it, with the
bits it still had to send, when the capacity comes back. For a transfer that shares none of its
resources (what every fast path checks), that is a function of its start time and fixed
duration: its end is when the time it spent outside every down window of its route reaches
the duration. The fast paths apply it, numpy across all transfers of a phase at once, and
count the time stood still as the DES does (per message, and the first hop alone).

Windows are half-open, [down_from, down_until): a link is down from its first instant (as
`background.capacity_schedule` sets capacity 0) and up again at the second.
"""

from collections.abc import Iterable, Sequence

import numpy as np

from transitsim.network.des.engine import ResourceFault

Window = tuple[float, float]


def down_windows(faults: Iterable[ResourceFault]) -> dict[int, list[Window]]:
    """Per resource, its down windows in time order."""
    windows: dict[int, list[Window]] = {}
    for fault in faults:
        windows.setdefault(fault.resource, []).append((fault.down_from_s, fault.down_until_s))
    for spans in windows.values():
        spans.sort()
    return windows


def route_windows(windows: dict[int, list[Window]], resources: Iterable[int]) -> tuple:
    """The windows in which any of `resources` is down, overlapping ones merged, in time order."""
    spans = sorted(span for r in resources for span in windows.get(r, ()))
    merged: list[list[float]] = []
    for begin, end in spans:
        if merged and begin <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return tuple((begin, end) for begin, end in merged)


def delayed(
    start_s: np.ndarray, work_s: np.ndarray, windows: Sequence[Window]
) -> tuple[np.ndarray, np.ndarray]:
    """End and time stood still of transfers starting at start_s that need work_s of up time.

    A transfer running into a window stops at its beginning and goes on at its end with the work
    it had left; one starting inside a window waits for its end. One that ends exactly as a
    window begins is not touched."""
    now = np.asarray(start_s, dtype=float).copy()
    left = np.asarray(work_s, dtype=float).copy()
    still = np.zeros_like(now)
    for begin, end in windows:
        hit = (end > now) & (now + left > begin)
        if not hit.any():
            continue
        before = hit & (now < begin)
        left = np.where(before, left - (begin - now), left)
        still = np.where(hit, still + (end - np.maximum(now, begin)), still)
        now = np.where(hit, end, now)
    return now + left, still


def delayed_one(start_s: float, work_s: float, windows: Sequence[Window]) -> tuple[float, float]:
    """`delayed` for one transfer, in plain floats (the trees' pass is a Python loop)."""
    now, left, still = start_s, work_s, 0.0
    for begin, end in windows:
        if end > now and now + left > begin:
            if now < begin:
                left -= begin - now
            still += end - max(now, begin)
            now = end
    return now + left, still


class HopFaults:
    """Which transfers of a (transfer x hop) table cross a down link, grouped by their windows.

    `routes[e][h]` is the resources of transfer e's hop h. Transfers whose hop crosses no faulted
    resource are left out, so a table without faults costs nothing."""

    def __init__(self, windows: dict[int, list[Window]], routes: Sequence[Sequence[Iterable[int]]]):
        self.by_hop: dict[int, list[tuple[np.ndarray, tuple]]] = {}
        if not windows:
            return
        grouped: dict[tuple[int, tuple], list[int]] = {}
        for e, hops in enumerate(routes):
            for h, resources in enumerate(hops):
                spans = route_windows(windows, resources)
                if spans:
                    grouped.setdefault((h, spans), []).append(e)
        for (h, spans), edges in grouped.items():
            self.by_hop.setdefault(h, []).append((np.array(edges, dtype=np.int64), spans))

    def __bool__(self) -> bool:
        return bool(self.by_hop)

    def apply(
        self, h: int, began: np.ndarray, ended: np.ndarray, work: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Hop h's ends with its faults (began + work where none), and the time stood still."""
        groups = self.by_hop.get(h)
        if not groups:
            return ended, None
        ended = ended.copy()
        still = np.zeros_like(ended)
        for edges, spans in groups:
            ended[edges], still[edges] = delayed(began[edges], work[edges], spans)
        return ended, still
