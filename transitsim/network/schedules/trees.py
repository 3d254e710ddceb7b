"""Pipelined tree all-reduces as schedules: one binary tree, or NCCL's double binary tree.

The payload is cut into chunks that flow up the tree (each node adds its children's chunk to its
own and sends the sum to its parent) and, once summed at the root, back down, chunk after
chunk, so every level works on a different chunk at once (NCCL's tree pipeline). The trees are
NCCL's: `btree` numbers ranks in order, so every subtree is a contiguous range of ranks (few
edges cross a datacentre boundary); the double binary tree adds a second tree, mirrored (even
N) or shifted by one rank (odd N), in which the first tree's leaves are the interior nodes;
each tree carries half of the payload, so each rank sends and receives about 2x the payload,
like the ring, with O(log N) steps of latency instead of O(N).

NCCL runs the two halves at once (runTreeSplit: the reduce and the broadcast in separate
threads). Over one-rank hosts each half is serial at every rank: a chain of sends and a chain
of receives per half, so its send up can overlap its send down (they share its links, fluidly,
in the DES). In a chain, transfers are one at a time in schedule order: the sends through
`after`, the receives through a JOIN at the receiver that waits for its previous incoming
message of that half from another sender to have been sent. On multi-GPU nodes (`nodes`, NCCL's
shape: `node_forest`) every connection (a tree's edge, one way, in one half) is its own queue,
as in NCCL: a rank receives from all its children at once and sends a chunk to all its children
at once, and the double binary tree's two trees (two channels in NCCL) do not wait on each
other; a connection's sends go in chunk order (`after`). Over ranks that would put every rank
with two children on its link twice every step, which the straggler replays' lone-transfer
passes could not time (docs/engine.md "Trees on multi-GPU nodes"). `lanes` tells the fast paths
which transfers can be under way together: those of different halves over ranks, of different
connections on nodes. Messages are ordered by pipeline slot (chunk + spacing x level), so
dependencies and all chains point to earlier messages: the ids are a topological order
(`fast/trees/fixed.py` relies on it).
"""

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network.fabric import JOIN, LOCAL_XFORM, PLAIN
from transitsim.network.limits import MAX_TREE_TRANSFERS, MAX_WORKERS
from transitsim.network.schedules.dag import Schedule

# A tree's payload is cut into chunks of TREE_CHUNK_BYTES, the last one what is left, as NCCL
# cuts a channel's share into fixed chunks of its protocol (src/enqueue.cc, calcCollChunking,
# read at NVIDIA/nccl 5067397: for the tree, one step of the protocol's buffer a chunk: LL
# 32 KiB of data, LL128 562.5 KiB, Simple 512 KiB; 64 KiB lies between). Past
# TREE_MAX_CHUNKS chunks (which bounds the schedule's size) the share is cut into that many
# equal chunks, which grow with it, so a larger payload never gets smaller or fewer chunks.
TREE_CHUNK_BYTES = 64 * 1024
TREE_MAX_CHUNKS = 64
# A receiver's buffer per connection holds NCCL_STEPS chunks (src/include/device.h: 8 slots
# a channel's connection; a tree's chunk is one step): a sender runs at most that far ahead of a
# rank that has not started, whose receives beyond its buffer wait for it.
RECV_SLOTS = 8
TREE_ALGOS = ("tree", "double_binary_tree")
# each multi-GPU node's ranks, its head (the rank on rail 0) first; () where ranks are not on
# such nodes (network/fabrics/nodes.py `tree_nodes`)
Nodes = tuple[tuple[int, ...], ...]


def btree_parents(workers: int) -> np.ndarray:
    """NCCL's in-order binary tree (ncclGetBtree): parent of each rank, -1 for the root (0).

    A rank's parent flips its lowest set bit and sets the next one up (or only clears it
    when that would leave the ranks), so rank 0 has one child, the highest power of two below N.
    """
    parents = np.full(workers, -1, dtype=np.int64)
    for rank in range(1, workers):
        bit = rank & -rank
        up = (rank ^ bit) | (bit << 1)
        parents[rank] = up if up < workers else rank ^ bit
    return parents


