"""A researcher's profile (+ loss log) -> one transitsim trace (issue 23, items 1 and 2).

The profile is a timing template of a few steps; the loss log gives the convergence of every
step. Each row of the trace is one logged step with its losses, and the template's figures:
payload bytes and collective from the profiled collectives, compute_s / update_s / comm_s /
wall_s the mean over the profiled steps (means keep wall = compute + exposed
communication + optimiser, step by step). With several ranks' files, each profiled step takes
the slowest rank's compute (a synchronous step waits for it), so that a replay on the network
the job ran on reproduces the measured step. Without a loss log the rows are the profiled steps
themselves, each with its own figures, and the losses are unknown (stored as inf).

New metadata (documented in docs/bring-your-own-run.md): `profile` holds the source files, the
per-step and per-rank figures, the collectives of each step and the straggler spread fitted from
the ranks; `backward_profile` holds the measured bucket launches (one entry per all-reduce, in
the reverse of their launch order, as DDP's registration order would list them).
"""

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.atomic import check_writable_folder
from transitsim.base.errors import TransitsimError
from transitsim.traces.dtypes import element_size
from transitsim.traces.format import (
    MAX_PARAMS,
    MAX_STEP_BYTES,
    STEP_COLUMNS,
    VARIANTS,
    Trace,
    check_run_name,
    config_name,
    read_meta,
    validate_meta,
    validate_steps,
    write_trace,
)
from transitsim.traces.kineto import (
    Collective,
    RankProfile,
    StepTiming,
    read_job_profiles,
)
from transitsim.traces.loss_logs import LossLog

BYTES_PER_PARAM = 4  # fp32 gradients, where neither the profile nor --dtype says
DTYPE_ALIASES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "fp8": 1, "tf32": 4}


@dataclass
class ImportOptions:
    """What the user says about the run that the files do not (None: from the files)."""

    name: str | None = None
    variant: str = "A"
    seed: int = 0
    workers: int | None = None
    params: int | None = None
    dtype: str | None = None  # the gradients' element type, where the trace does not say
    optimizer: str | None = None  # the user's optimiser, where the trace does not say


@dataclass
class ProfileImport:
    """A trace built from a profile (unwritten until import_profile writes it)."""

    trace: Trace
    notes: list[str] = field(default_factory=list)
    stragglers: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)  # figures that do not add up, one line each


@dataclass
class _JobStep:
    """One profiled step of the whole job: the slowest rank's figures and every rank's times."""

    number: int
    critical: StepTiming
    payload_bytes: int
    collective: str
    per_rank: dict[int, StepTiming]


def _step_kind(step: StepTiming) -> tuple[int, str]:
    """(payload bytes, collective) of a step: its all-reduces, else its all-gathers (bytes 0
    where none has a readable size)."""
    kind = step.gradient_kind()
    return (0, "all_reduce") if kind is None else (step.bytes_of(kind), kind)


def _job_steps(profiles: list[RankProfile]) -> list[_JobStep]:
    numbers = sorted(set.intersection(*({s.number for s in p.steps} for p in profiles)))
    by_number = [(p.rank or 0, {s.number: s for s in p.steps}) for p in profiles]
    out = []
    for number in numbers:
        per_rank = {rank: steps[number] for rank, steps in by_number}
        critical = max(per_rank.values(), key=lambda s: s.compute_s)
        payload, kind = _step_kind(per_rank[min(per_rank)])
        if payload > MAX_STEP_BYTES:
            raise TransitsimError(
                f"{profiles[0].path}: ProfilerStep#{number}'s {kind}s send {payload:,} bytes "
                f"(more than {MAX_STEP_BYTES:,}): recorded shapes no model has"
            )
        out.append(_JobStep(number, critical, payload, kind, per_rank))
    return out


