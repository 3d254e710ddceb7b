"""`load_scenario`: read, validate and resolve a scenario file into one `Scenario`.

Every user mistake becomes one `TransitsimError` line naming the file, the line and the key path,
e.g. `quickstart.yaml:12: networks[0].host_link.rate: expected a rate like "200 Gb/s", got "fast"`.
"""

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from transitsim.base.errors import TransitsimError
from transitsim.base.units import show_value
from transitsim.replay.fitted import read_fitted
from transitsim.scenario.models import Scenario
from transitsim.scenario.networks import expand_networks
from transitsim.scenario.traces import check_names, resolve_traces
from transitsim.scenario.yaml_source import (
    KeyPathIssue,
    error_message,
    format_path,
    line_of,
    read_yaml,
    visible_path,
)


def load_scenario(path: Path | str) -> Scenario:
    """Read, validate and resolve a scenario file; any mistake is one TransitsimError line."""
    path = Path(path)
    node = None

    def fail(where: tuple[Any, ...], message: str, line: int | None = None) -> TransitsimError:
        key = format_path(where)
        prefix = f"{path}:{line or line_of(node, where)}:"
        return TransitsimError(f"{prefix} {key}: {message}" if key else f"{prefix} {message}")

    try:
        node, data = read_yaml(path)  # keys checked too (check_keys)
    except KeyPathIssue as issue:
        raise fail(issue.path, issue.message, issue.line) from None
    if not isinstance(data, dict):
        raise fail(
            (), f"a scenario is a mapping of keys (traces, networks, ...), got {show_value(data)}"
        )
    if "name" not in data:
        data = {"name": path.stem, **data}
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors = [(visible_path(e["loc"], data, Scenario, e["type"]), e) for e in exc.errors()]
        # by line; on one line an unknown key first (a typo also makes a key "missing")
        errors.sort(key=lambda item: (line_of(node, item[0]), item[1]["type"] != "extra_forbidden"))
        where, first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise fail(where, error_message(first, Scenario) + more) from None
    scenario._source_path = path
    try:
        scenario._expanded = expand_networks(scenario)
        scenario._trace_files = resolve_traces(scenario, path.parent)
        check_names(scenario, scenario._trace_files)
    except KeyPathIssue as issue:
        raise fail(issue.path, issue.message) from None
    if scenario.stragglers.from_ is not None:
        try:
            scenario._stragglers_fit = read_fitted(path.parent / scenario.stragglers.from_)
        except TransitsimError as exc:
            raise fail(("stragglers", "from"), str(exc)) from None
    return scenario
