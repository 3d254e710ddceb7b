"""The JSON Schema of scenario files (editors validate and complete YAML with it)."""

import json
from typing import Any

from transitsim.scenario.models import Scenario
from transitsim.scenario.presets import preset_names


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, including the shorthands pydantic cannot see."""
    schema = Scenario.model_json_schema(mode="validation")
    defs = schema["$defs"]
    schema["properties"]["traces"]["items"] = {
        "anyOf": [{"type": "string"}, {"$ref": "#/$defs/TraceEntry"}]
    }
    preset_name = {"type": "string", "enum": preset_names()}
    schema["properties"]["networks"]["items"] = {
        "anyOf": [preset_name, {"$ref": "#/$defs/NetworkModel"}]
    }
    network = defs["NetworkModel"]
    required = network.pop("required", [])
    network["anyOf"] = [{"required": ["preset"]}, {"required": required}]
    preset = network["properties"]["preset"]
    network["properties"]["preset"] = {
        "anyOf": [preset_name, {"type": "null"}],
        "default": None,
        "description": preset.get("description", ""),
    }
    grid_network = defs["GridModel"]["properties"]["network"]
    defs["GridModel"]["properties"]["network"] = {
        "anyOf": [preset_name, {"$ref": "#/$defs/NetworkModel"}],
        "description": grid_network.get("description", ""),
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://transitsim.invalid/scenario.schema.json",
        "title": "transitsim scenario",
        **schema,
    }


# ---------------------------------------------------------------------------------------------
# The scenario reference (docs/scenario-reference.md), generated from the same schema

REFERENCE_HEADER = """\
# Scenario reference

Every key a scenario file takes, generated from the scenario models
(`transitsim/scenario/models.py`, `network_models.py`) by

    transitsim scenario-reference -o docs/scenario-reference.md

(tests/test_scenario_reference.py fails when this file is stale). The same descriptions are in
the JSON Schema, `scenarios/scenario.schema.json` (`transitsim scenario-schema`), which editors
use to check and complete YAML. Quantities take units, written as text ("200 Gb/s", "5 ms",
"1,000 km", "25 MiB"); a key left out takes its default. The shipped scenarios in `scenarios/`
use most of them; `transitsim validate FILE` checks a file without running it.
"""


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _anchor(name: str) -> str:
    return name.lower()


def _limits(schema: dict[str, Any]) -> str:
    """ "1..1,024", "> 0", "at most 64 items" from a schema's bounds."""
    parts = []
    low = schema.get("minimum")
    high = schema.get("maximum")
    if "exclusiveMinimum" in schema:
        parts.append(f"> {schema['exclusiveMinimum']:,}")
    if low is not None and high is not None:
        parts.append(f"{low:,} to {high:,}")
    elif low is not None:
        parts.append(f">= {low:,}")
    elif high is not None:
        parts.append(f"<= {high:,}")
    if "exclusiveMaximum" in schema:
        parts.append(f"< {schema['exclusiveMaximum']:,}")
    if "minItems" in schema or "maxItems" in schema:
        parts.append(f"{schema.get('minItems', 0)} to {schema.get('maxItems', 'any')} items")
    if schema.get("minLength"):
        parts.append("not empty")
    return ", ".join(parts)


def _type(schema: dict[str, Any]) -> str:
    """A property's type in words: `"a" | "b"`, [LinkModel](#linkmodel), a list of them..."""
    name = _ref_name(schema)
    if name:
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"]
            text = " or ".join(dict.fromkeys(_type(option) for option in options))
            if "examples" in schema:
                text = _quantity(schema, text)
            return text
    if "enum" in schema:
        return " | ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        inner = schema.get("additionalProperties")
        return f"mapping of {_type(inner)}" if isinstance(inner, dict) else "mapping"
    if kind == "string" and "examples" in schema:
        return _quantity(schema, "text")
    if kind == "string" and "pattern" in schema:
        return f"text matching `{schema['pattern']}`"
    words = {"string": "text", "number": "number", "integer": "whole number", "boolean": "bool"}
    text = words.get(str(kind), "any value") if kind else "any value"
    limits = _limits(schema)
    return f"{text} ({limits})" if limits else text


