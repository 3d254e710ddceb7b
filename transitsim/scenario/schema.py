"""The JSON Schema of scenario files (editors validate and complete YAML with it)."""

from typing import Any

from transitsim.network.presets import preset_names
from transitsim.scenario.models import Scenario


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
    network["properties"]["preset"] = {"anyOf": [preset_name, {"type": "null"}], "default": None}
    defs["GridModel"]["properties"]["network"] = {
        "anyOf": [preset_name, {"$ref": "#/$defs/NetworkModel"}]
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://transitsim.invalid/scenario.schema.json",
        "title": "transitsim scenario",
        **schema,
    }