def _bucket_profile(steps: list[_JobStep]) -> tuple[dict[str, Any] | None, str | None]:
    """The backward profile from the bucket launches of the slowest rank, averaged over steps
    with the usual bucket count; (None, why) when the profile cannot give one.

    Replay places the end of the backward at the end of the step's compute (compute_s, which
    holds every part of the step but the wait on the exchange and the update) and the buckets
    before it as they were before the backward's end: the backward's share is its measured
    length over compute_s, not over the frame, so a host-bound step's idle time (before the
    backward, or after the update) moves no bucket away from the backward's end."""
    usable = []
    for step in steps:
        s = step.critical
        buckets = [c for c in s.collectives if c.kind == step.collective]
        start, end = s.backward_start_s, s.compute_end_s
        if not buckets or start is None or end <= start or s.compute_s <= 0:
            continue
        if any(not c.elements for c in buckets):
            return None, "a bucket's element count is unreadable: no backward profile"
        span = end - start
        ready = [
            min(max((((c.launch_us if c.ready_us is None else c.ready_us) - s.frame_start_us)
                     * 1e-6 - start) / span, 0.0), 1.0)
            for c in buckets
        ]  # fmt: skip
        usable.append(([int(c.elements or 0) for c in buckets], ready, span / s.compute_s))
    if not usable:
        return None, "no step with both backward ops and bucket launches: no backward profile"
    common = Counter(tuple(n) for n, _, _ in usable).most_common(1)[0][0]
    chosen = [(r, share) for n, r, share in usable if tuple(n) == common]
    ready = [statistics.fmean(r[i] for r, _ in chosen) for i in range(len(common))]
    share = statistics.fmean(share for _, share in chosen)
    tensors = [
        {"name": f"bucket {i}", "numel": common[i], "ready": ready[i]}
        for i in reversed(range(len(common)))  # DDP registration order: last launched first
    ]
    profile = {
        "version": 1,
        "window": f"{len(chosen)} profiled step(s): when the slowest rank's buckets were ready "
        + ("on the GPU" if steps[0].critical.device_s is not None else "(their launches)"),
        "source": "kineto",
        "buckets": True,  # the tensors are the job's DDP buckets: replay keeps them as they are
        "backward_share": min(max(share, 1e-9), 1.0),
        "tensors": tensors,
    }
    return profile, None


def _arrival_s(step: StepTiming) -> float:
    """When a rank reached the exchange after its step started: its backward's end in its
    own step (the device's window on a GPU trace), else its compute."""
    return step.compute_end_s or step.compute_s


def _fit_stragglers(steps: list[_JobStep]) -> dict[str, Any] | None:
    """The ranks' spread as the replay's Stragglers (replay/fitted.py), fitted from when each
    rank started its step and reached the exchange, not from its span: a rank that starts late
    waits least and has the shortest span, and its span says nothing of its speed.

    Fixed per-rank factors: each rank's median arrival over the slowest rank's (the trace's
    compute is the slowest rank's, so the slowest keeps it); on top, exponential
    multiplicative jitter fitted to what the factors leave: for X ~ Exp(mean s),
    E|X_i - X_j| = s, so s is the mean pairwise difference of the per-step arrivals divided by
    their rank's factor and the slowest rank's median."""
    ranks = sorted(steps[0].per_rank)
    arrivals = np.array([[_arrival_s(s.per_rank[r]) for r in ranks] for s in steps])
    medians = np.median(arrivals, axis=0)
    if len(ranks) < 2 or (medians <= 0).any() or (arrivals <= 0).any():
        return None
    factors = medians / medians.max()
    relative = arrivals / (factors * medians.max())  # 1 + jitter, per step and rank
    pairs = [
        float(np.mean(np.abs(relative[:, i] - relative[:, j])))
        for i in range(len(ranks))
        for j in range(i + 1, len(ranks))
    ]
    return {
        "distribution": "exponential",
        "scale": round(float(np.mean(pairs)), 6),
        "mode": "multiplicative",
        "worker_factors": [round(float(f), 6) for f in factors],
        "fitted_from": f"{len(ranks)} ranks x {len(steps)} profiled steps: when each reached "
        "the exchange after its step started",
    }


