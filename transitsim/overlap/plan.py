"""The units one step exchanges under overlap: DDP buckets for dense gradients, tensors for DeMo.

Dense (A): PyTorch DDP's bucketing. Parameters in reverse registration order (the order backward
usually produces them) are packed greedily: a bucket closes once it holds at least its cap, the
first bucket's cap being small (1 MiB) so that the first exchange starts early, the others
`bucket_bytes` (DDP's bucket_cap_mb=25, i.e. 25 MiB). A bucket is ready when its last gradient
is, and DDP all-reduces buckets in order: one that is ready early still waits for its
predecessors (step.py keeps that order).

DeMo (B..F): each parameter tensor is compressed as soon as its gradient is ready and its values
(plus positions) exchanged at once; the sign update waits for all of them. A tensor's payload and
compression cost are taken in proportion to its element count (chunks, and so kept values, grow
with it).

A profile whose tensors are the job's own buckets (`traces import --profile`: the DDP buckets
its trace launched) keeps them: one unit each, in the order they were ready, whatever the caps.

Without a measured profile (the uniform assumption) there are no tensors: the bytes are cut into
the same bucket sizes, ready at the fraction of the backward their cumulative bytes stand for,
for every variant.
"""

from dataclasses import dataclass

from transitsim.base.errors import TransitsimError
from transitsim.traces.backward_profile import BackwardProfile

OVERLAP_MODES = ("none", "buckets")
DDP_BUCKET_BYTES = 25 * 1024 * 1024  # torch DDP bucket_cap_mb=25
DDP_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


@dataclass(frozen=True)
class Unit:
    """One exchange of a step: ready at `ready` (fraction of the backward) on every worker."""

    ready: float
    dense_bytes: int  # gradient bytes it covers (what a transform ingests)
    payload_bytes: int  # bytes one worker puts on the line for it
    compress_share: float  # its share of the step's compression time


def single_unit(dense_bytes: int, payload_bytes: int) -> list[Unit]:
    """No overlap: everything ready at the end of the backward, exchanged at once."""
    return [Unit(1.0, dense_bytes, payload_bytes, 1.0)]


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights`, integers summing to `total` exactly."""
    whole = sum(weights)
    cuts, run = [0], 0
    for w in weights:
        run += w
        cuts.append(round(total * run / whole))
    return [b - a for a, b in zip(cuts, cuts[1:], strict=False)]


def _buckets(sizes: list[int], bucket_bytes: int, first_bucket_bytes: int) -> list[list[int]]:
    """Indices into `sizes`, packed greedily in order; a bucket closes once it reaches its cap."""
    buckets: list[list[int]] = [[]]
    filled = 0
    for i, size in enumerate(sizes):
        buckets[-1].append(i)
        filled += size
        cap = first_bucket_bytes if len(buckets) == 1 else bucket_bytes
        if filled >= cap and i < len(sizes) - 1:
            buckets.append([])
            filled = 0
    return buckets


def _merge_empty(units: list[Unit]) -> list[Unit]:
    """Fold units that would carry no payload into the next (or the last into its predecessor)."""
    merged: list[Unit] = []
    carry: Unit | None = None
    for unit in units:
        if carry is not None:
            unit = Unit(
                max(carry.ready, unit.ready),
                carry.dense_bytes + unit.dense_bytes,
                carry.payload_bytes + unit.payload_bytes,
                carry.compress_share + unit.compress_share,
            )
            carry = None
        if unit.payload_bytes <= 0:
            carry = unit
        else:
            merged.append(unit)
    if carry is not None:
        if not merged:
            return [carry]
        last = merged.pop()
        merged.append(
            Unit(
                max(last.ready, carry.ready),
                last.dense_bytes + carry.dense_bytes,
                last.payload_bytes + carry.payload_bytes,
                last.compress_share + carry.compress_share,
            )
        )
    return merged


def plan_units(
    profile: BackwardProfile,
    dense_bytes: int,
    payload_bytes: int,
    *,
    dense: bool,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES,
) -> list[Unit]:
    """The step's exchanges in the order they are issued.

    dense: the payload is the dense gradient (A: DDP buckets); otherwise one unit per tensor.
    dense_bytes / payload_bytes: the step's totals, already scaled to the replayed model.
    """
    if bucket_bytes < 1 or first_bucket_bytes < 1:
        raise TransitsimError(
            f"bucket sizes must be positive, got {bucket_bytes} and {first_bucket_bytes}"
        )
    if dense_bytes <= 0 or payload_bytes <= 0:
        return single_unit(max(dense_bytes, 0), max(payload_bytes, 0))
    if not profile.measured:
        return _uniform(dense_bytes, payload_bytes, bucket_bytes, first_bucket_bytes)
    count = len(profile.numel)
    if dense and not profile.buckets:
        order = list(range(count))[::-1]  # DDP: reverse registration order
        sizes = _split(dense_bytes, [profile.numel[i] for i in order])
        groups = [
            [order[j] for j in bucket]
            for bucket in _buckets(sizes, bucket_bytes, first_bucket_bytes)
        ]
    else:  # one tensor (or one of the job's own buckets) per unit, as backward makes them ready
        groups = [[i] for i in sorted(range(count), key=lambda i: (profile.ready[i], -i))]
    weights = [sum(profile.numel[i] for i in group) for group in groups]
    units = [
        Unit(max(profile.ready[i] for i in group), d, p, w / sum(weights))
        for group, d, p, w in zip(
            groups,
            _split(dense_bytes, weights),
            _split(payload_bytes, weights),
            weights,
            strict=True,
        )
    ]
    return _merge_empty(units)


def _uniform(
    dense_bytes: int, payload_bytes: int, bucket_bytes: int, first_bucket_bytes: int
) -> list[Unit]:
    """Bytes ready evenly over the backward, cut into DDP-sized pieces of the dense gradient."""
    sizes = [min(first_bucket_bytes, dense_bytes)]
    rest = dense_bytes - sizes[0]
    if rest > 0:
        full = rest // bucket_bytes
        sizes += [bucket_bytes] * full
        if rest % bucket_bytes:
            sizes.append(rest - full * bucket_bytes)
    payloads = _split(payload_bytes, sizes)
    units, done = [], 0
    for size, payload in zip(sizes, payloads, strict=True):
        done += size
        units.append(Unit(done / dense_bytes, size, payload, size / dense_bytes))
    return _merge_empty(units)


def describe(units: list[Unit]) -> str:
    """A short phrase for notes: how many units and their typical size."""
    if len(units) == 1:
        return "1 exchange"
    mean = sum(u.payload_bytes for u in units) / len(units)
    return f"{len(units)} exchanges of {mean / 1e6:.3g} MB on average"
