"""The GPT of spec §3: parameter names, order and count, initialisation, forward pass."""

import math

import pytest

torch = pytest.importorskip("torch")

from trainer.model import GPT, ModelShape, padded_vocab, param_count, param_shapes  # noqa: E402

torch.set_num_threads(1)

# Spec §3 table: (V, T, L, heads, E) -> parameters.
PUBLISHED = {
    "tinystories-gpu": (ModelShape(4096, 256, 8, 6, 384), 15_833_472),
    "tinystories-cpu": (ModelShape(4096, 256, 6, 6, 192), 3_492_288),
    "shakespeare": (ModelShape(128, 128, 4, 4, 128), 820_352),
    "synthetic": (ModelShape(64, 64, 1, 2, 64), 57_536),
}


@pytest.mark.parametrize("profile", list(PUBLISHED))
def test_param_count_formula_matches_the_published_counts(profile):
    shape, expected = PUBLISHED[profile]
    assert param_count(shape) == expected
    assert sum(math.prod(s) for s in param_shapes(shape).values()) == expected


def test_built_model_has_the_spec_names_shapes_and_order():
    shape, expected = PUBLISHED["tinystories-gpu"]
    model = GPT(shape, seed=0)
    built = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    assert built == list(param_shapes(shape).items())
    assert sum(p.numel() for p in model.parameters()) == expected
    assert built[:3] == [
        ("wte.weight", (4096, 384)),
        ("wpe.weight", (256, 384)),
        ("blocks.0.ln1.weight", (384,)),
    ]
    assert built[-1] == ("ln_f.weight", (384,))
    # Blocks: ln1, qkv, proj, ln2, fc, out; no biases anywhere.
    assert [n for n, _ in built[2:8]] == [
        "blocks.0.ln1.weight",
        "blocks.0.attn.qkv.weight",
        "blocks.0.attn.proj.weight",
        "blocks.0.ln2.weight",
        "blocks.0.fc.weight",
        "blocks.0.out.weight",
    ]
    assert not any("bias" in name for name, _ in built)


def test_vocab_is_padded_to_a_multiple_of_64():
    vocabs = (60, 64, 65, 84, 4096, 4097)
    assert [padded_vocab(v) for v in vocabs] == [64, 64, 128, 128, 4096, 4160]


def test_init_draws_only_matrices_in_order_from_the_run_seed():
    shape = PUBLISHED["shakespeare"][0]
    model = GPT(shape, seed=3)
    generator = torch.Generator().manual_seed(3)
    residual_std = 0.02 / math.sqrt(2 * shape.n_layer)
    for name, param in model.named_parameters():
        if param.dim() == 1:
            assert torch.equal(param, torch.ones_like(param)), name
            continue
        std = residual_std if name.endswith(("proj.weight", "out.weight")) else 0.02
        expected = torch.randn(param.shape, generator=generator) * std
        assert torch.equal(param, expected), name
    # The empirical std of a large matrix is close to its nominal value.
    assert model.blocks[0].fc.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.blocks[0].out.weight.std().item() == pytest.approx(residual_std, rel=0.02)


def test_different_seeds_give_different_weights_and_same_seed_the_same():
    shape = PUBLISHED["synthetic"][0]
    a, b, c = GPT(shape, 0), GPT(shape, 0), GPT(shape, 1)
    assert torch.equal(a.wte.weight, b.wte.weight)
    assert not torch.equal(a.wte.weight, c.wte.weight)


def test_forward_is_causal_tied_and_starts_near_uniform_loss():
    shape = ModelShape(64, 16, 2, 2, 32)
    model = GPT(shape, seed=0)
    idx = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(0))
    logits = model(idx)
    assert logits.shape == (2, 16, 64)
    targets = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(1))
    loss = model(idx, targets).item()
    assert loss == pytest.approx(math.log(64), abs=0.05)
    # Changing a later token does not change earlier logits (causal attention).
    changed = idx.clone()
    changed[:, 10] = (changed[:, 10] + 1) % 64
    assert torch.allclose(model(changed)[:, :10], logits[:, :10], atol=1e-6)
    assert not torch.allclose(model(changed)[:, 10:], logits[:, 10:])
    # Every parameter takes part in the loss.
    model(idx, targets).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_logits_use_the_input_embedding_as_output_layer():
    shape = ModelShape(64, 8, 1, 2, 32)
    model = GPT(shape, seed=0)
    idx = torch.zeros((1, 8), dtype=torch.long)
    before = model(idx)
    with torch.no_grad():
        # Token 5 is not in the input, so only its output logit can move. (A constant shift
        # would not show: LayerNorm output has zero mean.)
        model.wte.weight[5] += torch.linspace(-1, 1, 32)
    after = model(idx)
    moved = (after - before).abs().amax(dim=(0, 1))
    assert moved[5] > 0.1 and moved[torch.arange(64) != 5].max() == 0
