"""Cluster fabrics: multi-GPU nodes on rail-optimised leaf-spine or 3-tier fat-tree networks.

Topologies "rail_optimised" and "fat_tree" build on the same pieces (cables for
topology.build_topology): G GPUs per node joined by the node's NVLink switch, one NIC per GPU.
Rail-optimised: NIC g of every node in a scalable unit goes to that unit's rail-g leaf, leaves
meet at a spine. Fat-tree: NICs to leaf (top-of-rack) switches, leaves to one aggregation switch
per pod, pods to a core, each tier's uplinks `oversubscription` times thinner than what is below.
NCCL-style hierarchical all-reduce runs on them as `hierarchical` with the nodes as its groups:
reduce-scatter over NVLink inside each node, one inter-node ring per rail, all-gather inside.
"""

from transitsim.network.fabrics.fat_tree import fat_tree_cables
from transitsim.network.fabrics.nodes import (
    FABRIC_TOPOLOGIES,
    node_groups,
    nodes,
    nvswitch,
    rail_of,
)
from transitsim.network.fabrics.rail import rail_cables
from transitsim.network.fabrics.validate import validate_fabric

__all__ = [
    "FABRIC_TOPOLOGIES",
    "aggregation_node",
    "fabric_cables",
    "node_groups",
    "rail_of",
    "validate_fabric",
]


def fabric_cables(network):  # -> list[tuple[str, str, LinkSpec, int]]
    """(u, v, spec, parallel count) of every cable of a cluster fabric."""
    if network.topology == "rail_optimised":
        return rail_cables(network)
    return fat_tree_cables(network)


def aggregation_node(network) -> str:
    """Where an in-network all-reduce of every GPU sums: on one node its NVLink switch (NVLink
    SHARP), else the spine, or the core."""
    if nodes(network) == 1 and network.gpus_per_node > 1:
        return nvswitch(0)
    return "spine" if network.topology == "rail_optimised" else "core"
