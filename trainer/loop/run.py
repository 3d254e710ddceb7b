"""The training loop (spec §4) with its LR schedule (§5), checkpoints and the trace it writes.

W workers share one model. A process holds some of them (all W on the simulated backend, one
per rank under torch.distributed): each step each of its workers draws its batch and computes
its gradient at the same weights; the gradients are stacked (L, *shape) and handed to the
variant's one GradientExchange (trainer/variants/gradient_exchange.py: dense AdamW, DeMo or
local SGD), whose exchange between workers goes through `trainer.variants.exchange`. One trace
row per step, written by process 0. Every `ckpt_every` steps the run saves a checkpoint (all
processes' state merged into one file) and rewrites its trace (status "incomplete"), so
re-running the same command after a crash resumes and ends with the same trace.
"""

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer.config import RunConfig, same_config
from trainer.data.batches import WorkerBatches, eval_batches
from trainer.data.corpus import Corpus, load_corpus
from trainer.loop.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from trainer.loop.profile import BackwardProfiler, measured, profile_due
from trainer.loop.records import (
    OPTICS_ALGORITHMS,
    source_revision,
    sync_columns,
    write_run_trace,
)
from trainer.loop.threads import ThreadGovernor
from trainer.model import GPT, ModelShape, padded_vocab
from trainer.naming import run_name
from trainer.variants.build import build_exchange, merge_exchange_states
from trainer.variants.exchange import Exchange, LocalExchange
from trainer.variants.gradient_exchange import StepRecord
from transitsim.base.errors import TransitsimError
from transitsim.traces.format import read_meta

TIMING_COLUMNS = ("compute_s", "compress_s", "comm_s", "update_s", "wall_s", "end_unix_s")
# E, E' per step on worker 0 (issue 14's optics hypothesis), NaN until the optics runs.
OOB_COLUMNS = (
    "oob_sent_share",
    "oob_quant_share",
    "fb_removed_exact_share",
    "fb_removed_sent_share",
)
# Where each variant keeps its state in a checkpoint (GradientExchange.state_key).
STATE_KEYS = ("optimizer", "demo", "local_sgd")


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


def setup_torch(threads: int, device: str = "cpu") -> None:
    """Strict determinism on the CPU, warn-only on CUDA (spec §4), with the intra-op threads."""
    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True)


def run_device(cfg: RunConfig, local_rank: int = 0) -> torch.device:
    """The torch device of a run: the CPU, or this process's CUDA device."""
    if cfg.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TransitsimError("--device cuda: no CUDA device is available to torch")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


