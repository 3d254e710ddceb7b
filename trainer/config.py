"""Run configuration and presets (spec §1.1, §1.2), plus the variant ids of the design's table.

One flat dataclass, like nanoGPT's config: every field can be overridden from the CLI.
A run is built in three layers: RunConfig defaults, then a preset (model and schedule shape),
then the variant's defaults (algorithm, chunking, learning rate), then the user's overrides.
"""

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from transitsim.base.errors import TransitsimError

# Design-table variant id -> (internal algorithm, default band shape).
VARIANT_IDS: dict[str, tuple[str, str]] = {
    "A": ("adamw", "low"),
    "B": ("topk", "low"),
    "C": ("band", "low"),
    "D": ("calib", "calib"),
    "E": ("optics", "low"),
    "E'": ("optics_switch", "low"),
    "F": ("band", "random"),
    "G": ("moving", "rotating"),
    # Local SGD (trainer/variants/local_sgd.py, docs/local-sgd.md): each worker a replica.
    "H": ("diloco", "low"),
    "H-s": ("streaming_diloco", "low"),
    "L": ("sparseloco", "low"),
}
# Beyond these a value is a typo, not a run: an int too wide for torch's seeds, a model that
# cannot be allocated (one clear line instead of an overflow or an allocator traceback).
UPPER_BOUNDS: dict[str, int] = {
    "seed": 2**32 - 1,
    "workers": 4096,
    "steps": 10**9,
    "block": 65536,
    "n_layer": 1024,
    "n_head": 1024,
    "n_embd": 65536,
    "batch": 65536,
    "vocab_size": 10**7,
    "chunk": 1 << 20,
    "threads": 1024,
}
MAX_TRAIN_BYTES = 64 * 2**30
LOCAL_SGD_ALGORITHMS = ("diloco", "streaming_diloco", "sparseloco")
ALGORITHMS = (
    "adamw",
    "topk",
    "band",
    "calib",
    "optics",
    "optics_switch",
    "moving",
    *LOCAL_SGD_ALGORITHMS,
)
# G's selections (trainer/variants/moving.py): bands that move without per-step comparisons.
MOVING_SELECTIONS = ("recal", "rotating", "subspace")
BANDS = ("low", "zigzag", "high", "random", "calib", *MOVING_SELECTIONS)
CHUNK_MODES = ("2d", "1d")
TOKENIZERS = ("char", "bpe")
DEVICES = ("cpu", "cuda")
FEEDBACK_MODES = {
    "optics": ("exact", "sent"),
    "optics_switch": ("loopback", "exact", "mean"),
}

# Peak learning rates chosen by the published LR sweep (spec §1.2, §14.6): AdamW 3e-3, DeMo 1e-3.
# The CPU sweep (§16.3) agrees for AdamW, and the Shakespeare optics check ran DeMo at 1e-3, so the
# same pair is the default on every preset.
ADAMW_LR = 3e-3
DEMO_LR = 1e-3
# The outer optimiser of DiLoCo and Streaming DiLoCo: SGD with Nesterov momentum, the papers'
# outer lr 0.7 and momentum 0.9 (Douillard et al. 2023, 2025).
OUTER_LR = 0.7
OUTER_MOMENTUM = 0.9
# Bits per value of the outer exchange: BF16 (H), the 4-bit E3M0 of Streaming DiLoCo (H-s), the
# 2 bits of SparseLoCo (L); each variant supports only its own.
OUTER_BITS = {"diloco": (16,), "streaming_diloco": (4,), "sparseloco": (2,)}

