"""Run a scenario: every (trace, network point) replayed, summarised and written to a folder.

    scenario = load_scenario("scenarios/quickstart.yaml")
    result = run_scenario(scenario, Path("out/quickstart"))
    result.summary      # steps-, time- and bytes-to-loss per config, network and target

The replays run on `transitsim.sweep` (serially or on Dask); this module turns their timelines
into the summary (`metrics.time_to_target`, grid parameters as timeline columns), the ladder,
the crossovers of a grid and the report, and writes every file atomically (a temp file in the
same folder, then os.replace): a run killed at any moment leaves each output whole or absent.
"""

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from transitsim.analysis.decision import decide
from transitsim.analysis.hardware import marked_labels
from transitsim.analysis.metrics import ladder, measured_step_times, parse_targets, resolve_config
from transitsim.analysis.outcomes import DEFAULT_TIE_MARGIN
from transitsim.analysis.summary import (
    grid_crossovers,
    is_number,
    link_utilisation,
    no_summary,
    summarise,
)
from transitsim.base.errors import TransitsimError, error_line
from transitsim.base.tables import config_labels
from transitsim.outputs import RunResult, check_outputs_writable, write_outputs
from transitsim.replay.context import assumptions, scenario_question
from transitsim.replay.replay import check_replay
from transitsim.replay.request import ReplayRequest
from transitsim.replay.sites import check_site_layout, replicas_for
from transitsim.scenario import Scenario, network_placement, scenario_to_networks
from transitsim.scenario.networks import faults_on
from transitsim.sweep import CLUSTER_AFTER_S, JobResult, ReplayJob, run_jobs
from transitsim.traces.format import Trace, read_trace


class JobsFailed(TransitsimError):
    """Every job failed, so there is nothing to summarise (the CLI lists them and exits 1)."""

    def __init__(self, failures: list[JobResult]) -> None:
        super().__init__(f"every job failed ({len(failures)})")
        self.failures = failures


# ---------------------------------------------------------------------------------------------
# Scenario -> jobs


def load_traces(paths: list[Path]) -> dict[str, Trace]:
    """Traces by run name, read (and validated) once, in the given order."""
    traces: dict[str, Trace] = {}
    for path in paths:
        trace = read_trace(path)
        if trace.name in traces:
            raise TransitsimError(
                f"run {trace.name!r} appears twice ({traces[trace.name].path} and {path})"
            )
        traces[trace.name] = trace
    return traces


def unfinished_notes(traces: list[Trace]) -> list[str]:
    """One note per trace that stopped early without diverging (a run still in progress, or
    killed): it counts as a seed that never reaches a target, which may not be what it is."""
    notes = []
    for trace in traces:
        diverged = any(str(n).startswith("diverged") for n in trace.meta.get("notes") or [])
        if trace.meta.get("status") == "incomplete" and not diverged:
            done = int(trace.steps["step"].iloc[-1]) if len(trace.steps) else 0
            notes.append(
                f"{trace.name} is incomplete ({done:,} of {trace.meta.get('steps_planned', '?')} "
                "steps, not diverged): it counts as a seed that reaches no target after its last "
                "step; finish it (the trainer resumes it) or leave it out of the scenario"
            )
    return notes


