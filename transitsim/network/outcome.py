"""From message times to the figures an exchange reports: finish times, bytes, link figures, and
the critical-path breakdown into transform, wire and wait time.

The critical path is walked backwards from the worker that finishes last: through the message
whose arrival completed its result, then at each message through the dependency that released
it (the data dependency whose arrival, or the own previous send whose completion, came last;
data wins ties), until a message released by its worker's start. Along it:

- transform_s: serialisation time of hops whose uncontended rate is set by a transform
  (pluggable or switch port) or by host lanes carrying the dense delta into one (ingest), plus
  transform latencies (lanes that only carry line payload are wire time, labelled "lanes");
- wire_s: the rest of the time messages on the path were under way: serialisation limited by a
  link, the aggregator or a host endpoint (bottleneck "host"), propagation, per-message
  overheads (the links' and the host's), switch forwarding, and the slow-down from sharing
  links or endpoints with other transfers (contention);
- wait_s: the rest of time_s: the straggler offset of the worker the path starts at, and time
  transfers stood still on a link that was down (faults).

transform_s + wire_s + wait_s == time_s (wait_s is clamped at 0 against rounding).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from transitsim.network.des.engine import Timing
from transitsim.network.fabric import Fabric, Path
from transitsim.network.schedules.dag import Schedule

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Breakdown:
    transform_s: float
    wire_s: float
    wait_s: float
    bottleneck: str  # link | lanes | transform | aggregator | host | latency | wait | none


def finish_times(schedule: Schedule, timing: Timing, start_s: np.ndarray) -> np.ndarray:
    """Per worker: when its last result-bearing message arrived (its start if none)."""
    finish = np.asarray(start_s, dtype=float).copy()
    into = schedule.counts & (schedule.dst < schedule.workers)
    np.maximum.at(finish, schedule.dst[into], timing.arrive_s[into])
    return finish


_LINES: dict[int, tuple] = {}


def line_bytes(
    schedule: Schedule, path_ids: np.ndarray, paths: list[Path], cache: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each worker sends onto and receives from the line (not local lane traffic).
    cache: once per (cached) schedule, as a tree replay asks every step."""
    held = _LINES.get(id(schedule)) if cache else None
    if held is not None and held[0] is schedule:
        return held[1].copy(), held[2].copy()
    send = np.array([p.send_factor for p in paths] + [0.0])[path_ids]
    recv = np.array([p.recv_factor for p in paths] + [0.0])[path_ids]
    workers = schedule.workers
    sent = np.zeros(workers)
    received = np.zeros(workers)
    from_worker = schedule.src < workers
    to_worker = schedule.dst < workers
    np.add.at(sent, schedule.src[from_worker], (schedule.nbytes * send)[from_worker])
    np.add.at(received, schedule.dst[to_worker], (schedule.nbytes * recv)[to_worker])
    if cache:
        if len(_LINES) >= 4:
            _LINES.pop(next(iter(_LINES)))
        _LINES[id(schedule)] = (schedule, sent.copy(), received.copy())
    return sent, received


_LINK_COLUMNS: dict[int, tuple] = {}


def link_stats(fabric: Fabric, timing: Timing, time_s: float) -> "pd.DataFrame":
    """One row per resource (link direction, lanes, transform, aggregator).

    utilisation = bytes carried / (rate x time_s): the share of its capacity used on average
    over the exchange (busy_s counts time with at least one transfer on it).
    """
    import pandas as pd  # only who reads link figures pays for pandas

    held = _LINK_COLUMNS.get(id(fabric))
    if held is None or held[0] is not fabric:  # the names as pandas strings, once per fabric
        if len(_LINK_COLUMNS) >= 8:
            _LINK_COLUMNS.pop(next(iter(_LINK_COLUMNS)))
        held = _LINK_COLUMNS[id(fabric)] = (
            fabric,
            pd.array([r.name for r in fabric.resources]),
            pd.array([r.kind for r in fabric.resources]),
            fabric.capacities(),
        )
    _, names, kinds, rates = held
    carried = timing.bytes
    with np.errstate(divide="ignore", invalid="ignore"):
        utilisation = np.where(
            (time_s > 0) & np.isfinite(rates), carried * 8.0 / (rates * time_s), 0.0
        )
    return pd.DataFrame(
        {
            "link": names,
            "kind": kinds,
            "rate_bps": rates,
            "busy_s": timing.busy_s,
            "bytes": carried,
            "utilisation": utilisation,
        }
    )


