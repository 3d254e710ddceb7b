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


def segments_per_message(collective: str, nbytes: int, workers: int) -> int:
    """gloo transfers inside one transitsim ring message (one rank's chunk in one phase)."""
    if collective == "all_reduce":
        return allreduce_segments(nbytes, workers)[0] // workers
    return 2  # all_gather: two halves per block


def describe(collective: str, nbytes: int, workers: int) -> str:
    """The algorithm, in words, for the table."""
    if collective == "all_reduce":
        count, per = allreduce_segments(nbytes, workers)
        return f"ring reduce-scatter + all-gather, {count} segments of {per} B, 2 in flight"
    if collective == "all_gather":
        return f"ring, {workers - 1} steps of 2 halves of {nbytes // 2} B, 2 in flight"
    raise ValueError(f"no gloo description for {collective!r}")


def transitsim_algo(collective: str) -> str:
    """transitsim's collective with the same steps and bytes."""
    return {"all_reduce": "ring_allreduce", "all_gather": "ring_allgather"}[collective]


def bytes_sent_per_rank(collective: str, nbytes: int, workers: int) -> float:
    if collective == "all_reduce":
        return 2 * (workers - 1) / workers * nbytes
    return (workers - 1) * nbytes
