"""Which algorithm gloo runs for each collective torch.distributed asks of it.

Read off the sources (torch 2.13's ProcessGroupGloo calls `gloo::allreduce`, `gloo::allgather`
and `gloo::broadcast` with default options; pytorch/gloo gloo/allreduce.cc, allgather.cc):

- all_reduce: `AllreduceOptions` with the algorithm unspecified, which gloo maps to RING: a
  reduce-scatter ring then an all-gather ring (each rank sends to rank - 1). The payload is cut
  into `numSegments = roundUp(max(ceil(bytes / 1 MiB), 2 P), P)` segments (at most 1 MiB, at
  least two per rank), and two segments are in flight at once (one being reduced while the next
  is on the wire). Bytes each rank sends: 2 (P - 1) / P x payload, as transitsim's
  ring_allreduce. (bcube exists but is only used when asked for; torch never asks.)
- all_gather (all_gather_into_tensor): a ring (each rank sends to rank + 1) of P - 1 steps;
  each rank's block travels as two halves, two transfers in flight. Bytes each rank sends:
  (P - 1) x payload, as transitsim's ring_allgather.
- hierarchical_all_reduce (two sites, worker.py builds it from process groups): transitsim's
  `hierarchical`. Inside each site of n ranks a ring reduce-scatter by isend/irecv (n - 1
  transfers of payload / n per rank), then gloo's ring all-reduce of each rank's shard among
  the D corresponding ranks of the sites (2 (D - 1) / D x payload / n, cut into gloo's
  segments), then a ring all-gather inside the site (n - 1 transfers of payload / n).
"""

import math

MAX_SEGMENT_BYTES = 1 << 20  # gloo AllreduceOptions::kMaxSegmentSize
ELEMENT_BYTES = 4  # float32


def allreduce_segments(nbytes: int, workers: int) -> tuple[int, int]:
    """(number of segments, bytes per segment) gloo's ring all-reduce cuts a payload into."""
    count = max(math.ceil(nbytes / MAX_SEGMENT_BYTES), 2 * workers)
    count = math.ceil(count / workers) * workers
    per = math.ceil(math.ceil(nbytes / count) / ELEMENT_BYTES) * ELEMENT_BYTES
    return count, per


HIERARCHICAL = "hierarchical_all_reduce"
SITES = 2  # the testbed's hierarchical all-reduce runs across two sites


def segments_per_message(collective: str, nbytes: int, workers: int) -> float:
    """gloo transfers inside one transitsim ring message (one rank's chunk in one phase); for
    the hierarchical all-reduce the mean over its messages (1 per intra-site ring message, the
    segments of gloo's all-reduce per message of the cross-site stage)."""
    if collective == "all_reduce":
        return allreduce_segments(nbytes, workers)[0] // workers
    if collective == HIERARCHICAL:
        n = workers // SITES
        shard = math.ceil(nbytes / n / ELEMENT_BYTES) * ELEMENT_BYTES
        cross_messages = 2 * (SITES - 1)
        cross = cross_messages * (allreduce_segments(shard, SITES)[0] // SITES)
        intra_messages = 2 * (n - 1)
        return (intra_messages + cross) / (intra_messages + cross_messages)
    return 2  # all_gather: two halves per block


def describe(collective: str, nbytes: int, workers: int) -> str:
    """The algorithm, in words, for the table."""
    if collective == "all_reduce":
        count, per = allreduce_segments(nbytes, workers)
        return f"ring reduce-scatter + all-gather, {count} segments of {per} B, 2 in flight"
    if collective == "all_gather":
        return f"ring, {workers - 1} steps of 2 halves of {nbytes // 2} B, 2 in flight"
    if collective == HIERARCHICAL:
        n = workers // SITES
        count, per = allreduce_segments(math.ceil(nbytes / n / ELEMENT_BYTES) * ELEMENT_BYTES,
                                        SITES)  # fmt: skip
        return (
            f"hierarchical: ring reduce-scatter in each site ({n - 1} steps of {nbytes // n} B),"
            f" gloo ring all-reduce across {SITES} sites ({count} segments of {per} B), "
            f"ring all-gather in each site"
        )
    raise ValueError(f"no gloo description for {collective!r}")


def transitsim_algo(collective: str) -> str:
    """transitsim's collective with the same steps and bytes."""
    return {"all_reduce": "ring_allreduce", "all_gather": "ring_allgather",
            HIERARCHICAL: "hierarchical"}[collective]  # fmt: skip


def bytes_sent_per_rank(collective: str, nbytes: int, workers: int) -> float:
    if collective == "all_reduce":
        return 2 * (workers - 1) / workers * nbytes
    if collective == HIERARCHICAL:
        n = workers // SITES
        return 2 * (n - 1) / n * nbytes + 2 * (SITES - 1) / SITES * nbytes / n
    return (workers - 1) * nbytes


def wan_bytes_per_direction(collective: str, nbytes: int, workers: int) -> float:
    """Payload bytes one direction of the two sites' WAN carries in one call (ranks split in
    order: the flat rings cross it once each way, on one ring edge)."""
    if collective == HIERARCHICAL:
        n = workers // SITES
        return n * 2 * (SITES - 1) / SITES * nbytes / n / (SITES - 1)
    return bytes_sent_per_rank(collective, nbytes, workers)