def _param_value(value: Any) -> Any:
    """A grid value as a table cell: numbers and text as they are, a mapping as JSON text."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return json.dumps(value, sort_keys=True, default=str)


def scenario_jobs(scenario: Scenario, traces: dict[str, Trace]) -> list[ReplayJob]:
    """One job per (network point, trace), networks in scenario order (grid points last)."""
    compute = scenario.compute.to_compute_model()
    faults = tuple(fault.to_link_fault() for fault in scenario.faults)
    replicas = {trace.name: trace.replicas for trace in scenario.trace_files}
    # one step's events per network point, from a trace replayed as trained (a replica-per-site
    # layout adds an intra-site exchange that step events do not draw)
    recorded = next((name for name in traces if replicas.get(name, "worker") == "worker"), None)
    jobs = []
    for name, network, params in scenario_to_networks(scenario):
        placement = network_placement(scenario, name)
        stragglers, _ = scenario.stragglers_on(network.workers)  # unfit factors: jitter only
        for trace in traces.values():
            request = ReplayRequest(
                network=network,
                compute=compute,
                transform_at=placement.transform_at,
                sum_at=placement.sum_at,
                stragglers=stragglers,
                faults=faults_on(network, faults),
                seed=scenario.stragglers.seed,
                scale_params=scenario.scale_params,
                overlap=placement.overlap,
                bucket_bytes=placement.bucket_bytes,
                replicas=replicas.get(trace.name, "worker"),
                record_step=trace.name == recorded,
            )
            jobs.append(
                ReplayJob(
                    index=len(jobs),
                    trace_name=trace.name,
                    request=request,
                    params={key: _param_value(value) for key, value in params.items()},
                )
            )
    return jobs


def check_jobs(jobs: list[ReplayJob], traces: dict[str, Trace]) -> list[str]:
    """Plan every job as replay would (transitsim.replay.replay.check_replay), simulating
    nothing; the distinct reasons jobs would fail, each once with how many jobs it concerns."""
    reasons: dict[str, list[str]] = {}
    for job in jobs:
        try:
            check_replay(traces[job.trace_name], job.request)
        except Exception as exc:  # every reason, not only the first job's
            name = job.network_name
            reason = error_line(exc).replace(f"network {name!r}", "network")
            reasons.setdefault(reason.replace(name, "<network>"), []).append(name)
    problems = []
    for reason, names in reasons.items():
        networks = list(dict.fromkeys(names))
        where = f"{len(networks)} networks, e.g. {networks[0]!r}" if len(networks) > 1 else ""
        where = where or repr(networks[0])
        problems.append(f"{len(names)} of {len(jobs)} jobs would fail (on {where}): {reason}")
    return problems


def default_output_dir(scenario: Scenario) -> Path:
    """outputs.dir of the scenario (relative to its file), else out/<scenario name>/."""
    return scenario.output_dir or Path("out") / (scenario.name or "scenario")


def _resolve_label(name: str, scenario_labels: dict[str, str]) -> str:
    """A label written in a scenario ("final:<label>", baseline) as its config name."""
    by_label = {label: config for config, label in scenario_labels.items()}
    return by_label.get(name, name)


def run_scenario(
    scenario: Scenario,
    out_dir: Path | None = None,
    *,
    serial: bool = False,
    scheduler: str | None = None,
    quiet: bool = False,
    trace_events: Path | None = None,
    cluster_after_s: float = CLUSTER_AFTER_S,
) -> RunResult:
    """Replay every (trace, network point) of a loaded scenario, summarise, write the outputs.

    out_dir: default `default_output_dir(scenario)`. Files: those of outputs.files (timeline in
    outputs.table_format, summary/ladder/sweep/link_util as CSV, report.html, trace_events.json);
    trace_events: also write one step's trace events to this file. Jobs that fail are in
    `failures`; the tables hold the others. Raises JobsFailed when no job succeeds.
    cluster_after_s: see `sweep.run_jobs` (when the rest of the jobs go to a local cluster).
    The local Dask cluster starts worker processes by spawning: a script that calls this
    without serial=True needs the `if __name__ == "__main__":` guard.
    """
    out_dir = default_output_dir(scenario) if out_dir is None else Path(out_dir)
    check_outputs_writable(out_dir, trace_events)
    traces = load_traces([trace.path for trace in scenario.trace_files])
    own_labels = {
        trace.config: trace.label for trace in scenario.trace_files if trace.label is not None
    }
    target_names = [
        target if isinstance(target, str) else f"{target:g}" for target in scenario.targets
    ]
    spec = ",".join(
        f"final:{_resolve_label(t[len('final:') :], own_labels)}" if t.startswith("final:") else t
        for t in target_names
    )
    targets = parse_targets(spec, list(traces.values()))
    baseline = _resolve_label(scenario.baseline, own_labels) if scenario.baseline else None
    jobs = scenario_jobs(scenario, traces)
    results = run_jobs(
        traces,
        jobs,
        serial=serial,
        scheduler=scheduler,
        cluster_after_s=cluster_after_s,
        quiet=quiet,
    )
    extra_workers = extrapolated_workers(traces, [job.request.network.workers for job in jobs])
    title = f"transitsim: {scenario.name}"
    title_extrapolation = extrapolation_text(scenario.scale_params, extra_workers)
    if title_extrapolation:
        title += f" ({title_extrapolation})"
    result = assemble(
        results,
        traces,
        targets,
        target_names,
        baseline,
        title=title,
        own_labels=own_labels,
        tie_margin=scenario.verdict.tie_margin,
    )
    result.extrapolation = (
        extrapolation_text(scenario.scale_params, extra_workers, compact=True) or None
    )
    if scenario.scale_params is not None:  # first, so that the printed notes always show it
        result.notes.insert(0, _scale_note(scenario.scale_params, traces))
    result.notes[:0] = unfinished_notes(list(traces.values()))  # first: they change the answer
    result.question = scenario_question(scenario.source_path, scenario.description)
    result.assumptions = assumptions(
        scenario.compute.to_compute_model(),
        scenario.scale_params,
        list(traces.values()),
        sorted({job.request.network.workers for job in jobs}),
    )
    files = list(dict.fromkeys(scenario.outputs.files))
    write_outputs(result, out_dir, files, scenario.outputs.table_format, trace_events)
    return result


def extrapolated_to(params: int) -> str:
    """How a run's title says it replays a what-if model size."""
    return f"extrapolated to {params:,} parameters"


