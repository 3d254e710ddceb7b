"""One step whose exchanges start as soon as their gradients are ready.

Per worker w (compute c_w, backward share b): forward ends at (1 - b) c_w, and unit u's gradients
are ready at (1 - b) c_w + r_u b c_w. Compression runs on the same GPU, between backward kernels:
compressing unit u as soon as it is ready delays the rest of the backward by as long, so u's
values are ready at that time plus the compression of units 1..u, and the GPU is done at
c_w + compress_s, as without overlap. Exchanges go through one communication stream per worker,
in order (NCCL, DDP): unit u starts on worker w at max(its values ready, unit u-1 done on w). The
step ends when every worker has every unit and its GPU is free; the update follows.

Each unit's exchange is timed by the network floor on its own (`exchange`): two units never share
links at the same instant on one worker's stream, though one worker may start unit u+1 while
another still finishes unit u (their messages are then not modelled as contending).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from transitsim.overlap.plan import Unit


@dataclass(frozen=True)
class UnitTiming:
    """One unit's exchange as the network floor timed it (times step-relative)."""

    finish_s: np.ndarray  # per worker
    transform_s: float  # critical path of this exchange alone
    wire_s: float
    wait_s: float
    wire_bytes: float  # mean over workers, on the line
    events: int
    link_stats: pd.DataFrame | None = None  # link, busy_s, bytes (others kept from the first)
    wan_bytes: float = 0.0  # of wire_bytes, those that crossed a WAN link

    # link_stats' (link, busy_s, bytes) as arrays, read once when the timing is made (and kept
    # by dataclasses.replace): a cached unit is summed into every step it is in, and reading
    # pandas columns there cost more than the timing itself
    link_arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.link_arrays is None and self.link_stats is not None:
            object.__setattr__(self, "link_arrays", link_arrays_of(self.link_stats))


def link_arrays_of(frame: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(link, busy_s, bytes) of a link_stats frame."""
    if frame is None:
        return None
    return (
        frame["link"].to_numpy(),
        frame["busy_s"].to_numpy(dtype=np.float64),
        frame["bytes"].to_numpy(dtype=np.float64),
    )


ExchangeFn = Callable[[Unit, np.ndarray], UnitTiming]


@dataclass(frozen=True)
class OverlapStep:
    """A step's exchanges, overlapped: times relative to the step's start."""

    finish_s: float  # every worker has every unit and its GPU is done
    gpu_s: float  # slowest worker's compute + compression
    exchange_s: float  # sum over units of (last finish - first start): the exchange's own time
    transform_s: float  # sums over units of their critical-path parts
    wire_s: float
    wait_s: float
    wire_bytes: float
    events: int
    link_stats: pd.DataFrame | None
    start_s: tuple[float, ...]  # per unit, its first worker's start
    end_s: tuple[float, ...]  # per unit, its last worker's finish
    wan_bytes: float = 0.0  # of wire_bytes, those that crossed a WAN link

    @property
    def units(self) -> int:
        return len(self.start_s)


def unit_ready_s(
    units: list[Unit], compute_w_s: np.ndarray, compress_s: float, backward_share: float
) -> np.ndarray:
    """(units, workers): when each unit's payload is ready to go, step-relative."""
    compute = np.asarray(compute_w_s, dtype=np.float64)
    forward = compute * (1.0 - backward_share)
    backward = compute * backward_share
    shares = np.cumsum([u.compress_share for u in units])
    ready = np.array([u.ready for u in units])
    out = forward[None, :] + ready[:, None] * backward[None, :] + compress_s * shares[:, None]
    if len(units) == 1 and units[0].ready == 1.0 and units[0].compress_share == 1.0:
        out[0] = compute + compress_s  # no overlap: bit for bit what replay always charged
    return out


def overlapped_step(
    units: list[Unit],
    compute_w_s: np.ndarray,
    compress_s: float,
    backward_share: float,
    exchange: ExchangeFn,
) -> OverlapStep:
    """Time one step's units in order on each worker's stream (see the module docstring)."""
    ready = unit_ready_s(units, compute_w_s, compress_s, backward_share)
    previous: np.ndarray | None = None
    timings: list[UnitTiming] = []
    starts, ends = [], []
    for u, unit in enumerate(units):
        start = ready[u] if previous is None else np.maximum(ready[u], previous)
        timing = exchange(unit, start)
        previous = np.asarray(timing.finish_s, dtype=np.float64)
        timings.append(timing)
        starts.append(float(start.min()))
        ends.append(float(previous.max()))
    gpu_s = float(np.max(np.asarray(compute_w_s, dtype=np.float64) + compress_s))
    return OverlapStep(
        finish_s=max(ends[-1], gpu_s),
        gpu_s=gpu_s,
        exchange_s=float(sum(e - s for s, e in zip(starts, ends, strict=True))),
        transform_s=float(sum(t.transform_s for t in timings)),
        wire_s=float(sum(t.wire_s for t in timings)),
        wait_s=float(sum(t.wait_s for t in timings)),
        wire_bytes=float(sum(t.wire_bytes for t in timings)),
        events=int(sum(t.events for t in timings)),
        link_stats=_summed_links(timings),
        start_s=tuple(starts),
        end_s=tuple(ends),
        wan_bytes=float(sum(t.wan_bytes for t in timings)),
    )


def _summed_links(timings: list[UnitTiming]) -> pd.DataFrame | None:
    """Per link, busy seconds and bytes summed over the units (one network: same links), unit
    after unit, as arrays."""
    present = [t for t in timings if t.link_stats is not None]
    if not present:
        return None
    total = present[0].link_stats.copy()
    links = present[0].link_arrays[0]
    busy_s, carried = np.zeros(len(total)), np.zeros(len(total))
    for timing in present:
        names, busy, bytes_ = timing.link_arrays
        if not np.array_equal(names, links):
            aligned = timing.link_stats.set_index("link").reindex(links).reset_index()
            busy = aligned["busy_s"].to_numpy(dtype=np.float64)
            bytes_ = aligned["bytes"].to_numpy(dtype=np.float64)
        busy_s += busy
        carried += bytes_
    total["busy_s"] = busy_s
    total["bytes"] = carried
    return total