def _quantity(schema: dict[str, Any], text: str) -> str:
    from transitsim.scenario.quantities import UNIT_HINTS

    example = schema["examples"][0]
    hint = UNIT_HINTS.get(example)
    return f"{hint}, e.g. `{example}`" if hint else f"{text}, e.g. `{example}`"


def _default(name: str, schema: dict[str, Any], model: dict[str, Any]) -> str:
    if name in model.get("required", []):
        return "required"
    unless = [alt["required"] for alt in model.get("anyOf", []) if "required" in alt]
    if any(name in keys and len(keys) > 1 for keys in unless):  # NetworkModel: or a preset
        others = [k for keys in unless if name not in keys for k in keys]
        return f"required unless {', '.join(f'`{k}`' for k in others)}"
    if "default" not in schema:
        return "its keys' defaults"
    return f"`{json.dumps(schema['default'])}`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _section(name: str, model: dict[str, Any], where: list[str]) -> list[str]:
    lines = [f"## {name}", ""]
    if where:
        lines += ["At " + ", ".join(f"`{w}`" for w in where) + ".", ""]
    if model.get("description"):
        lines += [" ".join(model["description"].split()), ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, prop in model.get("properties", {}).items():
        description = prop.get("description") or ""
        lines.append(
            f"| `{key}` | {_cell(_type(prop))} | {_cell(_default(key, prop, model))} "
            f"| {_cell(description)} |"
        )
    return [*lines, ""]


def _references(schema: Any) -> list[str]:
    """Model names a schema refers to, in order of appearance."""
    found: list[str] = []
    if isinstance(schema, dict):
        name = _ref_name(schema)
        if name:
            found.append(name)
        for value in schema.values():
            found += _references(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _references(value)
    return found


def _paths(schema: dict[str, Any]) -> dict[str, list[str]]:
    """Per model, the key paths it appears at ("networks[].host_link", "grid.network.host_link")."""
    defs = schema["$defs"]
    edges: dict[str, list[tuple[str, str]]] = {}  # model -> [(key as written, child model)]
    for name, model in [("Scenario", schema), *defs.items()]:
        for key, prop in model.get("properties", {}).items():
            suffix = {"array": "[]", "object": ".NAME"}.get(prop.get("type"), "")
            for child in dict.fromkeys(_references(prop)):
                edges.setdefault(name, []).append((key + suffix, child))
    paths: dict[str, list[str]] = {}

    def visit(name: str, prefix: str, depth: int) -> None:
        for key, child in edges.get(name, []):
            at = f"{prefix}{key}"
            if at not in paths.setdefault(child, []) and depth < 6:
                paths[child].append(at)
                visit(child, f"{at}.", depth + 1)

    visit("Scenario", "", 0)
    return paths


def scenario_reference_markdown() -> str:
    """docs/scenario-reference.md: a section per model, the top level first, then each model
    in the order the keys above it name it, with the key paths where it appears."""
    schema = scenario_json_schema()
    defs = schema["$defs"]
    order = ["Scenario"]
    for name in order:
        model = schema if name == "Scenario" else defs[name]
        order += [
            c for c in dict.fromkeys(_references(model.get("properties", {}))) if c not in order
        ]
    where = _paths(schema)
    lines = [REFERENCE_HEADER]
    lines += _section(
        "Scenario", {**schema, "description": "The top level of a scenario file."}, []
    )
    for name in [*order[1:], *(n for n in defs if n not in order)]:
        shown = where.get(name, [])
        more = len(shown) - 8
        lines += _section(name, defs[name], shown[:8] + ([f"... {more} more"] if more > 0 else []))
    return "\n".join(lines).rstrip() + "\n"
