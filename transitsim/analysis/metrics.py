"""Steps-, bytes- and time-to-loss: when each configuration first reaches a validation loss.

A configuration is a run name without its seed part; its seeds are its runs. As in the
experiment's analysis (spec §13), a configuration reaches a target only if every seed reaches it:
its figures are means over seeds, NaN (a dash) otherwise, with "r/n" saying how many did.
"""

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

from transitsim.analysis.uncertainty import seed_interval
from transitsim.base.errors import TransitsimError
from transitsim.traces.format import VARIANTS, Trace, config_name

LADDER_COLUMNS = (
    "config",
    "variant",
    "target",
    "seeds",
    "reached",
    "steps",
    "payload_bytes",
    "wire_bytes",
    "steps_crossed",
    "steps_before",
)
METRIC_COLUMNS = (
    "run",
    "config",
    "variant",
    "network",
    "step",
    "val_loss",
    "time_s",
    "wire_bytes",
)
# optional timeline columns time_to_target reads where present (never grid parameters): of
# wire_bytes, those that crossed a WAN link (replay/step.py; lan = wire - wan)
SPLIT_COLUMNS = ("wan_bytes",)
_FIRST = object()  # no previous grid value yet
# How sure time_to_target_s (and steps_to_target) is, over seeds (analysis/uncertainty.py).
INTERVAL_COLUMNS = (
    "time_to_target_s_sd",
    "time_to_target_s_lo",
    "time_to_target_s_hi",
    "interval",
    "steps_to_target_sd",
    "steps_to_target_lo",
    "steps_to_target_hi",
)
SUMMARY_COLUMNS = (
    "config",
    "variant",
    "network",
    "target",
    "seeds",
    "reached",
    "steps_to_target",
    "time_to_target_s",
    *INTERVAL_COLUMNS,
    "bytes_to_target",
    "wan_bytes_to_target",
    "lan_bytes_to_target",
    "speedup_vs_baseline",
)

MAX_TARGETS = 64  # loss targets one run or simulate() asks (check_target_count)


def first_reaching(df: pd.DataFrame, target: float) -> pd.Series | None:
    """The first row, in step order, whose val_loss is at or below target (None if none is).

    Rows without an evaluation (NaN) never count; a loss exactly equal to the target does.
    """
    ordered = df.sort_values("step", kind="stable")
    hits = ordered[ordered["val_loss"] <= target]
    return None if hits.empty else hits.iloc[0]


def crossing_step(steps: pd.DataFrame, target: float) -> tuple[float, float, int] | None:
    """Of one run: (the last evaluated step above the target, the step where its loss crossed
    it, interpolated as `crossings` does, the first evaluated step at or below it), or None
    where it never gets there. With no evaluation above it, all three are the first."""
    one_run = steps.sort_values("step", kind="stable").assign(run=0, network=0)
    hits = crossings(with_previous_evaluation(one_run), target)
    if hits.empty:
        return None
    hit = hits.iloc[0]
    return float(hit["step_before"]), float(hit["step"]), int(hit["step_after"])


def ring_wire_bytes(payload_bytes: Any, collective: Any, workers: int) -> Any:
    """Bytes one worker sends per step in its ring collective (spec §10), from the payload.

    all-reduce 2(W-1)/W x payload, all-gather (W-1) x payload, a switch's reduce: the payload once.
    """
    factor = {"all_reduce": 2 * (workers - 1) / workers, "all_gather": workers - 1}
    if isinstance(collective, pd.Series):
        return payload_bytes * collective.astype(str).map(factor).fillna(1.0)
    return payload_bytes * factor.get(collective, 1.0)


def wire_bytes_per_row(trace: Trace) -> pd.Series:
    """Per-step wire bytes of each row: the trace's own column, else derived from the payload."""
    if "wire_bytes" in trace.steps.columns:
        return trace.steps["wire_bytes"].astype("float64")
    return ring_wire_bytes(
        trace.steps["payload_bytes"].astype("float64"), trace.steps["collective"], trace.workers
    )


