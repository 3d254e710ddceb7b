"""Orthonormal DCT-II matrices and the chunk transforms built from them (spec §7.1).

The basis is built in float64 from the cosine formula and only then cast, so every run (and every
tensor with the same chunk side) uses exactly the same float32 matrix. Transforms work on whole
batches of chunks at once: one call per chunk shape, never a Python loop over chunks.
"""

import functools

import numpy as np
import torch


@functools.lru_cache(maxsize=64)
def _dct_matrix_f64(n: int) -> np.ndarray:
    """D[f, i] = sqrt(2/n) cos(pi (2i+1) f / 2n), row 0 = 1/sqrt(n): orthonormal, D @ D.T = I."""
    if n < 1:
        raise ValueError(f"DCT size must be >= 1, got {n}")
    freq = np.arange(n, dtype=np.float64)[:, None]
    pos = np.arange(n, dtype=np.float64)[None, :]
    basis = np.sqrt(2.0 / n) * np.cos(np.pi * (2.0 * pos + 1.0) * freq / (2.0 * n))
    basis[0, :] = 1.0 / np.sqrt(n)
    basis.setflags(write=False)
    return basis


def dct_matrix(
    n: int, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """The n x n orthonormal DCT-II matrix, built in float64 then cast to `dtype`."""
    return torch.tensor(_dct_matrix_f64(n), dtype=torch.float64).to(dtype=dtype, device=device)


def chunk_transform_matrix(
    chunk_shape: tuple[int, ...], device: torch.device | str | None = None
) -> torch.Tensor:
    """The m x m matrix T acting on one row-major flattened chunk: D_m, or kron(D_h, D_w).

    Built from the float32 factors, as the per-chunk transform the optics emulates (spec §9.1).
    """
    if len(chunk_shape) == 1:
        return dct_matrix(chunk_shape[0], device=device)
    h, w = chunk_shape
    return torch.kron(dct_matrix(h, device=device), dct_matrix(w, device=device))


def dct_chunks(
    x: torch.Tensor,
    mats: tuple[torch.Tensor, ...],
    *,
    out: torch.Tensor | None = None,
    work: torch.Tensor | None = None,
) -> torch.Tensor:
    """Forward DCT of a batch of chunks.

    1-D: x (..., m), mats = (D_m,), returns x @ D_m.T.
    2-D: x (..., h, w), mats = (D_h, D_w), returns D_h @ x @ D_w.T per tile.
    out / work: optional buffers shaped like x for the result and the 2-D half-transform. A step
    that reuses them skips allocating (and page-faulting) fresh memory for every transform; the
    matmuls, and so the results, are the same bit for bit.
    """
    if len(mats) == 1:
        return torch.matmul(x, mats[0].T, out=out)
    d_rows, d_cols = mats
    return torch.matmul(d_rows, torch.matmul(x, d_cols.T, out=work), out=out)


def idct_chunks(
    c: torch.Tensor,
    mats: tuple[torch.Tensor, ...],
    *,
    out: torch.Tensor | None = None,
    work: torch.Tensor | None = None,
) -> torch.Tensor:
    """Inverse of `dct_chunks` (the transposes, since the basis is orthonormal); same buffers."""
    if len(mats) == 1:
        return torch.matmul(c, mats[0], out=out)
    d_rows, d_cols = mats
    return torch.matmul(d_rows.T, torch.matmul(c, d_cols, out=work), out=out)


def sub_idct_chunks(
    x: torch.Tensor, c: torch.Tensor, mats: tuple[torch.Tensor, ...], *, work: torch.Tensor
) -> torch.Tensor:
    """x -= idct_chunks(c, mats), in place, with the last matmul's output added into x by the
    BLAS call itself (beta = 1, alpha = -1): the same product subtracted, bit for bit, without
    writing it out and reading it back. work: a buffer shaped like c (2-D only)."""
    if len(mats) == 1:
        return x.addmm_(c, mats[0], alpha=-1.0)
    d_rows, d_cols = mats
    half = torch.matmul(c, d_cols, out=work)
    return x.baddbmm_(d_rows.T.expand(c.shape[0], -1, -1), half, alpha=-1.0)


def transform_rows(chunk_shape: tuple[int, ...], positions: torch.Tensor) -> torch.Tensor:
    """The rows of T = D_m or kron(D_h, D_w) at `positions`, (k, m), without building T.

    Row p = i * w + j of the Kronecker product is outer(D_h[i], D_w[j]) flattened, the same
    float32 products torch.kron forms.
    """
    positions = positions.cpu()
    if len(chunk_shape) == 1:
        return dct_matrix(chunk_shape[0])[positions]
    h, w = chunk_shape
    d_rows, d_cols = dct_matrix(h), dct_matrix(w)
    i, j = positions // w, positions % w
    return (d_rows[i][:, :, None] * d_cols[j][:, None, :]).reshape(len(positions), h * w)
