"""What tells the DeMo variants B..G apart, decided once from the config, and the named types a
DeMo step passes between its phases.

The step (trainer/variants/demo.py) reads these flags and dispatches on these types; it never
compares a variant or band string, so a variant is chosen at construction, not per step.
"""

from dataclasses import dataclass
from enum import Enum

import torch

from trainer.config import RunConfig
from trainer.variants.exchange import Message


class Selection(Enum):
    """G's band selection (trainer/variants/moving.py)."""

    RECAL = "recal"
    ROTATING = "rotating"
    SUBSPACE = "subspace"


class Feedback(Enum):
    """What a sender subtracts from its delta after sending a band (spec §6.2 step 8, §9)."""

    EXACT = "exact"  # the exact band values
    SENT = "sent"  # what the optics produced (E "sent", E' "loopback")
    MEAN = "mean"  # E' at a switch: the band mean every worker receives


@dataclass(frozen=True)
class DemoKind:
    """One DeMo variant's behaviour: B top-k, C/F fixed band, D calibrated band, E/E' optics
    (E' summed at a switch), G moving band with its selection."""

    topk: bool = False  # B
    calib: bool = False  # D: a band calibrated over a window
    optics: bool = False  # E, E'
    switch: bool = False  # E': the band is summed on the way
    feedback: Feedback = Feedback.EXACT
    selection: Selection | None = None  # G

    @classmethod
    def of(cls, cfg: RunConfig) -> "DemoKind":
        """The kind of cfg.variant (validated by demo_groups.validate_config)."""
        optics = cfg.variant in ("optics", "optics_switch")
        feedback = Feedback.EXACT
        if optics and cfg.feedback in ("sent", "loopback"):
            feedback = Feedback.SENT
        elif cfg.variant == "optics_switch" and cfg.feedback == "mean":
            feedback = Feedback.MEAN
        return cls(
            topk=cfg.variant == "topk",
            calib=cfg.variant == "calib",
            optics=optics,
            switch=cfg.variant == "optics_switch",
            feedback=feedback,
            selection=Selection(cfg.band) if cfg.variant == "moving" else None,
        )

    @property
    def calibrates(self) -> bool:
        """D, E and E' have a calibration window."""
        return self.calib or self.optics

    @property
    def moving(self) -> bool:
        return self.selection is not None

    @property
    def choosing(self) -> bool:
        """G recal / subspace: a host choice and a broadcast every R steps."""
        return self.selection in (Selection.RECAL, Selection.SUBSPACE)

    @property
    def rotating(self) -> bool:
        return self.selection is Selection.ROTATING


# --- one group's compressed step: what its workers send, and what the feedback needs ---------


@dataclass
class TopkPending:
    """B: the masked coefficients and the mask; fed back as it was compressed."""

    message: Message


@dataclass
class BandPending:
    """A band shared by the group's rows (C, D, E, E', F, G rotating 2-D)."""

    message: Message
    idx: torch.Tensor  # (L, rows, k) positions
    val: torch.Tensor  # exact band values (L, rows, k)
    use_band_matrix: bool


@dataclass
class RowsPending:
    """G recal / subspace after a choice: each tensor its own band rows."""

    message: Message
    val: torch.Tensor  # (L, rows, k)


@dataclass
class RowTPending:
    """G rotating in 1-D: each row its own k DCT rows."""

    message: Message
    val: torch.Tensor  # (L, rows, k)


Pending = TopkPending | BandPending | RowsPending | RowTPending


# --- one group's combined result, as the update needs it -------------------------------------


@dataclass
class TopkAggregate:
    sent: torch.Tensor  # (W, rows, m) every worker's masked coefficients
    chosen: torch.Tensor  # (W, rows, m) their masks


@dataclass
class BandAggregate:
    band_mean: torch.Tensor  # (rows, k)
    use_band_matrix: bool


@dataclass
class RowsAggregate:
    band_mean: torch.Tensor  # (rows, k)


@dataclass
class RowTAggregate:
    band_mean: torch.Tensor  # (rows, k)


Aggregate = TopkAggregate | BandAggregate | RowsAggregate | RowTAggregate
