"""Rail-optimised leaf-spine: NIC g of every node of a scalable unit on that unit's rail-g leaf.

`hosts_per_rack` is the scalable unit in nodes (0: all nodes in one); every rail leaf has one
uplink to the spine, `spine_link` or, absent, as fast as all the NICs below it (non-blocking).
"""

from transitsim.network.fabrics.nodes import aggregate, nodes, nvlink_cables, rail_of
from transitsim.network.spec import LinkSpec, NetworkSpec


def rail_leaf(unit: int, rail: int, units: int) -> str:
    return f"rail{rail}" if units == 1 else f"su{unit}-rail{rail}"


def rail_cables(network: NetworkSpec) -> list[tuple[str, str, LinkSpec, int]]:
    g = network.gpus_per_node
    per_unit = network.hosts_per_rack or nodes(network)
    units = -(-nodes(network) // per_unit)
    cables = nvlink_cables(network)
    for w in range(network.workers):
        unit = (w // g) // per_unit
        cables.append((f"h{w}", rail_leaf(unit, rail_of(network, w), units), network.host_link, 1))
    uplink = network.spine_link or aggregate(network.host_link, per_unit)
    for unit in range(units):
        for rail in range(g):
            cables.append((rail_leaf(unit, rail, units), "spine", uplink, 1))
    return cables
