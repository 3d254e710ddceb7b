"""Emulated analogue optical band transform with binary bit-plane input (spec §9).

The optics sees the chunked delta *values*, quantised to P bits in two's complement; each bit
plane passes through the band transform separately and picks up readout noise; the digital side
recombines the planes with weights 2^b (the sign plane -2^(P-1)).

The passes are linear, so sum_b w_b (plane_b @ T.T) == q @ T.T exactly in real arithmetic, for
the clipped integer q. `readout` uses that identity (one matmul instead of P) and still draws and
weights the noise per plane; `readout_per_plane` is the literal model, kept as the reference the
tests compare against (they agree to float32 rounding).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from trainer.variants.dct import dct_matrix


def full_scale(transform: torch.Tensor) -> float:
    """Readout full scale: the largest row L1 norm of the full per-chunk transform T (§9.1)."""
    return float(transform.double().abs().sum(dim=1).max())


def chunk_full_scale(chunk_shape: tuple[int, ...]) -> float:
    """FS of a chunk's transform D_m or kron(D_h, D_w) without building the Kronecker product:
    a Kronecker row's L1 norm is the product of its factors' row L1 norms."""
    fs = 1.0
    for side in chunk_shape:
        fs *= full_scale(dct_matrix(side))
    return fs


def readout_sigma(fs: float, enob: float | None) -> float:
    """Plane noise RMS: FS * 2^-ENOB / sqrt(3) (a uniform LSB of FS 2^-ENOB); 0 without ENOB."""
    if enob is None:
        return 0.0
    return fs * 2.0 ** (-enob) * 2.0 / math.sqrt(12.0)


def input_scale(sumsq: float, count: int, kappa: float) -> float:
    """Input full scale kappa * RMS of the pooled delta values; 1 when the RMS is 0 (§9.2)."""
    rms = math.sqrt(sumsq / count) if count > 0 else 0.0
    return kappa * rms if rms > 0 else 1.0


def count_outside(q: torch.Tensor, limit: float) -> int:
    """How many values have |q| > limit (a NaN is not counted), as q > limit plus q < -limit.

    On the CPU numpy's vectorised comparisons do this several times faster than torch's.
    """
    if q.device.type == "cpu":
        values = q.detach().numpy()
        return int(np.count_nonzero(values > limit)) + int(np.count_nonzero(values < -limit))
    return int(torch.count_nonzero(q > limit)) + int(torch.count_nonzero(q < -limit))


@dataclass
class OpticsEmulator:
    """The band transform of one chunk shape, as the optics computes it.

    t_band: the transform rows at the band positions, (k, m). sigma: plane readout noise RMS.
    planes: input bits P, or None for analogue input (no quantisation).
    """

    t_band: torch.Tensor
    sigma: float
    planes: int | None

    @property
    def exact(self) -> bool:
        """No quantisation and no noise: the optics returns the exact band (and is skipped)."""
        return self.planes is None and self.sigma == 0.0

    @property
    def qmax(self) -> int:
        return 2 ** (self.planes - 1) - 1 if self.planes is not None else 0

    def noise_shape(self, rows: int) -> tuple[int, ...]:
        """Shape of one tensor's noise draw: (P, rows, k), or (rows, k) without planes."""
        k = self.t_band.shape[0]
        return (rows, k) if self.planes is None else (self.planes, rows, k)

    def plane_weights(self) -> torch.Tensor:
        """Recombination weights 2^b, with the top (sign) plane at -2^(P-1)."""
        weights = [2.0**b for b in range(self.planes)]
        weights[-1] = -(2.0 ** (self.planes - 1))
        return torch.tensor(weights, dtype=self.t_band.dtype, device=self.t_band.device)

    def quantise(
        self, x: torch.Tensor, scale: torch.Tensor | float, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, int]:
        """q = round(x / scale * qmax) (half to even), clamped to +-qmax; also the clip count.

        out: optional buffer shaped like x for q (the same operations, done in place in it).
        """
        q = torch.div(x, scale, out=out).mul_(self.qmax).round_()
        clipped = count_outside(q, self.qmax)
        return q.clamp_(-self.qmax, self.qmax), clipped

    def readout(
        self,
        x: torch.Tensor,
        scale: torch.Tensor | float,
        noise: torch.Tensor | None,
        work: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, int]:
        """Band estimate of the chunks x (..., m) and the number of clipped inputs.

        scale: input full scale, broadcastable to x (one value per tensor, so per chunk row).
        noise: standard normal draws of shape (P, ..., k) (or (..., k) without planes), or None.
        work: optional buffer shaped like x for the quantised input.
        """
        if self.planes is None:
            y = x @ self.t_band.T
            if noise is not None and self.sigma > 0:
                y = y + self.sigma * noise
            return y, 0
        q, clipped = self.quantise(x, scale, out=work)
        y = q @ self.t_band.T
        if noise is not None and self.sigma > 0:
            weighted = torch.tensordot(self.plane_weights(), noise, dims=1)
            y = y + self.sigma * weighted
        return y * scale / self.qmax, clipped

    def readout_per_plane(
        self, x: torch.Tensor, scale: torch.Tensor | float, noise: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        """The literal §9.3 model: two's-complement planes, one noisy pass each, recombined."""
        if self.planes is None:
            return self.readout(x, scale, noise)
        q, clipped = self.quantise(x, scale)
        bits = torch.remainder(q.to(torch.int64), 2**self.planes)
        weights = self.plane_weights()
        y = torch.zeros(*x.shape[:-1], self.t_band.shape[0], dtype=x.dtype, device=x.device)
        for b in range(self.planes):
            plane = ((bits >> b) & 1).to(x.dtype)
            out = plane @ self.t_band.T
            if noise is not None and self.sigma > 0:
                out = out + self.sigma * noise[b]
            y = y + weights[b] * out
        return y * scale / self.qmax, clipped
