"""What the local-SGD variants put on the wire: the quantisers of H-s and L, L's top-k.

The quantisers really round (unlike the DeMo variants' BF16, which is only counted), because
the outer gradient's few bits are the algorithm being compared: every replica sends what it
quantised, keeps the rounding error where the variant feeds it back (L), and the receivers
average exactly what was sent. Each works row-wise over a leading replica axis, so a process
holding any subset of replicas computes each replica's bits as every other process would.

- `e3m0`: Streaming DiLoCo's 4-bit float, 1 sign and 3 exponent bits, no mantissa. Per replica
  and tensor a shared power-of-two scale 2^S with S = ceil(log2 max|x|) (one E8M0 byte); code 0
  is zero, codes 1..7 the magnitudes 2^(S-6) .. 2^S. Each value rounds to the nearest level in
  value (ties upward); below half of 2^(S-6) it is 0.
- `two_bit`: SparseLoCo's 2-bit values, here a uniform mid-rise quantiser per chunk: levels
  (+-0.5, +-1.5) * s with the step s = bf16(max|v| / 1.5) over the chunk's k chosen values
  (one BF16 scale per chunk, counted in trainer/variants/accounting.py); value v goes to
  (floor(v / s) + 0.5) * s, clamped to +-1.5 s. The paper does not pin its 2-bit quantiser down
  here, so this one is stated, not copied.
"""

import torch

E3M0_LEVELS = 7  # non-zero magnitudes: 2^(S-6) .. 2^S


def e3m0(x: torch.Tensor) -> torch.Tensor:
    """x (replicas, ...) rounded to E3M0 with one power-of-two scale per replica (docstring)."""
    flat = x.reshape(x.shape[0], -1)
    top = flat.abs().amax(-1, keepdim=True)
    # S = ceil(log2 top), exactly: top = f * 2^e with f in [0.5, 1), so S = e - (f == 0.5).
    fraction, power = torch.frexp(torch.where(top > 0, top, torch.ones_like(top)))
    exponent = (power - (fraction == 0.5).to(power.dtype)).to(x.dtype)
    levels = torch.arange(E3M0_LEVELS, device=x.device, dtype=x.dtype)  # 0..6
    grid = torch.exp2(exponent - (E3M0_LEVELS - 1) + levels)  # (replicas, 7) ascending
    magnitude = flat.abs()
    # Nearest level: the number of midpoints below |x|, with 0 below half the smallest level.
    lower = torch.cat([grid[:, :1] / 2, (grid[:, :-1] + grid[:, 1:]) / 2], dim=-1)
    code = (magnitude.unsqueeze(-1) >= lower.unsqueeze(1)).sum(-1)  # 0 .. 7
    values = torch.cat([torch.zeros_like(grid[:, :1]), grid], dim=-1)
    rounded = torch.gather(values, 1, code) * torch.sign(flat)
    rounded = torch.where(top > 0, rounded, torch.zeros_like(rounded))
    return rounded.reshape(x.shape)


def two_bit(values: torch.Tensor) -> torch.Tensor:
    """values (..., k): each row's k values on its 2-bit mid-rise grid (module docstring)."""
    top = values.abs().amax(-1, keepdim=True)
    step = (top / 1.5).to(torch.bfloat16).to(values.dtype)
    safe = torch.where(step > 0, step, torch.ones_like(step))
    level = (torch.floor(values / safe) + 0.5).clamp(-1.5, 1.5)
    return torch.where(step > 0, level * step, torch.zeros_like(values))
