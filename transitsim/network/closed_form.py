"""Closed forms (alpha-beta with NCCL-style step counts) for every collective: the tests' oracle.

All workers start at 0, no faults. Alpha and beta of a message are read off its route (the same
compiled paths the simulator uses, so a host endpoint's cost and rate are in them): a = the
sender's busy time (overhead + bytes / rate of the first hop), c = its arrival time (all hops:
overheads, serialisation, propagation, forwarding, transform latency). Where a collective makes
messages share a resource by construction (the shards of a ring of rings on one WAN link, two
children into one parent, N uploads into one aggregator, the ranks of one host on its
endpoint), their max-min fair rates are used.

- Ring (all-reduce 2(N-1) phases of B/N, all-gather N-1 phases of B): with uniform edges
  T = K (alpha + beta B/N). In general T is the longest path through the phase recurrence:
  T = max over start s and moves M of [sum of c over M consecutive edges + (K - M) x the largest
  a among them] (a phase either waits for its own send, a, or for the chunk, c).
- Hierarchical: the three rings in sequence (reduce-scatter in each group, all-reduce of each
  shard across groups, all-gather in each group).
- switch_sum: a two-stage pipeline of J pieces, up (a, L_up) then down (b, L_down):
  T = L_up + L_down + max((J-1) a + a_last, a + (J-2) max(a, b) + b) + b_last; with bounded
  slots that bind (J > slots), the symmetric per-piece recurrence of the window instead.
- tree and double_binary_tree (pipelined, both halves at once, schedules/trees.py): a lower
  bound no schedule of these chunks beats (docs/engine.md derives it). Per rank, its sends all
  cross the resources they have in common, of capacity C_out: they take sum(bits) / C_out of
  them, starting no sooner than its first chunk can (a leaf's at once, an interior rank's once
  chunk 0 came up from below), and the last one still has its latency to go; the same for its
  receives; the same for all the sends (receives) of the ranks of one host together, where
  several share its endpoint; and the last chunk of a deepest leaf leaves after its C chunks,
  climbs the tree and comes down again: (C - 1) a + 2 depth (a_last + c - a), a_last the last
  (partial) chunk's a; and chunk 0 climbs and comes down first, after which the last link down
  still sends the C - 1 others: 2 depth c + (C - 2) a + a_last. T >= the largest of these. In
  the bandwidth-bound limit it is 2 x payload / rate for the double binary tree, 3 x for one
  tree (an interior rank sends one chunk up and two down).

Exact (to rounding) for symmetric networks without contention beyond the above; the DES is the
reference everywhere else.
"""

import math

import numpy as np

from transitsim.network.des.fluid import fair_rates
from transitsim.network.exchange import (
    Exchange,
    equal_groups,
    fabric_for,
    transform_weights,
    validate_exchange,
)
from transitsim.network.fabric import (
    LOCAL_XFORM,
    PLAIN,
    XFORM_PLUGGABLE,
    XFORM_SWITCH,
    Fabric,
    Path,
    Weights,
)
from transitsim.network.fabrics.nodes import tree_nodes
from transitsim.network.schedules.trees import tree_chunk_sizes, tree_depths, tree_forest
from transitsim.network.spec import NetworkSpec


def _times(path: Path, nbytes: float, rates: list[float] | None = None) -> tuple[float, float]:
    """(a, c): sender busy until a, arrival at c, for one message alone (or at given rates)."""
    bits = nbytes * 8.0
    total = 0.0
    sent = 0.0
    for h, hop in enumerate(path.hops):
        rate = hop.rate_bps if rates is None else rates[h]
        serial = bits / rate if bits > 0 else 0.0
        total += hop.pre_s + serial
        if h == 0:
            sent = total
        total += hop.post_for(bits)
    return sent, total


def _shared_rates(fabric: Fabric, paths: list[Path]) -> list[list[float]]:
    """Per message, per hop: the max-min fair rate when all these messages' hops run at once."""
    capacity = fabric.capacities().tolist()
    hops = max(len(p.hops) for p in paths)
    rates = [[0.0] * len(p.hops) for p in paths]
    for h in range(hops):
        members = [i for i, p in enumerate(paths) if h < len(p.hops)]
        flows = [(paths[i].hops[h].resources, paths[i].hops[h].weights) for i in members]
        for i, rate in zip(members, fair_rates(capacity, flows), strict=True):
            rates[i][h] = rate
    return rates


def _best_tail(a: np.ndarray, c: np.ndarray, steps: int) -> np.ndarray:
    """Per start sender s: the longest `steps`-phase path ending with a move (see module doc)."""
    n = len(a)
    if steps == 0:
        return np.zeros(n)
    if np.all(a == a[0]) and np.all(c == c[0]):
        return np.full(n, steps * c[0])  # uniform ring: every phase waits for the chunk
    reps = steps // n + 2
    a_ext, c_ext = np.tile(a, reps), np.tile(c, reps)
    waits = steps - np.arange(1, steps + 1)
    best = np.empty(n)
    for s in range(n):
        moved = np.cumsum(c_ext[s : s + steps])
        slowest = np.maximum.accumulate(a_ext[s : s + steps])
        best[s] = np.max(moved + waits * slowest)
    return best


