"""NetworkSpec -> a networkx graph of hosts, switches and directed links.

Node names: hosts `h0..h{N-1}`; the one switch `sw` (topology "switch"); leaf switches
`leaf0..` under one `spine` (leaf_spine); one switch per datacentre `dc0..` (datacentres).
Every edge is one direction of a cable, named `u->v`; parallel WAN links between two
datacentres are one edge holding several links named `dc0->dc1#0`, `dc0->dc1#1`, ...
`NetworkSpec.link_overrides` keys are such names: `u->v` (one direction, every parallel link),
`u->v#k` (one parallel link) or `u<->v` (both directions).
"""

import dataclasses
import math

import networkx as nx

from transitsim.base.errors import TransitsimError
from transitsim.network.background import Background
from transitsim.network.fabrics import (
    FABRIC_TOPOLOGIES,
    fabric_cables,
    node_groups,
    validate_fabric,
)
from transitsim.network.limits import (
    MAX_DATACENTRES,
    MAX_GPUS_PER_NODE,
    MAX_WAN_LINKS,
    MAX_WORKERS,
)
from transitsim.network.nccl import check_nccl
from transitsim.network.spec import COLLECTIVE_ALGOS, TOPOLOGIES, HostSpec, LinkSpec, NetworkSpec


def host_name(worker: int) -> str:
    return f"h{worker}"


