"""The trainer's command line, shared by `python -m trainer` and `transitsim train`.

It parses, builds a RunConfig, then either prints the model size and byte accounting
(`--dry-run`) or trains with a progress bar. Every bad option is a one-line TransitsimError.
"""

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, fields, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from trainer.config import PRESETS, VARIANT_DEFAULTS, RunConfig, check_config, make_config
from transitsim.base.atomic import check_writable_folder
from transitsim.base.errors import TransitsimError

OPTIONAL_FIELDS = ("enob", "planes")  # None is a meaningful value (no noise / no quantisation)
VARIANT_ALIASES = {"EP": "E'", "E_PRIME": "E'", "EPRIME": "E'", "E-PRIME": "E'"}


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option raises one line instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise TransitsimError(f"{message} (see {self.prog} --help)")


def _none_or(kind: type) -> Any:
    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "null") else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _fraction(text: str) -> float:
    """A keep fraction as 0.0625 or 1/16."""
    try:
        return float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r}") from None


def threads_arg(text: str) -> int:
    """--threads N, or auto (0: trainer/loop/threads.py adapts the count to the machine)."""
    if text.strip().lower() == "auto":
        return 0
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a thread count or auto: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"threads must be at least 1 (or auto), got {value}")
    return value


def build_parser(prog: str = "python -m trainer") -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        allow_abbrev=False,  # `--npro 2` was read as --nproc 2, then passed on to every rank
        description="Train one variant of the DeMo fixed-band experiment and write its trace.",
        epilog=(
            "Variants: A adamw, B top-k, C low band, D calibrated band, E optics (1-D 256), "
            "E' optics summed at a switch (also written EP), F other band shapes, "
            "G moving bands without per-step comparisons (--band recal|rotating|subspace, "
            "--select-every R), H DiLoCo, H-s Streaming DiLoCo, L SparseLoCo (local SGD: "
            "--set inner_steps=H, fragments=P, overlap=T; docs/local-sgd.md). "
            "Re-running the same command resumes from its checkpoint."
        ),
    )
    base = RunConfig()
    parser.add_argument(
        "--preset",
        default="shakespeare",
        help=f"one of {', '.join(PRESETS)} (default: %(default)s)",
    )
    parser.add_argument(
        "--variant", required=True, help="A, B, C, D, E, E' (or EP), F, G, H, H-s, L (required)"
    )
    parser.add_argument(
        "-o", "--out", type=Path, help="output folder for trace and checkpoint (required)"
    )
    parser.add_argument(
        "--steps", type=int, help=f"optimiser steps, the schedule follows ({_by_preset('steps')})"
    )
    parser.add_argument("--seed", type=int, help=f"run seed (default: {base.seed})")
    parser.add_argument("--lr", type=float, help=f"peak learning rate ({_by_variant('lr')})")
    parser.add_argument(
        "--band",
        help="low, zigzag, high, random, calib; G: recal, rotating, subspace "
        f"({_by_variant('band', 'low')})",
    )
    parser.add_argument(
        "--chunk-mode", dest="chunk_mode", help=f"2d or 1d ({_by_variant('chunk_mode', '2d')})"
    )
    parser.add_argument(
        "--chunk",
        type=int,
        help=f"target chunk side (2d) or run length (1d) ({_by_variant('chunk', 64)})",
    )
    parser.add_argument(
        "--keep", type=_fraction, help="kept fraction per chunk, e.g. 1/16 (default: 1/16; L 1/64)"
    )
    # None is a value for these two (no readout noise / no quantisation), so "not given" is
    # argparse.SUPPRESS: the attribute is then absent.
    parser.add_argument(
        "--enob",
        type=_none_or(float),
        default=argparse.SUPPRESS,
        help=f"E: readout ENOB or none (default: {base.enob:g})",
    )
    parser.add_argument(
        "--planes",
        type=_none_or(int),
        default=argparse.SUPPRESS,
        help=f"E: input planes or none (default: {base.planes})",
    )
    parser.add_argument(
        "--kappa", type=float, help=f"E: input full scale in RMS units (default: {base.kappa:g})"
    )
    parser.add_argument(
        "--fs-every",
        dest="fs_every",
        type=int,
        help=f"E: full-scale re-set interval, 0 = fixed (default: {base.fs_every})",
    )
    parser.add_argument(
        "--feedback",
        help="E: exact|sent (default: sent); E': loopback|exact|mean (default: loopback)",
    )
    parser.add_argument(
        "--corpus",
        help=f"shakespeare, tinystories, synthetic, or a text path ({_by_preset('dataset')})",
    )
    parser.add_argument(
        "--tokenizer", help=f"char or bpe for path corpora ({_by_preset('tokenizer')})"
    )
    parser.add_argument(
        "--threads",
        type=threads_arg,
        help=f"torch intra-op threads, or auto: the cores no other process wants, re-read every "
        f"few steps (default: {'auto' if base.threads == 0 else base.threads}, "
        "as measured by benchmarks/bench_threads.py)",
    )
    parser.add_argument(
        "--select-every",
        dest="select_every",
        type=int,
        help="G: steps between re-choices (recal, subspace) or new random sets (rotating) "
        f"(default: {base.select_every})",
    )
    parser.add_argument(
        "--backend",
        default="simulated",
        choices=("simulated", "gloo", "nccl"),
        help="simulated: all workers in this process; gloo/nccl: one rank per process "
        "(torchrun, or --nproc) (default: simulated)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), help="where to compute (default: cpu)")
    parser.add_argument(
        "--nproc",
        type=int,
        help="start this many ranks on this machine over loopback (with --backend gloo/nccl; "
        "default: none, torchrun's environment)",
    )
    parser.add_argument(
        "--wire-dtype",
        dest="wire_dtype",
        default="float32",
        choices=("float32", "bfloat16"),
        help="dtype of the values sent between ranks; bfloat16 matches the byte accounting "
        "but rounds them (default: float32, the spec's arithmetic)",
    )
    parser.add_argument(
        "--dist-timeout",
        dest="dist_timeout",
        type=float,
        default=600.0,
        help="seconds a rank waits for the others to join or answer (default: 600)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any RunConfig field, repeatable, e.g. --set workers=4 (default: none)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, help="tokenizer cache (default: ~/.cache/transitsim)"
    )
    parser.add_argument(
        "--keep-checkpoint", action="store_true", help="keep it when done (default: delete)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="retrain, replacing a finished trace of this run's name (default: skip a finished "
        "run of the same configuration, refuse one of another)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print sizes and bytes only")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar; still prints where the trace went (default: off)",
    )
    return parser


