"""Coefficient selections (spec §8): fixed band shapes, top-k, calibrated band."""

import pytest

torch = pytest.importorskip("torch")

from trainer.config import RunConfig  # noqa: E402
from trainer.variants.dct import dct_matrix  # noqa: E402
from trainer.variants.demo import DeMo  # noqa: E402
from trainer.variants.selection import (  # noqa: E402
    band_positions,
    calibrated_positions,
    random_order,
    topk_select,
)

torch.set_num_threads(1)


def as_set(pos, w):
    return {divmod(int(p), w) for p in pos}


def test_low_band_64x64_k256_is_16x16_corner():
    pos = band_positions((64, 64), 256, "low", 0)
    assert as_set(pos, 64) == {(i, j) for i in range(16) for j in range(16)}
    assert int(pos[0]) == 0  # DC first
    # Square shells outward: the first 4 positions are shell 0 and shell 1 in (sum, i) order.
    assert [divmod(int(p), 64) for p in pos[:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_zigzag_64x64_k256_antidiagonals():
    pos = band_positions((64, 64), 256, "zigzag", 0)
    expected = {(i, j) for i in range(64) for j in range(64) if i + j <= 21}
    assert len(expected) == 253
    assert as_set(pos, 64) == expected | {(0, 22), (1, 21), (2, 20)}


def test_high_64x64_k256_outer_shells():
    pos = band_positions((64, 64), 256, "high", 0)
    shells = {(i, j) for i in range(64) for j in range(64) if max(i, j) >= 62}
    assert len(shells) == 252
    assert as_set(pos, 64) == shells | {(61, 61), (61, 60), (60, 61), (61, 59)}
    assert divmod(int(pos[0]), 64) == (63, 63)


def test_low_ordering_on_a_non_square_tile_uses_normalised_frequencies():
    # h=2, w=4: fi = i/2, fj = j/4; keys (max, sum, i) give this exact order.
    pos = band_positions((2, 4), 8, "low", 0)
    assert pos.tolist() == [0, 1, 2, 4, 5, 6, 3, 7]
    assert band_positions((2, 4), 8, "high", 0).tolist() == [7, 3, 6, 5, 4, 2, 1, 0]


def test_1d_bands():
    assert band_positions((256,), 16, "low", 0).tolist() == list(range(16))
    assert band_positions((256,), 16, "zigzag", 0).tolist() == list(range(16))
    assert band_positions((256,), 4, "high", 0).tolist() == [255, 254, 253, 252]


def test_random_band_is_seeded_randperm_shared_by_chunk_shape():
    gen = torch.Generator().manual_seed(5)
    expected = torch.randperm(64 * 64, generator=gen)[:256]
    assert torch.equal(band_positions((64, 64), 256, "random", 5), expected)
    assert torch.equal(band_positions((64, 64), 256, "random", 5), expected)  # same every call
    assert not torch.equal(band_positions((64, 64), 256, "random", 6), expected)
    assert torch.equal(band_positions((128,), 8, "random", 5), random_order(128, 5)[:8])
    with pytest.raises(ValueError, match="band shape"):
        band_positions((8,), 2, "calib", 0)


def test_topk_select_picks_largest_magnitudes_per_chunk():
    coef = torch.tensor([[0.1, -5.0, 2.0, 0.0], [3.0, 0.2, -0.3, -4.0]])
    idx, val = topk_select(coef, 2)
    assert [set(r) for r in idx.tolist()] == [{1, 2}, {0, 3}]
    assert torch.equal(val, coef.gather(-1, idx))


def test_calibrated_positions_from_planted_energy_map():
    energy = torch.zeros(64, dtype=torch.float64)
    planted = [40, 3, 17, 63]
    energy[planted] = torch.tensor([4.0, 9.0, 1.0, 2.0], dtype=torch.float64)
    assert calibrated_positions(energy, 4).tolist() == sorted(planted)
    assert calibrated_positions(energy, 2).tolist() == [3, 40]
    assert calibrated_positions(torch.zeros(8, dtype=torch.float64), 3).tolist() == [0, 1, 2]


def test_demo_calibrated_band_follows_planted_gradient_energy():
    """D collects the energy map over its window and freezes the top-k positions (§8.3)."""
    cfg = RunConfig(
        variant="calib",
        band="calib",
        chunk_mode="1d",
        chunk=32,
        keep=4 / 32,
        calib_start=1,
        calib_steps=3,
        diag_every=0,
    )
    param = torch.nn.Parameter(torch.zeros(64))
    demo = DeMo([("w", param)], cfg, workers=2)
    planted = [3, 9, 20, 31]
    gen = torch.Generator().manual_seed(0)
    d = dct_matrix(32)
    assert demo.sent_positions("w").tolist() == [0, 1, 2, 3]  # low band before calibration
    for step in range(5):
        coef = 1e-3 * torch.randn(2, 2, 32, generator=gen)
        coef[..., planted] += torch.tensor([1.0, 2.0, 3.0, 4.0])
        demo.step({"w": (coef @ d).reshape(2, 64)}, 1e-2, step)
        if step < 3:
            assert demo.sent_positions("w").tolist() == [0, 1, 2, 3]
    assert demo.sent_positions("w").tolist() == planted
