"""A scenario's trace entries -> trace files (read and validated), and names that refer to them."""

import contextlib
import glob
import itertools
import os
import re
from pathlib import Path

from transitsim.analysis.metrics import resolve_config
from transitsim.base.errors import TransitsimError
from transitsim.scenario.models import Scenario, TraceFile
from transitsim.scenario.yaml_source import KeyPathIssue
from transitsim.traces.format import config_name, read_trace

MAX_TRACE_FILES = 10_000
MAX_GLOB_PATHS = 100_000  # a "**" over a home folder would otherwise walk it all
_GLOB_CHARS = re.compile(r"[*?\[]")


def _matches(text: str, base_dir: Path) -> list[Path]:
    """The trace files one entry names: a glob's matches, a folder's *.parquet, or the file."""
    if "\x00" in text:
        raise ValueError("the path holds a NUL character")
    pattern = Path(text).expanduser()
    pattern = pattern if pattern.is_absolute() else base_dir / pattern
    if _GLOB_CHARS.search(text):
        found = itertools.islice(glob.iglob(str(pattern), recursive=True), MAX_GLOB_PATHS + 1)
        matches = sorted(Path(p) for p in found)
        if len(matches) > MAX_GLOB_PATHS:
            raise ValueError(f"the pattern matches more than {MAX_GLOB_PATHS:,} paths")
        matches = [p for p in matches if p.is_file()]
        if not matches:
            raise ValueError(f"no trace file matches {pattern}")
    elif pattern.is_dir():
        matches = sorted(pattern.glob("*.parquet"))
        if not matches:
            raise ValueError(f"no *.parquet trace in folder {pattern}")
    elif not pattern.exists():
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.stat(pattern)  # a name too long says so (OSError); a missing one is not found
        raise ValueError(f"trace file not found: {pattern}")
    else:
        matches = [pattern]
    return matches


def resolve_traces(scenario: Scenario, base_dir: Path) -> list[TraceFile]:
    files: list[TraceFile] = []
    seen: set[Path] = set()
    for index, entry in enumerate(scenario.traces):
        where = ("traces", index, "path")
        try:
            matches = _matches(entry.path, base_dir)
        except OSError as exc:  # a path too long for the system, a folder we may not read
            raise KeyPathIssue(where, f"cannot read {entry.path[:80]!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise KeyPathIssue(where, str(exc)) from None
        if len(matches) > MAX_TRACE_FILES:
            raise KeyPathIssue(
                where, f"{len(matches):,} trace files match (at most {MAX_TRACE_FILES:,})"
            )
        entry_configs = set()
        for path in matches:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                meta = read_trace(path).meta  # the step table too: run would read it
            except TransitsimError as exc:
                raise KeyPathIssue(where, str(exc)) from None
            config = config_name(meta["name"])
            entry_configs.add(config)
            files.append(
                TraceFile(
                    path=path,
                    name=meta["name"],
                    config=config,
                    variant=meta["variant"],
                    seed=meta["seed"],
                    workers=meta["workers"],
                    n_params=meta["n_params"],
                    label=entry.label,
                    replicas=entry.replicas,
                )
            )
        if entry.label and len(entry_configs) > 1:
            configs = ", ".join(sorted(entry_configs))
            raise KeyPathIssue(
                ("traces", index, "label"),
                f'label "{entry.label}" would name several configs ({configs}): '
                "give each its own entry",
            )
    labels: dict[str, str] = {}
    for trace in files:
        if trace.label and labels.setdefault(trace.config, trace.label) != trace.label:
            raise KeyPathIssue(
                ("traces",),
                f'config "{trace.config}" has two labels: '
                f'"{labels[trace.config]}" and "{trace.label}"',
            )
    owners: dict[str, str] = {}
    for config, label in labels.items():  # two rows "SAME", and `baseline: SAME` picks one
        other = owners.setdefault(label, config)
        if other != config:
            raise KeyPathIssue(
                ("traces",), f'label "{label}" names two configs ("{other}" and "{config}")'
            )
        if label in variants_of(files) and label != config:
            raise KeyPathIssue(
                ("traces",),
                f'label "{label}" of config "{config}" is the name of another config',
            )
    return files


def variants_of(files: list[TraceFile]) -> dict[str, str]:
    """Config name -> variant id of the resolved traces."""
    return {trace.config: trace.variant for trace in files}


def check_names(scenario: Scenario, files: list[TraceFile]) -> None:
    """Targets 'final:X' and the baseline must name one config: its name, its label, a variant
    with a single config, or a unique part of a name (as `transitsim.analysis.metrics` resolves
    them)."""
    variants = {trace.config: trace.variant for trace in files}
    labels = {trace.label for trace in files if trace.label}
    queries = [
        (("targets", i), t[6:]) for i, t in enumerate(scenario.targets) if isinstance(t, str)
    ]
    if scenario.baseline is not None:
        queries.append((("baseline",), scenario.baseline))
    for where, query in queries:
        if query in labels:
            continue
        try:
            resolve_config(query, variants)
        except TransitsimError as exc:
            raise KeyPathIssue(where, str(exc)) from None