def _ring_time(
    first: list[tuple[float, float]], later: list[tuple[float, float]], phases: int
) -> float:
    """Longest path through `phases` ring phases; edge e has (a, c) in phase 0 and afterwards."""
    if phases == 0:
        return 0.0
    a0, c0 = (np.array(x) for x in zip(*first, strict=True))
    a, c = (np.array(x) for x in zip(*later, strict=True))
    rest = _best_tail(a, c, phases - 1)
    move = c0 + np.roll(rest, -1)  # move at phase 0 to the next sender
    if phases == 1:
        return float(move.max())
    stay = a0 + rest
    return float(np.maximum(stay, move).max())


def _rings(
    fabric: Fabric, rings: np.ndarray, phases: int, chunk: float, first_kind: int, w: Weights
) -> float:
    """Parallel rings (rows of worker ids) run together: the slowest one's time."""
    if phases == 0 or rings.shape[1] < 2:
        return 0.0
    nxt = np.roll(rings, -1, axis=1)
    pairs = list(zip(rings.ravel().tolist(), nxt.ravel().tolist(), strict=True))
    plain = [fabric.path(s, d, PLAIN, w) for s, d in pairs]
    firsts = [fabric.path(s, d, first_kind, w) for s, d in pairs]
    plain_rates = _shared_rates(fabric, plain)
    first_rates = _shared_rates(fabric, firsts)
    members = rings.shape[1]
    worst = 0.0
    for r in range(rings.shape[0]):
        span = range(r * members, (r + 1) * members)
        first = [_times(firsts[i], chunk, first_rates[i]) for i in span]
        later = [_times(plain[i], chunk, plain_rates[i]) for i in span]
        worst = max(worst, _ring_time(first, later, phases))
    return worst


def _pre_stage(fabric: Fabric, exchange: Exchange, w: Weights) -> float:
    """The own transform before a collective that adds partial sums (pluggable only)."""
    if exchange.transform_at != "pluggable" or exchange.algo in ("ring_allgather", "switch_sum"):
        return 0.0
    worst = 0.0
    for i in range(fabric.network.workers):
        worst = max(worst, _times(fabric.path(i, i, LOCAL_XFORM, w), exchange.payload_bytes)[1])
    return worst


def _switch_sum(fabric: Fabric, exchange: Exchange, w: Weights) -> float:
    network = fabric.network
    workers = network.workers
    agg = fabric.node_index[fabric.aggregation_switch()]
    kind = {None: PLAIN, "pluggable": XFORM_PLUGGABLE, "switch": XFORM_SWITCH}[
        exchange.transform_at
    ]
    payload = exchange.payload_bytes
    if workers == 1 and kind == PLAIN:
        return 0.0  # one worker already holds the sum
    piece = network.switch.piece_bytes
    pieces = max(math.ceil(payload / piece), 1)
    last = payload - (pieces - 1) * piece
    down_factor = 2.0 if (exchange.loopback and kind == XFORM_SWITCH) else 1.0
    ups = [fabric.path(i, agg, kind, w) for i in range(workers)]
    downs = [fabric.path(agg, i, PLAIN, w) for i in range(workers)]
    up_rates, down_rates = _shared_rates(fabric, ups), _shared_rates(fabric, downs)

    def stage(paths, rates, nbytes):
        timed = [_times(p, nbytes, r) for p, r in zip(paths, rates, strict=True)]
        busy = max(t[0] for t in timed)
        return busy, max(t[1] - t[0] for t in timed)

    a, up_delay = stage(ups, up_rates, piece)
    a_last, _ = stage(ups, up_rates, last)
    b, down_delay = stage(downs, down_rates, piece * down_factor)
    b_last, _ = stage(downs, down_rates, last * down_factor)
    slots = network.switch.agg_slots
    if slots == 0 or pieces <= slots:
        body = max((pieces - 1) * a + a_last, a + (pieces - 2) * max(a, b) + b)
        return up_delay + down_delay + body + b_last
    up_sent = down_sent = 0.0
    arrived: list[float] = []
    for j in range(pieces):  # the window: piece j waits for piece j - slots to come back
        window = arrived[j - slots] if j >= slots else 0.0
        up_sent = max(up_sent, window) + (a_last if j == pieces - 1 else a)
        down_sent = max(up_sent + up_delay, down_sent) + (b_last if j == pieces - 1 else b)
        arrived.append(down_sent + down_delay)
    return arrived[-1]


