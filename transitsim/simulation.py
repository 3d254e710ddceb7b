"""The notebook API: traces x networks -> one timeline, a time-to-loss summary and link use.

    import transitsim
    result = transitsim.simulate("traces/published/tinystories-gpu/*adamw*", "8x200g-switch",
                                 targets=[3.3])
    result.summary        # the same table `transitsim run` writes to summary.csv
    result.verdict        # the answer in words, one sentence per target

Traces: files, folders, globs or Trace objects. Networks: NetworkSpec objects, preset names
("8x200g-switch", see transitsim.preset_names()) or mappings written as in a scenario file
({"preset": "2dc-wan", "wan_link": {"rate": "10 Gb/s"}}). Every (trace, network) pair is
replayed (transitsim.replay.replay, with the options of transitsim.ReplayRequest) and the
timelines are stacked; the summary is transitsim.analysis.summary's, so the API and the CLI's
CSV are one table.
"""

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from transitsim.analysis.decision import decide
from transitsim.analysis.hardware import marked_labels
from transitsim.analysis.metrics import (
    check_target,
    check_target_count,
    parse_targets,
)
from transitsim.analysis.preview import preview_html, preview_text, what_else
from transitsim.base.errors import TransitsimError
from transitsim.network import NetworkSpec
from transitsim.replay.replay import TIMELINE_COLUMNS, replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import Trace, find_traces, read_trace, validate_trace

GLOB_CHARS = "*?["


@dataclass(repr=False)
class SimulationResult:
    """timeline: one row per (trace row, network); summary: steps, time and bytes to each target
    per (configuration, network, target), with speed-ups against the baseline and each row's
    call at its point (analysis/decision.py); link_stats: per (run, network, link) use over the
    run; notes: caveats (extrapolation, fallbacks, seeds on different hardware)."""

    timeline: pd.DataFrame
    summary: pd.DataFrame
    link_stats: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> list[str]:
        """Which configuration reaches each target first, in words (transitsim.analysis.verdict)."""
        from transitsim.analysis.verdict import verdict_sentences

        return verdict_sentences(self.summary, [], self.labels)

    def _more(self) -> str:
        runs = self.timeline["run"].nunique()
        return what_else(self.summary, runs, self.notes, ".summary, .timeline, .link_stats, .notes")

    def __repr__(self) -> str:
        """The verdict, then the summary's head: what a terminal or notebook shows first."""
        return preview_text(self.verdict, self.notes, self.summary, self._more())

    def _repr_html_(self) -> str:
        """A notebook's view: the verdict, the notes, then the summary's head as a table."""
        return preview_html(self.verdict, self.notes, self.summary, self._more())


def simulate(
    traces: Iterable[str | Path | Trace] | str | Path | Trace,
    networks: Iterable[NetworkSpec | str | dict] | NetworkSpec | str | dict,
    *,
    targets: list[float] | str | None = None,
    baseline: str | None = None,
    **options: Any,
) -> SimulationResult:
    """Replay every trace on every network and summarise time-to-loss against `baseline`.

    traces: trace files, folders of them, globs ("traces/x/*adamw*.parquet") or Trace objects.
    networks: NetworkSpec objects, preset names or scenario-style mappings. targets: losses, or a
    spec such as "3.5,final:A" (see metrics.parse_targets); None: the baseline's mean final
    loss. baseline: a variant id or configuration name (None: A when the traces hold an A run,
    else no speed-ups). options: the replay's, as transitsim.ReplayRequest declares them
    (compute, transform_at, sum_at, collective, stragglers, faults, scale_params, seed, overlap,
    bucket_bytes, ...), applied to every pair; transform_at is a placement for the optical
    variants E and E', or a {variant: placement} dict. Caveats (extrapolation, fallbacks) are in
    `notes` and in the tables' attrs["notes"]; the summary's `extrapolated` column marks what
    they concern.
    """
    _check_options(options)
    loaded = _load(traces)
    if baseline is None and any(trace.variant == "A" for trace in loaded):
        baseline = "A"
    target_list = _targets(targets, loaded, baseline)
    network_list = _networks(networks)
    timelines: list[pd.DataFrame] = []
    links: list[pd.DataFrame] = []
    notes: list[str] = []
    for network in network_list:
        request = ReplayRequest(network=network, **options)
        for trace in loaded:
            result = replay(trace, request)
            timelines.append(result.timeline)
            links.append(result.link_stats)
            notes.extend(result.timeline.attrs.get("notes", []))
    notes = list(dict.fromkeys(notes))
    timeline = pd.concat(timelines, ignore_index=True)[TIMELINE_COLUMNS]
    link_stats = pd.concat(links, ignore_index=True)
    timeline.attrs = {"notes": notes, "extrapolated": bool(timeline["extrapolated"].any())}
    from transitsim.analysis.summary import summarise  # the CLI's summary: one table
    from transitsim.base.tables import config_labels

    labels = config_labels({trace.config_name: trace.meta for trace in loaded})
    labels, hardware_notes = marked_labels(labels, loaded)
    notes = [*hardware_notes, *notes]
    timeline.attrs["notes"] = notes
    summary = decide(summarise(timeline, [], target_list, baseline, labels), [], labels)
    summary.attrs = dict(timeline.attrs)
    return SimulationResult(
        timeline=timeline, summary=summary, link_stats=link_stats, notes=notes, labels=labels
    )


