"""A nanoGPT-style decoder exactly as spec §3 describes it.

No biases, no dropout, tied input/output embeddings, weight-only LayerNorm (eps 1e-5), exact
(erf) GELU and causal scaled-dot-product attention. Parameter names and their order matter:
DeMo keeps per-name state and the initialisation draws in this order.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB_MULTIPLE = 64
INIT_STD = 0.02
LN_EPS = 1e-5


def padded_vocab(vocab: int) -> int:
    """The model's vocabulary: the real one rounded up to a multiple of 64 (spec §2)."""
    return -(-vocab // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


@dataclass(frozen=True)
class ModelShape:
    """The shape of a GPT: padded vocabulary V, context T, layers L, heads, width E."""

    vocab: int
    block: int
    n_layer: int
    n_head: int
    n_embd: int


def param_count(shape: ModelShape) -> int:
    """V·E + T·E + L·(12E² + 2E) + E, without building the model (spec §3)."""
    v, t, n_layer, e = shape.vocab, shape.block, shape.n_layer, shape.n_embd
    return v * e + t * e + n_layer * (12 * e * e + 2 * e) + e


def param_shapes(shape: ModelShape) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape in registration order, without allocating anything."""
    e = shape.n_embd
    shapes: dict[str, tuple[int, ...]] = {
        "wte.weight": (shape.vocab, e),
        "wpe.weight": (shape.block, e),
    }
    for i in range(shape.n_layer):
        shapes[f"blocks.{i}.ln1.weight"] = (e,)
        shapes[f"blocks.{i}.attn.qkv.weight"] = (3 * e, e)
        shapes[f"blocks.{i}.attn.proj.weight"] = (e, e)
        shapes[f"blocks.{i}.ln2.weight"] = (e,)
        shapes[f"blocks.{i}.fc.weight"] = (4 * e, e)
        shapes[f"blocks.{i}.out.weight"] = (e, 4 * e)
    shapes["ln_f.weight"] = (e,)
    return shapes


class Attention(nn.Module):
    """Causal multi-head self-attention: one qkv projection, SDPA, one output projection."""

    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, t, e = h.shape
        q, k, v = self.qkv(h).split(e, dim=2)
        q, k, v = (x.view(b, t, self.n_head, e // self.n_head).transpose(1, 2) for x in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, e))


class Block(nn.Module):
    """Pre-norm transformer block; registration order ln1, attn, ln2, fc, out (spec §3)."""

    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd, eps=LN_EPS, bias=False)
        self.attn = Attention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd, eps=LN_EPS, bias=False)
        self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.out = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.ln1(h))
        return h + self.out(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    """Token + position embeddings, L blocks, final LayerNorm, logits through the tied wte."""

    def __init__(self, shape: ModelShape, seed: int) -> None:
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab, shape.n_embd)
        self.wpe = nn.Embedding(shape.block, shape.n_embd)
        self.blocks = nn.ModuleList(Block(shape.n_embd, shape.n_head) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.n_embd, eps=LN_EPS, bias=False)
        self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """nanoGPT init from a CPU generator seeded with the run seed; only matrices draw.

        Residual projections (proj, out) get 0.02/sqrt(2L); everything else 0.02. LayerNorm
        weights are 1 and draw nothing, so the random stream depends only on the matrices.
        """
        generator = torch.Generator().manual_seed(seed)
        residual_std = INIT_STD / math.sqrt(2 * self.shape.n_layer)
        for name, param in self.named_parameters():
            if param.dim() == 2:
                std = residual_std if name.endswith(("proj.weight", "out.weight")) else INIT_STD
                param.copy_(torch.randn(param.shape, generator=generator) * std)
            else:
                param.fill_(1.0)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, V), or the mean cross-entropy over all positions when targets are given."""
        t = idx.shape[1]
        positions = torch.arange(t, device=idx.device)
        h = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            h = block(h)
        logits = F.linear(self.ln_f(h), self.wte.weight)
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