def _by_preset(name: str) -> str:
    """A field's default per preset, for --help: "default: the preset's (a 1, b 2)"."""
    values = {
        preset: settings.get(name, getattr(RunConfig(), name))
        for preset, settings in PRESETS.items()
    }
    if len(set(values.values())) == 1:
        return f"default: {next(iter(values.values()))}"
    return "default: the preset's: " + ", ".join(f"{p} {v}" for p, v in values.items())


def _by_variant(name: str, fallback: Any = None) -> str:
    """A field's default per variant id, for --help."""
    values = {vid: settings.get(name, fallback) for vid, settings in VARIANT_DEFAULTS.items()}
    groups: dict[Any, list[str]] = {}
    for vid, value in values.items():
        groups.setdefault(value, []).append(vid)
    if len(groups) == 1:
        return f"default: {next(iter(groups))}"
    return "default: " + "; ".join(
        f"{'/'.join(v)} {value:g}" if isinstance(value, float) else f"{'/'.join(v)} {value}"
        for value, v in groups.items()
    )


def _field_value(name: str, text: str) -> Any:
    """Parse `--set name=text` by the field's default type."""
    if name not in {f.name for f in fields(RunConfig)} or name == "extra":
        raise TransitsimError(f"--set {name}=...: unknown config field {name!r}")
    default = getattr(RunConfig(), name)
    if name in OPTIONAL_FIELDS and text.lower() in ("none", "null"):
        return None
    try:
        if name == "keep":
            return float(Fraction(text))
        if name == "threads":
            return threads_arg(text)
        if isinstance(default, bool):
            return {"true": True, "false": False}[text.lower()]
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except (ValueError, KeyError, ZeroDivisionError, argparse.ArgumentTypeError):
        kind = type(default).__name__
        raise TransitsimError(f"--set {name}={text}: expected a {kind}") from None
    return text


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Preset, variant defaults, `--set` values, then the named options (most specific last)."""
    variant = VARIANT_ALIASES.get(args.variant.upper(), args.variant.upper())
    overrides: dict[str, Any] = {}
    for item in args.sets:
        name, sep, text = item.partition("=")
        if not sep:
            raise TransitsimError(f"--set {item!r}: expected FIELD=VALUE")
        overrides[name.strip()] = _field_value(name.strip(), text.strip())
    named = {
        "steps": args.steps,
        "seed": args.seed,
        "lr": args.lr,
        "band": args.band,
        "chunk_mode": args.chunk_mode,
        "chunk": args.chunk,
        "keep": args.keep,
        "kappa": args.kappa,
        "fs_every": args.fs_every,
        "feedback": args.feedback,
        "select_every": args.select_every,
        "dataset": args.corpus,
        "tokenizer": args.tokenizer,
        "threads": args.threads,
        "device": args.device,
    }
    overrides.update({k: v for k, v in named.items() if v is not None})
    for name in OPTIONAL_FIELDS:
        if name in args:
            overrides[name] = getattr(args, name)
    cfg = make_config(args.preset, variant, **overrides)
    if args.corpus is not None and args.tokenizer is None and args.corpus == "tinystories":
        cfg = replace(cfg, tokenizer="bpe")
    check_config(cfg)
    return cfg


def main(argv: list[str] | None = None, prog: str = "python -m trainer") -> int:
    """Parse and run; returns the exit code. Bad input raises TransitsimError (exit 2)."""
    parser = build_parser(prog)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    from trainer.distributed.launch import check_timeout

    check_timeout(args.dist_timeout)
    cfg = config_from_args(args)
    if args.dry_run:
        report = dry_run_report(cfg, args.cache_dir)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print_dry_run(report)
        return 0
    if args.out is None:
        raise TransitsimError("give an output folder with -o DIR (or use --dry-run)")
    check_writable_folder(args.out, what="-o folder")
    if args.backend == "simulated":
        if args.nproc is not None:
            raise TransitsimError("--nproc starts ranks of a --backend gloo or nccl run")
        return _train(cfg, args)
    from trainer.distributed.env import check_backend

    check_backend(args.backend, cfg.device)
    if args.nproc is not None:
        return _launch(cfg, args, argv, parser)
    return _train(cfg, args)


def _launch(
    cfg: RunConfig, args: argparse.Namespace, argv: list[str], parser: argparse.ArgumentParser
) -> int:
    """--nproc N: check that this machine can hold N ranks, then start them."""
    from trainer.distributed.launch import LAUNCHER_PID, check_machine_holds, launch

    if os.environ.get(LAUNCHER_PID):
        raise TransitsimError("--nproc in a rank that --nproc started: ranks launch no ranks")
    if args.nproc < 1:
        raise TransitsimError(f"--nproc must be at least 1, got {args.nproc}")
    if cfg.workers % args.nproc:
        raise TransitsimError(
            f"{cfg.workers} workers do not split evenly over --nproc {args.nproc}; "
            f"use --set workers=N with N a multiple of {args.nproc}"
        )
    check_machine_holds(
        args.nproc, max(cfg.threads, 1), _model_bytes(cfg, cfg.workers // args.nproc)
    )
    return launch(argv, args.nproc, parser.parse_args)


def _model_bytes(cfg: RunConfig, local_workers: int) -> int:
    """A rank's model memory beside RANK_BASE_BYTES: weights, gradients and AdamW's two moments,
    and per worker it holds a momentum and a delta (float32); 0 where the vocabulary is unknown
    without reading the corpus."""
    from trainer.data.corpus import known_vocab
    from trainer.loop.run import model_shape
    from trainer.model import param_count

    vocab = known_vocab(cfg.dataset, cfg.tokenizer, cfg.vocab_size)
    if vocab is None:
        return 0
    return 4 * param_count(model_shape(cfg, vocab)) * (4 + 2 * local_workers)


def _train(cfg: RunConfig, args: argparse.Namespace) -> int:
    options = dict(cache_dir=args.cache_dir, keep_checkpoint=args.keep_checkpoint, force=args.force)
    with progress_bar(cfg.steps, enabled=not (args.quiet or args.json)) as on_step:
        if args.backend == "simulated":
            from trainer.loop.run import train

            result = train(cfg, args.out, on_step=on_step, **options)
        else:
            from trainer.distributed.env import LostRank, exit_lost_peer
            from trainer.distributed.launch import LAUNCHER_PID
            from trainer.distributed.run import train_distributed

            try:
                rank, result = train_distributed(
                    cfg,
                    args.out,
                    backend=args.backend,
                    wire_dtype=args.wire_dtype,
                    timeout_s=args.dist_timeout,
                    on_step=on_step,
                    **options,
                )
            except LostRank:
                if os.environ.get(LAUNCHER_PID):  # the launcher names the rank that died
                    exit_lost_peer()
                raise
            if rank != 0:  # rank 0 reports
                return 0
    final_val = _final_val_loss(result.trace_path)
    if args.json:
        print(
            json.dumps(
                {
                    "trace": str(result.trace_path),
                    "name": result.name,
                    "status": result.status,
                    "steps_done": result.steps_done,
                    "resumed_from": result.resumed_from,
                    "final_val_loss": None if math.isnan(final_val) else final_val,
                    "notes": result.notes,
                }
            )
        )
    else:  # also with --quiet: where the trace went is the one thing a run must say
        notes = f" [{'; '.join(result.notes)}]" if result.notes else ""
        summary = f"{result.steps_done} steps, final val loss {final_val:.4f}"
        print(f"{result.trace_path}: {summary}{notes}")
    return 0


def _final_val_loss(path: Path) -> float:
    from transitsim.traces.format import read_trace

    return read_trace(path).final_val_loss


# --- dry run ---------------------------------------------------------------------------------


def dry_run_report(cfg: RunConfig, cache_dir: Path | None) -> dict[str, Any]:
    """Build the model (no training) and account its bytes per worker per step (spec §10)."""
    from trainer.config import variant_id
    from trainer.data.corpus import known_vocab, load_corpus
    from trainer.loop.run import model_shape
    from trainer.model import GPT, param_count
    from trainer.naming import run_name
    from trainer.variants.accounting import byte_accounting

    vocab = known_vocab(cfg.dataset, cfg.tokenizer, cfg.vocab_size)
    if vocab is None:
        vocab = load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size, cache_dir).vocab
    shape = model_shape(cfg, vocab)
    model = GPT(shape, cfg.seed)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == param_count(shape), "parameter count disagrees with spec §3's formula"
    acc = byte_accounting(shapes, cfg, cfg.workers)
    return {
        "name": run_name(cfg),
        "variant": variant_id(cfg),
        "algorithm": cfg.variant,
        "model": asdict(shape),
        "n_params": n_params,
        "workers": cfg.workers,
        "tokens_per_step": cfg.workers * cfg.batch * cfg.block,
        "steps": cfg.steps,
        "dense_bytes_per_step": acc.dense_bytes,
        "payload_bytes_per_step": acc.payload_bytes,
        "payload_bytes_int64_per_step": acc.payload_int64_bytes,
        "wire_bytes_per_step": acc.wire_bytes,
        "collective": acc.collective,
        "reducible": acc.reducible,
        "ratio_vs_dense": acc.dense_bytes / acc.payload_bytes,
        "ratio_vs_dense_int64": acc.dense_bytes / acc.payload_int64_bytes,
    } | ({"sync_payload_bytes": [sync.payload_bytes for sync in acc.syncs]} if acc.syncs else {})


def print_dry_run(report: dict[str, Any]) -> None:
    """The dry-run report: the run's name, then a two-column rich table of sizes and bytes."""
    from rich.console import Console
    from rich.table import Table

    model = report["model"]
    rows = [
        ("variant", f"{report['variant']} ({report['algorithm']})"),
        ("layers / heads / width", f"{model['n_layer']} / {model['n_head']} / {model['n_embd']}"),
        ("context / vocab", f"{model['block']} / {model['vocab']}"),
        ("parameters", f"{report['n_params']:,}"),
        ("tokens per step", f"{report['tokens_per_step']:,}"),
        ("dense bytes per step", f"{report['dense_bytes_per_step']:,}"),
        ("payload per worker per step", f"{report['payload_bytes_per_step']:,}"),
        ("payload with int64 indices", f"{report['payload_bytes_int64_per_step']:,}"),
        ("collective", f"{report['collective']}, W={report['workers']}"),
        ("wire per worker per step", f"{report['wire_bytes_per_step']:,.0f}"),
        ("reducible (same positions)", "yes" if report["reducible"] else "no"),
        ("dense / payload", f"{report['ratio_vs_dense']:.6g}x"),
        ("dense / int64 payload", f"{report['ratio_vs_dense_int64']:.6g}x"),
    ]
    if "sync_payload_bytes" in report:  # local SGD: the per-step figures above are means
        means = ("payload per worker per step", "wire per worker per step")
        rows = [(f"{label} (mean)" if label in means else label, v) for label, v in rows]
        syncs = ", ".join(f"{b:,}" for b in report["sync_payload_bytes"])
        rows.append(("payload per sync (per fragment)", syncs))
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in rows:
        table.add_row(label, value)
    console = Console()
    console.print(report["name"], soft_wrap=True, highlight=False)
    console.print(table)


# --- progress ----------------------------------------------------------------------------------


@contextmanager
def progress_bar(steps: int, enabled: bool) -> Iterator[Callable[[Any], None] | None]:
    """A rich progress bar on stderr (step, loss, steps/s, ETA); yields its update callback."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("step"),
        MofNCompleteColumn(),
        BarColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("val {task.fields[val]}"),
        TextColumn("{task.fields[rate]} steps/s"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task("train", total=steps, loss="-", val="-", rate="-")
        first: list[int] = []

        def update(report: Any) -> None:
            if not first:  # a resumed run starts its bar where the checkpoint was
                first.append(report.done - 1)
                progress.reset(task, completed=report.done - 1)
            fields_ = {"loss": f"{report.train_loss:.3f}"}
            if not math.isnan(report.val_loss):
                fields_["val"] = f"{report.val_loss:.3f}"
            speed = progress.tasks[0].speed
            fields_["rate"] = f"{speed:.2f}" if speed else "-"
            progress.update(task, completed=report.done, **fields_)

        yield update
