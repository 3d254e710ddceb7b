"""Failover on parallel links for the fast paths: which outages they time exactly, and how.

The DES restripes a message over the links of its bundle that are up whenever one goes down or
comes back (des/fluid.py). The fast paths take transfers of fixed rates, so they follow it
exactly in two cases only, checked here against the exchange's span [t0, t1]:

- a link down from before t0 until after t1 while another of its bundle is up at t0: every
  message is striped over the others for the whole exchange, which is the fabric with that
  link left out (`Fabric(excluded=...)`), provided no other link of the bundle goes down then;
- every link of a bundle down over the same windows (a fault on "u<->v"): no message moves
  while they are, as on a single link; the fast paths' own fault handling.

Anything else moves flows between links mid-exchange at a new rate: the DES times it.
"""

from collections.abc import Callable
from typing import Any

from transitsim.network.des.engine import ResourceFault
from transitsim.network.fabric import Fabric
from transitsim.network.fast import NotExact

Spans = list[tuple[float, float]]


def _spans(faults: list[ResourceFault]) -> dict[int, Spans]:
    spans: dict[int, Spans] = {}
    for fault in faults:
        spans.setdefault(fault.resource, []).append((fault.down_from_s, fault.down_until_s))
    return spans


def _down_at(spans: Spans, t: float) -> bool:
    return any(begin <= t < end for begin, end in spans)


def striped_faults(fabric: Fabric, faults: list[ResourceFault]) -> bool:
    """Whether any fault is on one of a bundle of parallel links."""
    return any(f.resource in fabric.bundle_of for f in faults)


def excluded_links(fabric: Fabric, faults: list[ResourceFault], t0_s: float) -> frozenset[str]:
    """The parallel links down at t0 while another of their bundle is up: left out of stripes."""
    spans = _spans(faults)
    names = {link.resource.index: name for name, link in fabric.links.items()}
    out = set()
    for r, bundle in fabric.bundle_of.items():
        if _down_at(spans.get(r, []), t0_s) and any(
            not _down_at(spans.get(b, []), t0_s) for b in bundle
        ):
            out.add(names[r])
    return frozenset(out)


def failover_reason(
    fabric: Fabric, faults: list[ResourceFault], excluded: frozenset[str], t0_s: float, t1_s: float
) -> NotExact | None:
    """Why timing the exchange over [t0, t1] with `excluded` left out is not the DES's failover
    (None: it is)."""
    spans = _spans(faults)
    gone = {fabric.links[name].resource.index for name in excluded}
    for bundle in sorted(set(fabric.bundle_of.values())):
        if not any(r in spans for r in bundle):
            continue
        for r in bundle:
            if r in gone and not any(b <= t0_s and e >= t1_s for b, e in spans[r]):
                return NotExact(
                    "a parallel link comes back during the exchange (flows restripe onto it)"
                )
        rest = [r for r in bundle if r not in gone]
        clipped = [[(b, e) for b, e in spans.get(r, []) if b < t1_s and e > t0_s] for r in rest]
        if gone and any(clipped):
            return NotExact("a parallel link goes down while another is already down (failover)")
        if any(c != clipped[0] for c in clipped):
            return NotExact(
                "one of parallel links goes down during the exchange while another stays up: "
                "its flows move onto the others at a new rate (failover, timed by the DES)"
            )
    return None


def with_failover(
    fabric: Fabric,
    faults: list[ResourceFault],
    t0_s: float,
    reduced_for: Callable[[frozenset[str]], Fabric],
    run: Callable[[Fabric], Any],
    same_plan: Callable[[Fabric], bool],
) -> Any:
    """`run` (a fast path: a result with finish_s, or NotExact) on the fabric without the
    parallel links down at t0, kept only where that is the DES's failover; else NotExact."""
    if not striped_faults(fabric, faults):
        return run(fabric)
    excluded = excluded_links(fabric, faults, t0_s)
    reduced = reduced_for(excluded) if excluded else fabric
    if not same_plan(reduced):
        return NotExact("the schedule is planned on the network with every link up")
    fast = run(reduced)
    if isinstance(fast, NotExact):
        return fast
    reason = failover_reason(fabric, faults, excluded, t0_s, float(fast.finish_s.max()))
    return fast if reason is None else reason
