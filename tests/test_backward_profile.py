"""The backward profile (trainer/loop/profile.py): when each gradient is ready, recorded once a
run."""

import random

import pytest

torch = pytest.importorskip("torch")

from trainer.config import make_config  # noqa: E402
from trainer.loop.profile import BackwardProfiler, measured, profile_due  # noqa: E402
from trainer.loop.run import train  # noqa: E402
from trainer.model import GPT, ModelShape  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

torch.set_num_threads(1)


def _batch(shape: ModelShape, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, shape.vocab, (2, shape.block), generator=g)
    return x, torch.roll(x, -1, dims=1)


def test_profile_orders_gradients_last_layer_first_and_leaves_numbers_unchanged():
    shape = ModelShape(vocab=64, block=16, n_layer=3, n_head=2, n_embd=32)
    x, y = _batch(shape)
    plain, hooked = GPT(shape, 0), GPT(shape, 0)
    plain(x, y).backward()
    params = list(hooked.named_parameters())
    profiler = BackwardProfiler(params)
    for _ in range(2):
        hooked.zero_grad(set_to_none=True)
        with measured(profiler) as backward_starts:
            loss = hooked(x, y)
            backward_starts()
            loss.backward()
    for (name, p), (_, q) in zip(plain.named_parameters(), params, strict=True):
        assert torch.equal(p.grad, q.grad), name  # the hooks only read a clock
    profile = profiler.profile()
    ready = {t["name"]: t["ready"] for t in profile["tensors"]}
    assert [t["name"] for t in profile["tensors"]] == [name for name, _ in params]
    assert sum(t["numel"] for t in profile["tensors"]) == sum(p.numel() for _, p in params)
    assert all(0.0 <= r <= 1.0 for r in ready.values())
    # backward runs from the loss down: the last block's weights are ready before the first's
    assert ready["blocks.2.out.weight"] < ready["blocks.0.attn.qkv.weight"]
    assert ready["ln_f.weight"] < ready["blocks.0.ln1.weight"]
    # the tied embedding collects its input-side gradient last of all
    assert ready["wte.weight"] >= max(ready.values()) - 1e-9
    assert 0.0 < profile["backward_share"] < 1.0
    assert profile["backward_s"] > 0 and profile["forward_s"] > 0


def test_unmeasured_micro_step_is_a_no_op():
    with measured(None) as backward_starts:
        assert backward_starts() is None


def test_profile_is_due_once_on_the_second_step():
    assert not profile_due(0, 30, False)
    assert profile_due(1, 30, False)
    assert not profile_due(1, 30, True)
    assert profile_due(0, 1, False)


def test_trace_metadata_carries_the_profile(tmp_path):
    rng = random.Random(0)
    text = " ".join(rng.choice("the cat sat on a mat".split()) for _ in range(3000))
    corpus = tmp_path / "tiny.txt"
    corpus.write_text(text)
    cfg = make_config(
        "synthetic", "C", steps=3, threads=1, dataset=str(corpus), eval_every=3, block=16
    )
    result = train(cfg, tmp_path / "out", say=lambda _: None)
    meta = read_trace(result.trace_path).meta
    profile = meta["backward_profile"]
    assert profile["version"] == 1
    assert sum(t["numel"] for t in profile["tensors"]) == meta["n_params"]
    assert f"{cfg.workers} micro-step(s)" in profile["window"]


def test_a_ready_fraction_beyond_any_float_is_a_malformed_profile_not_an_overflow():
    """Found by the fuzzing of the readers under load: a JSON integer of 400 digits as `ready`
    raised OverflowError from float() (a traceback) instead of the one-line refusal."""
    from transitsim.base.errors import TransitsimError
    from transitsim.traces.backward_profile import backward_profile

    profile = {
        "version": 1,
        "backward_share": 0.5,
        "tensors": [{"name": "w", "numel": 4, "ready": 10**400}],
    }
    with pytest.raises(TransitsimError, match="ready is beyond any float"):
        backward_profile({"backward_profile": profile, "name": "t"})
