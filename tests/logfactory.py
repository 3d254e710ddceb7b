"""Writes training logs in the published experiment's JSONL format (spec §12), with losses a test
chooses, so importer, ladder and CLI tests run on known numbers without the real logs.

Byte counts are the GPU profile's (spec §10): 15,833,472 parameters, eight workers.
"""

import json
from pathlib import Path
from typing import Any

N_PARAMS = 15_833_472
WORKERS = 8
DENSE_BYTES = 31_666_944
BAND_BYTES = 1_979_184
TOPK_BYTES = 3_957_960
TOPK_INT64_BYTES = 9_895_920
SECONDS_PER_STEP = 0.25
HARDWARE = {
    "machine": "x86_64",
    "processor": "x86_64",
    "threads": 2,
    "torch": "2.11.0+cu130",
    "python": "3.13.15",
    "device": "NVIDIA A100-SXM4-40GB",
}
SOURCES, GROUPS = ("delta", "momentum", "grad"), ("all", "attn", "mlp", "embed")
SELECTORS = ("topk", "low", "zigzag", "high", "random")


def run_config(
    variant: str = "topk",
    band: str = "low",
    chunk_mode: str = "2d",
    chunk: int = 64,
    seed: int = 0,
    steps: int = 3000,
    eval_every: int = 200,
    lr: float | None = None,
    enob: float | None = 8.0,
    planes: int | None = 8,
    fs_every: int | None = None,
    feedback: str | None = None,
) -> dict[str, Any]:
    """A RunConfig dict (spec §1.1, GPU profile). fs_every/feedback None: an older log's config,
    which lacks the two keys."""
    config: dict[str, Any] = {
        "dataset": "tinystories",
        "variant": variant,
        "band": band,
        "keep": 0.0625,
        "chunk_mode": chunk_mode,
        "chunk": chunk,
        "workers": WORKERS,
        "batch": 8,
        "block": 256,
        "n_layer": 8,
        "n_head": 6,
        "n_embd": 384,
        "steps": steps,
        "lr": lr if lr is not None else (0.003 if variant == "adamw" else 0.001),
        "warmup": 200,
        "decay": 0.999,
        "weight_decay": 0.1,
        "calib_start": 200,
        "calib_steps": 100,
        "enob": enob,
        "planes": planes,
        "kappa": 4.0,
        "native": 256,
        "seed": seed,
        "eval_every": eval_every,
        "eval_batches": 8,
        "diag_every": eval_every,
        "ckpt_every": 500,
        "threads": 2,
        "device": "auto",
        "extra": {},
    }
    if fs_every is not None:
        config["fs_every"] = fs_every
    if feedback is not None:
        config["feedback"] = feedback
    return config


def run_name(config: dict[str, Any]) -> str:
    """The experiment's run name (spec §1.4)."""
    name = f"{config['dataset']}-{config['variant']}"
    if config["variant"] != "adamw":
        if config["variant"] in ("band", "calib", "optics"):
            name += f"-{config['band']}"
        name += f"-k{round(1 / config['keep'])}-{config['chunk_mode']}{config['chunk']}"
        if config["variant"] == "optics":
            enob = "None" if config["enob"] is None else float(config["enob"])
            name += f"-enob{enob}-p{config['planes']}"
            if config.get("fs_every", 0):
                name += f"-agc{config['fs_every']}"
            if config.get("feedback", "exact") != "exact":
                name += f"-fb{config['feedback']}"
    return f"{name}-lr{config['lr']:g}-s{config['seed']}"


def bytes_per_step(variant: str) -> tuple[int, int, float]:
    """(payload, payload with int64 indices, ring wire) per worker per step (spec §10)."""
    if variant == "adamw":
        return DENSE_BYTES, DENSE_BYTES, 2 * (WORKERS - 1) / WORKERS * DENSE_BYTES
    if variant == "topk":
        return TOPK_BYTES, TOPK_INT64_BYTES, (WORKERS - 1) * TOPK_BYTES
    return BAND_BYTES, BAND_BYTES, (WORKERS - 1) * BAND_BYTES


def config_record(config: dict[str, Any]) -> dict[str, Any]:
    payload, payload_int64, wire = bytes_per_step(config["variant"])
    return {
        "type": "config",
        "name": run_name(config),
        "config": config,
        "n_params": N_PARAMS,
        "data": {"tokeniser": "byte-level BPE, 4096 tokens", "vocab": 4096},
        "payload_bytes_per_step": payload,
        "payload_bytes_int64_per_step": payload_int64,
        "wire_bytes_per_step": wire,
        "dense_bytes_per_step": DENSE_BYTES,
        "hardware": HARDWARE,
    }