def _check_options(options: dict[str, Any]) -> None:
    """Only a replay's own options (those a ReplayRequest declares, the network aside)."""
    known = [f.name for f in dataclasses.fields(ReplayRequest) if f.name != "network"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TransitsimError(
            f"simulate: unknown option(s) {', '.join(unknown)}; a replay takes {', '.join(known)}"
        )
    if "compute" in options and options["compute"] is None:
        del options["compute"]  # the default model, as replay's own default
    if "faults" in options and options["faults"] is not None:
        options["faults"] = tuple(options["faults"])
    elif "faults" in options:
        options["faults"] = ()


def _targets(
    targets: list[float] | str | None, traces: list[Trace], baseline: str | None
) -> list[float]:
    """Loss targets: as given, parsed from a spec string, or the baseline's mean final loss."""
    if targets is None:
        if baseline is None:
            raise TransitsimError("simulate: give targets (or a baseline whose final loss to use)")
        return parse_targets(f"final:{baseline}", traces)
    if isinstance(targets, str):
        return parse_targets(targets, traces)
    try:
        items = check_target_count(list(targets))  # the CLI's bound, before any is checked
        values = [check_target(target) for target in items]
    except TypeError:
        raise TransitsimError(f"simulate: targets must be losses, got {targets!r:.200}") from None
    except TransitsimError as exc:
        raise TransitsimError(f"simulate: {exc}") from None
    if not values:
        raise TransitsimError("simulate: targets is empty")
    return values


def _load(traces: Iterable[str | Path | Trace] | str | Path | Trace) -> list[Trace]:
    """Trace objects from files, folders and Trace objects; a run given twice is an error,
    found before any file is read (a list of ten million copies is refused at once)."""
    if isinstance(traces, str | Path | Trace):
        items = [traces]
    elif isinstance(traces, Iterable):
        items = list(traces)
    else:
        raise TransitsimError(
            "simulate: traces must be a path, a folder, a glob, a Trace or a list of them, "
            f"got {type(traces).__name__}"
        )
    given: list[Trace | Path] = []
    for item in items:
        if isinstance(item, Trace):
            given.append(item)
        elif isinstance(item, str | Path):
            given.extend(_expand(item))
        else:
            raise TransitsimError(f"traces: expected a path or a Trace, got {item!r}")
    if not given:
        raise TransitsimError("simulate: no traces given (or the folders hold no .parquet files)")
    _refuse_repeats([_given_name(item) for item in given])
    loaded = [
        validate_trace(item) if isinstance(item, Trace) else read_trace(item) for item in given
    ]
    _refuse_repeats([trace.name for trace in loaded])  # one run in two files
    return loaded


def _given_name(item: Trace | Path) -> str:
    """A Trace's run name, or a file's resolved path: what makes two items the same run."""
    return item.name if isinstance(item, Trace) else str(Path(item).resolve())


def _refuse_repeats(names: list[str]) -> None:
    seen: set[str] = set()
    repeated = sorted({name for name in names if name in seen or seen.add(name)})
    if repeated:
        shown = ", ".join(repeated[:5]) + (
            f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
        )
        raise TransitsimError(f"simulate: run(s) given more than once: {shown}")


def _expand(item: str | Path) -> list[Path]:
    """A file, a folder (its traces) or a glob (sorted matches; none is an error)."""
    text = str(item)
    if any(char in text for char in GLOB_CHARS) and not Path(text).exists():
        base = Path(text).anchor or "."
        pattern = text[len(Path(text).anchor) :] if Path(text).anchor else text
        matches = sorted(Path(base).glob(pattern))
        if not matches:
            raise TransitsimError(f"traces: no trace file matches {text!r}")
        return find_traces(matches)
    return find_traces([item])


def _network(item: object) -> NetworkSpec:
    from transitsim.scenario import network_from_dict, network_preset

    if isinstance(item, NetworkSpec):
        return item
    if isinstance(item, str):
        return network_preset(item)
    if isinstance(item, dict):
        return network_from_dict(item)
    raise TransitsimError(
        f"networks: expected a NetworkSpec, a preset name or a mapping, got {item!r}"
    )


def _networks(
    networks: Iterable[NetworkSpec | str | dict] | NetworkSpec | str | dict,
) -> list[NetworkSpec]:
    single = isinstance(networks, NetworkSpec | str | dict)
    items = [_network(item) for item in ([networks] if single else list(networks))]
    if not items:
        raise TransitsimError("simulate: no networks given")
    names = [network.name for network in items]
    if len(set(names)) != len(names):
        raise TransitsimError(f"simulate: network names must differ, got {names}")
    return items