def extrapolated_workers(traces: dict[str, Trace], workers: list[int]) -> list[int]:
    """The worker counts replayed that no trace was trained with (loss per step is kept)."""
    trained = {trace.workers for trace in traces.values()}
    return sorted(set(workers) - trained)


def _count(number: int) -> str:
    """1000000000 -> "1e9" (a round power of ten times a few digits), else "15,833,472"."""
    digits = str(number).rstrip("0")
    zeros = len(str(number)) - len(digits)
    return f"{digits}e{zeros}" if number >= 10**6 and zeros >= 6 else f"{number:,}"


def extrapolation_text(params: int | None, workers: list[int], compact: bool = False) -> str:
    """What the numbers are extrapolated to, as a title and the verdict say it: "extrapolated
    to 1,000,000,000 parameters and 64, 256 and 1,024 workers" (compact: "1e9 parameters")."""
    parts = []
    if params is not None:
        parts.append(f"{_count(params) if compact else f'{params:,}'} parameters")
    if workers:
        shown = [f"{count:,}" for count in workers]
        text = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        parts.append(f"{text} workers")
    return "extrapolated to " + " and ".join(parts) if parts else ""


def _scale_note(params: int, traces: dict[str, Trace]) -> str:
    recorded = sorted({trace.meta["n_params"] for trace in traces.values()})
    sizes = ", ".join(f"{n:,}" for n in recorded)
    return (
        f"{extrapolated_to(params)}: bytes, compute, compression and update scaled from the "
        f"traces' {sizes}-parameter model(s); loss per step is the traces' own"
    )