def _workers(profiles: list[RankProfile], options: ImportOptions, notes: list[str]) -> int:
    if options.workers is not None:
        if options.workers < 1:
            raise TransitsimError(f"--workers must be at least 1, got {options.workers}")
        return options.workers
    world = profiles[0].world_size
    if world:
        return world
    groups = [c.group_size for p in profiles for s in p.steps for c in s.collectives]
    groups = [g for g in groups if g]
    if groups:
        notes.append("no distributedInfo in the profile: workers from the collectives' group size")
        return max(groups)
    notes.append(f"no distributedInfo: workers = the {len(profiles)} profile file(s) given")
    return len(profiles)


def _template(steps: list[_JobStep], notes: list[str]) -> dict[str, Any]:
    payloads = [s.payload_bytes for s in steps]
    if len(set(payloads)) > 1:
        notes.append(
            f"payload differs between profiled steps ({min(payloads):,}..{max(payloads):,} "
            "bytes): their median is used"
        )
    kinds = Counter(s.collective for s in steps).most_common(1)[0][0]
    # means, not medians: per step wall = compute + exposed + update, and means keep that sum
    med = {
        key: float(np.mean([getattr(s.critical, key) for s in steps]))
        for key in (
            "wall_s", "compute_s", "update_s", "comm_s", "exposed_s", "hidden_s", "waited_s"
        )
    }  # fmt: skip
    med["payload_bytes"] = int(np.median(payloads))
    med["collective"] = kinds
    return med


def _other_collectives(steps: list[_JobStep], kind: str, notes: list[str]) -> None:
    others = Counter(c.kind for s in steps for c in s.critical.collectives if c.kind != kind)
    if others:
        listed = ", ".join(f"{n} {k}" for k, n in sorted(others.items()))
        notes.append(f"not in the payload (not the gradient exchange replayed): {listed}")


def _rows(
    steps: list[_JobStep], loss: LossLog | None, template: dict[str, Any], variant: str
) -> pd.DataFrame:
    reducible = template["collective"] == "all_reduce" and variant != "B"
    if loss is None:
        shift = 1 if steps[0].number == 0 else 0
        rows = pd.DataFrame(
            {
                "step": [s.number + shift for s in steps],
                "train_loss": math.inf,
                "val_loss": math.nan,
                "lr": 0.0,
                "payload_bytes": [s.payload_bytes for s in steps],
                "compute_s": [s.critical.compute_s for s in steps],
                "update_s": [s.critical.update_s for s in steps],
                "comm_s": [s.critical.comm_s for s in steps],
                "wall_s": [s.critical.wall_s for s in steps],
            }
        )
    else:
        table = loss.table
        rows = pd.DataFrame(
            {
                "step": table["step"].to_numpy(),
                "train_loss": table["train_loss"].to_numpy(),
                "val_loss": table["val_loss"].to_numpy(),
                "lr": table["lr"].fillna(0.0).to_numpy(),
            }
        )
        for key in ("payload_bytes", "compute_s", "update_s", "comm_s", "wall_s"):
            rows[key] = template[key]
    rows["collective"] = template["collective"]
    rows["reducible"] = reducible
    rows["compress_s"] = 0.0
    rows["payload_bytes"] = rows["payload_bytes"].astype("int64")
    return rows[list(STEP_COLUMNS) + ["update_s", "comm_s", "wall_s"]]