# What each variant id means when the user gives nothing else (spec §1.3 grids, design table).
# E defaults to feedback "sent": the design table's E is the fixed optics, where the sender feeds
# back what the optics produced; `--feedback exact` gives the published "as designed" runs.
VARIANT_DEFAULTS: dict[str, dict[str, Any]] = {
    "A": dict(variant="adamw", band="low", lr=ADAMW_LR),
    "B": dict(variant="topk", band="low", chunk_mode="2d", chunk=64, lr=DEMO_LR),
    "C": dict(variant="band", band="low", chunk_mode="2d", chunk=64, lr=DEMO_LR),
    "D": dict(variant="calib", band="calib", chunk_mode="2d", chunk=64, lr=DEMO_LR),
    "E": dict(
        variant="optics", band="low", chunk_mode="1d", chunk=256, feedback="sent", lr=DEMO_LR
    ),
    "E'": dict(
        variant="optics_switch",
        band="low",
        chunk_mode="1d",
        chunk=256,
        feedback="loopback",
        lr=DEMO_LR,
    ),
    "F": dict(variant="band", band="random", chunk_mode="2d", chunk=64, lr=DEMO_LR),
    # G in the module's shape (1-D 256, as C 1-D 256 and E), so it can be made by the optics.
    "G": dict(variant="moving", band="rotating", chunk_mode="1d", chunk=256, lr=DEMO_LR),
    # Local SGD: inner AdamW at A's learning rate on every replica (docs/local-sgd.md).
    "H": dict(variant="diloco", inner_steps=50, outer_bits=16, lr=ADAMW_LR),
    # A fragment every H/P = 10 steps, each fragment every 50; its exchange overlaps 5 steps.
    "H-s": dict(
        variant="streaming_diloco",
        inner_steps=50,
        fragments=5,
        overlap=5,
        outer_bits=4,
        lr=ADAMW_LR,
    ),
    # 64 of every 4,096 (1.5625 %) per 64 x 64 tile, as DeMo chunks; error feedback decay 0.95,
    # outer lr 1 and no outer momentum (SparseLoCo's plain averaged step).
    "L": dict(
        variant="sparseloco",
        inner_steps=10,
        keep=1 / 64,
        chunk_mode="2d",
        chunk=64,
        decay=0.95,
        outer_lr=1.0,
        outer_momentum=0.0,
        outer_bits=2,
        lr=ADAMW_LR,
    ),
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
    select_every: int = 50  # G: R, the steps between re-choices (recal, subspace) or new sets
    # Local SGD (H, H-s, L; docs/local-sgd.md). keep, chunk_mode and chunk are L's top-k and
    # chunking; decay is L's error-feedback decay.
    inner_steps: int = 50  # H: inner AdamW steps between two syncs of the same parameters
    outer_lr: float = OUTER_LR
    outer_momentum: float = OUTER_MOMENTUM  # Nesterov; 0 = plain SGD (L)
    fragments: int = 1  # H-s: P, fragments synchronised in turn, one every H/P steps
    overlap: int = 0  # H-s: tau, inner steps a fragment's exchange overlaps before it lands
    mix: float = 0.5  # H-s: alpha, share of the local fragment kept when the outer one lands
    outer_bits: int = 16  # bits per value of the outer exchange (16 H, 4 H-s, 2 L)
    seed: int = 0
    eval_every: int = 50
    eval_batches: int = 8
    diag_every: int = 50
    ckpt_every: int = 100
    # 1, not the spec's 4, nor auto (0, trainer/loop/threads.py), though benchmarks/bench_threads.py
    # measured auto fastest both ways (0.64x one thread's step quiet, 1.07x beside a busy process,
    # where 2 threads were 2.68x): some variants' losses change in the last bits with the thread
    # count (G subspace: 4.16369748 against 4.16369915 at step 5), so auto, which follows the
    # machine's load, would break the bit-exact resume a checkpointed run promises.
    threads: int = 1
    device: str = "cpu"
    tokenizer: str = "char"  # char | bpe (byte-level BPE, spec §2.1) for path corpora
    vocab_size: int = 4096  # BPE vocabulary when tokenizer == "bpe"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Known fields from data; fields it lacks (added after it was written) at defaults."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def same_config(stored: dict[str, Any] | None, cfg: RunConfig) -> bool:
    """Whether a config dict written by an earlier trainer describes cfg: fields added since
    (absent from `stored`) count as their defaults, so old traces and checkpoints still match."""
    if not isinstance(stored, dict):
        return False
    known = {f.name for f in fields(RunConfig)}
    if set(stored) - known:
        return False
    return RunConfig.from_dict(stored).to_dict() == cfg.to_dict()


# Each preset as what differs from its base: (base preset or None for RunConfig's defaults, which
# are the Shakespeare shape of spec §1.1, changes). PRESETS below resolves the chains.
PRESET_CHANGES: dict[str, tuple[str | None, dict[str, Any]]] = {
    # Spec §1.2 "shakespeare": the published CPU check's shape.
    "shakespeare": (None, dict(steps=600)),
    # The smallest preset that keeps the published shape (8 workers, 1/16 kept, 2-D 64x64 tiles,
    # 1-D 256 and 64 runs, the calibration window and optics schedule of the Shakespeare check),
    # at about 1/8 of the `shakespeare` preset's cost per step: the project's recorded traces.
    "shakespeare-mini": (
        "shakespeare",
        dict(n_layer=2, block=64, batch=4, steps=400, eval_every=25, ckpt_every=50),
    ),
    # Spec §1.2 "tinystories (CPU)": 3,492,288 parameters.
    "tinystories": (
        None,
        dict(
            dataset="tinystories",
            n_layer=6,
            n_head=6,
            n_embd=192,
            block=256,
            batch=4,
            steps=1500,
            warmup=100,
            calib_start=100,
            eval_every=100,
            diag_every=100,
            tokenizer="bpe",
            vocab_size=4096,
        ),
    ),
    # Spec §1.2 "tinystories-gpu": the published GPU profile (15,833,472 parameters).
    "tinystories-gpu": (
        "tinystories",
        dict(
            n_layer=8,
            n_embd=384,
            batch=8,
            steps=3000,
            warmup=200,
            calib_start=200,
            calib_steps=100,
            eval_every=200,
            diag_every=200,
            ckpt_every=500,
        ),
    ),
    # Spec §1.2 "synthetic": tiny, for tests.
    "synthetic": (
        None,
        dict(
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
    ),
}


def _preset_changes(name: str) -> dict[str, Any]:
    """A preset's changes to RunConfig's defaults, its bases' first."""
    base, changes = PRESET_CHANGES[name]
    return {**(_preset_changes(base) if base is not None else {}), **changes}


# Every preset resolved: each RunConfig field (but `extra`) at the preset's value.
PRESETS: dict[str, dict[str, Any]] = {
    name: {
        f.name: getattr(replace(RunConfig(), **_preset_changes(name)), f.name)
        for f in fields(RunConfig)
        if f.name != "extra"
    }
    for name in PRESET_CHANGES
}


def preset_config(name: str, **overrides: Any) -> RunConfig:
    """A preset's config with overrides applied (unknown preset or field -> KeyError)."""
    return replace(RunConfig(**PRESETS[name]), **overrides)


def make_config(preset: str, variant_id: str, **overrides: Any) -> RunConfig:
    """Preset, then the variant's defaults, then the user's overrides; validated.

    Raises TransitsimError (one line) for an unknown preset, variant id, field or bad value.
    """
    if preset not in PRESETS:
        raise TransitsimError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
    variant_id = canonical_variant(variant_id)
    if variant_id not in VARIANT_DEFAULTS:
        raise TransitsimError(
            f"unknown variant {variant_id!r} (choose from {', '.join(VARIANT_DEFAULTS)})"
        )
    known = {f.name for f in fields(RunConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TransitsimError(f"unknown config field(s): {', '.join(unknown)}")
    cfg = replace(RunConfig(**PRESETS[preset]), **VARIANT_DEFAULTS[variant_id])
    cfg = replace(cfg, **overrides)
    check_config(cfg)
    return cfg


def canonical_variant(text: str) -> str:
    """A variant id as the table spells it, whatever its case ("h-S" -> "H-s")."""
    by_upper = {vid.upper(): vid for vid in VARIANT_DEFAULTS}
    return by_upper.get(text.upper(), text)


def variant_id(cfg: RunConfig) -> str:
    """The design-table id (A..H, H-s, L, E') of a config: band shapes other than low are F."""
    if cfg.variant == "band":
        return "C" if cfg.band == "low" else "F"
    for vid, (algorithm, _band) in VARIANT_IDS.items():
        if algorithm == cfg.variant:
            return vid
    raise TransitsimError(f"unknown algorithm {cfg.variant!r} (choose from {ALGORITHMS})")


def is_local_sgd(cfg: RunConfig) -> bool:
    """H, H-s and L: replicas that train apart and synchronise every few steps."""
    return cfg.variant in LOCAL_SGD_ALGORITHMS


def is_demo(cfg: RunConfig) -> bool:
    """Every variant but AdamW and the local-SGD ones runs DeMo (spec §6)."""
    return cfg.variant != "adamw" and not is_local_sgd(cfg)


def check_config(cfg: RunConfig) -> None:
    """Raise TransitsimError naming the first field with a value the trainer cannot run."""

    def fail(name: str, why: str) -> None:
        raise TransitsimError(f"bad value {name}={getattr(cfg, name)!r}: {why}")

    for item in fields(cfg):  # nan/inf pass every comparison below unnoticed
        value = getattr(cfg, item.name)
        if isinstance(value, float) and not math.isfinite(value):
            fail(item.name, "must be a finite number")
    for name, most in UPPER_BOUNDS.items():
        if getattr(cfg, name) > most:
            fail(name, f"must be at most {most:,}")
    if cfg.variant not in ALGORITHMS:
        fail("variant", f"choose from {', '.join(ALGORITHMS)}")
    if cfg.band not in BANDS:
        fail("band", f"choose from {', '.join(BANDS)}")
    if cfg.chunk_mode not in CHUNK_MODES:
        fail("chunk_mode", "choose from 2d, 1d")
    if cfg.tokenizer not in TOKENIZERS:
        fail("tokenizer", "choose from char, bpe")
    if cfg.variant in FEEDBACK_MODES and cfg.feedback not in FEEDBACK_MODES[cfg.variant]:
        fail("feedback", f"choose from {', '.join(FEEDBACK_MODES[cfg.variant])}")
    if cfg.variant == "moving" and cfg.band not in MOVING_SELECTIONS:
        fail("band", f"variant G selects with one of {', '.join(MOVING_SELECTIONS)}")
    if cfg.variant != "moving" and cfg.band in MOVING_SELECTIONS:
        fail("band", "recal, rotating and subspace are the selections of variant G")
    if cfg.select_every < 1:
        fail("select_every", "must be at least 1")
    if not 0 < cfg.keep <= 1:
        fail("keep", "must lie in (0, 1]")
    if not 0 <= cfg.decay < 1:
        fail("decay", "must lie in [0, 1)")
    for name in ("chunk", "workers", "batch", "block", "n_layer", "n_head", "n_embd", "steps"):
        if getattr(cfg, name) < 1:
            fail(name, "must be at least 1")
    if cfg.threads < 0:
        fail("threads", "must be at least 1, or 0 for auto (the cores nobody else is using)")
    for name in ("eval_every", "eval_batches", "diag_every", "ckpt_every", "native"):
        if getattr(cfg, name) < 1:
            fail(name, "must be at least 1")
    for name in ("warmup", "calib_start", "calib_steps", "fs_every", "seed"):
        if getattr(cfg, name) < 0:
            fail(name, "must not be negative")
    if cfg.lr <= 0:
        fail("lr", "must be positive")
    if cfg.weight_decay < 0:
        fail("weight_decay", "must not be negative")
    if cfg.n_embd % cfg.n_head:
        fail("n_embd", f"must be a multiple of n_head ({cfg.n_head})")
    if cfg.planes is not None and not 1 <= cfg.planes <= 31:
        fail("planes", "must lie in 1..31 (or None)")
    if cfg.enob is not None and cfg.enob <= 0:
        fail("enob", "must be positive (or None)")
    if cfg.kappa <= 0:
        fail("kappa", "must be positive")
    if cfg.vocab_size < 257 and cfg.tokenizer == "bpe":
        fail("vocab_size", "a byte-level BPE needs more than 256 tokens")
    if cfg.device not in DEVICES:
        fail("device", f"choose from {', '.join(DEVICES)}")
    if is_local_sgd(cfg):
        check_local_sgd(cfg)
    need = estimated_bytes(cfg)
    if need > MAX_TRAIN_BYTES:
        raise TransitsimError(
            f"model and batch need about {need / 2**30:,.0f} GiB (block {cfg.block}, n_embd "
            f"{cfg.n_embd}, n_layer {cfg.n_layer}, batch {cfg.batch}); at most "
            f"{MAX_TRAIN_BYTES / 2**30:,.0f} GiB"
        )


def check_local_sgd(cfg: RunConfig) -> None:
    """The local-SGD knobs (docs/local-sgd.md): a schedule the trainer can run."""

    def fail(name: str, why: str) -> None:
        raise TransitsimError(f"bad value {name}={getattr(cfg, name)!r}: {why}")

    if not 1 <= cfg.inner_steps <= cfg.steps:
        fail("inner_steps", f"must lie in 1..steps ({cfg.steps}): --set inner_steps=N")
    if not 0 < cfg.outer_lr <= 10:
        fail("outer_lr", "must lie in (0, 10]")
    if not 0 <= cfg.outer_momentum < 1:
        fail("outer_momentum", "must lie in [0, 1)")
    if cfg.outer_bits not in OUTER_BITS[cfg.variant]:
        fail("outer_bits", f"variant {variant_id(cfg)} sends {OUTER_BITS[cfg.variant][0]} bits")
    if cfg.variant == "streaming_diloco":
        if not 1 <= cfg.fragments <= cfg.inner_steps or cfg.inner_steps % cfg.fragments:
            fail("fragments", f"must divide inner_steps ({cfg.inner_steps})")
        if not 0 <= cfg.overlap < cfg.inner_steps:
            fail("overlap", f"must lie in 0..inner_steps-1 ({cfg.inner_steps - 1})")
        if not 0 <= cfg.mix < 1:
            fail("mix", "must lie in [0, 1)")
    else:
        if cfg.fragments != 1:
            fail("fragments", "only H-s synchronises fragments")
        if cfg.overlap != 0:
            fail("overlap", "only H-s overlaps its exchange")
    if cfg.variant == "sparseloco" and cfg.outer_momentum != 0:
        fail("outer_momentum", "L has no outer momentum (its error feedback stands in for it)")


def estimated_bytes(cfg: RunConfig) -> float:
    """A rough upper estimate of the memory a run needs: float32 weights with their gradients
    and two optimiser moments per worker copy, and one worker's activations and attention
    matrices (the trainer steps workers one after another)."""
    vocab = cfg.vocab_size if cfg.tokenizer == "bpe" else 256
    params = (vocab + cfg.block) * cfg.n_embd + 12 * cfg.n_layer * cfg.n_embd**2
    if is_local_sgd(cfg):  # every replica its weights and AdamW moments (L: error feedback)
        params *= 1 + cfg.workers
    activations = cfg.batch * cfg.block * cfg.n_layer * (16 * cfg.n_embd + cfg.n_head * cfg.block)
    return 4.0 * (4 * params + 2 * activations)
