"""A built network: its stages, shortest-path routes, and routes compiled into hops.

With `NetworkSpec.host`, every message a rank sends crosses its host endpoint's send side and
every message a rank receives its host's receive side (one Resource each per host, shared by
the ranks placed on it), in series with the links, and the sender pays the host's per-message
cost before its first bit (with the links' overheads). Two ranks of one host still talk over
their own links (each rank keeps its link, as a namespace's veth or a GPU's NVLink port does),
crossing their host's send and receive sides.

A *path* is what one message crosses from its source to its destination, as a tuple of hops.
Each hop is one fluid transfer over a set of resources (all at once: cut-through), preceded by a
fixed delay (`pre_s`: per-message overheads) and followed by one (`post_s`: propagation, switch
forwarding, transform latency). Every message is one hop: packets stream through the switches,
and a store-and-forward switch holds each packet (MTU, `SwitchSpec.mtu_bytes`) before sending it
on, which adds one packet's time at its ingress rate (the whole message when it is smaller),
not the whole message's. The sender is free again when its first hop has been sent.
"""

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network.background import Background
from transitsim.network.fabrics import FABRIC_TOPOLOGIES, aggregation_node
from transitsim.network.spec import NetworkSpec
from transitsim.network.stages import (
    Endpoint,
    Link,
    Pluggable,
    Resource,
    Switch,
    transform_rate_bps,
)
from transitsim.network.topology import build_topology, host_name

# What a message is, for the stages it meets on its way.
PLAIN = 0  # line payload end to end (also forwarded ring chunks: never transformed)
XFORM_PLUGGABLE = 1  # dense into the source pluggable, band values out on the line
XFORM_SWITCH = 2  # dense on the host lanes and uplink, band values after the switch port
LOCAL_XFORM = 3  # dense through the own pluggable's transform and straight back to the host
JOIN = 4  # no transfer: the aggregator has every contribution of a piece (a barrier)
KIND_NAMES = ("plain", "xform_pluggable", "xform_switch", "local_xform", "join")
PATH_CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class Hop:
    pre_s: float
    resources: tuple[int, ...]
    weights: tuple[float, ...]  # resource bytes per line-payload byte
    post_s: float
    rate_bps: float  # payload bits/s when alone: min over resources of rate / weight
    limit: int  # index of the resource that sets rate_bps (-1: none)
    store_s_per_bit: float = 0.0  # store-and-forward: sum of 1 / ingress rate over the switches
    packet_bits: float = 0.0  # ... each of which holds one packet (MTU) before sending it on
    # with parallel links: per resource, the weight it would carry alone (a striped link's
    # weight times its bundle's size; the DES restripes over the links that are up); () = none
    bases: tuple[float, ...] = ()

    def post_for(self, bits: float) -> float:
        """The delay after the last bit left: post_s plus, per store-and-forward switch, one
        packet (or the whole message, if smaller) received before it is forwarded."""
        if self.store_s_per_bit == 0.0:
            return self.post_s
        return self.post_s + min(bits, self.packet_bits) * self.store_s_per_bit


@dataclass(frozen=True)
class Path:
    hops: tuple[Hop, ...]
    transform_latency_s: float  # part of the hops' post_s that is transform latency
    send_factor: float  # line bytes on the source host's uplink per payload byte (0: none)
    recv_factor: float  # line bytes on the destination host's downlink per payload byte


@dataclass(frozen=True)
class Weights:
    """Per-exchange ratios: dense bytes (and padded dense bytes) per line-payload byte."""

    dense: float = 1.0
    padded: float = 1.0
    loopback: bool = False


# On a tie of rates, which resource a hop is said to be limited by: the aggregator (shared by
# every upload, so it is what binds once more than one flows), then a link, then the rest.
TIE_ORDER = {"aggregator": 0, "link": 1, "lanes": 2, "transform": 3, "host": 4}


def _tie_wins(resource: Resource, current: int, fabric: "Fabric") -> bool:
    if current < 0:
        return True
    return TIE_ORDER[resource.kind] < TIE_ORDER[fabric.resources[current].kind]