def bytes_through(steps: pd.DataFrame, per_step: pd.Series, step: int) -> float:
    """Bytes sent over steps 1..step: each row's per-step figure times the steps it stands for
    (one for a trainer trace, the interval since the previous row for an imported log)."""
    upto = steps["step"] <= step
    counts = steps.loc[upto, "step"].diff().fillna(steps.loc[upto, "step"])
    return float((per_step[upto] * counts).sum())


def wire_bytes_per_step(trace: Trace) -> float:
    """The run's wire bytes per step (metadata, else its last row)."""
    if trace.meta.get("wire_bytes_per_step") is not None:
        return float(trace.meta["wire_bytes_per_step"])
    return float(wire_bytes_per_row(trace).iloc[-1])


def measured_step_times(traces: list[Trace]) -> dict[str, float]:
    """Per configuration, the mean step its profiled job measured (`traces import --profile`
    keeps it as meta profile.template.wall_s, the slowest rank's ProfilerStep span), averaged
    over its seeds; configurations without a profile are left out."""
    measured: dict[str, list[float]] = {}
    for trace in traces:
        template = (trace.meta.get("profile") or {}).get("template") or {}
        wall = template.get("wall_s")
        if isinstance(wall, int | float) and math.isfinite(wall) and wall > 0:
            measured.setdefault(trace.config_name, []).append(float(wall))
    return {config: float(np.mean(walls)) for config, walls in measured.items()}


def _missing_last(value: Any) -> tuple[bool, Any]:
    return (value is None, 0 if value is None else value)


def run_sort_key(meta: dict[str, Any]) -> tuple:
    """Order runs as the experiment's tables do: by variant letter (A..F); within a letter by
    band and chunking, and E by (feedback, fs_every, planes, enob); then name and seed."""
    params = meta.get("variant_params") or {}
    variant = meta.get("variant")
    return (
        VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS),
        str(params.get("band") or ""),
        str(params.get("chunk_mode") or ""),
        _missing_last(params.get("chunk")),
        str(params.get("feedback") or ""),
        _missing_last(params.get("fs_every")),
        _missing_last(params.get("planes")),
        _missing_last(params.get("enob")),
        _missing_last(params.get("keep")),
        _missing_last(params.get("lr")),
        config_name(meta.get("name", "")),
        meta.get("seed", 0),
    )


def group_by_config(traces: list[Trace]) -> dict[str, list[Trace]]:
    """Runs grouped by configuration, in table order; the same run twice is an error."""
    seen: dict[str, Trace] = {}
    for trace in traces:
        if trace.name in seen:
            raise TransitsimError(
                f"run {trace.name!r} appears twice ({seen[trace.name].path} and {trace.path}): "
                "pass one of them"
            )
        seen[trace.name] = trace
    groups: dict[str, list[Trace]] = {}
    for trace in sorted(traces, key=lambda t: run_sort_key(t.meta)):
        groups.setdefault(trace.config_name, []).append(trace)
    return groups


def ladder(traces: list[Trace], targets: list[float]) -> pd.DataFrame:
    """Steps- and bytes-to-loss per configuration and target (the published "ladder").

    steps is the mean over seeds of each seed's first evaluated step at or below the target (the
    published ladder's convention), NaN unless every seed gets there; payload_bytes and
    wire_bytes are the bytes one worker sent up to that step (steps x bytes per step when those
    are constant), averaged the same way. steps_crossed is where the loss crossed the target,
    interpolated between that evaluation and the one before it (steps_before), as the summary's
    steps_to_target is: the step is known only to within that bracket.
    """
    rows = []
    for name, runs in group_by_config(traces).items():
        for target in targets:
            reached = []
            for trace in runs:
                crossing = crossing_step(trace.steps, target)
                if crossing is None:
                    continue
                before, crossed, step = crossing
                payload = bytes_through(trace.steps, trace.steps["payload_bytes"], step)
                wire = bytes_through(trace.steps, wire_bytes_per_row(trace), step)
                reached.append((step, payload, wire, crossed, before))
            every = len(reached) == len(runs)
            means = np.mean(reached, axis=0) if every else [math.nan] * 5
            rows.append(
                {
                    "config": name,
                    "variant": runs[0].variant,
                    "target": float(target),
                    "seeds": len(runs),
                    "reached": f"{len(reached)}/{len(runs)}",
                    "steps": float(means[0]),
                    "payload_bytes": float(means[1]),
                    "wire_bytes": float(means[2]),
                    "steps_crossed": float(means[3]),
                    "steps_before": float(means[4]),
                }
            )
    return pd.DataFrame(rows, columns=list(LADDER_COLUMNS))


