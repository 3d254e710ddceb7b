"""A 3-tier fat-tree: hosts on leaves, leaves on one aggregation switch per pod, pods on a core.

`hosts_per_rack` GPUs (their NICs) per leaf, `racks_per_pod` leaves per pod. A leaf's uplink
carries hosts_per_rack NICs' rate / oversubscription, a pod's uplink racks_per_pod leaf
uplinks' / oversubscription (1: non-blocking). With gpus_per_node > 1 a node's GPUs also share
an NVLink switch, and a node never straddles two leaves.
"""

from transitsim.network.fabrics.nodes import aggregate, nvlink_cables
from transitsim.network.spec import LinkSpec, NetworkSpec


def fat_tree_cables(network: NetworkSpec) -> list[tuple[str, str, LinkSpec, int]]:
    per_leaf = network.hosts_per_rack
    leaves = -(-network.workers // per_leaf)
    per_pod = network.racks_per_pod or leaves
    pods = -(-leaves // per_pod)
    over = network.oversubscription
    cables = nvlink_cables(network)
    cables += [
        (f"h{w}", f"leaf{w // per_leaf}", network.host_link, 1) for w in range(network.workers)
    ]
    leaf_up = aggregate(network.host_link, per_leaf, over)
    cables += [(f"leaf{leaf}", f"agg{leaf // per_pod}", leaf_up, 1) for leaf in range(leaves)]
    pod_up = aggregate(leaf_up, per_pod, over)
    cables += [(f"agg{pod}", "core", pod_up, 1) for pod in range(pods)]
    return cables
