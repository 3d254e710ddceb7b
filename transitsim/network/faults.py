"""Link faults: a link down for an interval, named as the user names links, resolved to the
fabric's resources (overlapping intervals of one resource merged)."""

import math
from dataclasses import dataclass

from transitsim.base.errors import TransitsimError
from transitsim.network.des.engine import ResourceFault
from transitsim.network.fabric import Fabric


@dataclass(frozen=True)
class LinkFault:
    """A link down for an interval (absolute time, the clock of start_s): transfers wait."""

    link: str  # "u->v", "u->v#k" (one parallel link) or "u<->v" (both directions)
    down_from_s: float
    down_until_s: float


def resolve_faults(fabric: Fabric, faults: list[LinkFault] | None) -> list[ResourceFault]:
    """Faults on resources, overlapping intervals of one resource merged."""
    intervals: dict[int, list[tuple[float, float]]] = {}
    for fault in faults or []:
        if not isinstance(fault, LinkFault):
            raise TransitsimError(f"expected a LinkFault, got {type(fault).__name__}")
        begin, end = fault.down_from_s, fault.down_until_s
        if not (math.isfinite(begin) and math.isfinite(end) and end > begin):
            raise TransitsimError(
                f"link fault on {fault.link!r}: needs finite down_from_s < down_until_s, "
                f"got {begin} .. {end}"
            )
        for r in _fault_resources(fabric, fault.link):
            intervals.setdefault(r, []).append((begin, end))
    merged = []
    for r, spans in sorted(intervals.items()):
        spans.sort()
        current = list(spans[0])
        for begin, end in spans[1:]:
            if begin <= current[1]:
                current[1] = max(current[1], end)
            else:
                merged.append(ResourceFault(r, *current))
                current = [begin, end]
        merged.append(ResourceFault(r, *current))
    return merged


def _fault_resources(fabric: Fabric, name: str) -> list[int]:
    if name in fabric.links:
        return [fabric.links[name].resource.index]
    pairs = []
    if "<->" in name:
        u, v = name.split("<->", 1)
        pairs = [(u, v), (v, u)]
    elif "->" in name:
        pairs = [tuple(name.split("->", 1))]
    found = [link.resource.index for pair in pairs for link in fabric.edge_links.get(pair, [])]
    if not found:
        sample = ", ".join(sorted(fabric.links)[:3])
        raise TransitsimError(f"link fault names unknown link {name!r} (links are like {sample})")
    return found