def group_sizes(workers: int, groups: int) -> list[int]:
    """Contiguous, as even as possible: the first `workers % groups` groups get one more host."""
    return [workers // groups + (1 if g < workers % groups else 0) for g in range(groups)]


def worker_groups(network: NetworkSpec) -> list[list[int]]:
    """The hosts of each datacentre (datacentres), rack (leaf_spine), node (cluster fabrics, in
    rail order) or all (switch)."""
    if network.topology in FABRIC_TOPOLOGIES:
        return node_groups(network)
    if network.topology == "datacentres":
        count = network.datacentres
    elif network.topology == "leaf_spine":
        count = math.ceil(network.workers / network.hosts_per_rack)
    else:
        count = 1
    if network.topology == "leaf_spine":
        sizes = [
            min(network.hosts_per_rack, network.workers - r * network.hosts_per_rack)
            for r in range(count)
        ]
    else:
        sizes = group_sizes(network.workers, count)
    groups, first = [], 0
    for size in sizes:
        groups.append(list(range(first, first + size)))
        first += size
    return groups


def _check_positive(value: object, what: str, allow_inf: bool = False) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise TransitsimError(f"{what} must be a positive number, got {value!r}")
    if not allow_inf and not math.isfinite(value):
        raise TransitsimError(f"{what} must be finite, got {value!r}")


def _check_non_negative(value: object, what: str) -> None:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise TransitsimError(f"{what} must be a finite number >= 0, got {value!r}")


def _check_link(link: LinkSpec, what: str) -> None:
    if not isinstance(link, LinkSpec):
        raise TransitsimError(f"{what} must be a LinkSpec, got {type(link).__name__}")
    _check_positive(link.rate_bps, f"{what}.rate_bps")
    _check_non_negative(link.latency_s, f"{what}.latency_s")
    _check_non_negative(link.length_m, f"{what}.length_m")
    _check_non_negative(link.overhead_s, f"{what}.overhead_s")
    eff = link.efficiency
    if not isinstance(eff, int | float) or isinstance(eff, bool) or not 0 < eff <= 1:
        raise TransitsimError(f"{what}.efficiency must be in (0, 1], got {eff!r}")
    if link.background is not None and not isinstance(link.background, Background):
        raise TransitsimError(
            f"{what}.background must be a Background (network/background.py), "
            f"got {type(link.background).__name__}"
        )


def _check_count(value: object, what: str, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise TransitsimError(f"{what} must be an integer >= {minimum}, got {value!r}")


# Keys a topology has no use for, with their defaults (a value other than the default would be
# ignored silently, so it is refused), and why.
_FABRIC_IS_ONE_SITE = "a cluster fabric is one datacentre"
IGNORED_KEYS: dict[str, dict[str, tuple[object, str]]] = {
    "fat_tree": {
        "spine_link": (None, "its uplinks are host_link x hosts_per_rack / oversubscription"),
        "datacentres": (1, _FABRIC_IS_ONE_SITE),
        "wan_link": (None, _FABRIC_IS_ONE_SITE),
        "wan_links": (1, _FABRIC_IS_ONE_SITE),
    },
    "rail_optimised": {
        "oversubscription": (1.0, "only fat_tree thins its tiers; set spine_link's rate"),
        "racks_per_pod": (0, "only fat_tree has pods; hosts_per_rack is the scalable unit"),
        "datacentres": (1, _FABRIC_IS_ONE_SITE),
        "wan_link": (None, _FABRIC_IS_ONE_SITE),
        "wan_links": (1, _FABRIC_IS_ONE_SITE),
    },
}
for _topology in ("switch", "leaf_spine", "datacentres"):
    IGNORED_KEYS[_topology] = {
        "oversubscription": (1.0, "only fat_tree has tiers to thin"),
        "racks_per_pod": (0, "only fat_tree has pods"),
    }


def ignored_keys(network: NetworkSpec) -> list[tuple[str, str]]:
    """(key, why) for every key set away from its default that the network's topology ignores."""
    ignored = IGNORED_KEYS.get(network.topology, {})
    return [
        (key, why) for key, (default, why) in ignored.items() if getattr(network, key) != default
    ]


def _check_ignored(network: NetworkSpec, name: str) -> None:
    for key, why in ignored_keys(network)[:1]:
        raise TransitsimError(
            f"{name}: {key} has no effect on topology {network.topology} ({why}): remove it"
        )


def _check_sizes(network: NetworkSpec, name: str) -> None:
    """The scenario's bounds (network/limits.py), for NetworkSpecs built by hand too: 10**7
    workers, or a rail fabric of 10**5, ran out of memory building the graph."""
    for key, limit in (
        ("workers", MAX_WORKERS),
        ("hosts_per_rack", MAX_WORKERS),
        ("datacentres", MAX_DATACENTRES),
        ("wan_links", MAX_WAN_LINKS),
        ("gpus_per_node", MAX_GPUS_PER_NODE),
        ("racks_per_pod", MAX_WORKERS),
    ):
        value = getattr(network, key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TransitsimError(f"{name}: {key} must be an integer, got {value!r}")
        if value > limit:
            raise TransitsimError(f"{name}: {key} must be at most {limit:,}, got {value:,}")


def check_size_and_keys(network: NetworkSpec) -> None:
    """What scenario validation checks of a built NetworkSpec as well: the size bounds, keys its
    topology ignores, a host endpoint's ranks, and a cluster fabric it could not time soon."""
    name = f"network {network.name!r}"
    _check_sizes(network, name)
    _check_ignored(network, name)
    if network.host is not None:
        _check_host(network, name)
    if network.nccl is not None:
        check_nccl(network.nccl, name)
    if network.topology in FABRIC_TOPOLOGIES:
        validate_fabric(network, name)


def validate_network(network: NetworkSpec) -> None:
    """Raise TransitsimError (one line, naming the field) for anything the simulator cannot run."""
    if not isinstance(network, NetworkSpec):
        raise TransitsimError(f"expected a NetworkSpec, got {type(network).__name__}")
    name = f"network {network.name!r}"
    if network.topology not in TOPOLOGIES:
        raise TransitsimError(
            f"{name}: unknown topology {network.topology!r} "
            f"(expected one of {', '.join(TOPOLOGIES)})"
        )
    _check_count(network.workers, f"{name}: workers", 1)
    check_size_and_keys(network)
    _check_link(network.host_link, f"{name}: host_link")
    if network.pluggable is not None:
        _check_positive(network.pluggable.host_lane_bps, f"{name}: pluggable.host_lane_bps")
        _check_positive(network.pluggable.line_bps, f"{name}: pluggable.line_bps")
    switch = network.switch
    _check_non_negative(switch.forwarding_latency_s, f"{name}: switch.forwarding_latency_s")
    _check_count(switch.agg_slots, f"{name}: switch.agg_slots", 0)
    _check_count(switch.agg_slot_bytes, f"{name}: switch.agg_slot_bytes", 0)
    _check_positive(switch.agg_rate_bps, f"{name}: switch.agg_rate_bps", allow_inf=True)
    for where, transform in (
        ("pluggable.transform", network.pluggable.transform if network.pluggable else None),
        ("switch.transform", switch.transform),
    ):
        if transform is None:
            continue
        _check_count(transform.size, f"{name}: {where}.size", 1)
        if transform.size & (transform.size - 1):
            raise TransitsimError(
                f"{name}: {where}.size must be a power of 2, got {transform.size}"
            )
        _check_count(transform.planes, f"{name}: {where}.planes", 1)
        _check_count(transform.input_bytes, f"{name}: {where}.input_bytes", 1)
        _check_positive(transform.passes_per_s, f"{name}: {where}.passes_per_s")
        _check_non_negative(transform.latency_s, f"{name}: {where}.latency_s")
        if not 0 < transform.keep <= 1:
            raise TransitsimError(f"{name}: {where}.keep must be in (0, 1], got {transform.keep}")
    if network.topology in FABRIC_TOPOLOGIES:
        validate_fabric(network, name)
        if network.nvlink is not None:
            _check_link(network.nvlink, f"{name}: nvlink")
        if network.spine_link is not None:
            _check_link(network.spine_link, f"{name}: spine_link")
    if network.topology == "leaf_spine":
        _check_count(network.hosts_per_rack, f"{name}: leaf_spine hosts_per_rack", 1)
        if network.spine_link is not None:
            _check_link(network.spine_link, f"{name}: spine_link")
    if network.topology == "datacentres":
        _check_count(network.datacentres, f"{name}: datacentres", 1)
        if network.datacentres > network.workers:
            raise TransitsimError(
                f"{name}: {network.datacentres} datacentres for only {network.workers} workers"
            )
        if network.datacentres > 1:
            if network.wan_link is None:
                raise TransitsimError(f"{name}: datacentres > 1 needs a wan_link")
            _check_link(network.wan_link, f"{name}: wan_link")
            _check_count(network.wan_links, f"{name}: wan_links", 1)
    if network.collective is not None and network.collective not in COLLECTIVE_ALGOS:
        raise TransitsimError(
            f"{name}: unknown collective {network.collective!r} "
            f"(expected one of {', '.join(COLLECTIVE_ALGOS)})"
        )
    for key, spec in network.link_overrides.items():
        _check_link(spec, f"{name}: link_overrides[{key!r}]")


def _check_host(network: NetworkSpec, name: str) -> None:
    """A host endpoint: a cost >= 0, a positive rate (inf: none), whole hosts of ranks. A host
    may hold ranks of several datacentres or racks (the testbed's one machine holds both of
    its two sites' namespaces): placement is by rank, whatever the topology."""
    host = network.host
    if not isinstance(host, HostSpec):
        raise TransitsimError(f"{name}: host must be a HostSpec, got {type(host).__name__}")
    _check_non_negative(host.per_message_s, f"{name}: host.per_message_s")
    _check_positive(host.rate_bps, f"{name}: host.rate_bps", allow_inf=True)
    _check_count(host.ranks_per_host, f"{name}: host.ranks_per_host", 1)
    per = host.ranks_per_host
    if network.workers % per:
        raise TransitsimError(
            f"{name}: host.ranks_per_host ({per}) must divide workers ({network.workers})"
        )


def _cables(network: NetworkSpec) -> list[tuple[str, str, LinkSpec, int]]:
    """(u, v, spec, parallel count) for every cable, before overrides."""
    cables = []
    hosts = [host_name(w) for w in range(network.workers)]
    if network.topology in FABRIC_TOPOLOGIES:
        return fabric_cables(network)
    if network.topology == "switch":
        cables += [(h, "sw", network.host_link, 1) for h in hosts]
    elif network.topology == "leaf_spine":
        spine_link = network.spine_link or network.host_link
        for rack, members in enumerate(worker_groups(network)):
            cables += [(host_name(w), f"leaf{rack}", network.host_link, 1) for w in members]
            cables.append((f"leaf{rack}", "spine", spine_link, 1))
    else:
        groups = worker_groups(network)
        for dc, members in enumerate(groups):
            cables += [(host_name(w), f"dc{dc}", network.host_link, 1) for w in members]
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                assert network.wan_link is not None
                cables.append((f"dc{a}", f"dc{b}", network.wan_link, network.wan_links))
    return cables


def build_topology(network: NetworkSpec) -> nx.DiGraph:
    """The network as a directed graph: one edge per cable direction, overrides applied.

    Node attribute `kind` is "host" (with `worker`) or "switch"; edge attribute `links` is a
    list of (name, LinkSpec), one per parallel link. With a pluggable, a host cable's rate is
    capped at the pluggable's line rate.
    """
    validate_network(network)
    graph = nx.DiGraph(name=network.name)
    for w in range(network.workers):
        graph.add_node(host_name(w), kind="host", worker=w)
    overrides = dict(network.link_overrides)
    for u, v, spec, parallel in _cables(network):
        for a, b in ((u, v), (v, u)):
            for node in (a, b):
                if node not in graph:
                    graph.add_node(node, kind="switch")
            links = []
            for k in range(parallel):
                name = f"{a}->{b}" if parallel == 1 else f"{a}->{b}#{k}"
                chosen = spec
                for key in (f"{a}<->{b}", f"{b}<->{a}", f"{a}->{b}", name):
                    if key in overrides:
                        chosen = overrides[key]
                links.append((name, chosen))
            graph.add_edge(a, b, links=links)
    if network.pluggable is not None:
        line_bps = network.pluggable.line_bps
        for a, b, data in graph.edges(data=True):
            if graph.nodes[a]["kind"] == "host" or graph.nodes[b]["kind"] == "host":
                data["links"] = [
                    (name, _with_rate(spec, min(spec.rate_bps, line_bps)))
                    for name, spec in data["links"]
                ]
    _check_override_names(graph, overrides, network.name)
    return graph


def _with_rate(spec: LinkSpec, rate_bps: float) -> LinkSpec:
    return dataclasses.replace(spec, rate_bps=rate_bps)


def _check_override_names(graph: nx.DiGraph, overrides: dict, network_name: str) -> None:
    known = set()
    for a, b, data in graph.edges(data=True):
        known |= {f"{a}->{b}", f"{a}<->{b}"} | {name for name, _ in data["links"]}
    unknown = sorted(set(overrides) - known)
    if unknown:
        sample = ", ".join(sorted(known)[:4])
        raise TransitsimError(
            f"network {network_name!r}: link_overrides names unknown link {unknown[0]!r} "
            f"(links are named like {sample}, ...)"
        )