def share(source: str, group: str, selector: str, step: int) -> float:
    """A deterministic energy share in [0, 1] for a diag record."""
    base = {"topk": 0.4, "low": 0.1, "zigzag": 0.11, "high": 0.05, "random": 0.0625}[selector]
    return base + 0.01 * SOURCES.index(source) + 0.001 * GROUPS.index(group) + step * 1e-7


def diag_record(step: int) -> dict[str, Any]:
    energy = {
        source: {
            group: {selector: share(source, group, selector, step) for selector in SELECTORS}
            for group in GROUPS
        }
        for source in SOURCES
    }
    return {"type": "diag", "step": step, "energy": energy}


def records(
    val_losses: list[float], done: bool = True, seconds_per_step: float = SECONDS_PER_STEP, **kw
) -> list[dict[str, Any]]:
    """The log's records: config, then (diag, eval) at every eval_every steps, then done.

    val_losses[i] is the val loss at step (i + 1) * eval_every; fewer losses than the configured
    steps with done=False is a run that crashed. train loss = val loss + 0.5.
    """
    config = run_config(**kw)
    payload, _, wire = bytes_per_step(config["variant"])
    out = [config_record(config)]
    for index, val_loss in enumerate(val_losses):
        step = (index + 1) * config["eval_every"]
        if config["variant"] != "adamw":
            out.append(diag_record(step))
        record = {
            "type": "eval",
            "step": step,
            "val_loss": val_loss,
            "train_loss": val_loss + 0.5,
            "lr": config["lr"] * (1 - step / (2 * config["steps"])),
            "payload_bytes": payload * step,
            "wire_bytes": wire * step,
            "seconds": seconds_per_step * step,
        }
        if config["variant"] == "optics" and step >= 2 * config["eval_every"]:
            record["clip_rate"] = 0.01 * index
            record["clip_rate_interval"] = 0.02 * index
        out.append(record)
    if done:
        seconds = seconds_per_step * config["steps"]
        out.append({"type": "done", "step": config["steps"], "seconds": seconds})
    return out


def write_log(
    folder: Path,
    val_losses: list[float],
    done: bool = True,
    broken_last_line: bool = False,
    file_name: str | None = None,
    **kw,
) -> Path:
    """Write one log as `<run name>.jsonl` in folder (or file_name); returns its path."""
    lines = [json.dumps(record) for record in records(val_losses, done=done, **kw)]
    if broken_last_line:
        lines.append(lines[-1][: len(lines[-1]) // 2])  # a write cut short by a crash
    path = Path(folder) / (file_name or f"{run_name(run_config(**kw))}.jsonl")
    path.write_text("\n".join(lines) + "\n")
    return path


def losses_reaching(levels: list[tuple[int, float]], steps: int = 3000, every: int = 200):
    """Val losses at each eval step: a staircase that drops to each (step, loss) level from that
    step on; before the first level the loss is 5.0."""
    out = []
    for step in range(every, steps + 1, every):
        loss = 5.0
        for at, level in levels:
            if step >= at:
                loss = level
        out.append(loss)
    return out


# (config keyword arguments, per-seed (step, loss) staircases): the slide-05 shape of the ladder
STUDY = {
    "A": ({"variant": "adamw"}, [[(400, 3.0), (2000, 1.78), (3000, 1.64)]] * 3),
    "B": ({"variant": "topk"}, [[(400, 3.05), (3000, 1.79)]] * 3),
    "C": (
        {"variant": "band", "chunk_mode": "1d", "chunk": 256},
        [[(2600, 3.13), (3000, 3.12)], [(2600, 3.15)], [(2800, 3.12)]],
    ),
    "D": (
        {"variant": "calib", "band": "calib"},
        [[(2400, 3.15), (2600, 3.1)], [(2600, 3.1)], [(2600, 3.15), (2800, 3.08)]],
    ),
    "F": ({"variant": "band", "band": "random"}, [[(1200, 3.15), (1400, 3.05)]]),
}


def write_study(folder: Path) -> list[Path]:
    """Logs of STUDY, one per seed, in folder."""
    return [
        write_log(folder, losses_reaching(levels), seed=seed, **kw)
        for kw, seeds in STUDY.values()
        for seed, levels in enumerate(seeds)
    ]
