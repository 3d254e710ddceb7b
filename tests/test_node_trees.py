"""Trees on multi-GPU nodes take NCCL's shape (a chain through each node's GPUs, a tree over the
nodes' heads) and run every connection as its own queue, as NCCL does; the fast paths stay equal
to the DES on them (schedules/trees.py `node_forest`, fast/trees/split.py `split_links`)."""

import dataclasses

import numpy as np
import pytest

from transitsim.network import (
    Exchange,
    LinkFault,
    LinkSpec,
    NetworkSpec,
    simulate_exchange,
)
from transitsim.network.fabrics.nodes import tree_nodes
from transitsim.network.schedules.trees import DOWN, UP, tree_forest, tree_layout
from transitsim.network.spec import HostSpec, NcclSpec

NVLINK = LinkSpec(rate_bps=2.4e12, latency_s=1e-6)
NIC = LinkSpec(rate_bps=200e9, latency_s=2e-6)


def rail(nodes: int, gpus: int, **kw) -> NetworkSpec:
    return NetworkSpec(
        "rail", "rail_optimised", nodes * gpus, NIC, gpus_per_node=gpus, nvlink=NVLINK, **kw
    )


def test_a_node_is_a_chain_from_its_head_and_the_heads_form_the_tree():
    network = rail(nodes=2, gpus=4)
    nodes = tree_nodes(network)
    assert nodes == ((0, 1, 2, 3), (7, 6, 5, 4))  # rail order: node 1 runs backwards (snake)
    first, second = tree_forest("double_binary_tree", 8, nodes)
    # the first tree: node 0's head (rank 0) is the root, node 1's head (rank 7) its child
    assert first.tolist() == [-1, 0, 1, 2, 5, 6, 7, 0]
    # the second swaps the nodes' roles and keeps each node's chain
    assert second.tolist() == [7, 0, 1, 2, 5, 6, 7, -1]
    assert tree_nodes(NetworkSpec("sw", "switch", 8, NIC)) == ()  # one rank a host: over ranks


def test_a_rank_sends_to_all_its_children_at_once_on_nodes_and_in_turn_over_ranks():
    network = rail(nodes=2, gpus=4)
    nodes = tree_nodes(network)
    for shape, concurrent in ((nodes, True), ((), False)):
        schedule, halves, _ = tree_layout("tree", 8, 1 << 20, False, 1, shape)
        src, dst, after = schedule.src, schedule.dst, schedule.after
        # a send that waits on the same rank's send to another rank: over ranks, one chain a
        # half at every rank; on nodes each connection waits only on itself
        sends = [m for m in range(len(src)) if halves[m] >= 0 and after[m] >= 0]
        across = [m for m in sends if halves[after[m]] >= 0 and dst[after[m]] != dst[m]]
        assert (not across) == concurrent, shape
    schedule, halves, lanes = tree_layout("tree", 8, 1 << 20, False, 1, nodes)
    sends = halves >= 0
    pairs = set(zip(halves[sends], schedule.src[sends], schedule.dst[sends], strict=True))
    assert len(set(lanes[sends].tolist())) == len(pairs)  # a lane per connection
    assert {int(h) for h in halves[sends]} == {UP, DOWN}


def _case(seed: int):
    rng = np.random.default_rng(seed)
    nodes, gpus = int(rng.integers(1, 5)), int(rng.integers(2, 5))
    topology = str(rng.choice(["rail_optimised", "fat_tree"]))
    extra = {}
    if topology == "fat_tree":
        extra = {"hosts_per_rack": gpus * int(rng.integers(1, 3)), "racks_per_pod": 1}
    if rng.random() < 0.5:
        extra["host"] = HostSpec(rate_bps=float(rng.choice([1.2e12, 2.0e12])))
    network = NetworkSpec(
        "n",
        topology,
        nodes * gpus,
        dataclasses.replace(NIC, rate_bps=float(rng.choice([100e9, 400e9]))),
        gpus_per_node=gpus,
        nvlink=dataclasses.replace(NVLINK, latency_s=float(rng.choice([0.0, 1e-6]))),
        **extra,
    )
    if rng.random() < 0.4:
        network = dataclasses.replace(network, nccl=NcclSpec(channels=int(rng.choice([2, 8]))))
    algo = str(rng.choice(["tree", "double_binary_tree"]))
    exchange = Exchange(algo, int(rng.choice([777, 200_000, 3_000_001])))
    start = rng.exponential(1e-5, network.workers) if rng.random() < 0.6 else None
    return network, exchange, start


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_paths_equal_the_des_on_nodes(seed: int):
    network, exchange, start = _case(seed)
    fast = simulate_exchange(network, exchange, start_s=start)
    des = simulate_exchange(network, exchange, start_s=start, method="des")
    assert fast.method == "fast", seed
    np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.bytes_sent, des.bytes_sent, rtol=1e-12)


def test_a_fault_on_nodes_goes_to_the_des_and_says_why():
    network = rail(nodes=2, gpus=4)
    fault = LinkFault("h0->rail0", 1e-6, 5e-6)
    result = simulate_exchange(network, Exchange("tree", 1 << 20), faults=[fault])
    assert result.method == "des"


def test_two_nodes_send_across_through_their_heads_only():
    network = rail(nodes=2, gpus=4)
    result = simulate_exchange(network, Exchange("double_binary_tree", 8 << 20), method="des")
    crossing = result.link_stats.set_index("link")["bytes"]
    rails = [name for name in crossing.index if "rail" in name and crossing[name] > 0]
    assert sorted(rails) == ["h0->rail0", "h7->rail0", "rail0->h0", "rail0->h7"]