def _profile_meta(
    profiles: list[RankProfile], steps: list[_JobStep], template: dict[str, Any]
) -> dict[str, Any]:
    def figures(s: StepTiming) -> dict[str, float]:
        keys = ("wall_s", "compute_s", "update_s", "comm_s", "exposed_s", "hidden_s", "waited_s")
        out = {key: round(getattr(s, key), 9) for key in keys}
        for key in ("device_s", "gpu_compute_s", "idle_s"):  # GPU traces: the device's own
            if getattr(s, key) is not None:
                out[key] = round(getattr(s, key), 9)
        return out

    return {
        "files": [p.path.name for p in profiles],
        "ranks": [p.rank for p in profiles],
        "device": profiles[0].device,
        "backend": profiles[0].backend,
        "template": {k: v for k, v in template.items()},
        "typical_compute_s": float(
            np.median([s.compute_s for step in steps for s in step.per_rank.values()])
        ),
        "steps": [
            {
                "number": step.number,
                **figures(step.critical),
                "payload_bytes": step.payload_bytes,
                "slowest_rank": next(r for r, s in step.per_rank.items() if s is step.critical),
                "per_rank": {str(r): figures(s) for r, s in step.per_rank.items()},
                "collectives": [
                    {
                        "kind": c.kind,
                        "bytes": c.nbytes,
                        "elements": c.elements,
                        "group_size": c.group_size,
                        "launch_s": round((c.launch_us - step.critical.start_us) * 1e-6, 9),
                        **({} if run is None else {"run_s": run}),
                        **(
                            {}
                            if c.ready_us is None
                            else {
                                "ready_s": round(
                                    (c.ready_us - step.critical.frame_start_us) * 1e-6, 9
                                )
                            }
                        ),
                    }
                    for c, run in zip(
                        step.critical.collectives,
                        _run_seconds(step.critical.collectives),
                        strict=True,
                    )
                ],
            }
            for step in steps
        ],
    }


def _run_seconds(collectives: list[Collective]) -> list[float | None]:
    """How long each collective had the network to itself, seconds (None: not timed): its
    kernels' time on a GPU, its op's on a CPU trace; where collectives of one kind ran at once
    (gloo runs a step's buckets on two threads, beside each other), the stretch they covered
    together is shared between them by their bytes, as they shared the link."""
    out: list[float | None] = [None] * len(collectives)
    timed = sorted(
        (i for i, c in enumerate(collectives) if c.run_us is not None),
        key=lambda i: (collectives[i].kind, collectives[i].run_us),  # type: ignore[arg-type]
    )
    cluster: list[int] = []
    for i in [*timed, None]:
        run = None if i is None else collectives[i].run_us
        if cluster and (
            i is None
            or collectives[i].kind != collectives[cluster[0]].kind
            or run[0] >= max(collectives[j].run_us[1] for j in cluster)  # type: ignore[index]
        ):
            start = min(collectives[j].run_us[0] for j in cluster)  # type: ignore[index]
            end = max(collectives[j].run_us[1] for j in cluster)  # type: ignore[index]
            sizes = [collectives[j].nbytes or 0 for j in cluster]
            total = sum(sizes)
            for j, size in zip(cluster, sizes, strict=True):
                share = size / total if total and all(sizes) else 1 / len(cluster)
                out[j] = round(max(end - start, 0.0) * share * 1e-6, 9)
            cluster = []
        if i is not None:
            cluster.append(i)
    return out


