"""A run's trace metadata (the trace contract of transitsim/traces/format.py) and its writing.

Kept apart from the training loop: what a trace says about its run (config, model, bytes,
hardware, backend, the meaning of each timing column) is one job, training another.
"""

import os
import platform
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from trainer.config import RunConfig, is_local_sgd, variant_id
from trainer.data.corpus import Corpus
from trainer.model import GPT
from trainer.naming import run_name
from trainer.variants.accounting import ByteAccounting
from trainer.variants.exchange import Exchange
from trainer.variants.local_sgd_schedule import Schedule
from transitsim.traces.format import write_trace

OPTICS_ALGORITHMS = ("optics", "optics_switch")
TIMING_MEANING = {
    "compute_s": "mean measured forward+backward seconds of one worker's micro-step",
    "compress_s": "one worker's share (1/L) of the measured compression of the process's L "
    "workers' deltas (DCT, selection, feedback, aggregation), without comm_s; 0 for AdamW",
    "comm_s": "measured seconds process 0 spent in the collectives that carry what workers "
    "send (including waiting for slower ranks); 0 on the simulated backend",
    "exchange_bytes": "bytes process 0 handed to those collectives this step",
    "update_s": "measured seconds to apply the aggregated update to the shared weights "
    "(AdamW: gradient mean and AdamW step), without comm_s",
    "wall_s": "measured seconds of process 0's whole step: its workers' micro-steps in turn, "
    "compression, exchange, update, any evaluation",
    "end_unix_s": "wall-clock time (Unix seconds) at the end of the step on process 0",
}


class TracedRun(Protocol):
    """What a trace records of a run: the parts of a Trainer (trainer/loop/run.py) read here,
    named here so that this module, which run.py imports, need not import it back."""

    cfg: RunConfig
    corpus: Corpus
    model: GPT
    bytes: ByteAccounting
    n_params: int
    device: torch.device
    exchange: Exchange
    done: int  # steps run
    rows: list[dict[str, Any]]  # one trace row per step
    diagnostics: list[dict[str, Any]]
    notes: list[str]
    backward_profile: dict[str, Any] | None


def source_revision() -> str:
    """The git commit of the trainer's source tree, or "unknown" outside a checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def variant_params(cfg: RunConfig) -> dict[str, Any]:
    """The knobs that define the variant (the rest of the config is in meta["config"])."""
    params: dict[str, Any] = {"algorithm": cfg.variant, "lr": cfg.lr, "warmup": cfg.warmup}
    if cfg.variant == "adamw":
        return {**params, "weight_decay": cfg.weight_decay}
    if is_local_sgd(cfg):
        return {**params, **local_sgd_params(cfg)}
    params.update(
        band=cfg.band, chunk_mode=cfg.chunk_mode, chunk=cfg.chunk, keep=cfg.keep, decay=cfg.decay
    )
    if cfg.variant in ("calib", *OPTICS_ALGORITHMS):
        params.update(calib_start=cfg.calib_start, calib_steps=cfg.calib_steps)
    if cfg.variant == "moving":
        params.update(selection=cfg.band, select_every=cfg.select_every)
    if cfg.variant in OPTICS_ALGORITHMS:
        params.update(
            enob=cfg.enob,
            planes=cfg.planes,
            kappa=cfg.kappa,
            fs_every=cfg.fs_every,
            feedback=cfg.feedback,
            native=cfg.native,
        )
    return params


def local_sgd_params(cfg: RunConfig) -> dict[str, Any]:
    """H, H-s, L: the inner optimiser's decay and the outer exchange's knobs (docs/local-sgd.md)."""
    params: dict[str, Any] = {
        "weight_decay": cfg.weight_decay,
        "inner_steps": cfg.inner_steps,
        "outer_lr": cfg.outer_lr,
        "outer_momentum": cfg.outer_momentum,
        "nesterov": cfg.outer_momentum > 0,
        "outer_bits": cfg.outer_bits,
    }
    if cfg.variant == "streaming_diloco":
        params.update(fragments=cfg.fragments, overlap=cfg.overlap, mix=cfg.mix)
    if cfg.variant == "sparseloco":
        params.update(keep=cfg.keep, chunk_mode=cfg.chunk_mode, chunk=cfg.chunk, decay=cfg.decay)
    return params


def sync_columns(schedule: Schedule, done: int) -> dict[str, Any]:
    """A local-SGD step's exchange: whether one starts, of which fragment, where it lands.

    outer_sync: an outer exchange starts when this step's inner update is done (payload_bytes
    is its size; 0 on every other step); sync_fragment: its fragment (0 when none starts);
    lands_step: the step at whose end its outer update is applied to the replicas (the step
    itself for H and L, tau later for H-s; 0 when none starts)."""
    fragment = schedule.sync_fragment(done)
    return {
        "outer_sync": fragment is not None,
        "sync_fragment": 0 if fragment is None else fragment,
        "lands_step": 0 if fragment is None else done + schedule.overlap,
    }


def local_sgd_meta(cfg: RunConfig, acc: ByteAccounting) -> dict[str, Any]:
    """The schedule and per-fragment bytes replay needs to time H, H-s and L (the trace's
    `local_sgd` key; docs/local-sgd.md)."""
    schedule = acc.schedule
    assert schedule is not None
    return {
        "replicas": cfg.workers,
        "inner_steps": schedule.inner_steps,
        "fragments": schedule.fragments,
        "overlap_steps": schedule.overlap,
        "mix": cfg.mix if cfg.variant == "streaming_diloco" else 0.0,
        "value_bits": cfg.outer_bits,
        "density": cfg.keep if cfg.variant == "sparseloco" else 1.0,
        "outer_lr": cfg.outer_lr,
        "outer_momentum": cfg.outer_momentum,
        "nesterov": cfg.outer_momentum > 0,
        "collective": acc.collective,
        "fragment_offsets": [schedule.offset(p) for p in range(schedule.fragments)],
        "fragment_tensors": [list(sync.tensors) for sync in acc.syncs],
        "sync_payload_bytes": [sync.payload_bytes for sync in acc.syncs],
        "sync_payload_int64_bytes": [sync.payload_int64_bytes for sync in acc.syncs],
        "sync_wire_bytes": [sync.wire_bytes for sync in acc.syncs],
        "rule": "fragment p starts an exchange at the end of each step t >= 1 with "
        "t % inner_steps == fragment_offsets[p]; its outer update lands at the end of step "
        "t + overlap_steps; payload_bytes is 0 on every other step",
        "evaluated_on": "the shared (outer) weights; train_loss is the replicas' mean",
    }


def device_label(device: torch.device) -> str:
    """The CUDA device's name (spec §13's hardware.device), or "cpu"."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def distributed_meta(exchange: Exchange) -> dict[str, Any]:
    """How the W workers were spread over processes, and how they exchanged."""
    meta: dict[str, Any] = {
        "backend": exchange.backend,
        "world_size": exchange.world,
        "workers_per_process": exchange.local_workers,
    }
    wire = getattr(exchange, "wire_dtype", None)
    if wire is not None:
        meta["wire_dtype"] = str(wire).removeprefix("torch.")
        meta["master_addr"] = os.environ.get("MASTER_ADDR", "")
        meta["socket_ifname"] = os.environ.get("GLOO_SOCKET_IFNAME", "")
    return meta


