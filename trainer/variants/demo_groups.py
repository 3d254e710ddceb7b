"""The DeMo step's bookkeeping: tensors grouped by chunk shape and k, and the views between a
parameter's own shape and its rows of a group buffer; the configuration checks.

A group keeps every local worker's delta of all its tensors in one chunk-major buffer, so the
step (trainer/variants/demo.py) is a few large matmuls per group; `member_view` and
`grad_view` give one tensor's rows of such a buffer and its gradient in the same chunk layout.
"""

import math
from dataclasses import dataclass, field

import torch

from trainer.config import FEEDBACK_MODES, RunConfig
from trainer.variants.chunking import Chunker
from trainer.variants.moving import SELECTIONS
from trainer.variants.optics import OpticsEmulator
from trainer.variants.selection import FIXED_SHAPES

DEMO_VARIANTS = ("topk", "band", "calib", "optics", "optics_switch", "moving")
OPTICS_VARIANTS = ("optics", "optics_switch")
ROW_T_MAX_VALUES = 1 << 26  # G rotating: per-row band rows up to 256 MiB, else gather the DCT
TOPK_BLOCK_VALUES = 1 << 17  # B: chunk values per block of its step (512 KiB; 2^16..2^18 tried)
FEEDBACK_BY_VARIANT = {
    "topk": ("exact",),
    "band": ("exact",),
    "calib": ("exact",),
    "moving": ("exact",),
}
FEEDBACK_BY_VARIANT.update(FEEDBACK_MODES)


@dataclass
class Member:
    """One parameter tensor inside its group, plus its calibration state."""

    name: str
    param: torch.nn.Parameter
    chunker: Chunker
    start: int  # first chunk row in the group buffer
    energy: torch.Tensor | None = None  # D: float64 (m,) energy map over the window
    sumsq: float = 0.0  # E/E': sum of delta^2 (window, then since the last full-scale re-set)
    count: int = 0
    scale_in: float = 1.0
    positions: torch.Tensor | None = None  # D, G recal: calibrated band, (k,)
    rows_t: torch.Tensor | None = None  # G recal / subspace after a choice: band rows (k, m)
    cov: torch.Tensor | None = None  # G subspace: float64 (m, m) chunk covariance since a choice

    @property
    def stop(self) -> int:
        return self.start + self.chunker.chunks


@dataclass
class Group:
    """All tensors with the same chunk shape and k, stacked chunk-major."""

    chunk_shape: tuple[int, ...]
    k: int
    members: list[Member]
    mats: tuple[torch.Tensor, ...]  # (D_m,) or (D_h, D_w)
    delta: torch.Tensor  # (L, rows, *chunk_shape): this process's L workers
    shadow: torch.Tensor  # (rows, *chunk_shape)
    band: torch.Tensor | None = None  # (k,) positions shared by every row, None for top-k / D
    pos_rows: torch.Tensor | None = None  # (rows, k) positions per row (band variants)
    t_band: torch.Tensor | None = None  # (k, m) transform rows at `band`
    emulator: OpticsEmulator | None = None
    scale_rows: torch.Tensor | None = None  # (rows, 1) input full scale per row
    diag_bands: dict[str, torch.Tensor] | None = None
    member_rows: bool = False  # G after a choice: each tensor its own band rows (member.rows_t)
    epoch: int | None = None  # G rotating: the epoch whose positions pos_rows holds
    row_t: torch.Tensor | None = None  # G rotating, 1-D: each row's band rows (rows, k, m)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # work memory reused per step

    @property
    def rows(self) -> int:
        return self.delta.shape[1]

    @property
    def m(self) -> int:
        return math.prod(self.chunk_shape)

    @property
    def band_matrix_cheaper(self) -> bool:
        """x @ T_band.T costs k MACs per value; the separable DCT h + w (2-D) or m (1-D)."""
        if len(self.chunk_shape) == 1:
            return True
        return self.k < sum(self.chunk_shape)


def validate_config(cfg: RunConfig, workers: int) -> None:
    """Clear errors for configurations the DeMo step cannot run."""
    if cfg.variant not in DEMO_VARIANTS:
        raise ValueError(
            f"DeMo runs variants {DEMO_VARIANTS}; got {cfg.variant!r} (adamw has no DeMo step)"
        )
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not 0 < cfg.keep <= 1:
        raise ValueError(f"keep must lie in (0, 1], got {cfg.keep}")
    if cfg.chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {cfg.chunk}")
    if not 0 <= cfg.decay < 1:
        raise ValueError(f"decay must lie in [0, 1), got {cfg.decay}")
    allowed = FEEDBACK_BY_VARIANT[cfg.variant]
    if cfg.feedback not in allowed:
        raise ValueError(
            f"feedback {cfg.feedback!r} is not valid for variant {cfg.variant!r}; "
            f"choose one of {allowed}"
        )
    if cfg.variant in ("band", "optics", "optics_switch") and cfg.band not in FIXED_SHAPES:
        raise ValueError(
            f"variant {cfg.variant!r} needs a fixed band shape {FIXED_SHAPES}, got {cfg.band!r}"
        )
    if cfg.variant == "moving":
        if cfg.band not in SELECTIONS:
            raise ValueError(f"variant 'moving' (G) selects with one of {SELECTIONS}")
        if cfg.select_every < 1:
            raise ValueError(f"select_every must be >= 1, got {cfg.select_every}")
    if cfg.variant in ("calib", *OPTICS_VARIANTS):
        if cfg.calib_start < 0 or cfg.calib_steps < 1:
            raise ValueError(
                f"calibration needs calib_start >= 0 and calib_steps >= 1, "
                f"got {cfg.calib_start}, {cfg.calib_steps}"
            )
    if cfg.variant in OPTICS_VARIANTS:
        if cfg.planes is not None and cfg.planes < 2:
            raise ValueError(f"planes must be >= 2 or None, got {cfg.planes}")
        if cfg.enob is not None and cfg.enob <= 0:
            raise ValueError(f"enob must be > 0 or None, got {cfg.enob}")
        if cfg.kappa <= 0:
            raise ValueError(f"kappa must be > 0, got {cfg.kappa}")
        if cfg.fs_every < 0:
            raise ValueError(f"fs_every must be >= 0, got {cfg.fs_every}")


def member_view(buf: torch.Tensor, member: Member) -> torch.Tensor:
    """The member's rows of a group buffer (*lead, rows, *chunk), shaped like `grad_view`."""
    ch = member.chunker
    lead = buf.dim() - (3 if ch.two_d else 2)
    rows = buf.narrow(lead, member.start, ch.chunks)
    if not ch.two_d:
        return rows
    r, c = ch.shape
    return rows.unflatten(lead, (r // ch.h, c // ch.w))


def grad_view(grad: torch.Tensor, member: Member) -> torch.Tensor:
    """A parameter's gradient (*lead, *shape) as chunk rows, (*lead, chunks, m) or tiles."""
    ch = member.chunker
    if ch.two_d:
        return ch.tiled_view(grad)
    lead = grad.shape[: grad.dim() - len(ch.shape)]
    return grad.reshape(*lead, ch.chunks, ch.m)