def dbt_parents(workers: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's double binary tree (ncclGetDtree): the btree, and its mirror (even N) or its
    shift by one rank (odd N)."""
    first = btree_parents(workers)
    ranks = np.arange(workers)
    if workers % 2 == 0:
        mirror = workers - 1 - ranks
        up = first[mirror]
        second = np.where(up < 0, -1, workers - 1 - up)
    else:
        shifted = (ranks - 1) % workers
        up = first[shifted]
        second = np.where(up < 0, -1, (up + 1) % workers)
    return first, second


def tree_depths(parents: np.ndarray) -> np.ndarray:
    """Depth of every rank (the root's is 0)."""
    depth = np.full(len(parents), -1, dtype=np.int64)
    for rank in range(len(parents)):
        chain = []
        node = rank
        while depth[node] < 0 and parents[node] >= 0:
            chain.append(node)
            node = int(parents[node])
        if depth[node] < 0:
            depth[node] = 0
        for d, member in enumerate(reversed(chain), start=int(depth[node]) + 1):
            depth[member] = d
    return depth


def edge_colours(pairs: list[tuple[int, int]], nodes: int) -> list[int]:
    """A proper colouring of directed transfers (src, dst): no node sends two of one colour or
    receives two of one colour, with as many colours as the busiest node has transfers (Koenig:
    the senders and receivers form a bipartite multigraph; recolour along alternating paths)."""
    at_src: list[dict[int, int]] = [{} for _ in range(nodes)]  # colour -> transfer
    at_dst: list[dict[int, int]] = [{} for _ in range(nodes)]
    colour = [-1] * len(pairs)
    for e, (s, d) in enumerate(pairs):
        a = next(k for k in range(len(pairs) + 1) if k not in at_src[s])
        b = next(k for k in range(len(pairs) + 1) if k not in at_dst[d])
        if a != b and a in at_dst[d]:
            # swap a and b along the path from d that alternates a (into d) and b (out of src)
            path, node, want, into = [], d, a, True
            while True:
                side = at_dst[node] if into else at_src[node]
                f = side.get(want)
                if f is None:
                    break
                path.append(f)
                node = pairs[f][0] if into else pairs[f][1]
                want, into = (b if want == a else a), not into
            for f in path:
                fs, fd = pairs[f]
                del at_src[fs][colour[f]], at_dst[fd][colour[f]]
            for f in path:
                fs, fd = pairs[f]
                colour[f] = b if colour[f] == a else a
                at_src[fs][colour[f]] = at_dst[fd][colour[f]] = f
        colour[e] = a
        at_src[s][a] = at_dst[d][a] = e
    return colour


def tree_chunk_sizes(tree_bytes: float) -> list[float]:
    """The chunks a tree carrying `tree_bytes` is pipelined in: full chunks of TREE_CHUNK_BYTES,
    the last what is left (one empty chunk for no payload); past TREE_MAX_CHUNKS full chunks,
    TREE_MAX_CHUNKS equal chunks. Every chunk grows with the payload and their count never
    falls, so one byte more never gives a faster pipeline (doubling the chunk there did: fewer,
    larger chunks filled the pipeline sooner, docs/engine.md "Monotone physics")."""
    if tree_bytes > TREE_MAX_CHUNKS * TREE_CHUNK_BYTES:
        return [tree_bytes / TREE_MAX_CHUNKS] * TREE_MAX_CHUNKS
    full = int(tree_bytes // TREE_CHUNK_BYTES)
    sizes = [float(TREE_CHUNK_BYTES)] * full
    rest = tree_bytes - full * TREE_CHUNK_BYTES
    if rest > 0 or not sizes:
        sizes.append(float(rest))
    return sizes


def tree_chunks(tree_bytes: float) -> int:
    """Chunks a tree carrying `tree_bytes` is pipelined in."""
    return len(tree_chunk_sizes(tree_bytes))


def tree_forest(algo: str, workers: int, nodes: Nodes = ()) -> list[np.ndarray]:
    """The parent arrays of the trees `algo` runs: over the ranks, or, where ranks share
    multi-GPU nodes (`nodes`: each node's ranks, its head first), NCCL's shape for them."""
    if nodes:
        return node_forest(algo, workers, nodes)
    if algo == "tree":
        return [btree_parents(workers)]
    return list(dbt_parents(workers))


def node_forest(algo: str, workers: int, nodes: Nodes) -> list[np.ndarray]:
    """NCCL's trees on multi-GPU nodes (src/graph/trees.cc, connectTrees in src/graph/
    connect.cc): inside a node a chain through its GPUs, the head first; across nodes a binary
    tree (or the double binary tree's two) over the nodes' heads, so a tree crosses the network
    only between heads, through the head's NIC. The double binary tree's second tree swaps the
    nodes' roles and keeps each node's chain."""
    over_nodes = [btree_parents(len(nodes))] if algo == "tree" else list(dbt_parents(len(nodes)))
    forest = []
    for up in over_nodes:
        parents = np.full(workers, -1, dtype=np.int64)
        for node, chain in enumerate(nodes):
            parent_node = int(up[node])
            parents[chain[0]] = -1 if parent_node < 0 else nodes[parent_node][0]
            for above, below in zip(chain, chain[1:], strict=False):
                parents[below] = above
        forest.append(parents)
    return forest


UP, DOWN = 0, 1  # the two halves: reduce (towards the root) and broadcast (away from it)


def _planned(forest: list[np.ndarray], workers: int, chunks: int, spacing: int) -> list[tuple]:
    """(slot, phase, colour, tree, chunk, src, dst) of every transfer, in schedule order.

    A transfer of chunk c at a rank `h` levels above its tree's deepest is in slot
    c + spacing x h going up (c + spacing x (top + depth) coming down), so it needs only
    transfers of earlier slots; within a phase no rank sends or receives two transfers of one
    colour in a slot (each phase's transfers are coloured on their own)."""
    edges = [(t, v, int(p)) for t, parents in enumerate(forest) for v, p in enumerate(parents)]
    edges = [e for e in edges if e[2] >= 0]
    if 2 * len(edges) * chunks > MAX_TREE_TRANSFERS:
        raise TransitsimError(
            f"the trees of {workers:,} workers are {2 * len(edges) * chunks:,} transfers, more "
            f"than the {MAX_TREE_TRANSFERS:,} a tree exchange is planned for; a ring "
            "(ring_allreduce, ring_allgather) on its fast path takes up to "
            f"{MAX_WORKERS:,} workers"
        )
    depths = [tree_depths(parents) for parents in forest]
    tops = [int(d.max()) if workers else 0 for d in depths]
    planned = []
    for phase in (UP, DOWN):
        transfers = [(t, v, p) if phase == UP else (t, p, v) for t, v, p in edges]
        colour = edge_colours([(s, d) for _, s, d in transfers], workers)
        for (t, s, d), k in zip(transfers, colour, strict=True):
            depth = int(depths[t][s])
            offset = spacing * (tops[t] - depth if phase == UP else tops[t] + depth)
            planned.extend((c + offset, phase, k, t, c, s, d) for c in range(chunks))
    planned.sort()
    return planned


def tree_layout(
    algo: str,
    workers: int,
    payload_bytes: int,
    pre_transform: bool,
    spacing: int = 1,
    nodes: Nodes = (),
) -> tuple[Schedule, np.ndarray, np.ndarray]:
    """The tree all-reduce's Schedule, each message's half (UP, DOWN; -1: a pre-stage transform
    or a JOIN) and its lane (-1 for those), which the fast paths read to know which transfers can
    be under way together: those of different lanes (the module doc)."""
    forest = tree_forest(algo, workers, nodes)
    share = payload_bytes / len(forest)
    sizes = tree_chunk_sizes(share)
    chunks = len(sizes)
    planned = _planned(forest, workers, chunks, spacing)
    children = [[[] for _ in range(workers)] for _ in forest]
    for t, parents in enumerate(forest):
        for v in range(workers):
            if parents[v] >= 0:
                children[t][int(parents[v])].append(v)

    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []
    nbytes: list[float] = []
    after: list[int] = []
    deps: list[list[int]] = []
    counts: list[bool] = []
    halves: list[int] = []
    lanes: list[int] = []

    def add(s: int, d: int, k: int, size: float, a: int, needs: list[int], result: bool) -> int:
        src.append(s)
        dst.append(d)
        kind.append(k)
        nbytes.append(size)
        after.append(a)
        deps.append(needs)
        counts.append(result)
        halves.append(-1)
        lanes.append(-1)
        return len(src) - 1

    own = [-1] * workers  # the own transformed contribution (pre-stage), if any
    started = [-1] * workers  # a JOIN at each rank at its start: what a full buffer waits for
    last: dict[tuple, int] = {}  # per chain (the module doc): its last send
    last_recv = [[-1] * workers for _ in (UP, DOWN)]  # over ranks: each one's last receive
    lane_of: dict[tuple, int] = {}
    received: dict[tuple, int] = {}  # chunks received so far per connection
    if pre_transform:
        for i in range(workers):  # both halves start once it is done
            own[i] = add(i, i, LOCAL_XFORM, float(payload_bytes), -1, [], True)
            last_recv[UP][i] = last_recv[DOWN][i] = own[i]
    up = [dict() for _ in forest]  # up[t][(v, c)]: v's partial sum of chunk c, sent to its parent
    down = [dict() for _ in forest]  # down[t][(v, c)]: the summed chunk c sent to v
    for _, phase, _, t, c, s, d in planned:
        parents = forest[t]
        if phase == UP or parents[s] < 0:
            needs = [up[t][(k, c)] for k in children[t][s]]
        else:
            needs = [down[t][(s, c)]]
        if own[s] >= 0:  # a rank sends and receives once its own transform is done
            needs.append(own[s])
        if nodes and own[d] >= 0:  # (over ranks, its chain of receives waits for it)
            needs.append(own[d])
        connection = (phase, t, s, d)
        if not nodes:  # one chain a half: the receives wait on the rank's previous one
            previous = last_recv[phase][d]
            if previous >= 0 and src[previous] != s:
                needs.append(add(d, d, JOIN, 0.0, previous, [], False))
        received[connection] = received.get(connection, 0) + 1
        if received[connection] > RECV_SLOTS:  # beyond the receiver's buffer: it must run
            if started[d] < 0:
                started[d] = add(d, d, JOIN, 0.0, -1, [], False)
            needs.append(started[d])
        into_root = phase == UP and parents[d] < 0
        chain = connection if nodes else (phase, s)
        m = add(s, d, PLAIN, sizes[c], last.get(chain, own[s]), needs, into_root or phase == DOWN)
        halves[m] = phase
        lanes[m] = lane_of.setdefault(connection, len(lane_of)) if nodes else phase
        last[chain] = m
        if not nodes:
            last_recv[phase][d] = m
        if phase == UP:
            up[t][(s, c)] = m
        else:
            down[t][(d, c)] = m
    lengths = np.array([len(n) for n in deps], dtype=np.int64)
    data_ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(lengths, out=data_ptr[1:])
    flat = [x for n in deps for x in n]
    schedule = Schedule(
        workers,
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        np.array(kind, dtype=np.int8),
        np.array(nbytes, dtype=float),
        np.array(after, dtype=np.int64),
        data_ptr,
        np.array(flat, dtype=np.int64),
        np.array(counts, dtype=bool),
    )
    return schedule, np.array(halves, dtype=np.int8), np.array(lanes, dtype=np.int64)