def trace_meta(trainer: TracedRun, status: str, revision: str) -> dict[str, Any]:
    """The trace metadata of the trace contract, from a trainer's config, model and bytes."""
    cfg, corpus, acc = trainer.cfg, trainer.corpus, trainer.bytes
    shape = trainer.model.shape
    return {
        "name": run_name(cfg),
        "variant": variant_id(cfg),
        "variant_params": variant_params(cfg),
        "config": cfg.to_dict(),
        "model": asdict(shape) | {"vocab_real": corpus.vocab},
        "n_params": trainer.n_params,
        "workers": cfg.workers,
        "batch": cfg.batch,
        "context": cfg.block,
        "corpus": corpus.name,
        "corpus_source": corpus.source,
        "tokenizer": corpus.tokenizer,
        "seed": cfg.seed,
        "hardware": {
            "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "device": device_label(trainer.device),
        },
        "backend": trainer.exchange.backend,
        "world_size": trainer.exchange.world,
        "distributed": distributed_meta(trainer.exchange),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
        "source_revision": revision,
        "dense_bytes_per_step": int(acc.dense_bytes),
        "payload_bytes_per_step": int(acc.payload_bytes),
        "payload_bytes_int64_per_step": int(acc.payload_int64_bytes),
        "wire_bytes_per_step": float(acc.wire_bytes),
        "collective": acc.collective,
        "reducible": bool(acc.reducible),
        "broadcast_bytes_per_choice": int(acc.broadcast_bytes),
        **({"local_sgd": local_sgd_meta(cfg, acc)} if acc.schedule is not None else {}),
        "timing": TIMING_MEANING,
        "steps_planned": cfg.steps,
        "steps_done": trainer.done,
        "rows": "every_step",
        "origin": "trainer",
        "status": status,
        "notes": list(trainer.notes),
    } | ({"backward_profile": trainer.backward_profile} if trainer.backward_profile else {})


def write_run_trace(path: Path, trainer: TracedRun, status: str, revision: str) -> Path:
    steps = pd.DataFrame(trainer.rows)
    diagnostics = pd.DataFrame(
        trainer.diagnostics, columns=["step", "source", "group", "selector", "share"]
    )
    return write_trace(path, steps, trace_meta(trainer, status, revision), diagnostics)
