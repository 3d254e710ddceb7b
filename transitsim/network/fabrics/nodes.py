"""Multi-GPU nodes: which GPU of which node a worker is, its NVLink cable, the node groups.

Workers are numbered node by node; inside a node the GPU (and so the rail its NIC is on) runs
forwards on even nodes and backwards on odd ones. A flat ring over workers 0..N-1 then crosses
from one node to the next on a single rail (GPU G-1 to G-1, then 0 to 0, ...), as the rings NCCL
builds on rail-optimised fabrics do, and never needs the spine.
"""

import dataclasses

from transitsim.network.spec import LinkSpec, NetworkSpec

FABRIC_TOPOLOGIES = ("rail_optimised", "fat_tree")


def nodes(network: NetworkSpec) -> int:
    return network.workers // network.gpus_per_node


def rail_of(network: NetworkSpec, worker: int) -> int:
    """The GPU index inside its node (and its NIC's rail) of a worker (snake order)."""
    g = network.gpus_per_node
    node, local = divmod(worker, g)
    return local if node % 2 == 0 else g - 1 - local


def node_groups(network: NetworkSpec) -> list[list[int]]:
    """Each node's workers in rail order, so that column g of the groups is rail g."""
    g = network.gpus_per_node
    groups = []
    for node in range(nodes(network)):
        members = list(range(node * g, (node + 1) * g))
        groups.append(members if node % 2 == 0 else members[::-1])
    return groups


def nvswitch(node: int) -> str:
    return f"nvs{node}"


def nvlink_cables(network: NetworkSpec) -> list[tuple[str, str, LinkSpec, int]]:
    """Every GPU to its node's NVLink switch (absent when gpus_per_node is 1)."""
    if network.gpus_per_node <= 1:
        return []
    link = network.nvlink or network.host_link
    return [
        (f"h{w}", nvswitch(w // network.gpus_per_node), link, 1) for w in range(network.workers)
    ]


def aggregate(link: LinkSpec, ports: int, oversubscription: float = 1.0) -> LinkSpec:
    """One uplink carrying `ports` links' worth of rate, thinned by the oversubscription."""
    return dataclasses.replace(link, rate_bps=link.rate_bps * ports / oversubscription)


def tree_nodes(network: NetworkSpec) -> tuple[tuple[int, ...], ...]:
    """Each node's workers in rail order (its head, on rail 0, first) where workers share
    multi-GPU nodes, so the trees take NCCL's shape there (schedules/trees.py `node_forest`);
    () elsewhere (a tree over all ranks)."""
    if network.topology not in FABRIC_TOPOLOGIES or network.gpus_per_node <= 1:
        return ()
    return tuple(tuple(group) for group in node_groups(network))