def build_trace(
    profile_paths: list[Path | str], loss: LossLog | None, options: ImportOptions
) -> ProfileImport:
    """Read the profile(s) and build the validated, unwritten trace (trace.path is None)."""
    _check_options(options)
    profiles = read_job_profiles(profile_paths)
    notes = [f"{p.path.name}: {note}" for p in profiles for note in p.notes]
    steps = _job_steps(profiles)
    template = _template(steps, notes)
    _other_collectives(steps, template["collective"], notes)
    workers = _workers(profiles, options, notes)
    warnings = [f"{p.path.name}: {w}" for p in profiles for w in p.warnings]
    n_params, element_bytes = _payload(steps, template, options, profiles[0].path, notes, warnings)
    dense = template["payload_bytes"] if options.variant == "A" else 0
    if not dense:
        dense = n_params * element_bytes
        notes.append(f"dense bytes per step assumed {element_bytes} per parameter")
    optimizer = _optimizer(profiles, options, notes)
    backward, why = _bucket_profile(steps)
    if why:
        notes.append(why)
    if loss is None:
        notes.append("no loss log: losses unknown (stored as inf): this trace times steps only")
    else:
        notes.extend(f"{loss.path.name}: {note}" for note in loss.notes)
        if loss.table["lr"].isna().all():
            notes.append(f"{loss.path.name}: no learning-rate column: lr stored as 0")
        notes.append(
            f"every row timed by the profile's template: the mean of {len(steps)} profiled "
            f"step(s) x {len(profiles)} rank(s)"
        )
    name = options.name or _stem(profiles[0].path)
    if config_name(name) == name:
        name = f"{name}-s{options.seed}"
    check_run_name(name, str(profiles[0].path))
    stragglers = _fit_stragglers(steps) if len(profiles) > 1 else None
    profile = _profile_meta(profiles, steps, template)
    profile["stragglers"] = stragglers
    if loss is not None:
        profile["loss_log"] = {"file": loss.path.name, "columns": loss.columns}
    steps_table = _rows(steps, loss, template, options.variant)
    meta: dict[str, Any] = {
        "name": name,
        "variant": options.variant,
        "variant_params": {},
        "seed": options.seed,
        "workers": workers,
        "n_params": int(n_params),
        "dense_bytes_per_step": int(dense),
        "payload_bytes_per_step": int(template["payload_bytes"]),
        "rows": _row_kind(steps_table, loss),
        "origin": "import",
        "status": "complete",
        "hardware": {"device": profiles[0].device, "backend": profiles[0].backend},
        "optimizer": optimizer,
        "timing": "measured: torch.profiler (Kineto) trace; see profile",
        "source_log": ", ".join(
            [p.path.name for p in profiles] + ([loss.path.name] if loss else [])
        ),
        "notes": notes + [f"warning: {w}" for w in warnings],
        "profile": profile,
    }
    if backward is not None:
        meta["backward_profile"] = backward
    validate_meta(meta, name)
    validate_steps(steps_table, name)
    trace = Trace(meta=meta, steps=steps_table, path=None)
    return ProfileImport(trace=trace, notes=notes, stragglers=stragglers, warnings=warnings)


def _row_kind(rows: pd.DataFrame, loss: LossLog | None) -> str:
    """What each row stands for: without a loss log the profiled steps themselves, one step
    each (ProfilerStep#15..#17 are 3 steps, not 17), every_step where they are 1, 2, ..."""
    if loss is not None:
        return "every_step" if loss.every_step else "evaluated_steps"
    consecutive = rows["step"].tolist() == list(range(1, len(rows) + 1))
    return "every_step" if consecutive else "profiled_steps"


def _check_options(options: ImportOptions) -> None:
    """Refuse what the user typed wrong before reading any file (one line each)."""
    if options.variant not in VARIANTS:
        raise TransitsimError(f"--variant {options.variant!r} is not one of {', '.join(VARIANTS)}")
    if options.params is not None and options.params < 1:
        raise TransitsimError(f"--params must be at least 1, got {options.params}")
    if options.params is not None and options.params > MAX_PARAMS:
        raise TransitsimError(f"--params must be at most {MAX_PARAMS:,}, got {options.params:,}")
    if options.dtype is not None:
        _dtype_size(options.dtype)
    if options.optimizer is not None:
        name = options.optimizer.strip()
        if not 0 < len(name) <= 60 or not name.isprintable():
            raise TransitsimError(f"--optimizer {options.optimizer!r} is not an optimiser's name")


def _dtype_size(text: str) -> int:
    key = text.strip().lower()
    size = DTYPE_ALIASES.get(key) or element_size(key)
    if size is None:
        raise TransitsimError(
            f"--dtype {text!r} is not an element type (fp32, bf16, fp16, fp64, fp8, int8, "
            "float, half, bfloat16, ...)"
        )
    return size


def _element_bytes(options: ImportOptions, steps: list[_JobStep]) -> tuple[int, str]:
    """Bytes per gradient element and where they came from: --dtype, else the type the trace
    records for the gradient exchange, else fp32."""
    if options.dtype is not None:
        return _dtype_size(options.dtype), f"--dtype {options.dtype}"
    found = Counter(
        c.dtype_bytes
        for s in steps
        for c in s.critical.collectives
        if c.kind == s.collective and c.dtype_bytes
    )
    if found:
        return found.most_common(1)[0][0], "the trace's element size"
    return BYTES_PER_PARAM, "fp32 assumed: give --dtype"


