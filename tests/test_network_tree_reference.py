"""An independent reference for the trees with both halves at once (issue 24 item 1).

A small fluid model written here from the description of the algorithm, not from the
engine's code: NCCL's trees (ncclGetBtree, ncclGetDtree) built again; the payload cut into
chunks of 64 KiB, the last one what is left (past 64 chunks a tree, chunks of twice the size,
until the share fits in 64); every transfer of chunk c up (child to parent) and down
(parent to child); each rank's half (reduce, broadcast) a queue of sends and a queue of
receives, taken one at a time in pipeline-slot order; a star switch whose every host has a link
up and a link down of one rate, shared max-min fairly by progressive filling over all the
flows at once (recomputed at every start and end); per message two link overheads before and
two link latencies after. It borrows from the engine only the tie-break inside a slot: a
proper edge colouring of each half's transfers (`edge_colours`, tested on its own in
test_network_trees.py), so that two transfers of one slot at one rank go in the same order.

The engine (its fast path and its DES) must give the reference's time to 1e-9 relative: the
two compute the same model, so only the rounding of float sums differs (the reference advances
every flow at every event, the engine only the flows whose rate changes).
"""

import math

import pytest

from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.network.schedules.trees import edge_colours

RATE_BPS = 100e9
CHUNK = 64 * 1024
MAX_CHUNKS = 64


def nccl_btree(n: int) -> list[int]:
    """ncclGetBtree: a rank's parent clears its lowest set bit and sets the next one up, or, if
    that leaves the ranks, only clears it."""
    parents = [-1] * n
    for rank in range(1, n):
        low = rank & -rank
        up = (rank ^ low) | (low << 1)
        parents[rank] = up if up < n else rank ^ low
    return parents


def nccl_dtree(n: int) -> list[list[int]]:
    """ncclGetDtree: the btree and, for even n, its mirror (rank r -> n - 1 - r), for odd n its
    shift by one rank."""
    first = nccl_btree(n)
    if n % 2 == 0:
        second = [-1 if first[n - 1 - r] < 0 else n - 1 - first[n - 1 - r] for r in range(n)]
    else:
        second = [-1 if first[(r - 1) % n] < 0 else (first[(r - 1) % n] + 1) % n for r in range(n)]
    return [first, second]


def _depths(parents: list[int]) -> list[int]:
    def depth(r: int) -> int:
        return 0 if parents[r] < 0 else 1 + depth(parents[r])

    return [depth(r) for r in range(len(parents))]


def _max_min(flows: list[tuple[int, int]], capacity: float) -> list[float]:
    """Progressive filling: every flow crosses its sender's link up and its receiver's link
    down; all rise together until a link is full, whose flows then stop rising."""
    rates = [0.0] * len(flows)
    rising = set(range(len(flows)))
    left = {}
    for s, d in flows:
        left[("up", s)] = capacity
        left[("down", d)] = capacity
    while rising:
        load: dict[tuple, int] = {}
        for i in rising:
            s, d = flows[i]
            for link in (("up", s), ("down", d)):
                load[link] = load.get(link, 0) + 1
        step = min(left[link] / k for link, k in load.items())
        full = {link for link, k in load.items() if left[link] / k <= step}
        for link, k in load.items():
            left[link] -= step * k
        for i in list(rising):
            rates[i] += step
            s, d = flows[i]
            if ("up", s) in full or ("down", d) in full:
                rising.discard(i)
    return rates


def reference_time_s(algo: str, n: int, payload: int, latency_s: float, overhead_s: float):
    """The all-reduce's time on the reference model (see the module doc): the double binary
    tree's spacing K between levels is the fastest of K = 1, 2, 3, 5, 8, 13, 21, 34 below the
    chunk count and the chunk count itself (issue 44: chosen by time, not by a latency rule)."""
    chunks = len(_chunk_sizes(payload / (1 if algo == "tree" else 2)))
    if algo == "tree" or n < 3:
        return _reference_time_s(algo, n, payload, latency_s, overhead_s, 1)
    spacings = [k for k in (1, 2, 3, 5, 8, 13, 21, 34) if k < chunks] + [chunks]
    times = [_reference_time_s(algo, n, payload, latency_s, overhead_s, k) for k in spacings]
    best = times[0]
    for t in times[1:]:
        best = t if t < best * (1 - 1e-9) else best
    return best


