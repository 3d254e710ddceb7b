"""Rings and switch sums whose ranks share host endpoints (ranks_per_host > 1): exact in step.

Ranks of one host share its send and receive Resources, so ring edges are no longer disjoint and the
per-phase recurrence of fast/ring/recurrence.py does not hold in general: with stragglers or faults
the edges of a phase overlap in part, and max-min shares change flow by flow (the DES's case). It
does hold where every phase runs in step: all n edges start at one instant, get one and the same
max-min rate (all of them at once, as the DES shares them: each capped by its host's R / k and its
own links), and so end together. Then no share changes during a phase, and each transfer takes bits
/ that rate. `host_shares` computes those rates a priori (and refuses where they differ, where
anything but host endpoints is shared, or where shared bytes are weighted); `run_fast_ring` checks a
posteriori that every phase's edges start together (equal starts, equal overheads and latencies),
else the caller runs the DES. No faults, no recording, no pre-stage transform. Not max-plus linear
(a straggler breaks the step): replay simulates such steps.

A sum at one switch is the same per piece (`switch_shares`): every worker's upload of a piece
starts together and shares its host's send side at one rate, every result comes down together
sharing the receive sides; uploads and results may not share a resource (a loopback through the
own lanes), and the aggregator may not bind at the in-step rate.
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network.des.fluid import fair_shares
from transitsim.network.fabric import Fabric, Path
from transitsim.network.fast.shared.not_exact import NotExact


@dataclass(frozen=True)
class HostShares:
    """Per kind of transfer (a ring's first and later phases; a switch sum's uploads and
    results): every worker's rate when they run in step, and the resource the DES names as
    what set it."""

    rates: tuple[np.ndarray, np.ndarray]
    binding: tuple[np.ndarray, np.ndarray]


def _shares(
    fabric: Fabric, paths: list[Path], also: str = ""
) -> tuple[np.ndarray, np.ndarray] | NotExact:
    """Every path's max-min rate with all of them at once (one hop each), and what binds it;
    only host endpoints (and a resource of kind `also`) may be shared, and one rate for all."""
    flows = [(p.hops[0].resources, p.hops[0].weights) for p in paths]
    count: dict[int, int] = {}
    for resources, _ in flows:
        for r in resources:
            count[r] = count.get(r, 0) + 1
    for resources, weights in flows:
        for r, w in zip(resources, weights, strict=True):
            kind = fabric.resources[r].kind
            if count[r] > 1 and kind == also:
                continue
            if count[r] > 1 and kind != "host":
                return NotExact("transfers share a resource (contention)")
            if count[r] > 1 and w != 1.0:
                return NotExact("a shared host endpoint carries weighted (transformed) bytes")
    rates, binding = fair_shares(fabric.capacities().tolist(), flows)
    if len(set(rates)) != 1:
        return NotExact("ranks sharing a host get unequal shares (max-min across hosts)")
    return np.array(rates), np.array(binding, dtype=np.int64)


def host_shares(
    fabric: Fabric, first: list[Path], later: list[Path], pre: bool
) -> HostShares | NotExact:
    """The in-step rates of a ring whose edges share only host endpoints, or why not."""
    if pre:
        return NotExact("a pre-stage transform on shared host endpoints")
    if any(len(p.hops) != 1 for p in first + later):
        return NotExact("routes of more than one hop")
    one, two = _shares(fabric, first), _shares(fabric, later)
    if isinstance(one, NotExact):
        return one
    if isinstance(two, NotExact):
        return two
    return HostShares((one[0], two[0]), (one[1], two[1]))


def switch_shares(
    fabric: Fabric, ups: list[Path], downs: list[Path], workers: int
) -> HostShares | NotExact:
    """The in-step rates of a switch sum whose uploads (results) share only host endpoints and
    the aggregator, or why not: (ups, downs) in HostShares' two slots."""
    if any(len(p.hops) != 1 for p in ups + downs):
        return NotExact("routes of more than one hop")
    up_resources = {r for p in ups for r in p.hops[0].resources}
    if up_resources & {r for p in downs for r in p.hops[0].resources}:
        return NotExact("uploads and results share a resource")
    one, two = _shares(fabric, ups, also="aggregator"), _shares(fabric, downs)
    if isinstance(one, NotExact):
        return one
    if isinstance(two, NotExact):
        return two
    for r in up_resources:
        resource = fabric.resources[r]
        if resource.kind == "aggregator" and workers * one[0][0] > resource.rate_bps:
            return NotExact("the aggregator's summing rate can bind")
    return HostShares((one[0], two[0]), (one[1], two[1]))