# a WAN link: one direction of a cable between two datacentre switches (topology._cables names
# them dcA->dcB, #k for parallel links); no other topology has a link that leaves a site
WAN_LINK = re.compile(r"^dc\d+->dc\d+(#\d+)?$")
# a link a host sends on: every byte a worker puts on its line crosses one of these once
HOST_LINK = re.compile(r"^h\d+->")
# a send is slowed by sharing where it took longer than its serial time by more than this share
SLOWED_REL = 1e-9
_MASKS: dict[int, tuple[Fabric, np.ndarray, np.ndarray]] = {}  # per fabric: (wan, host links)


def wan_share(fabric: Fabric, carried: np.ndarray) -> float:
    """The share of the bytes workers put on their lines that crossed a WAN link (0 on a network
    without datacentres): WAN link bytes over host-link bytes, capped at 1. `carried`: bytes per
    resource (Timing.bytes). The masks are made once per fabric: this runs every exchange."""
    held = _MASKS.get(id(fabric))
    if held is None or held[0] is not fabric:
        if len(_MASKS) >= 8:
            _MASKS.pop(next(iter(_MASKS)))
        links = [r.kind == "link" for r in fabric.resources]
        wan = np.array([k and WAN_LINK.match(r.name) is not None
                        for k, r in zip(links, fabric.resources, strict=True)])  # fmt: skip
        host = np.array([k and HOST_LINK.match(r.name) is not None
                         for k, r in zip(links, fabric.resources, strict=True)])  # fmt: skip
        held = _MASKS[id(fabric)] = (fabric, wan, host)
    _, wan, host = held
    if not wan.any():
        return 0.0
    carried = np.asarray(carried, dtype=np.float64)
    crossed = float(carried[wan].sum())
    sent = float(carried[host].sum())
    return min(crossed / sent, 1.0) if crossed > 0.0 and sent > 0.0 else 0.0


def utilisation_frame(fabric: Fabric, timing: Timing) -> "pd.DataFrame":
    """Piecewise-constant utilisation: one row per (link, interval) with a non-zero share."""
    import pandas as pd

    columns = ["link", "t0_s", "t1_s", "utilisation"]
    if timing.samples is None or len(timing.samples[0]) == 0:
        return pd.DataFrame({c: [] for c in columns})
    resource, time, share = (np.asarray(c) for c in timing.samples)
    order = np.lexsort((np.arange(len(time)), time, resource))
    resource, time, share = resource[order], time[order], share[order]
    same = resource[1:] == resource[:-1]
    keep = same & (time[1:] > time[:-1]) & (share[:-1] > 0)
    names = np.array([r.name for r in fabric.resources], dtype=object)
    return pd.DataFrame(
        {
            "link": names[resource[:-1][keep]],
            "t0_s": time[:-1][keep],
            "t1_s": time[1:][keep],
            "utilisation": share[:-1][keep],
        }
    )


def _transforms(fabric: Fabric, path: Path) -> bool:
    """Whether a message's route passes a transform (its host lanes then carry dense input)."""
    return any(fabric.resources[r].kind == "transform" for hop in path.hops for r in hop.resources)


_HOP_TERMS: dict[int, tuple] = {}