def _chunk_sizes(share: float) -> list[float]:
    """Chunks of 64 KiB, the last what is left; twice the size past 64 chunks, until it fits."""
    size = CHUNK
    while math.ceil(share / size) > MAX_CHUNKS:
        size *= 2
    sizes = [size] * int(share // size)
    if share - size * len(sizes) > 0 or not sizes:
        sizes.append(share - size * len(sizes))
    return sizes


def _reference_time_s(algo, n, payload, latency_s, overhead_s, spacing):
    """The time with `spacing` slots between levels."""
    forest = [nccl_btree(n)] if algo == "tree" else nccl_dtree(n)
    share = payload / len(forest)
    sizes = _chunk_sizes(share)
    chunks = len(sizes)
    pre, post = 2 * overhead_s, 2 * latency_s
    depths = [_depths(p) for p in forest]
    tops = [max(d) for d in depths]
    # every transfer: (key, half, tree, chunk, src, dst); half 0 up, 1 down
    transfers = []
    for half in (0, 1):
        edges = [(t, v, p) for t, parents in enumerate(forest) for v, p in enumerate(parents)]
        edges = [(t, v, p) if half == 0 else (t, p, v) for t, v, p in edges if p >= 0]
        colours = edge_colours([(s, d) for _, s, d in edges], n)
        for (t, s, d), colour in zip(edges, colours, strict=True):
            level = tops[t] - depths[t][s] if half == 0 else tops[t] + depths[t][s]
            for c in range(chunks):
                transfers.append(
                    ((c + spacing * level, half, colour, t, c, s, d), half, t, c, s, d)
                )
    transfers.sort()
    index = {(half, t, c, s, d): i for i, (_, half, t, c, s, d) in enumerate(transfers)}
    needs: list[list[int]] = []  # the transfers whose arrival each one waits for
    before: list[list[int]] = []  # the ones that must have been sent: queue predecessors
    last_send: dict[tuple, int] = {}
    last_recv: dict[tuple, int] = {}
    for i, (_, half, t, c, s, d) in enumerate(transfers):
        parents = forest[t]
        kids = [v for v in range(n) if parents[v] == s]
        if half == 0 or parents[s] < 0:  # up, or the root's down: all its children's sums
            needs.append([index[(0, t, c, k, s)] for k in kids])
        else:  # down: the chunk from its parent
            needs.append([index[(1, t, c, parents[s], s)]])
        before.append(
            [q[key] for q, key in ((last_send, (s, half)), (last_recv, (d, half))) if key in q]
        )
        last_send[(s, half)] = last_recv[(d, half)] = i
    sent = [math.nan] * len(transfers)
    arrived = [math.nan] * len(transfers)
    begins: dict[int, float] = {}  # released transfers and when their flow starts
    active: dict[int, float] = {}  # flows on the links: bits left
    done = [False] * len(transfers)
    waiting = set(range(len(transfers)))

    def release() -> None:
        for i in list(waiting):
            if all(done[j] for j in needs[i] + before[i]):
                times = [arrived[j] for j in needs[i]] + [sent[j] for j in before[i]]
                begins[i] = max(times, default=0.0) + pre
                waiting.discard(i)

    now = 0.0
    release()
    while begins or active:
        ids = list(active)
        rates = _max_min([transfers[i][4:6] for i in ids], RATE_BPS)
        ends = [now + active[i] / r for i, r in zip(ids, rates, strict=True)]
        nxt = min(ends + list(begins.values()))
        for i, r in zip(ids, rates, strict=True):
            active[i] -= r * (nxt - now)
        now = nxt
        for i, end in zip(ids, ends, strict=True):
            if end <= now * (1 + 1e-12):
                del active[i]
                sent[i], arrived[i], done[i] = now, now + post, True
        release()
        for i in [i for i, t in begins.items() if t <= now * (1 + 1e-12)]:
            del begins[i]
            active[i] = sizes[transfers[i][3]] * 8
    counted = [
        arrived[i]
        for i, (_, half, t, _, _, d) in enumerate(transfers)
        if half == 1 or forest[t][d] < 0
    ]
    return max(counted, default=0.0)


# N = 3..64: every N to 16, then odd, even, powers of two; with and without latency and
# overheads; payloads of 1 to 40 chunks per tree
SIZES = [(n, 300_000) for n in range(3, 17)] + [(20, 1_000_000), (31, 200_000), (45, 100_000)]
SIZES += [(3, 1_000_000), (8, 4_000_000), (64, 200_000)]
CASES = [
    (algo, n, payload, latency_s, overhead_s)
    for algo in ("tree", "double_binary_tree")
    for n, payload in SIZES
    for latency_s, overhead_s in ((0.0, 0.0), (5e-6, 0.0), (1e-6, 1e-7))
]


def _check_the_reference() -> None:
    """The reference's own pieces, checked by hand first: NCCL's 8-rank trees, and max-min where a
    link's share left unused by one flow goes to the other."""
    assert nccl_btree(8) == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert nccl_dtree(8)[1] == [1, 3, 1, 7, 5, 3, 5, -1]
    assert nccl_dtree(5)[1] == [1, -1, 3, 0, 3]  # odd: the btree shifted by one rank
    # 0 -> 1 and 0 -> 2 share 0's link up; 3 -> 1 shares 1's link down with the first
    rates = _max_min([(0, 1), (0, 2), (3, 1)], 1.0)
    assert rates == pytest.approx([0.5, 0.5, 0.5])
    rates = _max_min([(0, 1), (0, 2), (0, 3), (4, 1)], 3.0)
    assert rates == pytest.approx([1.0, 1.0, 1.0, 2.0])  # 1's link: 3 - 1 left for 4 -> 1


@pytest.mark.parametrize("algo, n, payload, latency_s, overhead_s", CASES)
def test_the_engine_equals_an_independent_fluid_model_of_the_split_trees(
    algo, n, payload, latency_s, overhead_s
):
    network = NetworkSpec(
        "s", "switch", n, LinkSpec(RATE_BPS, latency_s=latency_s, overhead_s=overhead_s)
    )
    _check_the_reference()
    expected = reference_time_s(algo, n, payload, latency_s, overhead_s)
    fast = simulate_exchange(network, Exchange(algo, payload))
    assert fast.method == "fast"
    assert fast.time_s == pytest.approx(expected, rel=1e-9)
    if n <= 8:
        des = simulate_exchange(network, Exchange(algo, payload), method="des")
        assert des.time_s == pytest.approx(expected, rel=1e-9)