def _payload(
    steps: list[_JobStep],
    template: dict[str, Any],
    options: ImportOptions,
    path: Path,
    notes: list[str],
    warnings: list[str],
) -> tuple[int, int]:
    """(n_params, bytes per element), setting the steps' payload from --params where the trace
    cannot give it: a trace recorded without shapes (or of zero-byte exchanges) is refused
    without --params, never imported as 0 bytes a step."""
    kind = template["collective"]
    mine = [c for s in steps for c in s.critical.collectives if c.kind == kind]
    unsized = sum(1 for c in mine if c.nbytes is None)
    size, source = _element_bytes(options, steps)
    whole = not mine or unsized == len(mine) or not template["payload_bytes"]
    if whole and options.params is None:
        unknown = next((c.unknown_dtype for c in mine if c.unknown_dtype), None)
        what = (
            "no gradient all-reduce or all-gather in the steps"
            if not mine
            else f"{unsized} {kind}(s) of element type {unknown!r}, whose size is unknown"
            if unknown
            else f"{unsized} {kind}(s) recorded without shapes"
            if unsized
            else f"its {kind}s send 0 bytes"
        )
        raise TransitsimError(
            f"{path}: message sizes are not recoverable from this trace ({what}): give the "
            "model's size with --params N (and the gradients' --dtype; default: the trace's "
            "element type, else fp32)"
        )
    if options.params is not None and (whole or unsized):
        payload = options.params * size
        for step in steps:
            step.payload_bytes = payload
        template["payload_bytes"] = payload
        notes.append(
            f"payload = --params {options.params:,} x {size} bytes ({source}) = {payload:,} "
            f"bytes a step: the trace does not size {'its' if whole else 'all its'} {kind}s"
        )
        return options.params, size
    if unsized:
        unknown = next((c.unknown_dtype for c in mine if c.unknown_dtype), None)
        why = f" (element type {unknown!r} of unknown size)" if unknown else ""
        warnings.append(
            f"{unsized} of {len(mine)} {kind}(s) have no readable size{why}: the payload counts "
            "only the others (give --params N for the whole exchange)"
        )
    elements = sum(c.elements or 0 for c in steps[0].critical.collectives if c.kind == kind)
    if options.params is None:
        if not elements:
            raise TransitsimError(
                f"{path}: the {kind}s' element counts are not recorded: give the model's size "
                "with --params N"
            )
        notes.append(f"n_params = the {elements:,} elements the step's {kind} sends")
        return elements, size
    if abs(options.params * size - template["payload_bytes"]) > 0.01 * template["payload_bytes"]:
        notes.append(
            f"--params {options.params:,} x {size} bytes is not the {template['payload_bytes']:,} "
            f"bytes the trace's {kind}s send a step: the payload is the trace's"
        )
    return options.params, size


def _optimizer(profiles: list[RankProfile], options: ImportOptions, notes: list[str]) -> str:
    """The user's optimiser (--optimizer, else the trace's Optimizer.step#NAME), "" unknown."""
    if options.optimizer is not None:
        return options.optimizer.strip()
    found = next((p.optimizer for p in profiles if p.optimizer), None)
    if found is None:
        notes.append("the trace names no optimiser (no Optimizer.step#...): give --optimizer")
    return found or ""


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name.removesuffix(suffix)
    return name or "profile"


def import_profile(
    profile_paths: list[Path | str],
    loss: LossLog | None,
    out_dir: Path | str,
    options: ImportOptions,
) -> ProfileImport:
    """Build the trace, then write `<name>.parquet` in out_dir (nothing written on any error)."""
    check_writable_folder(out_dir, what="traces folder")
    return write_import(build_trace(profile_paths, loss, options), out_dir)


def write_import(result: ProfileImport, out_dir: Path | str) -> ProfileImport:
    """Write a built import as `<name>.parquet` in out_dir and read its metadata back."""
    trace = result.trace
    trace.path = write_trace(Path(out_dir) / f"{trace.name}.parquet", trace.steps, trace.meta)
    trace.meta = read_meta(trace.path)
    return result
