"""Bytes one worker puts on the wire per step, per variant (spec §10), from tensor shapes alone.

Values cost 2 bytes (BF16) everywhere; a top-k position costs the fewest whole bytes that index
a chunk (compact), or 8 (int64, as DeMo's reference sends). The simulation itself never rounds
to BF16: these counts are analytic.

The local-SGD variants (H, H-s, L) send only on their sync steps; `local_sgd_syncs` gives one
`SyncBytes` per fragment (docs/local-sgd.md has the formulas worked by hand):

- H (DiLoCo): the dense pseudo-gradient in BF16, n_params * 2, ring all-reduced.
- H-s: per tensor of the fragment, its values at 4 bits (E3M0) and one byte of shared
  power-of-two scale: ceil(numel / 2) + 1; ring all-reduced.
- L (SparseLoCo): per chunk of m with k kept, k values at 2 bits, k positions at the compact
  width of B and one BF16 scale: ceil(2k / 8) + k * index_bytes(m) + 2; all-gathered.
"""

import math
from dataclasses import dataclass

from trainer.config import ALGORITHMS, LOCAL_SGD_ALGORITHMS, RunConfig
from trainer.variants.chunking import k_per_chunk, make_chunker
from trainer.variants.local_sgd_schedule import Schedule, assign_fragments

VALUE_BYTES = 2
INT64_INDEX_BYTES = 8
E3M0_SCALE_BYTES = 1  # H-s: a tensor's shared power-of-two scale, one exponent byte (E8M0)
CHUNK_SCALE_BYTES = 2  # L: a chunk's 2-bit quantiser step, in BF16


@dataclass(frozen=True)
class SyncBytes:
    """One fragment's outer exchange, per worker (replica), on each step it starts."""

    fragment: int
    tensors: tuple[str, ...]
    payload_bytes: int
    payload_int64_bytes: int
    wire_bytes: float


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
    # H, H-s, L: what each fragment's sync sends (payload_bytes above is then the mean per step
    # over a round of H steps, for tables; the trace's rows carry each step's exact bytes).
    syncs: tuple[SyncBytes, ...] = ()
    schedule: Schedule | None = None

    def at_step(self, done: int) -> tuple[int, int, float]:
        """(payload, payload with int64 positions, wire) of step `done` (1-based)."""
        if self.schedule is None:
            return self.payload_bytes, self.payload_int64_bytes, float(self.wire_bytes)
        fragment = self.schedule.sync_fragment(done)
        if fragment is None:
            return 0, 0, 0.0
        sync = self.syncs[fragment]
        return sync.payload_bytes, sync.payload_int64_bytes, sync.wire_bytes


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
    if cfg.variant in LOCAL_SGD_ALGORITHMS:
        return _local_sgd_accounting(shapes, cfg, workers, dense)
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


def local_schedule(cfg: RunConfig) -> Schedule:
    """The exchange schedule of a local-SGD config."""
    return Schedule(cfg.inner_steps, cfg.fragments, cfg.overlap)


def local_sgd_syncs(
    shapes: dict[str, tuple[int, ...]], cfg: RunConfig, workers: int
) -> tuple[SyncBytes, ...]:
    """Per fragment: its tensors and the bytes one replica sends when it synchronises."""
    owner = assign_fragments(shapes, cfg.fragments)
    syncs = []
    for fragment in range(cfg.fragments):
        names = tuple(name for name in shapes if owner[name] == fragment)
        payload, payload_int64 = 0, 0
        for name in names:
            numel = math.prod(shapes[name])
            if cfg.variant == "diloco":
                payload += numel * VALUE_BYTES
                payload_int64 += numel * VALUE_BYTES
            elif cfg.variant == "streaming_diloco":
                size = math.ceil(numel * cfg.outer_bits / 8) + E3M0_SCALE_BYTES
                payload, payload_int64 = payload + size, payload_int64 + size
            else:
                chunker = make_chunker(shapes[name], cfg.chunk_mode, cfg.chunk, chunk_rule("R"))
                k = k_per_chunk(chunker.m, cfg.keep)
                values = math.ceil(k * cfg.outer_bits / 8) + CHUNK_SCALE_BYTES
                payload += chunker.chunks * (values + k * index_bytes(chunker.m))
                payload_int64 += chunker.chunks * (values + k * INT64_INDEX_BYTES)
        if cfg.variant == "sparseloco":
            wire = float((workers - 1) * payload)
        else:
            wire = 2.0 * (workers - 1) / workers * payload
        syncs.append(SyncBytes(fragment, names, payload, payload_int64, wire))
    return tuple(syncs)


def _local_sgd_accounting(
    shapes: dict[str, tuple[int, ...]], cfg: RunConfig, workers: int, dense: int
) -> ByteAccounting:
    """H, H-s, L: the per-fragment syncs, and their mean per step over a round of H steps."""
    syncs = local_sgd_syncs(shapes, cfg, workers)
    per_round = cfg.inner_steps
    collective = "all_gather" if cfg.variant == "sparseloco" else "all_reduce"
    return ByteAccounting(
        payload_bytes=round(sum(s.payload_bytes for s in syncs) / per_round),
        payload_int64_bytes=round(sum(s.payload_int64_bytes for s in syncs) / per_round),
        dense_bytes=dense,
        wire_bytes=sum(s.wire_bytes for s in syncs) / per_round,
        collective=collective,
        reducible=cfg.variant != "sparseloco",
        syncs=syncs,
        schedule=local_schedule(cfg),
    )
