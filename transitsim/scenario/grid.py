"""A grid (a base network and lists of values for its keys) -> one network per combination."""

import copy
import itertools
import json
import math
from typing import Any

from pydantic import BaseModel, ValidationError

from transitsim.base.errors import TransitsimError
from transitsim.scenario.models import NetworkPoint, Scenario
from transitsim.scenario.network_models import MAX_GRID_POINTS, NetworkModel
from transitsim.scenario.specs import network_spec, placement_of
from transitsim.scenario.yaml_source import (
    KeyPathIssue,
    descend,
    fields_of,
    first_error,
    format_path,
    is_dict,
)


def _sweep_key_error(key: str) -> str | None:
    """Why `key` is not a dotted path into a network (None when it is)."""
    parts = key.split(".")
    if parts[0] in ("name", "preset", "description"):
        return f"{parts[0]} cannot be swept"
    models: list[Any] = [NetworkModel]
    for index, part in enumerate(parts):
        fields = fields_of(models)
        if part not in fields and not any(is_dict(m) for m in models):
            prefix = ".".join(parts[:index]) or "a network"
            allowed = ", ".join(sorted(fields))
            return f'unknown key "{part}" in {prefix} (allowed: {allowed})'
        models = descend(models, part)
    return None


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `raw` with the dotted `key` set (creating mappings on the way)."""
    result = copy.deepcopy(raw)
    node = result
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)
    return result


def _get_dotted(model: Any, key: str) -> Any:
    value = model
    for part in key.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part, None)
    return value


def _point_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def expand_grid(scenario: Scenario) -> list[NetworkPoint]:
    grid = scenario.grid
    assert grid is not None
    raw = grid._raw_network
    raw = {"preset": raw} if isinstance(raw, str) else raw
    base_name = grid.network.name or "grid"
    count = math.prod(len(values) for values in grid.sweep.values())
    if count > MAX_GRID_POINTS:  # first: checking each value of a huge grid takes long
        raise KeyPathIssue(
            ("grid", "sweep"), f"{count:,} points is too many (at most {MAX_GRID_POINTS:,})"
        )
    for key, values in grid.sweep.items():
        problem = _sweep_key_error(key)
        if problem:
            raise KeyPathIssue(("grid", "sweep", key), problem)
        for index, value in enumerate(values):  # each value alone, so errors point at it
            candidate = _set_dotted(raw, key, value)
            try:
                NetworkModel.model_validate(candidate)
            except ValidationError as exc:
                inner, message = first_error(exc, NetworkModel, candidate)
                detail = message if inner in ("", key) else f"{inner}: {message}"
                raise KeyPathIssue(("grid", "sweep", key, index), detail) from None
    keys = list(grid.sweep)
    # a key swept over mappings (a background {csv: FILE}) is one table column: every value as
    # the text written in the sweep, so the column holds one kind (numbers beside text failed
    # to write as Parquet, after the whole run)
    textual = {key for key in keys if any(isinstance(v, dict) for v in grid.sweep[key])}
    points = []
    for combination in itertools.product(*(grid.sweep[key] for key in keys)):
        candidate = raw
        for key, value in zip(keys, combination, strict=True):
            candidate = _set_dotted(candidate, key, value)
        label = ", ".join(f"{k}={_point_text(v)}" for k, v in zip(keys, combination, strict=True))
        name = f"{base_name}[{label}]"
        try:
            model = NetworkModel.model_validate(candidate)
        except ValidationError as exc:
            inner, message = first_error(exc, NetworkModel, candidate)
            raise KeyPathIssue(("grid", "sweep"), f"point {label}: {inner}: {message}") from None
        params = {}
        for key, value in zip(keys, combination, strict=True):
            parsed = _get_dotted(model, key)
            if key in textual:
                params[key] = _point_text(value)
            else:
                params[key] = value if isinstance(parsed, BaseModel) else parsed
        try:
            placement = placement_of(model, scenario.placement, ())
        except KeyPathIssue as issue:
            inner = format_path(issue.path)
            raise KeyPathIssue(
                ("grid", "sweep"), f"point {label}: {inner}: {issue.message}"
            ) from None
        try:
            spec = network_spec(model, name, scenario.base_dir)
        except TransitsimError as exc:  # a link's background CSV
            raise KeyPathIssue(("grid", "network"), str(exc)) from None
        points.append((name, spec, params, placement))
    return points
