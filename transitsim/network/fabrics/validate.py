"""One-line errors for cluster fabrics the simulator cannot build."""

import math

from transitsim.base.errors import TransitsimError
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
        if network.racks_per_pod < 0:
            raise TransitsimError(f"{name}: racks_per_pod must be >= 0")
    if network.topology == "rail_optimised" and network.hosts_per_rack < 0:
        raise TransitsimError(f"{name}: hosts_per_rack (nodes per scalable unit) must be >= 0")