def resolve_config(query: str, variants: dict[str, str]) -> str:
    """The one configuration a user means: its exact name, a variant id ("A") that has a single
    configuration, or a substring of exactly one name. variants maps config name -> variant."""
    if query in variants:
        return query
    by_variant = [name for name, variant in variants.items() if variant == query]
    candidates = by_variant or [name for name in variants if query in name]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise TransitsimError(
            f"unknown configuration {query!r} (expected one of: {', '.join(variants)})"
        )
    raise TransitsimError(
        f"configuration {query!r} is ambiguous: it matches {', '.join(candidates)}"
    )


def final_loss(runs: list[Trace]) -> float:
    """A configuration's mean final val loss over its seeds (spec §13)."""
    return float(np.mean([trace.final_val_loss for trace in runs]))


def parse_targets(spec: str, traces: list[Trace]) -> list[float]:
    """Loss targets from "3.158,3.124" and/or "final:CONFIG" (that configuration's mean final
    val loss; CONFIG is a name, a unique substring or a variant id such as "A")."""
    targets: list[float] = []
    items = [item.strip() for item in spec.split(",")]
    if not any(items):
        raise TransitsimError("no loss targets given (e.g. --targets 3.158,3.124 or final:A)")
    groups: dict[str, list[Trace]] | None = None
    for item in items:
        if item.startswith("final:"):
            if groups is None:
                groups = group_by_config(traces)
            variants = {name: runs[0].variant for name, runs in groups.items()}
            targets.append(final_loss(groups[resolve_config(item[len("final:") :], variants)]))
            continue
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise TransitsimError(
                f"bad loss target {item!r}: expected a number like 3.158 or final:CONFIG"
            )
        targets.append(check_target(value))
    return check_target_count(list(dict.fromkeys(targets)))  # named twice: one question


def check_target_count(targets: list[float]) -> list[float]:
    """At most MAX_TARGETS: each is a row per configuration and network, summarised one by one
    (1,000 targets took a minute on one trace; the shipped scenarios ask 2)."""
    if len(targets) > MAX_TARGETS:
        raise TransitsimError(f"{len(targets):,} loss targets is too many (at most {MAX_TARGETS})")
    return targets


