"""Optics emulation (spec §9): full scale, noise, bit planes, accuracy on white input, and the
optics variants E / E' inside the DeMo step (noise order, feedback, full-scale re-set)."""

import math

import pytest

torch = pytest.importorskip("torch")

from trainer.config import RunConfig  # noqa: E402
from trainer.variants.chunking import make_chunker  # noqa: E402
from trainer.variants.dct import chunk_transform_matrix, dct_matrix  # noqa: E402
from trainer.variants.demo import DeMo  # noqa: E402
from trainer.variants.optics import (  # noqa: E402
    OpticsEmulator,
    chunk_full_scale,
    full_scale,
    input_scale,
    readout_sigma,
)

torch.set_num_threads(1)

SHAPES = [
    ("wte.weight", (16, 48)),
    ("blocks.0.ln1.weight", (384,)),
    ("blocks.0.fc.weight", (64, 16)),
]


def test_full_scale_and_sigma():
    assert chunk_full_scale((256,)) == pytest.approx(16.0, rel=1e-6)
    assert chunk_full_scale((128,)) == pytest.approx(math.sqrt(128), rel=1e-6)
    assert chunk_full_scale((64, 64)) == pytest.approx(64.0, rel=1e-6)
    assert full_scale(chunk_transform_matrix((8, 16))) == pytest.approx(math.sqrt(128), rel=1e-6)
    assert readout_sigma(16.0, 8.0) == pytest.approx(0.036084, abs=1e-6)
    assert readout_sigma(16.0, None) == 0.0
    assert input_scale(16.0, 4, 4.0) == pytest.approx(8.0)
    assert input_scale(0.0, 4, 4.0) == 1.0


def white_error(planes, enob, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2000, 256, generator=gen)
    t_band = dct_matrix(256)[:16]
    scale = 4.0 * float(x.square().mean().sqrt())
    emulator = OpticsEmulator(t_band, readout_sigma(chunk_full_scale((256,)), enob), planes)
    noise = torch.randn(emulator.noise_shape(2000), generator=gen) if enob else None
    y, _ = emulator.readout(x, scale, noise)
    exact = x @ t_band.T
    return float((y - exact).norm() / exact.norm())


@pytest.mark.parametrize(
    ("planes", "enob", "low", "high"),
    [
        (8, None, 0.0085, 0.0105),
        (12, None, 0.0015, 0.0035),
        (8, 8.0, 0.15, 0.19),
        (4, None, 0.15, 0.18),
    ],
)
def test_white_input_accuracy_matches_section_9_7(planes, enob, low, high):
    """0.9% (8 planes), 0.2% (12 planes), ~16-17% (8 planes, ENOB 8), 16.5% (4 planes)."""
    assert low < white_error(planes, enob) < high


def test_fast_readout_equals_literal_per_plane_model():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 64, generator=gen)
    t_band = dct_matrix(64)[[0, 3, 7, 9]]
    scale = torch.tensor([[0.5], [1.0], [2.0], [4.0], [3.0]])  # per chunk row, broadcast over W
    emulator = OpticsEmulator(t_band, 0.01, 8)
    noise = torch.randn(emulator.noise_shape(10), generator=gen).view(8, 2, 5, 4)
    for n in (None, noise):
        fast, clipped_fast = emulator.readout(x, scale, n)
        literal, clipped_literal = emulator.readout_per_plane(x, scale, n)
        assert clipped_fast == clipped_literal > 0
        assert torch.allclose(fast, literal, atol=1e-5)


def test_planes_are_twos_complement_and_clip_symmetrically():
    """With an identity 'transform' the recombined planes give back q exactly."""
    emulator = OpticsEmulator(torch.eye(6), 0.0, 4)  # qmax = 7
    x = torch.tensor([[0.0, 1.0, -1.0, 0.5, -3.0, 2.5]])
    y, clipped = emulator.readout_per_plane(x, 1.0, None)
    q = torch.tensor([[0.0, 7, -7, 4, -7, 7]])  # round half to even: 3.5 -> 4
    assert clipped == 2
    assert torch.equal(y, q / 7)
    exact = OpticsEmulator(torch.eye(3), 0.0, None)
    assert exact.exact and not emulator.exact


