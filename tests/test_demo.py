"""The DeMo step (spec §6, §8, §11): agreement with DeMo's published algorithm and with a plain
per-tensor restatement of §6.2, error feedback, calibration, diagnostics, determinism, resume."""

import io
import math

import pytest

torch = pytest.importorskip("torch")

from trainer.config import RunConfig  # noqa: E402
from trainer.variants.demo import DeMo  # noqa: E402
from trainer.variants.selection import band_positions  # noqa: E402

torch.set_num_threads(1)

DECAY = 0.999


# ----------------------------------------------------------------------- reference algorithms


def fft_dct_basis(n: int) -> torch.Tensor:
    """Orthonormal DCT-II matrix D (rows = frequencies), from an FFT-based DCT of the identity
    in float32, as DeMo's reference builds its basis (Makhoul's even/odd reordering)."""
    x = torch.eye(n, dtype=torch.float32)
    v = torch.cat([x[:, ::2], x[:, 1::2].flip([1])], dim=1)
    spec = torch.fft.fft(v, dim=1)
    k = torch.arange(n, dtype=torch.float32)
    w = torch.exp(-1j * math.pi * k / (2 * n))
    coef = (spec * w).real * 2
    coef[:, 0] /= math.sqrt(n) * 2
    coef[:, 1:] /= math.sqrt(n / 2) * 2
    return coef.T.contiguous()  # coef[i, f] is frequency f of unit vector i


def largest_divisor(n: int, target: int) -> int:
    return n if n <= target else max(d for d in range(1, target + 1) if n % d == 0)