def check_target(value: object) -> float:
    """A loss target is a positive finite number: a cross-entropy is never below 0, and NaN or
    inf would be "reached" by every step or by none."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TransitsimError(f"bad loss target {value!r}: expected a number like 3.158")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise TransitsimError(f"bad loss target {value!r}: a loss target is a positive number")
    return number


def _grid_params(timeline: pd.DataFrame) -> list[str]:
    """Extra timeline columns that are constant within each (run, network): grid parameters."""
    extra = [c for c in timeline.columns if c not in (*METRIC_COLUMNS, *SPLIT_COLUMNS)]
    if not extra:
        return []
    distinct = timeline.groupby(["run", "network"], sort=False)[extra].nunique(dropna=False)
    return [c for c in extra if (distinct[c] <= 1).all()]


def time_to_target(
    timeline: pd.DataFrame, targets: list[float], baseline_variant: str | None = None
) -> pd.DataFrame:
    """Steps, wall-clock and wire bytes to each target, per (config, network[, grid params]).

    timeline: one row per (run, network, step) with METRIC_COLUMNS (time_s and wire_bytes
    cumulative; wan_bytes, of wire_bytes those that crossed a WAN link, where known) and
    possibly grid-parameter columns, which are carried into the summary. A figure
    is the mean over seeds of where each seed's loss crossed the target, interpolated between
    its evaluations (crossings), NaN unless every seed reaches; its interval carries both the
    seeds' spread and the evaluations' bracket (uncertainty.py). speedup_vs_baseline is the baseline
    configuration's time divided by this one's on the same network and target; the baseline is
    named by variant id (with one configuration) or by configuration name.
    """
    missing = [c for c in METRIC_COLUMNS if c not in timeline.columns]
    if missing:
        raise TransitsimError(f"timeline lacks column(s) {', '.join(missing)}")
    params = _grid_params(timeline)
    keys = ["config", "variant", "network", *params]
    ordered = timeline.sort_values(["run", "network", "step"], kind="stable")
    seeds = timeline.groupby(keys, sort=False, dropna=False)["run"].nunique()
    if "wan_bytes" not in ordered.columns:  # a timeline from before the split: unknown
        ordered = ordered.assign(wan_bytes=math.nan)
    evaluated = with_previous_evaluation(ordered)
    parts = []
    for target in targets:
        hits = crossings(evaluated, target)
        firsts = hits.groupby(keys, sort=False, dropna=False).agg(
            reached_runs=("run", "nunique"),
            steps_to_target=("step", "mean"),
            time_to_target_s=("time_s", "mean"),
            bytes_to_target=("wire_bytes", "mean"),
            wan_bytes_to_target=("wan_bytes", "mean"),
        )
        firsts["lan_bytes_to_target"] = firsts["bytes_to_target"] - firsts["wan_bytes_to_target"]
        part = seeds.rename("seeds").to_frame().join(firsts).join(_intervals(hits, keys))
        part["reached_runs"] = part["reached_runs"].fillna(0).astype(int)
        incomplete = part["reached_runs"] < part["seeds"]
        for column in (
            "steps_to_target",
            "time_to_target_s",
            "bytes_to_target",
            "wan_bytes_to_target",
            "lan_bytes_to_target",
        ):
            part[column] = part[column].astype("float64").mask(incomplete)
        for column in INTERVAL_COLUMNS:
            part[column] = part[column].mask(incomplete)
        part["reached"] = part["reached_runs"].astype(str) + "/" + part["seeds"].astype(str)
        part["target"] = float(target)
        parts.append(part.drop(columns="reached_runs").reset_index())
    summary = pd.concat(parts, ignore_index=True)
    summary["speedup_vs_baseline"] = math.nan
    if baseline_variant is not None:
        variants = dict(zip(summary["config"], summary["variant"], strict=True))
        baseline = resolve_config(baseline_variant, variants)
        where = ["network", *params, "target"]
        base = summary.loc[summary["config"] == baseline, [*where, "time_to_target_s"]]
        merged = summary[where].merge(
            base.rename(columns={"time_to_target_s": "_base_s"}), on=where, how="left"
        )
        summary["speedup_vs_baseline"] = (
            merged["_base_s"].to_numpy() / summary["time_to_target_s"].to_numpy()
        )
    columns = [*SUMMARY_COLUMNS[:3], *params, *SUMMARY_COLUMNS[3:]]
    return summary[columns]


def with_previous_evaluation(ordered: pd.DataFrame) -> pd.DataFrame:
    """The evaluated rows (in run, network, step order), each with the previous evaluation's
    step, loss, time and bytes of its run on its network (NaN at the first)."""
    evaluated = ordered[ordered["val_loss"].notna()].copy()
    previous = evaluated.groupby(["run", "network"], sort=False)[
        [c for c in ("step", "val_loss", "time_s", "wire_bytes", "wan_bytes") if c in evaluated]
    ].shift(1)
    for column in previous.columns:
        evaluated[f"prev_{column}"] = previous[column].astype("float64")
    return evaluated


def crossings(evaluated: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per (run, network) that reaches the target: where its loss crossed it.

    The first evaluation at or below the target and the one before it (above the target)
    bracket the crossing; step, time_s and wire_bytes are interpolated linearly in the loss
    between them, and step_before/after, time_s_before/after hold the bracket (both the first
    evaluation where there is none before it: the run was already there when first evaluated).
    """
    hits = evaluated[evaluated["val_loss"] <= target].drop_duplicates(["run", "network"])
    hits = hits.copy()
    loss_after = hits["val_loss"].astype("float64")
    loss_before = hits["prev_val_loss"]
    drop = loss_before - loss_after
    share = ((loss_before - target) / drop.where(drop > 0)).clip(0.0, 1.0).fillna(1.0)
    for column in ("step", "time_s", "wire_bytes", "wan_bytes"):
        if column not in hits:
            continue
        after = hits[column].astype("float64")
        before = hits[f"prev_{column}"].fillna(after)
        hits[f"{column}_before"] = before
        hits[f"{column}_after"] = after
        hits[column] = before + share * (after - before)
    return hits