def _common_rate(fabric: Fabric, paths: list[Path]) -> float:
    """The capacity of the resources every one of these paths crosses (inf: none in common)."""
    if not paths:
        return math.inf
    common = set.intersection(*(fabric.path_resources(p) for p in paths))
    share = {r: w for hop in paths[0].hops for r, w in zip(hop.resources, hop.weights, strict=True)}
    return min(  # a striped parallel link carries its share of each message: k of them, k x
        (
            fabric.resources[r].rate_bps / (share[r] if r in fabric.bundle_of else 1.0)
            for r in common
        ),
        default=math.inf,
    )


def _tree(fabric: Fabric, exchange: Exchange, w: Weights) -> float:
    """The lower bound of a pipelined tree all-reduce with both halves at once (module doc)."""
    workers = fabric.network.workers
    if workers < 2:
        return 0.0
    forest = tree_forest(exchange.algo, workers, tree_nodes(fabric.network))
    share = exchange.payload_bytes / len(forest)
    sizes = tree_chunk_sizes(share)
    chunks = len(sizes)
    bits = sizes[0] * 8.0  # a full chunk; the last may be smaller
    pairs = [(v, int(p)) for parents in forest for v, p in enumerate(parents) if p >= 0]
    pairs += [(p, v) for v, p in pairs]
    path = {e: fabric.path(e[0], e[1], PLAIN, w) for e in set(pairs)}
    timed = {e: _times(p, bits / 8.0) for e, p in path.items()}
    # the earliest a rank can send chunk 0 of a tree: at once at a leaf, else once chunk 0
    # came up from every child (contention-free, chains ignored: a lower bound)
    first = [math.inf] * workers
    for parents in forest:
        kids = [[v for v in range(workers) if parents[v] == u] for u in range(workers)]
        ready = [0.0] * workers
        for v in np.argsort(-tree_depths(parents)).tolist():  # deepest first
            ready[v] = max((ready[k] + timed[(k, v)][1] for k in kids[v]), default=0.0)
            first[v] = min(first[v], ready[v])
    bound = 0.0
    units = [{v} for v in range(workers)]
    host = fabric.network.host
    if host is not None and host.ranks_per_host > 1:  # a host's ranks share its two sides
        per = host.ranks_per_host
        units += [set(range(h, h + per)) for h in range(0, workers, per)]
    for unit in units:
        for mine, start in (
            ([e for e in pairs if e[0] in unit], lambda e: first[e[0]]),
            ([e for e in pairs if e[1] in unit], lambda e: first[e[0]]),
        ):
            if not mine:
                continue
            rate = _common_rate(fabric, [path[e] for e in mine])
            work = len(mine) * share * 8.0 / rate if math.isfinite(rate) else 0.0
            begin = min(start(e) + path[e].hops[0].pre_s for e in mine)
            latency = min(timed[e][1] - timed[e][0] for e in mine)
            bound = max(bound, begin + work + latency)
    busy = min(a for a, _ in timed.values())
    flight = min(c - a for a, c in timed.values())
    depth = max(int(tree_depths(parents).max()) for parents in forest)
    # the deepest leaf's last chunk leaves after its chunks before it, then climbs and comes
    # down; and chunk 0 does so first, and the last link down then sends every other chunk
    last = min(_times(p, sizes[-1])[0] for p in path.values())
    rest = (chunks - 2) * busy + last if chunks > 1 else 0.0
    return max(
        bound,
        (chunks - 1) * busy + 2 * depth * (last + flight),
        2 * depth * (busy + flight) + rest,
    )


def closed_form_time_s(network: NetworkSpec, exchange: Exchange) -> float:
    """The alpha-beta time of `exchange` on `network`, all workers starting together."""
    fabric = fabric_for(network)
    validate_exchange(network, exchange)
    w = transform_weights(network, exchange)
    workers = network.workers
    payload = exchange.payload_bytes
    pre = _pre_stage(fabric, exchange, w)
    ring = np.arange(workers)[None, :]
    if exchange.algo == "ring_allreduce":
        return pre + _rings(fabric, ring, 2 * (workers - 1), payload / workers, PLAIN, w)
    if exchange.algo == "ring_allgather":
        first = XFORM_PLUGGABLE if exchange.transform_at == "pluggable" else PLAIN
        return _rings(fabric, ring, workers - 1, float(payload), first, w)
    if exchange.algo == "hierarchical":
        groups = equal_groups(network)
        count, members = groups.shape
        shard = payload / members
        inside = _rings(fabric, groups, members - 1, shard, PLAIN, w)
        across = _rings(fabric, groups.T.copy(), 2 * (count - 1), shard / count, PLAIN, w)
        return pre + inside + across + inside
    if exchange.algo == "switch_sum":
        return _switch_sum(fabric, exchange, w)
    return pre + _tree(fabric, exchange, w)
