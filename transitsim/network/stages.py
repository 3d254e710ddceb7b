"""The stages a message passes through: host endpoints, links, pluggables, switches.

Each stage only knows its own parameters and which shared capacities (`Resource`s) it owns; the
fluid engine (`fluid.py`) shares those capacities fairly among the transfers crossing them, and
`fabric.py` strings stages into routes. Rates are in bits per second; a transfer is measured in
bytes of its *line payload*, and a resource that carries a different amount per payload byte
(host lanes carrying the dense delta, a transform reading dense inputs) is crossed with a weight.
"""

import math
from dataclasses import dataclass, field

from transitsim.network.spec import HostSpec, LinkSpec, PluggableSpec, SwitchSpec, TransformSpec

RESOURCE_KINDS = ("link", "lanes", "transform", "aggregator", "host")


@dataclass(eq=False)
class Resource:
    """A capacity that concurrent transfers share fairly (link direction, lanes, transform, a
    host endpoint's send or receive side)."""

    name: str
    kind: str  # one of RESOURCE_KINDS
    rate_bps: float
    index: int = -1  # position in the fabric's resource list, set when registered


def transform_rate_bps(transform: TransformSpec) -> float:
    """Dense input bits per second the transform consumes: one pass per bit plane per chunk."""
    chunk_bits = transform.size * transform.input_bytes * 8
    return chunk_bits * transform.passes_per_s / transform.planes


def padded_dense_bytes(transform: TransformSpec, dense_bytes: int) -> int:
    """Dense bytes the transform really processes: whole power-of-2 chunks (the last one padded)."""
    chunk_bytes = transform.size * transform.input_bytes
    return math.ceil(dense_bytes / chunk_bytes) * chunk_bytes


@dataclass(eq=False)
class Link:
    """One direction of a cable: bandwidth, propagation, a per-message overhead."""

    name: str
    src: str
    dst: str
    spec: LinkSpec
    resource: Resource

    @property
    def propagation_s(self) -> float:
        return self.spec.propagation_s

    @property
    def overhead_s(self) -> float:
        return self.spec.overhead_s


@dataclass(eq=False)
class Pluggable:
    """The module at a host port: electrical host lanes each way, maybe an optical transform.

    Outbound, the host lanes carry what the host hands over (the dense delta when the pluggable
    transforms it, the line payload otherwise) and the transform turns dense into band values;
    inbound, the lanes carry what arrives on the line.
    """

    host: str
    spec: PluggableSpec
    lanes_out: Resource
    lanes_in: Resource
    transform: Resource | None = None

    @property
    def transform_latency_s(self) -> float:
        return self.spec.transform.latency_s if self.spec.transform is not None else 0.0


@dataclass(eq=False)
class Switch:
    """Forwarding (cut-through or store-and-forward), maybe an aggregator and port transforms."""

    name: str
    spec: SwitchSpec
    aggregator: Resource | None = None  # summing capacity; None when unbounded or no aggregator
    port_transforms: dict[str, Resource] = field(default_factory=dict)  # host -> its port's

    @property
    def forwarding_latency_s(self) -> float:
        return self.spec.forwarding_latency_s

    @property
    def transform_latency_s(self) -> float:
        return self.spec.transform.latency_s if self.spec.transform is not None else 0.0


@dataclass(eq=False)
class Endpoint:
    """One host's endpoint (HostSpec), shared by the ranks placed on it: a send side and a
    receive side of `rate_bps` each (None where the rate is infinite: only the per-message
    cost is modelled), crossed by every message its ranks send or receive, in series with
    their own links; `per_message_s` is paid by every message one of its ranks sends."""

    index: int  # host i: ranks [i * ranks_per_host, (i + 1) * ranks_per_host)
    spec: HostSpec
    send: Resource | None
    receive: Resource | None

    @property
    def per_message_s(self) -> float:
        return self.spec.per_message_s