def _intervals(hits: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of first hits (one row per seed): the spread and interval of its time and
    steps to the target (analysis/uncertainty.py), as INTERVAL_COLUMNS, indexed as the
    groupby of the means is (so the two join row for row, NaN grid values included)."""
    groups = hits.groupby(keys, sort=False, dropna=False)
    index = groups["time_s"].mean().index  # the means' groupby order, NaN grid values included
    times, steps = [], []
    for _, group in groups:
        times.append(_bracketed(group, "time_s"))
        steps.append(_bracketed(group, "step"))
    frame = pd.DataFrame(index=index)
    for position, column in enumerate(INTERVAL_COLUMNS[:4]):
        frame[column] = [item[position] for item in times]
    for position, column in enumerate(INTERVAL_COLUMNS[4:]):
        frame[column] = [item[position] for item in steps]
    return frame.astype({c: "float64" for c in INTERVAL_COLUMNS if c != "interval"})


def _bracketed(rows: pd.DataFrame, column: str) -> tuple[float, float, float, str]:
    """seed_interval of one group's crossings, bracketed by their evaluations."""
    values = [rows[f"{column}{end}"].to_numpy(dtype="float64") for end in ("", "_before", "_after")]
    return seed_interval(*values)


def crossovers(summary: pd.DataFrame, param: str) -> pd.DataFrame:
    """The fastest configuration to each target at each value of a grid parameter, and where
    the winner changes (changed = True at the first value where a new configuration wins).

    Other grid-parameter columns of the summary are held fixed: each of their combinations is
    its own sweep over param. runner_up_ratio is the second-best time over the best.
    """
    if param not in summary.columns:
        raise TransitsimError(f"summary has no grid parameter {param!r}")
    others = [c for c in summary.columns if c not in SUMMARY_COLUMNS and c != param]
    rows = []
    for fixed, sweep in summary.groupby(["target", *others], sort=False, dropna=False):
        fixed = fixed if isinstance(fixed, tuple) else (fixed,)
        previous: Any = _FIRST
        for value, at in sweep.groupby(param, sort=True, dropna=False):
            ranked = at.dropna(subset=["time_to_target_s"]).sort_values(
                ["time_to_target_s", "config"], kind="stable"
            )
            best = ranked.iloc[0] if len(ranked) else None
            best_config = None if best is None else best["config"]
            row = dict(zip(["target", *others], fixed, strict=True))
            row.update(
                {
                    param: value,
                    "best_config": best_config,
                    "best_variant": None if best is None else best["variant"],
                    "network": None if best is None else best["network"],
                    "time_to_target_s": math.nan if best is None else best["time_to_target_s"],
                    "runner_up_config": ranked.iloc[1]["config"] if len(ranked) > 1 else None,
                    "runner_up_ratio": (
                        ranked.iloc[1]["time_to_target_s"] / best["time_to_target_s"]
                        if len(ranked) > 1
                        else math.nan
                    ),
                    "changed": previous is not _FIRST and best_config != previous,
                }
            )
            previous = best_config
            rows.append(row)
    return pd.DataFrame(rows)


def extrapolated_flags(summary: pd.DataFrame, timeline: pd.DataFrame) -> list[bool]:
    """Per summary row: whether any replayed row of its (config, network) was extrapolated."""
    flagged = timeline.groupby(["config", "network"], sort=False)["extrapolated"].any()
    keys = zip(summary["config"], summary["network"], strict=True)
    return [bool(flagged[key]) for key in keys]
