"""Run names (spec §1.4), so traces of the same configuration group by name without the seed.

`{dataset}-{algorithm}[-{band}]-k{1/keep}-{mode}{chunk}[-enob{e}-p{p}][-agc{n}][-fb{f}]-lr{lr}-s{seed}`
E' (optics summed at a switch) is named `opticsum` and always carries its feedback mode; G
(moving bands) is `moving-{selection}-...-r{R}`. The local-SGD variants name their schedule and
outer optimiser: H `diloco-h{H}-olr{lr_out}-om{mu}`, H-s `sdiloco-h{H}-p{P}-t{tau}-a{alpha}-q4-
olr..-om..`, L `sparseloco-h{H}-k{1/keep}-{mode}{chunk}-q2-ef{decay}-olr..`, then `-lr..-s..`.
"""

import re
from pathlib import Path

from trainer.config import RunConfig, is_local_sgd

BUILTIN_DATASETS = ("shakespeare", "tinystories", "synthetic")
# The spec's algorithm names, plus E' which the published experiment did not have.
NAME_OF_ALGORITHM = {"optics_switch": "opticsum", "streaming_diloco": "sdiloco"}


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
    if is_local_sgd(cfg):
        parts += local_sgd_parts(cfg)
    elif cfg.variant != "adamw":
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


def local_sgd_parts(cfg: RunConfig) -> list[str]:
    """The name parts of H, H-s and L: schedule, compression, outer optimiser."""
    parts = [f"h{cfg.inner_steps}"]
    if cfg.variant == "streaming_diloco":
        parts += [f"p{cfg.fragments}", f"t{cfg.overlap}", f"a{cfg.mix:g}", f"q{cfg.outer_bits}"]
    if cfg.variant == "sparseloco":
        parts += [f"k{round(1 / cfg.keep)}", f"{cfg.chunk_mode}{cfg.chunk}", f"q{cfg.outer_bits}"]
        parts.append(f"ef{cfg.decay:g}")
    parts.append(f"olr{cfg.outer_lr:g}")
    if cfg.variant != "sparseloco":
        parts.append(f"om{cfg.outer_momentum:g}")
    return parts