class Trainer:
    """One run's model, data, optimiser and accumulated trace rows; `step()` advances it once."""

    def __init__(
        self,
        cfg: RunConfig,
        corpus: Corpus,
        exchange: Exchange | None = None,
        device: torch.device | None = None,
    ) -> None:
        from trainer.variants.accounting import byte_accounting

        self.cfg, self.corpus = cfg, corpus
        self.exchange = exchange if exchange is not None else LocalExchange(cfg.workers)
        self.device = device if device is not None else run_device(cfg)
        ex = self.exchange
        self.workers_here = range(ex.offset, ex.offset + ex.local_workers)
        self.model = GPT(model_shape(cfg, corpus.vocab), cfg.seed).to(self.device)
        self.params = list(self.model.named_parameters())
        shapes = {name: tuple(p.shape) for name, p in self.params}
        self.bytes = byte_accounting(shapes, cfg, cfg.workers)
        self.n_params = sum(p.numel() for _, p in self.params)
        self.batches = WorkerBatches(corpus.train, cfg.workers, cfg.batch, cfg.block, cfg.seed)
        self.evals = [
            (x.to(self.device), y.to(self.device))
            for x, y in eval_batches(corpus.val, cfg.eval_batches, cfg.batch, cfg.block)
        ]
        self.grads = {
            name: torch.zeros((ex.local_workers, *p.shape), device=self.device)
            for name, p in self.params
        }
        # the variant's step: dense AdamW (A), DeMo (B..G) or local SGD (H, H-s, L)
        self.variant = build_exchange(self.params, cfg, ex, self.bytes.collective)
        self.optics = cfg.variant in OPTICS_ALGORITHMS
        self.done = 0
        self.rows: list[dict[str, Any]] = []
        self.diagnostics: list[dict[str, Any]] = []
        self.clip_mark = (0, 0)  # cumulative (clipped, total) at the previous evaluation
        self.notes: list[str] = []
        self.backward_profile: dict[str, Any] | None = None  # trainer/loop/profile.py, once per run

    # --- one step -----------------------------------------------------------------------

    def step(self) -> dict[str, Any] | None:
        """Run step `done` (0-based); return its trace row, or None when the loss diverged."""
        cfg, s = self.cfg, self.done
        start_s = time.perf_counter()
        lr = lr_at(s, cfg)
        losses, compute_sum = self._worker_gradients()
        # Every worker's loss in worker order and every process's compute time, on every process.
        per_process = self.exchange.gather_floats([*losses, compute_sum])
        losses = [loss for figures in per_process for loss in figures[:-1]]
        compute_s = sum(figures[-1] for figures in per_process) / cfg.workers
        train_loss = sum(losses) / cfg.workers
        if not math.isfinite(train_loss):
            self.notes += [f"diverged: non-finite training loss at step {s + 1}", "ended early"]
            return None
        record = self.variant.step(self.grads, lr, s)
        self.variant.load_shared(self.params)  # the model holds the shared weights between steps
        done = s + 1
        for diagnostic in record.diagnostics or []:
            self.diagnostics.append({"step": done, **diagnostic})
        evaluated = done % cfg.eval_every == 0 or done == cfg.steps
        val_loss = self.evaluate() if evaluated and self.exchange.rank == 0 else math.nan
        # G recal / subspace: the chooser broadcasts the new band on the steps it re-chooses;
        # a ring broadcast has every worker forward it once, so it adds to payload and wire alike.
        broadcast = self.bytes.broadcast_bytes if record.broadcast else 0
        payload, payload_int64, wire = self.bytes.at_step(done)
        row = {
            "step": done,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": lr,
            "payload_bytes": payload + broadcast,
            "payload_int64_bytes": payload_int64 + broadcast,
            "wire_bytes": wire + broadcast,
            "collective": self.bytes.collective,
            "reducible": bool(self.bytes.reducible),
            "compute_s": compute_s,
            "compress_s": record.compress_s,
            "comm_s": record.comm_s,
            "exchange_bytes": record.exchange_bytes,
            "update_s": record.update_s,
        }
        if self.cfg.variant == "moving":
            row["broadcast_bytes"] = broadcast
        if self.bytes.schedule is not None:  # local SGD
            row.update(sync_columns(self.bytes.schedule, done))
        if self.optics:
            row.update(self._clip_rates(record, evaluated))
            row.update({name: math.nan for name in OOB_COLUMNS} | (record.optics or {}))
        self.done = done
        row["wall_s"] = time.perf_counter() - start_s
        row["end_unix_s"] = time.time()
        self.rows.append(row)
        return row

    def _worker_gradients(self) -> tuple[list[float], float]:
        """This process's workers in order: batch, fwd+bwd at the shared weights, grads G[i].

        Returns their losses and their summed compute seconds."""
        losses, compute_s = [], 0.0
        self.model.train()
        due = profile_due(self.done, self.cfg.steps, self.backward_profile is not None)
        profiler = BackwardProfiler(self.params) if due else None
        for i, w in enumerate(self.workers_here):
            x, y = self.batches.next_batch(w)
            x, y = x.to(self.device), y.to(self.device)
            self.variant.load_replica(i, self.params)  # local SGD: its own replica's weights
            self.model.zero_grad(set_to_none=True)
            self._sync()
            started = time.perf_counter()
            with measured(profiler) as backward_starts:
                loss = self.model(x, y)
                backward_starts()
                loss.backward()
            self._sync()
            compute_s += time.perf_counter() - started
            losses.append(loss.item())
            for name, param in self.params:
                self.grads[name][i].copy_(param.grad)
        self.model.zero_grad(set_to_none=True)
        if profiler is not None:
            self.backward_profile = profiler.profile()
        return losses, compute_s

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean over the fixed validation batches of the mean token cross-entropy (spec §2.5)."""
        self.model.eval()
        total = sum(self.model(x, y).item() for x, y in self.evals)
        self.model.train()
        return total / len(self.evals)

    def _clip_rates(self, record: StepRecord, evaluated: bool) -> dict[str, float]:
        """Clipped / quantised inputs since the optics started, and since the last evaluation.

        NaN until calibration has ended (spec §9.5); 0.0 when the optics exists but has not run.
        """
        if record.clip is None:
            return {"clip_rate": math.nan, "clip_rate_interval": math.nan}
        clipped, total = record.clip
        if self.exchange.world > 1:  # each process counts its own workers' inputs
            counts = torch.tensor([clipped, total], dtype=torch.int64, device=self.device)
            clipped, total = (int(v) for v in self.exchange.total(counts).tolist())
        mark_clipped, mark_total = self.clip_mark
        rate = clipped / total if total else 0.0
        since = total - mark_total
        interval = (clipped - mark_clipped) / since if since else 0.0
        if evaluated:
            self.clip_mark = (clipped, total)
        return {"clip_rate": rate, "clip_rate_interval": interval}

    # --- checkpoint state ---------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """This process's state; `merge_states` joins all processes' into one checkpoint."""
        return {
            "config": self.cfg.to_dict(),
            "backend": self.exchange.backend,
            "held": [self.exchange.offset, self.exchange.local_workers],
            "step": self.done,
            "model": self.model.state_dict(),
            **dict.fromkeys(STATE_KEYS),
            self.variant.state_key: self.variant.state_dict(),
            "generators": self.batches.state(),
            "torch_rng": torch.get_rng_state(),
            "rows": self.rows,
            "diagnostics": self.diagnostics,
            "clip_mark": self.clip_mark,
            "notes": self.notes,
            "backward_profile": self.backward_profile,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a merged state (all W workers): this process takes its workers' part."""
        self.model.load_state_dict(state["model"])
        self.variant.load_state_dict(state[self.variant.state_key])
        self.variant.load_shared(self.params)
        self.batches.load_state(state["generators"])
        torch.set_rng_state(state["torch_rng"])
        self.done = int(state["step"])
        self.rows = list(state["rows"])
        self.diagnostics = list(state["diagnostics"])
        self.clip_mark = tuple(state["clip_mark"])
        self.notes = list(state["notes"])
        self.backward_profile = state.get("backward_profile")  # absent in older checkpoints

    def weights_checksum(self) -> float:
        """A float64 sum over all weights: equal on every process while they stay in step."""
        with torch.no_grad():
            return float(sum(p.double().abs().sum() for _, p in self.params))


