"""The training loop (spec §4) with its LR schedule (§5), checkpoints and the trace it writes.

W simulated workers share one model in one process. Each step every worker draws its batch and
computes its gradient at the same weights; the gradients are stacked (W, *shape) and handed to
the variant: AdamW on their mean (A) or DeMo (B..F, E'). One trace row per step. Every
`ckpt_every` steps the run saves a checkpoint and rewrites its trace (status "incomplete"), so
re-running the same command after a crash resumes and ends with the same trace.
"""

import math
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from trainer.config import RunConfig, is_demo, variant_id
from trainer.corpus import Corpus, load_corpus
from trainer.data import WorkerBatches, eval_batches
from trainer.model import GPT, ModelShape, padded_vocab
from trainer.naming import run_name
from trainer.profile import BackwardProfiler, measured, profile_due
from transitsim.errors import TransitsimError
from transitsim.trace import read_meta, write_trace

TIMING_COLUMNS = ("compute_s", "compress_s", "update_s", "wall_s")
OPTICS_ALGORITHMS = ("optics", "optics_switch")
TIMING_MEANING = {
    "compute_s": "mean measured forward+backward seconds of one worker's micro-step",
    "compress_s": "one worker's share (1/W) of the measured compression of all W workers' "
    "deltas (DCT, selection, feedback, aggregation); 0 for AdamW",
    "update_s": "measured seconds to apply the aggregated update to the shared weights "
    "(AdamW: gradient mean and AdamW step)",
    "wall_s": "measured seconds of the whole simulated step: all W workers' micro-steps in "
    "turn, the batched compression, the update and any evaluation",
}


