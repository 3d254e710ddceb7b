"""Pipelined tree all-reduces as schedules: one binary tree, or NCCL's double binary tree.

The payload is cut into chunks that flow up the tree (each node adds its children's chunk to its
own and sends the sum to its parent) and, once summed at the root, back down, chunk after
chunk, so every level works on a different chunk at once (NCCL's tree pipeline). The trees are
NCCL's: `btree` numbers ranks in order, so every subtree is a contiguous range of ranks (few
edges cross a datacentre boundary); the double binary tree adds a second tree, mirrored (even
N) or shifted by one rank (odd N), in which the first tree's leaves are the interior nodes;
each tree carries half of the payload, so each rank sends and receives about 2x the payload,
like the ring, with O(log N) steps of latency instead of O(N).

Each node takes its transfers one at a time in schedule order: its sends are serial (`after`),
and so are its receives (a JOIN at the receiver waits for its previous incoming message from
another sender to have been sent): NCCL posts one send and one receive per peer and step.
Messages are ordered by pipeline slot (chunk + level), so dependencies and both chains always
point to earlier messages: the ids are a topological order (`fast/tree.py` relies on it).
"""

import math

import numpy as np

from transitsim.network.fabric import JOIN, LOCAL_XFORM, PLAIN
from transitsim.network.schedules.dag import Schedule

TREE_CHUNK_BYTES = 64 * 1024  # bytes of one pipelined chunk per tree (NCCL-like granularity)
TREE_MAX_CHUNKS = 64  # at most this many chunks per tree (bounds the schedule's size)
TREE_ALGOS = ("tree", "double_binary_tree")


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


def tree_chunks(tree_bytes: float) -> int:
    """Chunks a tree carrying `tree_bytes` is pipelined in."""
    return min(max(math.ceil(tree_bytes / TREE_CHUNK_BYTES), 1), TREE_MAX_CHUNKS)


def tree_forest(algo: str, workers: int) -> list[np.ndarray]:
    """The parent arrays of the trees `algo` runs."""
    if algo == "tree":
        return [btree_parents(workers)]
    return list(dbt_parents(workers))


def tree_allreduce(algo: str, workers: int, payload_bytes: int, pre_transform: bool) -> Schedule:
    """The pipelined all-reduce over `algo`'s trees, each carrying an equal share of the payload."""
    forest = tree_forest(algo, workers)
    share = payload_bytes / len(forest)
    chunks = tree_chunks(share)
    chunk_bytes = share / chunks
    edges = [(t, v, int(p)) for t, parents in enumerate(forest) for v, p in enumerate(parents)]
    edges = [e for e in edges if e[2] >= 0]
    transfers = [(t, 0, v, p) for t, v, p in edges] + [(t, 1, p, v) for t, v, p in edges]
    colour = edge_colours([(s, d) for _, _, s, d in transfers], workers)
    depths = [tree_depths(parents) for parents in forest]
    tops = [int(d.max()) if workers else 0 for d in depths]
    # (period, colour, tree, phase, chunk, src, dst) of every transfer: in period p a transfer
    # needs only transfers of period p - 1, and no node sends or receives two of one colour
    planned: list[tuple[int, int, int, int, int, int, int]] = []
    for (t, phase, s, d), k in zip(transfers, colour, strict=True):
        top, depth = tops[t], depths[t]
        offset = top - int(depth[s]) if phase == 0 else top + int(depth[s])
        planned.extend((c + offset, k, t, phase, c, s, d) for c in range(chunks))
    planned.sort()
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

    def add(s: int, d: int, k: int, size: float, a: int, needs: list[int], result: bool) -> int:
        src.append(s)
        dst.append(d)
        kind.append(k)
        nbytes.append(size)
        after.append(a)
        deps.append(needs)
        counts.append(result)
        return len(src) - 1

    last_sent = [-1] * workers
    last_recv = [-1] * workers
    own = [-1] * workers  # the own transformed contribution (pre-stage), if any
    if pre_transform:
        for i in range(workers):
            own[i] = last_sent[i] = last_recv[i] = add(
                i, i, LOCAL_XFORM, float(payload_bytes), -1, [], True
            )
    up = [dict() for _ in forest]  # up[t][(v, c)]: v's partial sum of chunk c, sent to its parent
    down = [dict() for _ in forest]  # down[t][(v, c)]: the summed chunk c sent to v
    for _, _, t, phase, c, s, d in planned:
        parents = forest[t]
        if phase == 0:
            needs = [up[t][(k, c)] for k in children[t][s]]
        else:
            if parents[s] < 0:
                needs = [up[t][(k, c)] for k in children[t][s]]
            else:
                needs = [down[t][(s, c)]]
        if own[s] >= 0:
            needs.append(own[s])
        previous = last_recv[d]
        if previous >= 0 and src[previous] != s:
            needs.append(add(d, d, JOIN, 0.0, previous, [], False))
        into_root = phase == 0 and parents[d] < 0
        m = add(s, d, PLAIN, chunk_bytes, last_sent[s], needs, phase == 1 or into_root)
        if phase == 0:
            up[t][(s, c)] = m
        else:
            down[t][(d, c)] = m
        last_sent[s] = m
        last_recv[d] = m
    lengths = np.array([len(n) for n in deps], dtype=np.int64)
    data_ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(lengths, out=data_ptr[1:])
    flat = [x for n in deps for x in n]
    return Schedule(
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