def merge_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """All processes' states as the one state of a process holding every worker.

    Weights, optimiser and trace rows are the same on every process and come from process 0;
    each worker's batch generator comes from the process that holds it; the variant's state is
    joined by its own `merge_states`."""
    states = sorted(states, key=lambda s: s["held"][0])
    merged = dict(states[0])
    generators = list(merged["generators"])
    for state in states:
        offset, count = state["held"]
        generators[offset : offset + count] = state["generators"][offset : offset + count]
    merged["generators"] = generators
    merged["held"] = [0, len(generators)]
    for key in STATE_KEYS:
        if merged.get(key) is not None:
            merged[key] = merge_exchange_states(key, [state[key] for state in states])
    return merged


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
    exchange: Exchange | None = None,
    device: torch.device | None = None,
) -> RunResult:
    """Train (or resume) one run and write `<out_dir>/<name>.parquet`.

    An existing checkpoint of the same configuration is resumed; a complete trace of the same
    configuration is kept and the run skipped unless `force`; a complete trace of another
    configuration or backend is an error unless `force`, never silently replaced. Under
    torch.distributed (`exchange`), process 0 decides, reads and writes files, and every
    process follows its decisions.
    """
    exchange = exchange if exchange is not None else LocalExchange(cfg.workers)
    root = exchange.rank == 0
    out_dir = Path(out_dir)
    name = run_name(cfg)
    trace_path = out_dir / f"{name}.parquet"
    ckpt_path = checkpoint_path(out_dir, name)
    decision = _decide(cfg, exchange.backend, trace_path, ckpt_path, force) if root else None
    decision = exchange.broadcast_object(decision)
    if decision[0] == "error":
        if not root:  # process 0 says why, once
            raise SystemExit(2)
        raise TransitsimError(decision[1])
    if decision[0] == "skip":
        if root and not keep_checkpoint:
            ckpt_path.unlink(missing_ok=True)
        if root:
            say(f"{trace_path} is already complete (use --force to train it again)")
        return RunResult(trace_path, name, 0, cfg.steps, "skipped", [])

    device = device if device is not None else run_device(cfg)
    setup_torch(max(cfg.threads, 1), device.type)
    governor = ThreadGovernor() if cfg.threads == 0 and device.type == "cpu" else None
    corpus = load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size, cache_dir)
    trainer = Trainer(cfg, corpus, exchange, device)
    resumed_from = 0
    state = _resume_state(cfg, exchange.backend, ckpt_path) if root else None
    state = exchange.broadcast_object(state)
    if isinstance(state, str):
        if not root:
            raise SystemExit(2)
        raise TransitsimError(state)
    if state is not None:
        trainer.load_state(state)
        resumed_from = trainer.done
        if root:
            say(f"resuming {name} from step {resumed_from} (checkpoint {ckpt_path})")
    del state

    revision = source_revision()

    def save(status: str, checkpoint: bool) -> None:
        _check_in_step(trainer)
        states = exchange.gather_object(trainer.state()) if checkpoint else None
        if root:
            write_run_trace(trace_path, trainer, status, revision)
            if checkpoint:
                save_checkpoint(ckpt_path, merge_states(states))

    while trainer.done < cfg.steps:
        if governor is not None:
            governor.before_step(trainer.done)
        row = trainer.step()
        if row is None:
            if root:
                say(f"{name}: {trainer.notes[0]}; stopping")
            break
        if on_step is not None and root:
            on_step(StepReport(row["step"], cfg.steps, row["train_loss"], row["val_loss"]))
        if trainer.done % cfg.ckpt_every == 0 and trainer.done < cfg.steps:
            save("incomplete", checkpoint=True)

    if not trainer.rows:
        raise TransitsimError(f"{name}: the training loss was not finite at the first step")
    save("complete", checkpoint=keep_checkpoint)
    if root and not keep_checkpoint:
        ckpt_path.unlink(missing_ok=True)
    return RunResult(trace_path, name, resumed_from, trainer.done, "complete", trainer.notes)


