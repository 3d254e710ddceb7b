"""A scenario's trace entries -> trace files (metadata read), and the names that refer to them."""

import glob
import re
from pathlib import Path

from transitsim.errors import TransitsimError
from transitsim.metrics import resolve_config
from transitsim.scenario.models import Scenario, TraceFile
from transitsim.scenario.yaml_source import KeyPathIssue
from transitsim.trace import config_name, read_meta

_GLOB_CHARS = re.compile(r"[*?\[]")


def resolve_traces(scenario: Scenario, base_dir: Path) -> list[TraceFile]:
    files: list[TraceFile] = []
    seen: set[Path] = set()
    for index, entry in enumerate(scenario.traces):
        where = ("traces", index, "path")
        pattern = Path(entry.path).expanduser()
        pattern = pattern if pattern.is_absolute() else base_dir / pattern
        if _GLOB_CHARS.search(entry.path):
            matches = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True))
            matches = [p for p in matches if p.is_file()]
            if not matches:
                raise KeyPathIssue(where, f"no trace file matches {pattern}")
        elif pattern.is_dir():
            matches = sorted(pattern.glob("*.parquet"))
            if not matches:
                raise KeyPathIssue(where, f"no *.parquet trace in folder {pattern}")
        elif not pattern.exists():
            raise KeyPathIssue(where, f"trace file not found: {pattern}")
        else:
            matches = [pattern]
        entry_configs = set()
        for path in matches:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                meta = read_meta(path)
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
    return files


def check_names(scenario: Scenario, files: list[TraceFile]) -> None:
    """Targets 'final:X' and the baseline must name one config: its name, its label, a variant
    with a single config, or a unique part of a name (as `transitsim.metrics` resolves them)."""
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
