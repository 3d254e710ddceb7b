"""Run configuration and presets (spec §1.1, §1.2), plus the variant ids of the design's table.

One flat dataclass, like nanoGPT's config: every field can be overridden from the CLI.
"""

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

# Design-table variant id -> (internal algorithm, default band shape).
VARIANT_IDS: dict[str, tuple[str, str]] = {
    "A": ("adamw", "low"),
    "B": ("topk", "low"),
    "C": ("band", "low"),
    "D": ("calib", "calib"),
    "E": ("optics", "low"),
    "E'": ("optics_switch", "low"),
    "F": ("band", "random"),
}
ALGORITHMS = ("adamw", "topk", "band", "calib", "optics", "optics_switch")
BANDS = ("low", "zigzag", "high", "random", "calib")
FEEDBACK_MODES = {
    "optics": ("exact", "sent"),
    "optics_switch": ("loopback", "exact", "mean"),
}


@dataclass
class RunConfig:
    """Every knob of one training run; defaults follow the spec's RunConfig (§1.1)."""

    dataset: str = "shakespeare"  # corpus: shakespeare | tinystories | synthetic | a path
    variant: str = "band"  # algorithm, one of ALGORITHMS
    band: str = "low"
    keep: float = 1 / 16
    chunk_mode: str = "2d"
    chunk: int = 64
    workers: int = 8
    batch: int = 8
    block: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    steps: int = 1000
    lr: float = 1e-3
    warmup: int = 50
    decay: float = 0.999
    weight_decay: float = 0.1
    calib_start: int = 50
    calib_steps: int = 50
    enob: float | None = 8.0
    planes: int | None = 8
    kappa: float = 4.0
    fs_every: int = 0
    feedback: str = "exact"
    native: int = 256
    seed: int = 0
    eval_every: int = 50
    eval_batches: int = 8
    diag_every: int = 50
    ckpt_every: int = 100
    threads: int = 2
    device: str = "cpu"
    tokenizer: str = "char"  # char | bpe (byte-level BPE, spec §2.1) for path corpora
    vocab_size: int = 4096  # BPE vocabulary when tokenizer == "bpe"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


PRESETS: dict[str, dict[str, Any]] = {
    # Spec §1.2 "shakespeare": the published CPU check's shape.
    "shakespeare": dict(
        dataset="shakespeare",
        n_layer=4,
        n_head=4,
        n_embd=128,
        block=128,
        batch=8,
        workers=8,
        steps=600,
        warmup=50,
        calib_start=50,
        calib_steps=50,
        eval_every=50,
        diag_every=50,
        ckpt_every=100,
        lr=1e-3,
    ),
    # Spec §1.2 "tinystories-gpu": the published GPU profile (15,833,472 parameters).
    "tinystories-gpu": dict(
        dataset="tinystories",
        n_layer=8,
        n_head=6,
        n_embd=384,
        block=256,
        batch=8,
        workers=8,
        steps=3000,
        warmup=200,
        calib_start=200,
        calib_steps=100,
        eval_every=200,
        diag_every=200,
        ckpt_every=500,
        lr=1e-3,
        tokenizer="bpe",
        vocab_size=4096,
    ),
    # Spec §1.2 "synthetic": tiny, for tests.
    "synthetic": dict(
        dataset="synthetic",
        n_layer=1,
        n_head=2,
        n_embd=64,
        block=64,
        batch=2,
        workers=2,
        steps=20,
        warmup=4,
        calib_start=4,
        calib_steps=4,
        eval_every=10,
        diag_every=10,
        ckpt_every=10,
        eval_batches=2,
    ),
}


def preset_config(name: str, **overrides: Any) -> RunConfig:
    """A preset's config with overrides applied (unknown preset or field -> KeyError)."""
    return replace(RunConfig(**PRESETS[name]), **overrides)