def _decide(
    cfg: RunConfig, backend: str, trace_path: Path, ckpt_path: Path, force: bool
) -> tuple[str, str]:
    """("train" | "skip" | "error", why) for this run's output folder, on process 0."""
    name = trace_path.stem
    for stale in trace_path.parent.glob(f".{name}.*.tmp"):
        stale.unlink(missing_ok=True)  # left by a run killed while writing
    if force:
        ckpt_path.unlink(missing_ok=True)
        return ("train", "")
    meta = _complete_meta(trace_path)
    if meta is None:
        return ("train", "")
    differs = _identity_differences(meta, cfg, backend)
    if not differs:
        return ("skip", "")
    return (
        "error",
        f"{trace_path} holds a finished run with {differs} (use --force to replace it, "
        "or another -o folder)",
    )


def _resume_state(cfg: RunConfig, backend: str, ckpt_path: Path) -> dict[str, Any] | str | None:
    """The checkpoint to resume from, None to start afresh, or why it cannot be used."""
    if not ckpt_path.exists():
        return None
    try:
        state = load_checkpoint(ckpt_path)
    except TransitsimError as exc:
        return str(exc)
    if not same_config(state.get("config"), cfg):
        return (
            f"{ckpt_path} was written by a different configuration of run {ckpt_path.stem}; "
            "delete it or use another output folder"
        )
    if state.get("backend", "simulated") != backend:
        return (
            f"{ckpt_path} was written by the {state.get('backend', 'simulated')} backend, "
            f"not {backend}; delete it or use another output folder"
        )
    return state


def _check_in_step(trainer: Trainer) -> None:
    """Every process must hold the same weights; a difference is a bug, not a result."""
    sums = [s[0] for s in trainer.exchange.gather_floats([trainer.weights_checksum()])]
    if any(value != sums[0] for value in sums):
        raise TransitsimError(f"processes' weights differ (checksums {sums}): not in step")


# Config fields that change how fast a run goes, not what it computes.
NOT_IDENTITY = ("threads", "ckpt_every")


def _complete_meta(trace_path: Path) -> dict[str, Any] | None:
    """The metadata of a complete trace this trainer wrote at `trace_path`, else None."""
    if not trace_path.exists():
        return None
    try:
        meta = read_meta(trace_path)
    except TransitsimError:
        return None
    ok = meta.get("status") == "complete" and meta.get("origin") == "trainer"
    return meta if ok and isinstance(meta.get("config"), dict) else None


def _identity_differences(meta: dict[str, Any], cfg: RunConfig, backend: str) -> str:
    """ "" when the trace is this run; else the first differences, e.g. "steps=400 (not 30)"."""
    # a field added since the trace was written counts as its default
    old, new = {**RunConfig().to_dict(), **meta["config"]}, cfg.to_dict()
    diffs = [
        f"{key}={old.get(key)!r} (not {new.get(key)!r})"
        for key in sorted(set(old) | set(new))
        if key not in NOT_IDENTITY and old.get(key) != new.get(key)
    ]
    old_backend = meta.get("backend", "simulated")
    if old_backend != backend:
        diffs.append(f"backend {old_backend} (not {backend})")
    return ", ".join(diffs[:3])
