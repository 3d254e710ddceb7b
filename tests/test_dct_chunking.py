"""DCT basis and chunking of the trainer (spec §7): orthonormal basis, chunk rules, k per chunk."""

import math

import pytest

torch = pytest.importorskip("torch")

from trainer.variants.chunking import k_per_chunk, make_chunker, side_divisor, side_pow2  # noqa: E402
from trainer.variants.dct import (  # noqa: E402
    chunk_transform_matrix,
    dct_chunks,
    dct_matrix,
    idct_chunks,
    transform_rows,
)

torch.set_num_threads(1)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 192, 256])
def test_dct_matrix_is_orthonormal_dct_ii(n):
    d = dct_matrix(n)
    assert d.dtype == torch.float32 and d.shape == (n, n)
    eye = torch.eye(n, dtype=torch.float64)
    assert torch.allclose(d.double() @ d.double().T, eye, atol=2e-6)
    # Entries are the float64 cosine formula rounded once to float32.
    f = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(n, dtype=torch.float64)[None, :]
    expected = math.sqrt(2.0 / n) * torch.cos(math.pi * (2 * i + 1) * f / (2 * n))
    expected[0] = 1.0 / math.sqrt(n)
    assert torch.equal(d, expected.float())


def test_2d_transform_equals_kron_on_row_major_tile():
    gen = torch.Generator().manual_seed(1)
    tiles = torch.randn(3, 5, 4, 8, generator=gen)  # (W, chunks, h, w)
    mats = (dct_matrix(4), dct_matrix(8))
    coef = dct_chunks(tiles, mats)
    kron = chunk_transform_matrix((4, 8))
    via_kron = tiles.reshape(3, 5, 32) @ kron.T
    assert torch.allclose(coef.reshape(3, 5, 32), via_kron, atol=1e-5)
    assert torch.allclose(idct_chunks(coef, mats), tiles, atol=1e-5)
    # Position p = a*w + b holds vertical frequency a, horizontal b: DC of a constant tile.
    const = torch.ones(1, 4, 8)
    c = dct_chunks(const, mats).reshape(32)
    assert c[0] == pytest.approx(math.sqrt(32), rel=1e-6)
    assert c[1:].abs().max() < 1e-5


def test_1d_transform_roundtrip_and_transform_rows():
    gen = torch.Generator().manual_seed(2)
    runs = torch.randn(4, 16, generator=gen)
    mats = (dct_matrix(16),)
    assert torch.allclose(idct_chunks(dct_chunks(runs, mats), mats), runs, atol=1e-6)
    pos = torch.tensor([5, 0, 31, 12])
    assert torch.equal(transform_rows((4, 8), pos), chunk_transform_matrix((4, 8))[pos])
    assert torch.equal(transform_rows((16,), pos[:2]), dct_matrix(16)[pos[:2]])


@pytest.mark.parametrize(
    ("n", "target", "rule_r", "rule_p2"),
    [
        (384, 64, 64, 64),
        (384, 256, 192, 128),
        (4096, 64, 64, 64),
        (1152, 64, 64, 64),
        (1152, 256, 192, 128),
        (128, 256, 128, 128),
        (100, 64, 50, 4),
        (7, 64, 7, 1),
        (97, 64, 1, 1),
    ],
)
def test_chunk_rules(n, target, rule_r, rule_p2):
    assert side_divisor(n, target) == rule_r
    assert side_pow2(n, target) == rule_p2


def test_2d_chunker_tiles_row_major_and_roundtrips():
    ch = make_chunker((6, 8), "2d", 4, "R")  # tiles of 3 x 4, 2 x 2 of them
    assert (ch.h, ch.w, ch.chunks, ch.m, ch.two_d) == (3, 4, 4, 12, True)
    x = torch.arange(48.0).reshape(6, 8)
    tiles = ch.to_chunks(x)
    assert tiles.shape == (4, 3, 4)
    assert torch.equal(tiles[1], x[0:3, 4:8])  # row-major over (row-block, column-block)
    assert torch.equal(tiles[2], x[3:6, 0:4])
    assert torch.equal(ch.from_chunks(tiles), x)
    stacked = torch.stack([x, -x])
    assert torch.equal(ch.from_chunks(ch.to_chunks(stacked)), stacked)


def test_1d_runs_straddle_rows_and_vectors_fall_back_to_runs():
    ch = make_chunker((1152, 384), "1d", 256, "R")
    assert (ch.m, ch.chunks, ch.two_d) == (256, 1728, False)
    x = torch.arange(12.0).reshape(3, 4)
    runs = make_chunker((3, 4), "1d", 6, "R").to_chunks(x)
    assert torch.equal(runs[0], torch.tensor([0.0, 1, 2, 3, 4, 5]))  # crosses a row boundary
    vec = make_chunker((384,), "2d", 64, "R")
    assert (vec.m, vec.chunks, vec.two_d, vec.chunk_shape) == (64, 6, False, (64,))
    with pytest.raises(ValueError, match="chunk_mode"):
        make_chunker((4, 4), "3d", 4)


@pytest.mark.parametrize(
    ("mode", "chunk", "rule", "k_matrix", "k_vector"),
    [
        ("2d", 64, "R", 256, 4),
        ("1d", 256, "R", 16, 12),
        ("1d", 256, "P2", 16, 8),
        ("1d", 64, "R", 4, 4),
    ],
)
def test_k_per_chunk_table_at_width_384(mode, chunk, rule, k_matrix, k_vector):
    matrix = make_chunker((1152, 384), mode, chunk, rule)
    vector = make_chunker((384,), mode, chunk, rule)
    assert k_per_chunk(matrix.m, 1 / 16) == k_matrix
    assert k_per_chunk(vector.m, 1 / 16) == k_vector
    # Every chunking keeps exactly numel / 16 values at width 384.
    for ch in (matrix, vector):
        assert ch.chunks * k_per_chunk(ch.m, 1 / 16) * 16 == ch.numel


def test_k_uses_python_round_and_at_least_one():
    assert k_per_chunk(64, 32 / 4096) == 1  # 0.5 rounds to 0 (ties to even), then max(1, .)
    assert k_per_chunk(4096, 32 / 4096) == 32
    assert k_per_chunk(40, 1 / 16) == 2  # 2.5 -> 2
    assert k_per_chunk(56, 1 / 16) == 4  # 3.5 -> 4
