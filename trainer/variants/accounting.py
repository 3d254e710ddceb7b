"""Bytes one worker puts on the wire per step, per variant (spec §10), from tensor shapes alone.

Values cost 2 bytes (BF16) everywhere; a top-k position costs the fewest whole bytes that index
a chunk (compact), or 8 (int64, as DeMo's reference sends). The simulation itself never rounds
to BF16: these counts are analytic.
"""

import math
from dataclasses import dataclass

from trainer.config import ALGORITHMS, RunConfig
from trainer.variants.chunking import k_per_chunk, make_chunker

VALUE_BYTES = 2
INT64_INDEX_BYTES = 8


@dataclass
class ByteAccounting:
    """Per worker per step. wire_bytes: what one worker sends in the ring collective."""

    payload_bytes: int
    payload_int64_bytes: int
    dense_bytes: int
    wire_bytes: float
    collective: str  # "all_reduce" | "all_gather" | "reduce_at_switch"
    reducible: bool
    broadcast_bytes: int = 0  # G recal / subspace: the new band, sent on each choice step only


def index_bytes(m: int) -> int:
    """Bytes of a position within a chunk of m: max(1, ceil(log2(m) / 8))."""
    bits = (m - 1).bit_length()  # ceil(log2(m)) for m >= 1
    return max(1, math.ceil(bits / 8))


def chunk_rule(variant: str) -> str:
    """Power-of-2 chunks for the optics variants (E, E'), DeMo's divisor rule otherwise."""
    return "P2" if variant in ("optics", "optics_switch") else "R"


def byte_accounting(
    shapes: dict[str, tuple[int, ...]], cfg: RunConfig, workers: int
) -> ByteAccounting:
    """Payload, wire and dense bytes per worker per step for cfg.variant over these tensors."""
    if cfg.variant not in ALGORITHMS:
        raise ValueError(f"variant must be one of {ALGORITHMS}, got {cfg.variant!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    n_params = sum(math.prod(shape) for shape in shapes.values())
    dense = n_params * VALUE_BYTES
    if cfg.variant == "adamw":
        wire = 2.0 * (workers - 1) / workers * dense
        return ByteAccounting(dense, dense, dense, wire, "all_reduce", True)

    values = 0
    topk_bytes = 0
    for shape in shapes.values():
        chunker = make_chunker(shape, cfg.chunk_mode, cfg.chunk, chunk_rule(cfg.variant))
        kept = chunker.chunks * k_per_chunk(chunker.m, cfg.keep)
        values += kept
        topk_bytes += kept * (VALUE_BYTES + index_bytes(chunker.m))

    if cfg.variant == "topk":
        payload = topk_bytes
        payload_int64 = values * (VALUE_BYTES + INT64_INDEX_BYTES)
        return ByteAccounting(
            payload, payload_int64, dense, float((workers - 1) * payload), "all_gather", False
        )
    payload = values * VALUE_BYTES
    if cfg.variant == "moving":
        return ByteAccounting(
            payload,
            payload,
            dense,
            float((workers - 1) * payload),
            "all_gather",
            True,
            broadcast_bytes(shapes, cfg),
        )
    if cfg.variant == "optics_switch":
        # Each worker sends its band once to the switch, which sums and returns one result.
        return ByteAccounting(payload, payload, dense, float(payload), "reduce_at_switch", True)
    return ByteAccounting(
        payload, payload, dense, float((workers - 1) * payload), "all_gather", True
    )


def broadcast_bytes(shapes: dict[str, tuple[int, ...]], cfg: RunConfig) -> int:
    """Bytes of one G re-choice, broadcast by the chooser on the steps it chooses.

    recal: k positions per tensor (one set for all its chunks) at the compact index width;
    subspace: the k x m band rows per tensor as values; rotating: nothing (every worker computes
    its positions from the shared seed).
    """
    if cfg.variant != "moving" or cfg.band == "rotating":
        return 0
    total = 0
    for shape in shapes.values():
        chunker = make_chunker(shape, cfg.chunk_mode, cfg.chunk, chunk_rule(cfg.variant))
        k = k_per_chunk(chunker.m, cfg.keep)
        if cfg.band == "recal":
            total += k * index_bytes(chunker.m)
        else:
            total += k * chunker.m * VALUE_BYTES
    return total