def make_params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [(n, torch.nn.Parameter(0.02 * torch.randn(s, generator=gen))) for n, s in SHAPES]


def grads_at(step, params, workers):
    gen = torch.Generator().manual_seed(1000 + step)
    return {n: torch.randn(workers, *p.shape, generator=gen) for n, p in params}


def run(cfg, steps, workers=2, **kwargs):
    params = make_params()
    demo = DeMo(params, cfg, workers, **kwargs)
    for step in range(steps):
        demo.step(grads_at(step, params, workers), 1e-3, step)
    return params, demo


def assert_same_run(a, b):
    for (_, pa), (_, pb) in zip(a[0], b[0], strict=True):
        assert torch.equal(pa, pb)
    da, db = a[1].state_dict()["delta"], b[1].state_dict()["delta"]
    for name in da:
        assert torch.equal(da[name], db[name])


def optics_cfg(**kw):
    base = dict(
        variant="optics",
        chunk_mode="1d",
        chunk=256,
        calib_start=1,
        calib_steps=2,
        diag_every=0,
        planes=8,
        enob=8.0,
        kappa=4.0,
        seed=3,
    )
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.parametrize(("mode", "chunk"), [("1d", 256), ("2d", 16)])
def test_exact_optics_equals_band_with_power_of_2_chunks(mode, chunk):
    e = run(optics_cfg(planes=None, enob=None, chunk_mode=mode, chunk=chunk), 6)
    c = run(
        RunConfig(variant="band", chunk_mode=mode, chunk=chunk, diag_every=0, seed=3),
        6,
        chunk_rule_override="P2",
    )
    assert e[1].optics_active
    assert e[1].clip_counts() == (0, 0)
    assert_same_run(e, c)


def test_optics_before_calibration_end_sends_the_exact_band():
    e = run(optics_cfg(), 3)
    c = run(
        RunConfig(variant="band", chunk_mode="1d", chunk=256, diag_every=0, seed=3),
        3,
        chunk_rule_override="P2",
    )
    assert e[1].optics_active and e[1].clip_counts() == (0, 0)
    assert_same_run(e, c)
    e4 = run(optics_cfg(), 4)
    c4 = run(
        RunConfig(variant="band", chunk_mode="1d", chunk=256, diag_every=0, seed=3),
        4,
        chunk_rule_override="P2",
    )
    assert not torch.equal(e4[0][0][1], c4[0][0][1])


def test_switch_loopback_equals_optics_sent_and_exact_equals_exact():
    a = run(optics_cfg(feedback="sent", fs_every=2), 7)
    b = run(optics_cfg(variant="optics_switch", feedback="loopback", fs_every=2), 7)
    assert_same_run(a, b)
    assert a[1].clip_counts() == b[1].clip_counts()
    c = run(optics_cfg(feedback="exact"), 7)
    d = run(optics_cfg(variant="optics_switch", feedback="exact"), 7)
    assert_same_run(c, d)
    mean = run(optics_cfg(variant="optics_switch", feedback="mean"), 7)
    assert not torch.equal(mean[0][0][1], a[0][0][1])