class ReferenceDeMo:
    """bloc97/DeMo's step restated from spec §6.3 (one rank, weight decay 0, top-k count)."""

    def __init__(self, params, chunk: int, topk: int, lr: float):
        self.params, self.chunk, self.topk, self.lr = params, chunk, topk, lr
        self.delta = {n: torch.zeros_like(p) for n, p in params}

    def encode(self, x):
        if x.dim() > 1:
            h, w = largest_divisor(x.shape[0], self.chunk), largest_divisor(x.shape[1], self.chunk)
            tiles = x.reshape(x.shape[0] // h, h, x.shape[1] // w, w).permute(0, 2, 1, 3)
            coef = fft_dct_basis(h) @ tiles @ fft_dct_basis(w).T
            return coef.reshape(*coef.shape[:2], h * w), (h, w)
        m = largest_divisor(x.numel(), self.chunk)
        return x.reshape(-1, m) @ fft_dct_basis(m).T, (m,)

    def decode(self, coef, shape, chunk_shape):
        if len(chunk_shape) == 2:
            h, w = chunk_shape
            tiles = coef.reshape(*coef.shape[:2], h, w)
            x = fft_dct_basis(h).T @ tiles @ fft_dct_basis(w)
            return x.permute(0, 2, 1, 3).reshape(shape)
        return (coef @ fft_dct_basis(chunk_shape[0])).reshape(shape)

    def step(self, grads):
        for name, p in self.params:
            d = self.delta[name]
            d.mul_(DECAY).add_(self.lr * grads[name])
            coef, chunk_shape = self.encode(d)
            k = min(max(self.topk, 1), coef.shape[-1])
            idx = torch.topk(coef.abs(), k, dim=-1, sorted=False).indices
            val = coef.gather(-1, idx)
            local = torch.zeros_like(coef).scatter_reduce(
                -1, idx, val, reduce="mean", include_self=False
            )
            d.sub_(self.decode(local, d.shape, chunk_shape))
            gathered = torch.zeros_like(coef).scatter_reduce(
                -1, idx, val, reduce="mean", include_self=False
            )
            p.data.sub_(self.lr * torch.sign(self.decode(gathered, d.shape, chunk_shape)))


def kron_dct(chunk_shape):
    mats = [fft_dct_basis(s).double() for s in chunk_shape]
    return mats[0] if len(mats) == 1 else torch.kron(mats[0], mats[1])


def to_chunks(x, chunk_shape):
    """(W, *shape) -> (W, chunks, m), tiles row-major, in float64."""
    W = x.shape[0]
    if len(chunk_shape) == 1:
        return x.reshape(W, -1, chunk_shape[0]).double()
    h, w = chunk_shape
    r, c = x.shape[1:]
    return x.reshape(W, r // h, h, c // w, w).permute(0, 1, 3, 2, 4).reshape(W, -1, h * w).double()


def from_chunks(c, shape, chunk_shape):
    if len(chunk_shape) == 1:
        return c.reshape(shape)
    h, w = chunk_shape
    r, cc = shape
    return c.reshape(r // h, cc // w, h, w).permute(0, 2, 1, 3).reshape(shape)


class PerTensorDeMo:
    """Spec §6.2 for W workers, one tensor at a time, in float64 with explicit kron transforms:
    the plain restatement the batched implementation must agree with."""

    def __init__(self, params, chunk_shapes, ks, variant, band, seed, workers):
        self.params, self.chunk_shapes, self.ks = params, chunk_shapes, ks
        self.variant, self.band, self.seed, self.W = variant, band, seed, workers
        self.delta = {n: torch.zeros(workers, *p.shape, dtype=torch.float64) for n, p in params}

    def step(self, grads, lr):
        for name, p in self.params:
            cs, k = self.chunk_shapes[name], self.ks[name]
            t = kron_dct(cs)
            self.delta[name] = DECAY * self.delta[name] + lr * grads[name].double()
            x = to_chunks(self.delta[name], cs)  # (W, chunks, m)
            coef = x @ t.T
            if self.variant == "topk":
                idx = torch.topk(coef.abs(), k, dim=-1).indices
            else:
                pos = band_positions(cs, k, self.band, self.seed)
                idx = pos.expand(*coef.shape[:2], k)
            val = coef.gather(-1, idx)
            sent = torch.zeros_like(coef).scatter(-1, idx, val)
            x = x - sent @ t
            self.delta[name] = torch.stack(
                [from_chunks(x[w], tuple(p.shape), cs) for w in range(self.W)]
            )
            # Aggregate: concatenate workers along the chunk axis, scatter-mean per position.
            idx_all = torch.cat(list(idx), dim=-1)
            val_all = torch.cat(list(val), dim=-1)
            agg = torch.zeros(coef.shape[1:], dtype=torch.float64).scatter_reduce(
                -1, idx_all, val_all, reduce="mean", include_self=False
            )
            update = from_chunks(agg @ t, tuple(p.shape), cs)
            p.data.sub_(lr * torch.sign(update).float())


# ------------------------------------------------------------------------------- fixtures

SHAPES = [
    ("wte.weight", (32, 16)),
    ("wpe.weight", (16, 16)),
    ("blocks.0.ln1.weight", (16,)),
    ("blocks.0.attn.qkv.weight", (48, 16)),
    ("blocks.0.fc.weight", (64, 16)),
    ("blocks.0.out.weight", (16, 64)),
    ("ln_f.weight", (16,)),
]


def make_params(shapes=SHAPES, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [(n, torch.nn.Parameter(0.02 * torch.randn(s, generator=gen))) for n, s in shapes]


def grads_at(step, params, workers):
    gen = torch.Generator().manual_seed(500 + step)
    return {n: torch.randn(workers, *p.shape, generator=gen) for n, p in params}


def run(cfg, steps, workers=2, params=None, **kwargs):
    params = params or make_params()
    demo = DeMo(params, cfg, workers, **kwargs)
    for step in range(steps):
        demo.step(grads_at(step, params, workers), 1e-3, step)
    return params, demo


def same_run(a, b) -> bool:
    if not all(torch.equal(pa, pb) for (_, pa), (_, pb) in zip(a[0], b[0], strict=True)):
        return False
    da, db = a[1].state_dict()["delta"], b[1].state_dict()["delta"]
    return all(torch.equal(da[n], db[n]) for n in da)


def cfg_of(**kw):
    base = dict(chunk_mode="2d", chunk=8, diag_every=0, seed=7)
    base.update(kw)
    return RunConfig(**base)


# ----------------------------------------------------------------------------------- tests


def test_fft_basis_agrees_with_cosine_basis():
    from trainer.variants.dct import dct_matrix

    for n in (16, 64, 128):
        assert torch.allclose(fft_dct_basis(n), dct_matrix(n), atol=1e-6)


def test_topk_matches_demo_reference_over_three_steps():
    """Spec §6.4 item 8: one worker, chunk 64, k forced to 32 (keep 32/4096, and 32 for the
    128-vector whose 64-runs would otherwise keep 1): same parameters and delta within 1e-6."""
    shapes = [("mat", (128, 192)), ("vec", (128,)), ("small", (64, 64))]
    lr = 1e-3
    ours = make_params(shapes, seed=4)
    ref_params = [(n, torch.nn.Parameter(p.detach().clone())) for n, p in ours]
    cfg = RunConfig(variant="topk", chunk_mode="2d", chunk=64, keep=32 / 4096, diag_every=0)
    demo = DeMo(ours, cfg, 1, k_overrides={"vec": 32})
    ref = ReferenceDeMo(ref_params, chunk=64, topk=32, lr=lr)
    gen = torch.Generator().manual_seed(11)
    for step in range(3):
        grads = {n: torch.randn(1, *p.shape, generator=gen) for n, p in ours}
        demo.step(grads, lr, step)
        ref.step({n: g[0] for n, g in grads.items()})
    delta = demo.state_dict()["delta"]
    for (name, p), (_, rp) in zip(ours, ref_params, strict=True):
        assert torch.allclose(p, rp, atol=1e-6, rtol=0)
        assert torch.allclose(delta[name][0], ref.delta[name], atol=1e-6, rtol=0)
    assert not torch.allclose(ours[0][1], make_params(shapes, seed=4)[0][1])  # it did move


@pytest.mark.parametrize(
    ("variant", "band", "mode", "chunk", "workers"),
    [
        ("topk", "low", "2d", 8, 3),
        ("band", "low", "2d", 8, 3),
        ("band", "zigzag", "2d", 16, 2),
        ("band", "high", "1d", 32, 2),
        ("band", "random", "1d", 64, 3),
        ("band", "random", "2d", 8, 2),
    ],
)
def test_batched_step_equals_per_tensor_restatement(variant, band, mode, chunk, workers):
    """Grouping tensors by chunk shape changes nothing: same result as §6.2 per tensor."""
    cfg = cfg_of(variant=variant, band=band, chunk_mode=mode, chunk=chunk, keep=1 / 8)
    ours = make_params()
    ref_params = [(n, torch.nn.Parameter(p.detach().clone())) for n, p in ours]
    demo = DeMo(ours, cfg, workers)
    from trainer.variants.chunking import k_per_chunk, make_chunker

    chunkers = {n: make_chunker(tuple(p.shape), mode, chunk, "R") for n, p in ours}
    ref = PerTensorDeMo(
        ref_params,
        {n: c.chunk_shape for n, c in chunkers.items()},
        {n: k_per_chunk(c.m, cfg.keep) for n, c in chunkers.items()},
        variant,
        band,
        cfg.seed,
        workers,
    )
    for step in range(3):
        grads = grads_at(step, ours, workers)
        demo.step(grads, 1e-3, step)
        ref.step(grads, 1e-3)
    delta = demo.state_dict()["delta"]
    for (name, p), (_, rp) in zip(ours, ref_params, strict=True):
        assert torch.equal(p, rp), name
        assert torch.allclose(delta[name].double(), ref.delta[name], atol=1e-8, rtol=0)


def test_exact_feedback_removes_the_band_and_keeps_the_rest():
    """With exact feedback the band coefficients of delta are 0 after the step (to float32
    rounding: ~1e-8 of the delta's size) and every other coefficient is what it was."""
    from trainer.variants.chunking import make_chunker

    cfg = cfg_of(variant="band", band="zigzag", chunk=8, keep=1 / 4)
    params, demo = run(cfg, 3)
    before = demo.state_dict()["delta"]
    grads = grads_at(3, params, 2)
    demo.step(grads, 1e-3, 3)
    after = demo.state_dict()["delta"]
    for name, p in params:
        ch = make_chunker(tuple(p.shape), "2d", 8, "R")
        t = kron_dct(ch.chunk_shape)
        pos = band_positions(ch.chunk_shape, max(1, round(ch.m / 4)), "zigzag", cfg.seed)
        acc = (
            to_chunks(DECAY * before[name].double() + 1e-3 * grads[name].double(), ch.chunk_shape)
            @ t.T
        )
        now = to_chunks(after[name], ch.chunk_shape) @ t.T
        scale = acc.abs().max()
        assert acc[..., pos].abs().max() > 0.01 * scale  # the band held real energy
        assert now[..., pos].abs().max() < 1e-6 * scale
        off = torch.ones(ch.m, dtype=torch.bool)
        off[pos] = False
        assert torch.allclose(now[..., off], acc[..., off], atol=1e-6 * float(scale))


def test_zero_gradient_at_zero_state_leaves_weights_unchanged():
    params = make_params()
    start = [p.detach().clone() for _, p in params]
    demo = DeMo(params, cfg_of(variant="topk"), 2)
    demo.step({n: torch.zeros(2, *p.shape) for n, p in params}, 1e-3, 0)
    assert all(torch.equal(p, s) for (_, p), s in zip(params, start, strict=True))


def test_calib_equals_low_band_until_calibration_ends_then_freezes_own_positions():
    low = cfg_of(variant="band", band="low", chunk_mode="1d", chunk=32, keep=1 / 8)
    calib = cfg_of(
        variant="calib",
        band="calib",
        chunk_mode="1d",
        chunk=32,
        keep=1 / 8,
        calib_start=2,
        calib_steps=3,
        diag_every=5,
    )
    assert same_run(run(low, 5), run(calib, 5))  # window is steps 2..4, closing after step 4
    _, before = run(calib, 4)
    assert not before.calibrated and before.sent_positions("wte.weight").tolist() == [0, 1, 2, 3]
    params, demo = run(calib, 6)
    assert demo.calibrated
    positions = demo.sent_positions("wte.weight").tolist()
    assert positions == sorted(positions) and len(positions) == 4 and positions != [0, 1, 2, 3]
    assert not same_run(run(low, 6), (params, demo))


def test_calibrated_selector_appears_in_diagnostics_after_calibration():
    calib = cfg_of(variant="calib", band="calib", calib_start=0, calib_steps=2, diag_every=1)
    params = make_params()
    demo = DeMo(params, calib, 2)
    seen = []
    for step in range(4):
        rows = demo.step(grads_at(step, params, 2), 1e-3, step).diagnostics
        seen.append({r["selector"] for r in rows})
    assert "calib" not in seen[0] and "calib" not in seen[1]
    assert "calib" in seen[2] and "calib" in seen[3]


def expected_shares(params, grads0, chunk, mode, k_keep, seed, include):
    """Independent §11 computation on worker 0's gradient: pooled per tensor, energy-weighted
    per group."""
    from trainer.variants.chunking import k_per_chunk, make_chunker
    from trainer.variants.diagnostics import subgroup

    kept, total = {}, {}
    for name, p in params:
        ch = make_chunker(tuple(p.shape), mode, chunk, "R")
        if not include(ch):
            continue
        k = k_per_chunk(ch.m, k_keep)
        sq = (to_chunks(grads0[name][None], ch.chunk_shape)[0] @ kron_dct(ch.chunk_shape).T) ** 2
        energies = {"topk": torch.topk(sq, k, dim=-1).values.sum()}
        for shape in ("low", "zigzag", "high", "random"):
            energies[shape] = sq[:, band_positions(ch.chunk_shape, k, shape, seed)].sum()
        groups = ["all"] + ([subgroup(name)] if subgroup(name) else [])
        for group in groups:
            total[group] = total.get(group, 0.0) + float(sq.sum())
            for sel, e in energies.items():
                kept[(group, sel)] = kept.get((group, sel), 0.0) + float(e)
    return {key: value / total[key[0]] for key, value in kept.items()}


@pytest.mark.parametrize("mode", ["2d", "1d"])
def test_diagnostics_shares_groups_and_vector_exclusion(mode):
    """At step 0 delta = lr g, momentum = lr g and grad = g: the same shares for all three.
    In 2-D mode LayerNorm vectors are left out even when they hold most of the energy."""
    cfg = cfg_of(variant="band", chunk_mode=mode, chunk=8, keep=1 / 8, diag_every=1)
    params = make_params()
    demo = DeMo(params, cfg, 2)
    grads = grads_at(0, params, 2)
    grads["blocks.0.ln1.weight"] *= 1000.0
    rows = demo.step(grads, 1e-3, 0).diagnostics
    # the rows come with the step's record: nothing stays on the DeMo to be taken later
    assert not hasattr(demo, "take_diagnostics") and not hasattr(demo, "_diag_rows")
    include = (lambda ch: ch.two_d) if mode == "2d" else (lambda ch: True)
    expected = expected_shares(
        params, {n: g[0] for n, g in grads.items()}, 8, mode, 1 / 8, cfg.seed, include
    )
    assert len(rows) == 3 * 4 * 5
    for row in rows:
        assert row["share"] == pytest.approx(expected[(row["group"], row["selector"])], rel=1e-4)
    all_low = {
        r["source"]: r["share"] for r in rows if (r["group"], r["selector"]) == ("all", "low")
    }
    assert all_low["delta"] == pytest.approx(all_low["grad"], rel=1e-5)
    assert all_low["momentum"] == pytest.approx(all_low["grad"], rel=1e-5)
    if mode == "1d":  # the huge LayerNorm energy dominates "all" but no subgroup
        assert rows[0]["share"] != pytest.approx(expected[("attn", "topk")], rel=1e-2)


def test_diagnostics_only_on_diag_steps_and_timing_reported():
    params = make_params()
    demo = DeMo(params, cfg_of(variant="topk", diag_every=3), 2)
    got = []
    for step in range(6):
        record = demo.step(grads_at(step, params, 2), 1e-3, step)
        got.append(record.diagnostics is not None)
        timing = (record.compress_s, record.update_s, record.diag_s, record.comm_s)
        assert all(v >= 0 for v in (*timing, record.exchange_bytes))
    assert got == [False, False, True, False, False, True]


def test_same_seed_same_bits():
    cfg = cfg_of(variant="band", band="random", chunk_mode="1d", chunk=32)
    assert same_run(run(cfg, 4), run(cfg, 4))


@pytest.mark.parametrize(
    "cfg",
    [
        cfg_of(variant="topk"),
        cfg_of(
            variant="calib", band="calib", chunk_mode="1d", chunk=32, calib_start=2, calib_steps=4
        ),
        cfg_of(
            variant="optics",
            chunk_mode="1d",
            chunk=64,
            calib_start=1,
            calib_steps=2,
            fs_every=2,
            feedback="sent",
        ),
        cfg_of(
            variant="optics_switch",
            chunk_mode="2d",
            chunk=8,
            calib_start=1,
            calib_steps=2,
            feedback="mean",
            enob=6.0,
        ),
    ],
    ids=["B", "D-mid-window", "E-sent-fs", "E'-mean"],
)
def test_resume_from_state_dict_is_bit_exact(cfg):
    straight = run(cfg, 8)
    params = make_params()
    first = DeMo(params, cfg, 2)
    for step in range(4):
        first.step(grads_at(step, params, 2), 1e-3, step)
    buf = io.BytesIO()
    torch.save({"demo": first.state_dict(), "params": [p.detach() for _, p in params]}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    resumed_params = [
        (n, torch.nn.Parameter(t.clone()))
        for (n, _), t in zip(params, saved["params"], strict=True)
    ]
    second = DeMo(resumed_params, cfg, 2)
    second.load_state_dict(saved["demo"])
    for step in range(4, 8):
        second.step(grads_at(step, resumed_params, 2), 1e-3, step)
    assert same_run(straight, (resumed_params, second))
    assert straight[1].clip_counts() == second.clip_counts()
    if cfg.variant.startswith("optics"):
        assert second.clip_counts()[1] > 0


def test_load_state_dict_rejects_a_different_run():
    _, demo = run(cfg_of(variant="topk"), 1)
    other = DeMo(make_params(), cfg_of(variant="band"), 2)
    with pytest.raises(ValueError, match="variant"):
        other.load_state_dict(demo.state_dict())
