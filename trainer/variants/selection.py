"""Which DCT coefficients of a chunk are sent: fixed bands, top-k, calibrated band (spec §8).

A fixed band is the first k entries of a position ordering that depends only on the chunk shape,
so it is computed once and shared by every chunk, worker and step. Positions are row-major
indices into the flattened chunk: p = i * w + j for vertical frequency i, horizontal j.
"""

import functools

import numpy as np
import torch

FIXED_SHAPES = ("low", "zigzag", "high", "random")


@functools.lru_cache(maxsize=64)
def _order_2d(h: int, w: int, shape: str) -> tuple[int, ...]:
    """Full position ordering of an h x w tile for low / zigzag / high.

    Keys use exact integers (frequencies scaled by h*w), so ties are real ties: fi = i/h and
    fj = j/w become i*w and j*h. Python's sort is stable, so remaining ties keep row-major order.
    """
    positions = range(h * w)

    def low_key(p: int) -> tuple[int, int, int]:
        i, j = divmod(p, w)
        return (max(i * w, j * h), i * w + j * h, i)

    def zigzag_key(p: int) -> tuple[int, int]:
        i, j = divmod(p, w)
        return (i * w + j * h, i)

    if shape == "zigzag":
        return tuple(sorted(positions, key=zigzag_key))
    low = tuple(sorted(positions, key=low_key))
    if shape == "low":
        return low
    if shape == "high":
        return low[::-1]
    raise ValueError(f"no 2-D ordering for band shape {shape!r}")


def random_order(m: int, seed: int) -> torch.Tensor:
    """torch.randperm(m) from a fresh CPU generator seeded with the run seed (same for every
    tensor with the same chunk size)."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    return torch.randperm(m, generator=gen)


def band_positions(chunk_shape: tuple[int, ...], k: int, shape: str, seed: int) -> torch.Tensor:
    """The k positions (int64, CPU, in ordering order) of a fixed band of `shape` (spec §8.2).

    chunk_shape is (h, w) for a 2-D tile or (m,) for a 1-D run.
    """
    if shape not in FIXED_SHAPES:
        raise ValueError(f"band shape must be one of {FIXED_SHAPES}, got {shape!r}")
    m = 1
    for s in chunk_shape:
        m *= s
    if not 1 <= k <= m:
        raise ValueError(f"k must lie in [1, {m}] for chunk {chunk_shape}, got {k}")
    if shape == "random":
        return random_order(m, seed)[:k].clone()
    if len(chunk_shape) == 1:
        if shape == "high":
            return torch.arange(m - 1, m - k - 1, -1, dtype=torch.int64)
        return torch.arange(k, dtype=torch.int64)  # low == zigzag in 1-D
    h, w = chunk_shape
    return torch.tensor(_order_2d(h, w, shape)[:k], dtype=torch.int64)


def topk_select(coef: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk (last axis), the k positions of largest |coef| and the values there (spec §8.1)."""
    idx = torch.topk(coef.abs(), k, dim=-1, sorted=False).indices
    return idx, coef.gather(-1, idx)


# Below this many coefficients torch.topk is cheap enough; the partition path pays off above.
_PARTITION_MIN_NUMEL = 1 << 16


def topk_mask(
    coef: torch.Tensor,
    k: int,
    *,
    scratch: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per chunk (last axis), a boolean mask of the k positions `topk_select` picks.

    The same set as torch.topk(coef.abs(), k), found several times faster on the CPU: torch.topk
    runs a branchy nth_element over (value, index) pairs per chunk, while numpy's vectorised
    in-place partition needs only the values. Where a chunk's k-th largest |coef| is strictly
    larger than every value left out, its top-k set is unique and is one comparison away; a chunk
    with a tie at the boundary, or a NaN, is handed to torch.topk itself, whose tie-breaking is
    the reference. A mask rather than indices: the error feedback and the aggregation are dense
    operations on it, with results bit for bit those of scattering the indices.

    scratch (float, like coef) and out (bool, like coef): optional reused buffers.
    """
    m = coef.shape[-1]
    chosen = out if out is not None else torch.empty_like(coef, dtype=torch.bool)
    if coef.device.type != "cpu" or k >= m or coef.numel() < _PARTITION_MIN_NUMEL:
        indices = torch.topk(coef.abs(), k, dim=-1, sorted=False).indices
        return chosen.zero_().scatter_(-1, indices, True)
    rows = coef.numel() // m
    flat = coef.reshape(rows, m)
    mag = torch.abs(flat, out=scratch.view(rows, m) if scratch is not None else None)
    mag.numpy().partition(m - k, axis=-1)
    kth = mag[:, m - k :].amin(-1, keepdim=True)  # amin / amax propagate NaN,
    unique = mag[:, : m - k].amax(-1, keepdim=True) < kth  # so a NaN row is never "unique"
    mag = torch.abs(flat, out=mag)  # the partition reordered the magnitudes; take them afresh
    flat_chosen = chosen.view(rows, m)
    np.greater_equal(mag.numpy(), kth.numpy(), out=flat_chosen.numpy())
    if not bool(unique.all()):
        tied = (~unique).squeeze(-1).nonzero().squeeze(-1)
        reference = torch.topk(mag[tied], k, dim=-1, sorted=False).indices
        flat_chosen[tied] = False
        flat_chosen[tied.unsqueeze(-1), reference] = True
    return chosen


def topk_energy(coef_sq: torch.Tensor, k: int) -> torch.Tensor:
    """Per chunk, the sum of the k largest squared coefficients (diagnostics' top-k selector)."""
    return torch.topk(coef_sq, k, dim=-1, sorted=False).values.sum(-1)


def calibrated_positions(energy: torch.Tensor, k: int) -> torch.Tensor:
    """The k positions of largest accumulated energy, sorted ascending (spec §8.3).

    A stable descending sort makes ties deterministic (lower position first).
    """
    order = torch.argsort(energy, descending=True, stable=True)
    return torch.sort(order[:k]).values