def lr_at(step0: int, cfg: RunConfig) -> float:
    """Linear warm-up, then cosine to 10% of peak (spec §5); step0 is the 0-based step."""
    if step0 < cfg.warmup:
        return cfg.lr * (step0 + 1) / cfg.warmup
    t = (step0 - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@dataclass
class StepReport:
    """What a progress display needs after each step."""

    done: int
    steps: int
    train_loss: float
    val_loss: float


@dataclass
class RunResult:
    trace_path: Path
    name: str
    resumed_from: int  # 0 when the run started afresh
    steps_done: int
    status: str  # "complete", or "skipped" when a complete trace already existed
    notes: list[str]


def model_shape(cfg: RunConfig, vocab: int) -> ModelShape:
    """The model of a config over a corpus of `vocab` real tokens (padded to 64)."""
    return ModelShape(padded_vocab(vocab), cfg.block, cfg.n_layer, cfg.n_head, cfg.n_embd)


def setup_torch(threads: int) -> None:
    """Strict determinism on the CPU (spec §4) with the configured intra-op threads."""
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


class Trainer:
    """One run's model, data, optimiser and accumulated trace rows; `step()` advances it once."""

    def __init__(self, cfg: RunConfig, corpus: Corpus) -> None:
        from trainer.accounting import byte_accounting

        self.cfg, self.corpus = cfg, corpus
        self.model = GPT(model_shape(cfg, corpus.vocab), cfg.seed)
        self.params = list(self.model.named_parameters())
        shapes = {name: tuple(p.shape) for name, p in self.params}
        self.bytes = byte_accounting(shapes, cfg, cfg.workers)
        self.n_params = sum(p.numel() for _, p in self.params)
        self.batches = WorkerBatches(corpus.train, cfg.workers, cfg.batch, cfg.block, cfg.seed)
        self.evals = eval_batches(corpus.val, cfg.eval_batches, cfg.batch, cfg.block)
        self.grads = {name: torch.zeros((cfg.workers, *p.shape)) for name, p in self.params}
        self.optimizer: torch.optim.Optimizer | None = None
        self.demo = None
        if is_demo(cfg):
            from trainer.demo import DeMo

            self.demo = DeMo(self.params, cfg, cfg.workers)
        else:
            self.optimizer = torch.optim.AdamW(
                self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay
            )
        self.optics = cfg.variant in OPTICS_ALGORITHMS
        self.done = 0
        self.rows: list[dict[str, Any]] = []
        self.diagnostics: list[dict[str, Any]] = []
        self.clip_mark = (0, 0)  # cumulative (clipped, total) at the previous evaluation
        self.notes: list[str] = []
        self.backward_profile: dict[str, Any] | None = None  # trainer/profile.py, once per run

    # --- one step -----------------------------------------------------------------------

    def step(self) -> dict[str, Any] | None:
        """Run step `done` (0-based); return its trace row, or None when the loss diverged."""
        cfg, s = self.cfg, self.done
        start_s = time.perf_counter()
        lr = lr_at(s, cfg)
        losses, compute_s = self._worker_gradients()
        train_loss = sum(losses) / cfg.workers
        if not math.isfinite(train_loss):
            self.notes += [f"diverged: non-finite training loss at step {s + 1}", "ended early"]
            return None
        compress_s, update_s = self._update(lr, s)
        done = s + 1
        if self.demo is not None:
            for record in self.demo.take_diagnostics() or []:
                self.diagnostics.append({"step": done, **record})
        evaluated = done % cfg.eval_every == 0 or done == cfg.steps
        val_loss = self.evaluate() if evaluated else math.nan
        row = {
            "step": done,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": lr,
            "payload_bytes": self.bytes.payload_bytes,
            "payload_int64_bytes": self.bytes.payload_int64_bytes,
            "wire_bytes": float(self.bytes.wire_bytes),
            "collective": self.bytes.collective,
            "reducible": bool(self.bytes.reducible),
            "compute_s": compute_s,
            "compress_s": compress_s,
            "update_s": update_s,
        }
        if self.optics:
            row.update(self._clip_rates(evaluated))
        self.done = done
        row["wall_s"] = time.perf_counter() - start_s
        self.rows.append(row)
        return row

    def _worker_gradients(self) -> tuple[list[float], float]:
        """Each worker in order: its batch, fwd+bwd at the shared weights, grads into G[w]."""
        losses, compute_s = [], 0.0
        self.model.train()
        due = profile_due(self.done, self.cfg.steps, self.backward_profile is not None)
        profiler = BackwardProfiler(self.params) if due else None
        for w in range(self.cfg.workers):
            x, y = self.batches.next_batch(w)
            self.model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            with measured(profiler) as backward_starts:
                loss = self.model(x, y)
                backward_starts()
                loss.backward()
            compute_s += time.perf_counter() - started
            losses.append(loss.item())
            for name, param in self.params:
                self.grads[name][w].copy_(param.grad)
        self.model.zero_grad(set_to_none=True)
        if profiler is not None:
            self.backward_profile = profiler.profile()
        return losses, compute_s / self.cfg.workers

    def _update(self, lr: float, step0: int) -> tuple[float, float]:
        """Apply the variant's update; return one worker's (compress_s, update_s).

        DeMo compresses all W workers' deltas in one batched call, so one worker's share is 1/W
        of it (the replay charges compress_s per worker, like compute_s). The update (decode the
        aggregate, sign, step) is done once for the shared weights, as each worker would.
        """
        if self.demo is not None:
            self.demo.step(self.grads, lr, step0)
            timing = self.demo.last_timing
            return float(timing["compress_s"]) / self.cfg.workers, float(timing["update_s"])
        started = time.perf_counter()
        for name, param in self.params:  # the all-reduce average (spec §4, step 3)
            param.grad = self.grads[name].mean(dim=0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.model.zero_grad(set_to_none=True)
        return 0.0, time.perf_counter() - started

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean over the fixed validation batches of the mean token cross-entropy (spec §2.5)."""
        self.model.eval()
        total = sum(self.model(x, y).item() for x, y in self.evals)
        self.model.train()
        return total / len(self.evals)

    def _clip_rates(self, evaluated: bool) -> dict[str, float]:
        """Clipped / quantised inputs since the optics started, and since the last evaluation.

        NaN until calibration has ended (spec §9.5); 0.0 when the optics exists but has not run.
        """
        if not self.demo.optics_active:
            return {"clip_rate": math.nan, "clip_rate_interval": math.nan}
        clipped, total = self.demo.clip_counts()
        mark_clipped, mark_total = self.clip_mark
        rate = clipped / total if total else 0.0
        since = total - mark_total
        interval = (clipped - mark_clipped) / since if since else 0.0
        if evaluated:
            self.clip_mark = (clipped, total)
        return {"clip_rate": rate, "clip_rate_interval": interval}

    # --- checkpoint state ---------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "config": self.cfg.to_dict(),
            "step": self.done,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
            "demo": self.demo.state_dict() if self.demo is not None else None,
            "generators": self.batches.state(),
            "torch_rng": torch.get_rng_state(),
            "rows": self.rows,
            "diagnostics": self.diagnostics,
            "clip_mark": self.clip_mark,
            "notes": self.notes,
            "backward_profile": self.backward_profile,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.demo is not None:
            self.demo.load_state_dict(state["demo"])
        self.batches.load_state(state["generators"])
        torch.set_rng_state(state["torch_rng"])
        self.done = int(state["step"])
        self.rows = list(state["rows"])
        self.diagnostics = list(state["diagnostics"])
        self.clip_mark = tuple(state["clip_mark"])
        self.notes = list(state["notes"])
        self.backward_profile = state.get("backward_profile")  # absent in older checkpoints


# --- the trace -------------------------------------------------------------------------------


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
    params.update(
        band=cfg.band, chunk_mode=cfg.chunk_mode, chunk=cfg.chunk, keep=cfg.keep, decay=cfg.decay
    )
    if cfg.variant in ("calib", *OPTICS_ALGORITHMS):
        params.update(calib_start=cfg.calib_start, calib_steps=cfg.calib_steps)
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


def trace_meta(trainer: Trainer, status: str, revision: str) -> dict[str, Any]:
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
            "device": "cpu",
        },
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
        "timing": TIMING_MEANING,
        "steps_planned": cfg.steps,
        "steps_done": trainer.done,
        "rows": "every_step",
        "origin": "trainer",
        "status": status,
        "notes": list(trainer.notes),
    } | ({"backward_profile": trainer.backward_profile} if trainer.backward_profile else {})


def write_run_trace(path: Path, trainer: Trainer, status: str, revision: str) -> Path:
    steps = pd.DataFrame(trainer.rows)
    diagnostics = pd.DataFrame(
        trainer.diagnostics, columns=["step", "source", "group", "selector", "share"]
    )
    return write_trace(path, steps, trace_meta(trainer, status, revision), diagnostics)


# --- the run ---------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train(
    cfg: RunConfig,
    out_dir: Path,
    *,
    cache_dir: Path | None = None,
    keep_checkpoint: bool = False,
    force: bool = False,
    on_step: Callable[[StepReport], None] | None = None,
    say: Callable[[str], None] = _say,
) -> RunResult:
    """Train (or resume) one run and write `<out_dir>/<name>.parquet`.

    An existing checkpoint of the same configuration is resumed; a complete trace of the same
    configuration is kept and the run skipped unless `force`.
    """
    out_dir = Path(out_dir)
    name = run_name(cfg)
    trace_path = out_dir / f"{name}.parquet"
    ckpt_path = checkpoint_path(out_dir, name)
    for stale in (*out_dir.glob(f".{name}.ckpt.*.tmp"), *out_dir.glob(f".{name}.parquet.*.tmp")):
        stale.unlink(missing_ok=True)  # left by a run killed while writing
    if force:
        ckpt_path.unlink(missing_ok=True)
    elif _complete_trace_of(trace_path, cfg):
        if not keep_checkpoint:
            ckpt_path.unlink(missing_ok=True)
        say(f"{trace_path} is already complete (use --force to train it again)")
        return RunResult(trace_path, name, 0, cfg.steps, "skipped", [])

    setup_torch(cfg.threads)
    corpus = load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size, cache_dir)
    trainer = Trainer(cfg, corpus)
    resumed_from = 0
    if ckpt_path.exists():
        state = load_checkpoint(ckpt_path)
        if state.get("config") != cfg.to_dict():
            raise TransitsimError(
                f"{ckpt_path} was written by a different configuration of run {name}; "
                "delete it or use another output folder"
            )
        trainer.load_state(state)
        resumed_from = trainer.done
        say(f"resuming {name} from step {resumed_from} (checkpoint {ckpt_path})")

    revision = source_revision()
    while trainer.done < cfg.steps:
        row = trainer.step()
        if row is None:
            say(f"{name}: {trainer.notes[0]}; stopping")
            break
        if on_step is not None:
            on_step(StepReport(row["step"], cfg.steps, row["train_loss"], row["val_loss"]))
        if trainer.done % cfg.ckpt_every == 0 and trainer.done < cfg.steps:
            write_run_trace(trace_path, trainer, "incomplete", revision)
            save_checkpoint(ckpt_path, trainer.state())

    if not trainer.rows:
        raise TransitsimError(f"{name}: the training loss was not finite at the first step")
    write_run_trace(trace_path, trainer, "complete", revision)
    if keep_checkpoint:
        save_checkpoint(ckpt_path, trainer.state())
    else:
        ckpt_path.unlink(missing_ok=True)
    return RunResult(trace_path, name, resumed_from, trainer.done, "complete", trainer.notes)


def _complete_trace_of(trace_path: Path, cfg: RunConfig) -> bool:
    """Whether `trace_path` is a complete trace written by this trainer for this config."""
    if not trace_path.exists():
        return False
    try:
        meta = read_meta(trace_path)
    except TransitsimError:
        return False
    return meta.get("status") == "complete" and meta.get("config") == cfg.to_dict()
