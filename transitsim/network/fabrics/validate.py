"""One-line errors for cluster fabrics the simulator cannot build, or could not time soon."""

import math

from transitsim.base.errors import TransitsimError
from transitsim.network.limits import MAX_HIERARCHICAL_TRANSFERS
from transitsim.network.spec import NetworkSpec


def validate_fabric(network: NetworkSpec, name: str) -> None:
    g = network.gpus_per_node
    if not isinstance(g, int) or isinstance(g, bool) or g < 1:
        raise TransitsimError(f"{name}: {network.topology} needs gpus_per_node >= 1, got {g!r}")
    if network.workers % g:
        raise TransitsimError(
            f"{name}: workers ({network.workers}) must be a multiple of gpus_per_node ({g})"
        )
    if network.topology == "fat_tree":
        per_leaf = network.hosts_per_rack
        if not isinstance(per_leaf, int) or per_leaf < 1:
            raise TransitsimError(f"{name}: fat_tree needs hosts_per_rack >= 1 (GPUs per leaf)")
        if per_leaf % g:
            raise TransitsimError(
                f"{name}: hosts_per_rack ({per_leaf}) must be a multiple of gpus_per_node ({g}):"
                " a node sits under one leaf"
            )
        over = network.oversubscription
        if not isinstance(over, int | float) or not math.isfinite(over) or over < 1:
            raise TransitsimError(f"{name}: oversubscription must be >= 1, got {over!r}")
        if not isinstance(network.racks_per_pod, int) or network.racks_per_pod < 0:
            raise TransitsimError(f"{name}: racks_per_pod must be an integer >= 0")
    if network.topology == "rail_optimised" and network.hosts_per_rack < 0:
        raise TransitsimError(f"{name}: hosts_per_rack (nodes per scalable unit) must be >= 0")
    _check_hierarchical_size(network, name)


def _check_hierarchical_size(network: NetworkSpec, name: str) -> None:
    """Multi-GPU nodes replay A's all-reduce as NCCL does, hierarchically (one ring per rail
    across the nodes, in processor sharing): refuse a fabric whose one exchange would take
    minutes (network/limits.py), as a flat ring of the same size would not."""
    g = network.gpus_per_node
    hierarchical = g > 1 or network.collective == "hierarchical"
    nodes = network.workers // g
    transfers = 2 * network.workers * (nodes - 1)
    if hierarchical and transfers > MAX_HIERARCHICAL_TRANSFERS:
        raise TransitsimError(
            f"{name}: {network.workers:,} GPUs in {nodes:,} nodes of {g} make the hierarchical "
            f"all-reduce {transfers:,} ring transfers an exchange (at most "
            f"{MAX_HIERARCHICAL_TRANSFERS:,}: seconds of simulation an exchange, more with "
            "overlap): use fewer workers or more gpus_per_node"
        )