def replay_traces(
    traces: dict[str, Trace],
    request: ReplayRequest,
    *,
    targets: str | None = None,
    baseline: str | None = None,
    quiet: bool = False,
) -> RunResult:
    """Traces on one network (the `transitsim replay` question), in this process.

    request: the replay asked of every trace (its network and options); a replica per site
    applies to the local-SGD traces, the others are replayed as trained (sites.replicas_for).
    targets: a spec for metrics.parse_targets ("2.7,final:A"); None: the baseline's final loss
    when a baseline is named, else no time-to-target (timeline only).
    """
    network = request.network
    if baseline is not None:  # a typo is bad input, not a note beside a table without speed-ups
        resolve_config(baseline, {trace.config_name: trace.variant for trace in traces.values()})
    if targets is None and baseline is not None:
        targets = f"final:{baseline}"
    target_values = parse_targets(targets, list(traces.values())) if targets else []
    target_names = [item.strip() for item in targets.split(",")] if targets else []
    if request.replicas == "site" and all(
        replicas_for(trace, "site") == "worker" for trace in traces.values()
    ):  # asked of no trace it can apply to: bad input, not a silent replay as trained
        raise TransitsimError(
            "--replicas site places a local-SGD run's replicas one to a datacentre; none of "
            f"{', '.join(traces)} is a local-SGD trace (H, H-s, L)"
        )
    jobs = []
    for index, (name, trace) in enumerate(traces.items()):
        replicas = replicas_for(trace, request.replicas)
        if replicas == "site":  # a layout the network cannot hold is bad input: one line, exit 2
            check_site_layout(trace, network)
        recorded = index == 0 and (request.replicas == "worker" or replicas == "worker")
        job_request = dataclasses.replace(request, replicas=replicas, record_step=recorded)
        jobs.append(ReplayJob(index=index, trace_name=name, request=job_request))
    results = run_jobs(traces, jobs, serial=True, quiet=quiet)
    title = f"transitsim: replay on {network.name}"
    extra_workers = extrapolated_workers(traces, [network.workers])
    if extra_workers:
        title += f" ({extrapolation_text(None, extra_workers)})"
    result = assemble(
        results,
        traces,
        target_values,
        target_names,
        baseline,
        title=title,
    )
    result.extrapolation = extrapolation_text(None, extra_workers, compact=True) or None
    return result


# ---------------------------------------------------------------------------------------------
# Results -> tables


def assemble(
    results: list[JobResult],
    traces: dict[str, Trace],
    targets: list[float],
    target_names: list[str],
    baseline: str | None,
    *,
    title: str,
    own_labels: dict[str, str] | None = None,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> RunResult:
    """The run's tables from its job results (failed jobs are listed, not tabulated). The
    summary carries the decision table's call and winner at each point (analysis/decision.py,
    at this tie margin), and the crossovers are read from them."""
    done = [r for r in results if r.ok]
    failures = [r for r in results if not r.ok]
    if not done:
        raise JobsFailed(failures)
    params = list(dict.fromkeys(key for r in done for key in r.job.params))
    timeline = pd.concat([r.timeline for r in done], ignore_index=True)
    rows = [len(r.timeline) for r in done]
    for key in params:
        values = [r.job.params.get(key) for r in done]
        timeline[key] = pd.Series(np.repeat(np.array(values, dtype=object), rows)).astype(
            "float64" if all(is_number(v) or v is None for v in values) else "object"
        )
    notes = list(dict.fromkeys(n for r in done for n in r.timeline.attrs.get("notes", [])))
    timeline.attrs = {"notes": notes}
    metas = {trace.config_name: trace.meta for trace in traces.values()}
    labels = config_labels(metas) | (own_labels or {})
    labels, hardware_notes = marked_labels(labels, traces.values())
    notes[:0] = hardware_notes  # first: they change what a spread means
    if baseline is not None and targets:
        replayed = dict(zip(timeline["config"], timeline["variant"], strict=True))
        try:
            resolve_config(baseline, replayed)
        except TransitsimError as exc:  # e.g. every baseline job failed: keep the rest
            notes.append(f"no speed-ups: baseline {baseline!r}: {exc}")
            baseline = None
    summary = summarise(timeline, params, targets, baseline, labels) if targets else no_summary()
    summary = decide(summary, params, labels, tie_margin)
    return RunResult(
        title=title,
        timeline=timeline,
        summary=summary,
        ladder=ladder(list(traces.values()), targets) if targets else pd.DataFrame(),
        crossovers=grid_crossovers(summary, params, labels) if targets else pd.DataFrame(),
        link_util=link_utilisation(
            (r.job.network_name, r.job.trace_name, r.step_events) for r in done
        ),
        step_events=next((r.step_events for r in done if r.step_events is not None), None),
        labels=labels,
        targets=targets,
        target_names=target_names,
        params=params,
        failures=failures,
        notes=notes,
        tie_margin=tie_margin,
        measured_step_s=measured_step_times(list(traces.values())),
    )


# ---------------------------------------------------------------------------------------------
# Writing