def test_optics_step_matches_hand_computation_with_noise_in_parameter_order():
    """One optics step rebuilt by hand: noise drawn per tensor in parameter order with shape
    (P, W*chunks, k); the literal per-plane model; feedback 'sent' removes exactly tx."""
    W, lr, cfg = 2, 1e-3, optics_cfg(feedback="sent")
    params = make_params()
    demo = DeMo(params, cfg, W)
    for step in range(3):  # calibration closes after step 2
        demo.step(grads_at(step, params, W), lr, step)
    before = demo.state_dict()
    p_before = {n: p.detach().clone() for n, p in params}
    grads = grads_at(3, params, W)
    demo.step(grads, lr, 3)
    after = demo.state_dict()

    gen = torch.Generator().manual_seed(cfg.seed + 777)
    for name, param in params:
        ch = make_chunker(tuple(param.shape), "1d", 256, "P2")
        k = max(1, round(ch.m / 16))
        t_band = dct_matrix(ch.m)[:k]
        fs = math.sqrt(ch.m)
        emulator = OpticsEmulator(t_band, fs * 2.0**-8 / math.sqrt(3.0), 8)
        noise = torch.randn((8, W * ch.chunks, k), generator=gen)
        acc = cfg.decay * before["delta"][name] + lr * grads[name]
        x = ch.to_chunks(acc).reshape(W * ch.chunks, ch.m)
        tx, _ = emulator.readout_per_plane(x, before["scale_in"][name], noise)
        expected_delta = x - tx @ t_band
        assert torch.allclose(
            ch.to_chunks(after["delta"][name]).reshape(W * ch.chunks, ch.m),
            expected_delta,
            atol=1e-6,
        )
        update = (tx.view(W, ch.chunks, k).sum(0) / W) @ t_band
        expected_p = p_before[name] - lr * torch.sign(ch.from_chunks(update))
        assert torch.allclose(param.detach(), expected_p, atol=1e-7)
    assert torch.equal(after["noise_rng"], gen.get_state())


def test_full_scale_reset_schedule():
    """Calibration closes after step 2 (calib 1..2); with fs_every 3 the scale is re-set after
    steps 5 and 8, from the deltas of the steps since the previous setting."""
    cfg = optics_cfg(fs_every=3)
    params = make_params()
    demo = DeMo(params, cfg, 2)
    scales, counts = [], []
    for step in range(9):
        demo.step(grads_at(step, params, 2), 1e-3, step)
        state = demo.state_dict()
        scales.append(state["scale_in"]["wte.weight"])
        counts.append(state["count"]["wte.weight"])
    numel = 2 * 16 * 48
    assert scales[0] == scales[1] == 1.0
    assert counts == [0, numel, 0, numel, 2 * numel, 0, numel, 2 * numel, 0]
    changed = [s for s in range(1, 9) if scales[s] != scales[s - 1]]
    assert changed == [2, 5, 8]
    fixed = DeMo(make_params(), optics_cfg(fs_every=0), 2)
    for step in range(6):
        fixed.step(grads_at(step, params, 2), 1e-3, step)
    assert fixed.state_dict()["count"]["wte.weight"] == 0


def test_clip_counts_cover_every_quantised_value():
    params, demo = run(optics_cfg(kappa=0.5), 6)
    clipped, total = demo.clip_counts()
    numel = sum(math.prod(s) for _, s in SHAPES)
    assert total == 3 * 2 * numel  # optics ran at steps 3, 4, 5
    assert 0 < clipped < total
    assert demo.optics_active


@pytest.mark.parametrize(
    ("variant", "feedback"),
    [
        ("optics", "loopback"),
        ("optics", "mean"),
        ("optics_switch", "sent"),
        ("band", "sent"),
        ("topk", "mean"),
    ],
)
def test_feedback_is_validated_per_variant(variant, feedback):
    with pytest.raises(ValueError, match="feedback"):
        DeMo(make_params(), RunConfig(variant=variant, feedback=feedback), 2)


def test_optics_rejects_chunks_the_optics_cannot_take():
    params = [("w", torch.nn.Parameter(torch.zeros(1024)))]
    with pytest.raises(ValueError, match="native"):
        DeMo(params, optics_cfg(chunk=512, native=256), 2)
    with pytest.raises(ValueError, match="adamw"):
        DeMo(params, RunConfig(variant="adamw"), 2)