def _hop_terms(fabric: Fabric, path: Path) -> tuple:
    """What the critical-path walk reads of a path, per hop (pre, post, store-and-forward per
    bit, packet bits, rate, the kind of resource that limits it, whether a transform does),
    its transform latency and whether it carries dense input: worked out once per path (a
    tree replay walks the same paths every step)."""
    held = _HOP_TERMS.get(id(path))
    if held is not None and held[0] is path and held[1] is fabric:
        return held[2]
    terms = []
    for hop in path.hops:
        kind = fabric.resources[hop.limit].kind if hop.limit >= 0 else "link"
        terms.append(
            (
                hop.pre_s,
                hop.post_s,
                hop.store_s_per_bit,
                hop.packet_bits,
                hop.rate_bps,
                kind,
                kind == "transform",
            )
        )
    made = (tuple(terms), path.transform_latency_s, _transforms(fabric, path))
    if len(_HOP_TERMS) >= 100_000:
        _HOP_TERMS.clear()
    _HOP_TERMS[id(path)] = (path, fabric, made)
    return made


def critical_path(
    fabric: Fabric,
    dag,
    path_of: Callable[[int], Path | None],
    timing: Timing,
    start_s: np.ndarray,
    finish_s: np.ndarray,
) -> Breakdown:
    """transform / wire / wait along the critical path (see the module docstring).

    `dag` is a Schedule or a RingPlan (deps, after_of, bytes_of, last_into); `path_of(m)` is
    message m's compiled path (None for a JOIN).
    """
    start_s = np.asarray(start_s, dtype=float)
    time_s = float(finish_s.max() - start_s.min())
    last_worker = int(np.argmax(finish_s))
    m = dag.last_into(last_worker, timing.arrive_s, finish_s[last_worker])
    if m is None:
        return Breakdown(0.0, 0.0, time_s, "wait" if time_s > 0 else "none")
    shares = {
        "link": 0.0,
        "lanes": 0.0,
        "transform": 0.0,
        "aggregator": 0.0,
        "host": 0.0,
        "latency": 0.0,
    }
    transform = wire = 0.0
    whole = True
    while True:
        path = path_of(m)
        if path is not None:
            terms, latency_whole, dense = _hop_terms(fabric, path)
            if not whole:
                terms = terms[:1]
            end = timing.arrive_s[m] if whole else timing.free_s[m]
            stalled = timing.stall_s[m] if whole else timing.stall0_s[m]
            moving = end - timing.ready_s[m] - stalled  # sending, delayed, or slowed by sharing
            bits = dag.bytes_of(m) * 8.0
            fixed = 0
            for pre_s, post_s, store_s_per_bit, packet_bits, _, _, _ in terms:
                if not whole:
                    post = 0.0
                elif store_s_per_bit == 0.0:
                    post = post_s
                else:
                    post = post_s + min(bits, packet_bits) * store_s_per_bit
                fixed += pre_s + post
            latency = latency_whole if whole else 0.0
            ingest = 0.0
            serials = []
            for _, _, _, _, rate_bps, kind, charged in terms:
                serial = bits / rate_bps if np.isfinite(rate_bps) else 0.0
                serials.append((kind, serial))
                if charged or (kind == "lanes" and dense):
                    ingest += serial
            slack = moving - fixed - sum(serial for _, serial in serials)
            shared = int(timing.shared_by[m])  # slowed by sharing: charged to what it shared
            pace = fabric.resources[shared].kind if shared >= 0 else "link"
            if len(serials) == 1 and shared >= 0 and slack > SLOWED_REL * max(moving, 0.0):
                # one hop slowed by a resource it shared: that resource set the pace of its
                # whole send (a host shared by its ranks below the link's rate is the host's)
                serials = [(pace, serials[0][1])]
            for kind, serial in serials:
                shares[kind] += serial
            shares["transform"] += latency
            shares["latency"] += fixed - latency
            shares[pace] += max(slack, 0.0)
            transform += ingest + latency
            wire += end - timing.ready_s[m] - stalled - ingest - latency
        ready = timing.ready_s[m]
        nxt = next((int(d) for d in dag.deps(m) if timing.arrive_s[d] == ready), None)
        if nxt is not None:
            m, whole = nxt, True
            continue
        after = dag.after_of(m)
        if after >= 0 and timing.free_s[after] == ready:
            m, whole = after, False
            continue
        break  # released by its worker's start: the straggler offset is part of wait
    wait = max(time_s - transform - wire, 0.0)
    shares["wait"] = wait
    return Breakdown(transform, wire, wait, max(shares, key=lambda k: shares[k]))