class Fabric:
    """Stages and routes of one NetworkSpec; compiles (src, dst, kind) into Paths.

    Parallel links between two nodes (a bundle) are striped: every message crosses each link of
    the bundle with an even share of its bytes (docs/engine.md "Parallel links"). `excluded`
    names links left out of every stripe (down for a whole exchange: the fast paths' failover).
    """

    def __init__(self, network: NetworkSpec, excluded: frozenset[str] = frozenset()):
        self.network = network
        self.excluded = excluded
        self.graph = build_topology(network)
        self.resources: list[Resource] = []
        self.links: dict[str, Link] = {}
        self.edge_links: dict[tuple[str, str], list[Link]] = {}
        # resources whose background share changes in time: (series, full payload rate)
        self.backgrounds: dict[int, tuple[Background, float]] = {}
        # resources with greedy background flows: how many (they share max-min, DES only)
        self.greedy: dict[int, int] = {}
        self.hosts = [host_name(w) for w in range(network.workers)]
        self.switch_names = sorted(
            n for n, d in self.graph.nodes(data=True) if d["kind"] == "switch"
        )
        self.node_names = self.hosts + self.switch_names
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        for u, v, data in self.graph.edges(data=True):
            links = []
            for name, spec in data["links"]:
                link = Link(name, u, v, spec, self._resource(name, "link", spec.available_bps))
                self.links[name] = link
                links.append(link)
                if spec.background is not None and spec.background.varies:
                    self.backgrounds[link.resource.index] = (spec.background, spec.payload_bps)
                if spec.background is not None and spec.background.greedy_flows:
                    self.greedy[link.resource.index] = spec.background.greedy_flows
            self.edge_links[(u, v)] = links
        # per resource of a bundle of parallel links: every resource of its bundle
        self.bundle_of: dict[int, tuple[int, ...]] = {}
        for links in self.edge_links.values():
            if len(links) > 1:
                bundle = tuple(link.resource.index for link in links)
                for r in bundle:
                    self.bundle_of[r] = bundle
        self.pluggables = [self._pluggable(h) for h in self.hosts]
        self.endpoints = self._endpoints()  # per worker: its host's endpoint (None: no host)
        self.switches = {name: self._switch(name) for name in self.switch_names}
        # a host's switches: one, or (cluster fabrics) its node's NVLink switch and its NIC's leaf
        self.accesses = {h: sorted(self.graph.successors(h)) for h in self.hosts}
        self.access = {h: switches[0] for h, switches in self.accesses.items()}
        switch_graph = self.graph.subgraph(self.switch_names)
        self._switch_routes = dict(nx.all_pairs_shortest_path(switch_graph))
        self._routes: dict[tuple[str, str], list[str]] = {}
        self._paths: dict[tuple, Path] = {}

    def _resource(self, name: str, kind: str, rate_bps: float) -> Resource:
        resource = Resource(name, kind, rate_bps, len(self.resources))
        self.resources.append(resource)
        return resource

    def _pluggable(self, host: str) -> Pluggable | None:
        spec = self.network.pluggable
        if spec is None:
            return None
        transform = None
        if spec.transform is not None:
            transform = self._resource(
                f"{host}:transform", "transform", transform_rate_bps(spec.transform)
            )
        return Pluggable(
            host,
            spec,
            lanes_out=self._resource(f"{host}:lanes_out", "lanes", spec.host_lane_bps),
            lanes_in=self._resource(f"{host}:lanes_in", "lanes", spec.host_lane_bps),
            transform=transform,
        )

    def _endpoints(self) -> list[Endpoint | None]:
        """Each worker's host endpoint: ranks_per_host consecutive workers share one (with a
        send and a receive Resource where its rate is finite)."""
        spec = self.network.host
        if spec is None:
            return [None] * self.network.workers
        endpoints = []
        for i in range(self.network.workers // spec.ranks_per_host):
            send = receive = None
            if math.isfinite(spec.rate_bps):
                send = self._resource(f"host{i}:send", "host", spec.rate_bps)
                receive = self._resource(f"host{i}:receive", "host", spec.rate_bps)
            endpoints += [Endpoint(i, spec, send, receive)] * spec.ranks_per_host
        return endpoints

    def _switch(self, name: str) -> Switch:
        spec = self.network.switch
        aggregator = None
        if spec.aggregator and math.isfinite(spec.agg_rate_bps):
            aggregator = self._resource(f"{name}:aggregator", "aggregator", spec.agg_rate_bps)
        ports = {}
        if spec.transform is not None:
            rate = transform_rate_bps(spec.transform)
            for host in self.graph.predecessors(name):
                if self.graph.nodes[host]["kind"] == "host":
                    ports[host] = self._resource(f"{name}:transform:{host}", "transform", rate)
        return Switch(name, spec, aggregator, ports)

    # --- routes -------------------------------------------------------------------------------

    def is_host(self, node: str) -> bool:
        return self.graph.nodes[node]["kind"] == "host"

    def route(self, src: str, dst: str) -> list[str]:
        """Shortest path (fewest hops) as a node list; via the access switches for hosts.

        A host with several switches (a GPU's NVLink switch and its NIC's leaf) leaves by the
        one that gives the fewest hops, ties going to the faster first and last links.
        """
        if src == dst:
            return [src]
        heads = self.accesses[src] if self.is_host(src) else [src]
        tails = self.accesses[dst] if self.is_host(dst) else [dst]
        if len(heads) == 1 and len(tails) == 1:
            middle = self._switch_routes[heads[0]][tails[0]]
        else:
            route = self._routes.get((src, dst))
            if route is None:
                route = self._routes[(src, dst)] = self._best_route(src, dst, heads, tails)
            return route
        head = [src] if self.is_host(src) else []
        tail = [dst] if self.is_host(dst) else []
        return head + middle + tail

    def _best_route(self, src: str, dst: str, heads: list[str], tails: list[str]) -> list[str]:
        best: tuple | None = None
        for a in heads:
            for b in tails:
                middle = self._switch_routes.get(a, {}).get(b)
                if middle is None:
                    continue
                nodes = ([src] if self.is_host(src) else []) + middle
                nodes += [dst] if self.is_host(dst) else []
                ends = [(nodes[0], nodes[1]), (nodes[-2], nodes[-1])]
                rate = min(self.edge_links[e][0].spec.payload_bps for e in ends)
                key = (len(nodes), -rate, nodes)
                if best is None or key < best:
                    best = key
        if best is None:
            raise TransitsimError(f"network {self.network.name!r}: no route from {src} to {dst}")
        return best[2]

    def route_links(self, src: str, dst: str) -> list[Link]:
        """The directed links along the route, the first striped link of each bundle."""
        return [bundle[0] for bundle in self.route_bundles(src, dst)]

    def route_bundles(self, src: str, dst: str) -> list[list[Link]]:
        """Per edge of the route, the links a message is striped over: every parallel link
        but the excluded ones (all of them, if every one is excluded)."""
        nodes = self.route(src, dst)
        bundles = []
        for u, v in zip(nodes, nodes[1:], strict=False):
            parallel = self.edge_links[(u, v)]
            kept = [link for link in parallel if link.name not in self.excluded]
            bundles.append(kept or parallel)
        return bundles

    def aggregation_switch(self) -> str:
        """The switch in-network all-reduce sums at: the one switch, or the spine."""
        if self.network.topology == "switch":
            return "sw"
        if self.network.topology == "leaf_spine":
            return "spine"
        if self.network.topology in FABRIC_TOPOLOGIES:
            return aggregation_node(self.network)
        if len(self.switch_names) == 1:
            return self.switch_names[0]
        raise TransitsimError(
            f"network {self.network.name!r}: switch_sum needs one switch every host reaches "
            f"(topology switch or leaf_spine, or a single datacentre)"
        )

    # --- paths --------------------------------------------------------------------------------

    def path(self, src: int, dst: int, kind: int, weights: Weights) -> Path:
        """The compiled path of a message between node indices `src` and `dst`."""
        key = (src, dst, kind, weights)
        path = self._paths.get(key)
        if path is None:
            if len(self._paths) >= PATH_CACHE_LIMIT:  # many distinct transform ratios: start over
                self._paths.clear()
            path = self._paths[key] = self._compile(
                self.node_names[src], self.node_names[dst], kind, weights
            )
        return path

    def _hop(
        self,
        pre_s: float,
        parts: list[tuple[Resource, float]],
        post_s: float,
        store_s_per_bit: float = 0.0,
        bases: tuple[float, ...] = (),
    ) -> Hop:
        rate, limit = math.inf, -1
        for resource, weight in parts:
            if not math.isfinite(resource.rate_bps):
                continue
            candidate = resource.rate_bps / weight
            if candidate < rate or (candidate == rate and _tie_wins(resource, limit, self)):
                rate, limit = candidate, resource.index
        return Hop(
            pre_s,
            tuple(r.index for r, _ in parts),
            tuple(w for _, w in parts),
            post_s,
            rate,
            limit,
            store_s_per_bit,
            self.network.switch.mtu_bytes * 8.0 if store_s_per_bit else 0.0,
            bases,
        )

    def _compile(self, src: str, dst: str, kind: int, weights: Weights) -> Path:
        saf = self.network.switch.store_and_forward
        hops: list[Hop] = []
        parts: list[tuple[Resource, float]] = []
        pre_s = post_s = transform_latency_s = store = 0.0
        source = self.pluggables[self.graph.nodes[src]["worker"]] if self.is_host(src) else None
        endpoint = self.endpoints[self.graph.nodes[src]["worker"]] if self.is_host(src) else None
        dense = kind in (XFORM_PLUGGABLE, XFORM_SWITCH, LOCAL_XFORM)
        if endpoint is not None:  # the host hands over what its lanes or uplink carry
            pre_s += endpoint.per_message_s
            if endpoint.send is not None:
                parts.append((endpoint.send, weights.dense if dense else 1.0))
        if source is not None:
            parts.append((source.lanes_out, weights.dense if dense else 1.0))
        if kind in (XFORM_PLUGGABLE, LOCAL_XFORM):
            if source is None or source.transform is None:
                raise TransitsimError(f"{src} has no pluggable transform")
            parts.append((source.transform, weights.padded))
            post_s += source.transform_latency_s
            transform_latency_s += source.transform_latency_s
            if kind == LOCAL_XFORM or weights.loopback:
                parts.append((source.lanes_in, 1.0))
                if endpoint is not None and endpoint.receive is not None:
                    parts.append((endpoint.receive, 1.0))  # the band back into the host
        if kind == LOCAL_XFORM:
            return Path((self._hop(pre_s, parts, post_s),), transform_latency_s, 0.0, 0.0)
        bases: list[float] = [w for _, w in parts]
        striped = False
        for position, bundle in enumerate(self.route_bundles(src, dst)):
            link = bundle[0]
            on_uplink_dense = kind == XFORM_SWITCH and position == 0
            base = weights.dense if on_uplink_dense else 1.0
            count = len(bundle)
            striped |= len(self.edge_links[(link.src, link.dst)]) > 1
            for member in bundle:  # an even share of the bytes on each striped link
                parts.append((member.resource, base / count if count > 1 else base))
                bases.append(base)
            # the stripes move in lockstep: the message pays the slowest link's fixed delays
            pre_s += max(member.overhead_s for member in bundle)
            post_s += max(member.propagation_s for member in bundle)
            if self.is_host(link.dst):
                continue
            switch = self.switches[link.dst]
            post_s += switch.forwarding_latency_s
            if on_uplink_dense:
                if src not in switch.port_transforms:
                    raise TransitsimError(f"switch {switch.name} has no port transform")
                parts.append((switch.port_transforms[src], weights.padded))
                bases.append(weights.padded)
                post_s += switch.transform_latency_s
                transform_latency_s += switch.transform_latency_s
            if link.dst == dst and switch.aggregator is not None:
                parts.append((switch.aggregator, 1.0))
                bases.append(1.0)
            if saf and link.dst != dst:  # holds one packet from this link, then sends it on
                # at the payload rate (after efficiency); background traffic slows a flow's
                # share, not the serialisation of each of its packets
                store += max(1.0 / member.spec.payload_bps for member in bundle)
        if self.is_host(dst):
            target = self.pluggables[self.graph.nodes[dst]["worker"]]
            if target is not None:
                parts.append((target.lanes_in, 1.0))
                bases.append(1.0)
            receiver = self.endpoints[self.graph.nodes[dst]["worker"]]
            if receiver is not None and receiver.receive is not None:
                parts.append((receiver.receive, 1.0))
                bases.append(1.0)
        hops.append(self._hop(pre_s, parts, post_s, store, tuple(bases) if striped else ()))
        send_factor = (weights.dense if kind == XFORM_SWITCH else 1.0) if self.is_host(src) else 0.0
        recv_factor = 1.0 if self.is_host(dst) else 0.0
        return Path(tuple(hops), transform_latency_s, send_factor, recv_factor)

    def path_resources(self, path: Path) -> set[int]:
        return {r for hop in path.hops for r in hop.resources}

    def capacities(self) -> np.ndarray:
        return np.array([r.rate_bps for r in self.resources], dtype=float)
