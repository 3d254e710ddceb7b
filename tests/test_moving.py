"""Variant G (issue 14): recal, rotating and subspace bands; positions, schedule, no per-step
comparisons, byte counts; and E's out-of-band diagnostics."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainer.config import RunConfig, make_config, same_config  # noqa: E402
from trainer.naming import run_name  # noqa: E402
from trainer.variants.accounting import broadcast_bytes, byte_accounting, index_bytes  # noqa: E402
from trainer.variants.dct import dct_chunks, dct_matrix  # noqa: E402
from trainer.variants.demo import DeMo  # noqa: E402
from trainer.variants.demo_groups import grad_view  # noqa: E402
from trainer.variants.moving import (  # noqa: E402
    is_choice_step,
    rotating_positions,
    subspace_step,
    units_mod,
)

torch.set_num_threads(1)

W = 3


def make_params(seed: int = 0) -> list[tuple[str, torch.nn.Parameter]]:
    gen = torch.Generator().manual_seed(seed)
    return [
        ("wte.weight", torch.nn.Parameter(torch.randn(32, 16, generator=gen))),
        ("blocks.0.fc.weight", torch.nn.Parameter(torch.randn(64, 16, generator=gen))),
        ("ln_f.weight", torch.nn.Parameter(torch.ones(64))),
    ]


def g_config(band: str, every: int, steps: int = 40, **extra) -> RunConfig:
    return RunConfig(
        variant="moving",
        band=band,
        chunk_mode="1d",
        chunk=64,
        keep=1 / 8,
        select_every=every,
        steps=steps,
        diag_every=1000,
        **extra,
    )


def grads_for(params, step: int, workers: int = W) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 + step)
    out = {}
    for name, p in params:
        g = torch.randn(workers, *p.shape, generator=gen)
        # a shared smooth component so the delta has structure a band can track
        g += torch.linspace(-1, 1, p.numel()).reshape(p.shape)
        out[name] = g
    return out


def band_coefs(demo: DeMo) -> list[torch.Tensor]:
    """Each group's DCT coefficients of every worker's delta, (W, rows, m)."""
    return [dct_chunks(g.delta, g.mats).reshape(demo.workers, g.rows, g.m) for g in demo._groups]


# --- rotating ----------------------------------------------------------------------------------


def test_rotating_positions_are_distinct_per_chunk_and_a_pure_function_of_seed_and_epoch():
    a = rotating_positions(64, 8, seed=3, epoch=5, first_row=0, rows=50)
    b = rotating_positions(64, 8, seed=3, epoch=5, first_row=0, rows=50)
    assert a.shape == (50, 8) and a.dtype == torch.int64
    assert torch.equal(a, b)  # every worker derives the same set
    assert all(len(set(row.tolist())) == 8 for row in a)  # k distinct positions
    assert int(a.min()) >= 0 and int(a.max()) < 64
    assert not torch.equal(a, rotating_positions(64, 8, 3, 6, 0, 50))  # next epoch differs
    assert not torch.equal(a, rotating_positions(64, 8, 4, 5, 0, 50))  # another seed differs
    # rows are independent of how they are batched: rows 10.. equal a slice
    assert torch.equal(a[10:20], rotating_positions(64, 8, 3, 5, 10, 10))


def test_rotating_covers_every_position_about_equally_often():
    counts = np.zeros(256)
    for epoch in range(400):
        pos = rotating_positions(256, 16, seed=0, epoch=epoch, first_row=0, rows=4)
        np.add.at(counts, pos.flatten().numpy(), 1)
    expected = 400 * 4 * 16 / 256
    assert counts.min() > 0.5 * expected and counts.max() < 1.6 * expected


def test_units_mod_non_power_of_two():
    assert units_mod(12).tolist() == [1, 5, 7, 11]
    pos = rotating_positions(192, 12, seed=1, epoch=0, first_row=0, rows=30)
    assert all(len(set(row.tolist())) == 12 for row in pos)


@pytest.mark.parametrize("every", [1, 4])
def test_rotating_schedule_and_shared_positions_in_demo(every):
    params = make_params()
    demo = DeMo(params, g_config("rotating", every), W)
    seen = []
    for step in range(9):
        record = demo.step(grads_for(params, step), 1e-2, step)
        seen.append([g.pos_rows.clone() for g in demo._groups])
        # exact feedback removed every worker's coefficients at the same positions: reducible
        for group, coef in zip(demo._groups, band_coefs(demo), strict=True):
            at = coef.gather(-1, group.pos_rows.expand(W, group.rows, group.k))
            assert float(at.abs().max()) < 1e-5
        assert not record.broadcast  # rotating never broadcasts anything
    for step in range(1, 9):
        same = all(torch.equal(a, b) for a, b in zip(seen[step], seen[step - 1], strict=True))
        assert same == (step % every != 0), step


# --- recal -------------------------------------------------------------------------------------


def test_recal_rechooses_every_r_steps_from_worker0_energy_since_last_choice():
    params = make_params()
    every = 5
    demo = DeMo(params, g_config("recal", every), W)
    members = {mm.name: mm for mm in demo._members}
    energy = {name: torch.zeros(mm.chunker.m, dtype=torch.float64) for name, mm in members.items()}
    chosen_at = []
    for step in range(16):
        grads = grads_for(params, step)
        # the expected map: worker 0's delta after accumulation, before compression
        before = {name: None for name in members}
        for group in demo._groups:
            for mm in group.members:
                delta0 = group.delta[0, mm.start : mm.stop].clone()
                before[mm.name] = delta0
        record = demo.step(grads, 1e-2, step)
        for name, mm in members.items():
            group = demo._group_of(mm)
            # reconstruct worker 0's accumulated delta: decay * before + lr * g
            acc = 0.999 * before[name] + 1e-2 * grad_view(grads[name][0], mm)
            coef = dct_chunks(acc, group.mats).reshape(-1, group.m)
            energy[name] += coef.square().sum(0, dtype=torch.float64)
        if record.broadcast:
            chosen_at.append(step)
            for name, mm in members.items():
                k = demo._group_of(mm).k
                expected = torch.sort(torch.argsort(energy[name], descending=True)[:k]).values
                assert mm.positions.tolist() == expected.tolist(), (step, name)
                energy[name].zero_()
    assert chosen_at == [4, 9, 14]


def test_recal_band_is_shared_by_workers_and_feedback_removes_it():
    params = make_params()
    demo = DeMo(params, g_config("recal", 3), W)
    for step in range(7):
        demo.step(grads_for(params, step), 1e-2, step)
    assert all(g.member_rows for g in demo._groups)
    for group, coef in zip(demo._groups, band_coefs(demo), strict=True):
        at = coef.gather(-1, group.pos_rows.expand(W, group.rows, group.k))
        assert float(at.abs().max()) < 1e-5


def test_is_choice_step_skips_the_last_step():
    assert [s for s in range(12) if is_choice_step(s, 4, 12)] == [3, 7]


# --- subspace ----------------------------------------------------------------------------------


def test_subspace_step_finds_the_principal_subspace():
    gen = torch.Generator().manual_seed(0)
    m, k = 32, 3
    basis = torch.linalg.qr(torch.randn(m, k, generator=gen, dtype=torch.float64))[0]
    x = torch.randn(500, k, generator=gen, dtype=torch.float64) * 10 @ basis.T
    x += 0.1 * torch.randn(500, m, generator=gen, dtype=torch.float64)
    cov = x.T @ x
    rows = dct_matrix(m)[:k].double()  # start from the low band
    for _ in range(10):
        rows = subspace_step(cov, rows)
    assert torch.allclose(rows @ rows.T, torch.eye(k, dtype=torch.float64), atol=1e-10)
    captured = float((x @ rows.T).square().sum() / x.square().sum())
    assert captured > 0.99


def test_subspace_demo_keeps_orthonormal_rows_and_broadcasts_on_choice_steps():
    params = make_params()
    demo = DeMo(params, g_config("subspace", 4), W)
    chose = []
    for step in range(10):
        chose.append(demo.step(grads_for(params, step), 1e-2, step).broadcast)
    assert [s for s, c in enumerate(chose) if c] == [3, 7]
    for mm in demo._members:
        k = demo._group_of(mm).k
        gram = mm.rows_t.double() @ mm.rows_t.double().T
        assert torch.allclose(gram, torch.eye(k, dtype=torch.float64), atol=1e-5)
    # feedback removed each worker's component in its tensor's band rows
    for group in demo._groups:
        flat = group.delta.reshape(W, group.rows, group.m)
        for mm in group.members:
            left = flat[:, mm.start : mm.stop] @ mm.rows_t.T
            assert float(left.abs().max()) < 1e-5


def test_subspace_rejects_big_chunks():
    params = make_params()
    cfg = g_config("subspace", 4)
    cfg.chunk_mode, cfg.chunk = "2d", 64
    with pytest.raises(ValueError, match="subspace"):
        DeMo([("w", torch.nn.Parameter(torch.randn(64, 64)))], cfg, W)
    assert params  # the small model is fine in 1-D


# --- no comparisons in the per-step path ---------------------------------------------------------

COMPARING = ("topk", "sort", "argsort", "kthvalue", "msort")


@pytest.fixture
def no_comparisons(monkeypatch):
    """Make every sorting / selecting routine raise, as torch functions and tensor methods."""

    def boom(*args, **kwargs):
        raise AssertionError("a comparison-based selection ran in the per-step path")

    for name in COMPARING:
        monkeypatch.setattr(torch, name, boom)
        monkeypatch.setattr(torch.Tensor, name, boom)
    monkeypatch.setattr("trainer.variants.demo.topk_mask", boom)
    monkeypatch.setattr("trainer.variants.demo.calibrated_positions", boom)
    monkeypatch.setattr(np, "partition", boom)
    monkeypatch.setattr(np, "argsort", boom)
    monkeypatch.setattr(np, "sort", boom)


@pytest.mark.parametrize("band", ["recal", "rotating", "subspace"])
def test_no_comparisons_between_choices(band, request):
    params = make_params()
    every = 4
    demo = DeMo(params, g_config(band, every), W)
    for step in range(every - 1):  # before the first choice
        demo.step(grads_for(params, step), 1e-2, step)
    if band in ("recal", "subspace"):
        demo.step(grads_for(params, every - 1), 1e-2, every - 1)  # the host choice, unpatched
    request.getfixturevalue("no_comparisons")
    start = every if band != "rotating" else every - 1
    for step in range(start, start + every - 1):  # the steps after a choice, none of them one
        assert not demo.step(grads_for(params, step), 1e-2, step).broadcast


def test_the_comparison_guard_catches_top_k(no_comparisons):
    params = make_params()
    cfg = RunConfig(variant="topk", chunk_mode="1d", chunk=64, keep=1 / 8, diag_every=1000)
    demo = DeMo(params, cfg, W)
    with pytest.raises(AssertionError, match="comparison"):
        demo.step(grads_for(params, 0), 1e-2, 0)


# --- bytes, names, configs -----------------------------------------------------------------------


def test_g_sends_band_bytes_and_broadcasts_its_choice():
    shapes = {"a": (32, 16), "b": (64, 16), "c": (64,)}
    band = byte_accounting(shapes, RunConfig(variant="band", chunk_mode="1d", chunk=64), 8)
    for selection, per_tensor in (
        ("rotating", lambda k, m: 0),
        ("recal", lambda k, m: k * index_bytes(m)),
        ("subspace", lambda k, m: k * m * 2),
    ):
        cfg = RunConfig(variant="moving", band=selection, chunk_mode="1d", chunk=64)
        acc = byte_accounting(shapes, cfg, 8)
        assert acc.payload_bytes == band.payload_bytes
        assert acc.wire_bytes == band.wire_bytes and acc.reducible
        assert acc.collective == "all_gather"
        # chunks of 64 keep 4 each: 3 tensors with one set (or rows) each
        assert acc.broadcast_bytes == broadcast_bytes(shapes, cfg) == 3 * per_tensor(4, 64)


def test_names_and_config_checks():
    cfg = make_config("shakespeare", "G", band="recal", select_every=10)
    assert run_name(cfg) == "shakespeare-moving-recal-k16-1d256-r10-lr0.001-s0"
    from transitsim.base.errors import TransitsimError

    with pytest.raises(TransitsimError, match="band"):
        make_config("shakespeare", "G", band="low")
    with pytest.raises(TransitsimError, match="band"):
        make_config("shakespeare", "C", band="recal")
    with pytest.raises(TransitsimError, match="select_every"):
        make_config("shakespeare", "G", select_every=0)


def test_configs_written_before_a_field_existed_still_match():
    cfg = make_config("shakespeare", "B")
    stored = cfg.to_dict()
    del stored["select_every"]
    assert same_config(stored, cfg)
    assert not same_config({**stored, "seed": 5}, cfg)
    assert not same_config({**stored, "unknown_field": 1}, cfg)


# --- a tiny run's trace ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    from trainer.loop.run import train
    from transitsim.traces.format import read_trace

    out = tmp_path_factory.mktemp("g")
    traces = {}

    for band in ("recal", "subspace", "rotating"):
        cfg = make_config(
            "synthetic", "G", band=band, select_every=3, chunk=64, steps=8, diag_every=4
        )
        result = train(cfg, out, say=lambda _: None)
        traces[band] = read_trace(result.trace_path)
    cfg = make_config("synthetic", "E", chunk=64, steps=10, calib_start=2, calib_steps=2)
    traces["E"] = read_trace(train(cfg, out, say=lambda _: None).trace_path)
    return traces


def test_trace_counts_broadcast_bytes_on_choice_steps_only(tiny_runs):
    for band, trace in tiny_runs.items():
        if band == "E":
            continue
        steps = trace.steps
        base = trace.meta["payload_bytes_per_step"]
        per_choice = trace.meta["broadcast_bytes_per_choice"]
        chosen = steps["step"][steps["broadcast_bytes"] > 0].tolist()
        if band == "rotating":
            assert per_choice == 0 and chosen == []
        else:
            assert per_choice > 0 and chosen == [3, 6]  # ends of steps 2 and 5 (0-based)
        assert (steps["payload_bytes"] == base + steps["broadcast_bytes"]).all()
        assert trace.meta["variant"] == "G"
        assert trace.meta["variant_params"]["selection"] == band
        assert trace.meta["variant_params"]["select_every"] == 3
        current = trace.diagnostics[trace.diagnostics["selector"] == "current"]
        assert len(current) and current["share"].between(0, 1).all()


def test_optics_diagnostics_per_step(tiny_runs):
    steps = tiny_runs["E"].steps
    active = steps[steps["oob_sent_share"].notna()]
    assert steps["oob_sent_share"].isna().iloc[:4].all()  # before the optics runs (step 5 on)
    assert len(active) == 6
    assert (active["oob_sent_share"] > 0).all() and (active["oob_quant_share"] > 0).all()
    # T_band has orthonormal rows: feedback of what was sent removes the band's energy less
    # the energy of its error, exactly
    identity = active["fb_removed_exact_share"] - active["oob_sent_share"]
    assert np.allclose(active["fb_removed_sent_share"], identity, rtol=1e-3, atol=1e-7)


def test_oob_quant_share_is_zero_without_quantisation():
    params = make_params()
    cfg = RunConfig(
        variant="optics",
        band="low",
        chunk_mode="1d",
        chunk=64,
        keep=1 / 8,
        planes=None,
        enob=8.0,
        calib_start=0,
        calib_steps=1,
        feedback="sent",
        diag_every=1000,
    )
    demo = DeMo(params, cfg, W)
    # calibration step: the exact band, no optics
    assert demo.step(grads_for(params, 0), 1e-2, 0).optics is None
    diag = demo.step(grads_for(params, 1), 1e-2, 1).optics
    assert diag["oob_quant_share"] < 1e-12 and diag["oob_sent_share"] > 0
    assert math.isclose(
        diag["fb_removed_sent_share"],
        diag["fb_removed_exact_share"] - diag["oob_sent_share"],
        rel_tol=1e-3,
    )


class _Crash(Exception):
    pass


@pytest.mark.parametrize("band", ["recal", "subspace", "rotating"])
def test_g_resumes_from_a_checkpoint_to_the_same_trace(tmp_path, band):
    """The band rows, energy map / covariance and epoch survive a crash between choices."""
    import pandas as pd

    from trainer.loop.run import TIMING_COLUMNS, train
    from transitsim.traces.format import read_trace

    cfg = make_config("synthetic", "G", band=band, select_every=3, chunk=64, steps=12, ckpt_every=5)

    def crash_at_step_7(report) -> None:
        if report.done == 7:
            raise _Crash

    with pytest.raises(_Crash):
        train(cfg, tmp_path / "crashed", on_step=crash_at_step_7, say=lambda _: None)
    resumed = train(cfg, tmp_path / "crashed", say=lambda _: None)
    assert resumed.resumed_from == 5
    straight = train(cfg, tmp_path / "straight", say=lambda _: None)
    a, b = read_trace(resumed.trace_path), read_trace(straight.trace_path)
    timing = [c for c in TIMING_COLUMNS if c in a.steps.columns]
    pd.testing.assert_frame_equal(
        a.steps.drop(columns=timing), b.steps.drop(columns=timing), check_exact=True
    )
