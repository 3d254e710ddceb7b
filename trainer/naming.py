"""Run names (spec §1.4), so traces of the same configuration group by name without the seed.

`{dataset}-{algorithm}[-{band}]-k{1/keep}-{mode}{chunk}[-enob{e}-p{p}][-agc{n}][-fb{f}]-lr{lr}-s{seed}`
E' (optics summed at a switch) is named `opticsum` and always carries its feedback mode; G
(moving bands) is `moving-{selection}-...-r{R}`.
"""

import re
from pathlib import Path

from trainer.config import RunConfig

BUILTIN_DATASETS = ("shakespeare", "tinystories", "synthetic")
# The spec's algorithm names, plus E' which the published experiment did not have.
NAME_OF_ALGORITHM = {"optics_switch": "opticsum"}


def dataset_label(dataset: str) -> str:
    """A built-in corpus by name; a path corpus by its file or folder stem, made name-safe."""
    if dataset in BUILTIN_DATASETS:
        return dataset
    stem = Path(dataset).stem or Path(dataset).name or "corpus"
    return re.sub(r"[^A-Za-z0-9_.]+", "_", stem).strip("_") or "corpus"


def run_name(cfg: RunConfig) -> str:
    """The spec §1.4 run name of a config (E' extended as `-opticsum-...-fb{feedback}`)."""
    algorithm = NAME_OF_ALGORITHM.get(cfg.variant, cfg.variant)
    parts = [dataset_label(cfg.dataset), algorithm]
    if cfg.variant != "adamw":
        if cfg.variant in ("band", "calib", "optics", "optics_switch", "moving"):
            parts.append(cfg.band)
        parts.append(f"k{round(1 / cfg.keep)}")
        parts.append(f"{cfg.chunk_mode}{cfg.chunk}")
    if cfg.variant == "moving":
        parts.append(f"r{cfg.select_every}")
    if cfg.variant in ("optics", "optics_switch"):
        enob = None if cfg.enob is None else float(cfg.enob)
        parts.append(f"enob{enob}")
        parts.append(f"p{cfg.planes}")
        if cfg.fs_every:
            parts.append(f"agc{cfg.fs_every}")
        if cfg.feedback != "exact" or cfg.variant == "optics_switch":
            parts.append(f"fb{cfg.feedback}")
    parts.append(f"lr{cfg.lr:g}")
    parts.append(f"s{cfg.seed}")
    return "-".join(parts)
