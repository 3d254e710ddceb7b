"""A network named on the command line: a preset or a YAML file written as a scenario's
network, with `--set KEY=VALUE` changes applied as a scenario grid would apply them.

`transitsim replay --network 2dc-wan --set wan_link.rate="100 Gb/s"` reads as the scenario
network `{preset: 2dc-wan, wan_link: {rate: 100 Gb/s}, name: "2dc-wan[wan_link.rate=100 Gb/s]"}`.
"""

import json
from pathlib import Path
from typing import Any

import yaml

from transitsim.base.errors import TransitsimError
from transitsim.scenario.presets import preset_names
from transitsim.scenario.yaml_source import (
    KeyPathIssue,
    check_expanded_size,
    format_path,
    read_yaml,
)


def parse_set(item: str) -> tuple[str, Any]:
    """'host_link.rate=100 Gb/s' -> ('host_link.rate', '100 Gb/s'); values read as YAML, so
    `workers=16` is a number and `switch.aggregator=true` a bool."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise TransitsimError(f'--set {item!r}: expected KEY=VALUE, e.g. host_link.rate="100 Gb/s"')
    if not text.strip():
        return key, ""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return key, text  # not YAML: the text as written
    except RecursionError:
        raise TransitsimError(f"--set {key}: the value is nested too deeply") from None
    if node is not None:
        check_expanded_size(node, f"--set {key}")  # an alias bomb would hang what reads it
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as exc:  # a tag safe_load refuses (!!python/object/apply:...)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise TransitsimError(f"--set {key}: not a plain YAML value ({problem})") from None
    except RecursionError:
        raise TransitsimError(f"--set {key}: the value is nested too deeply") from None


def _as_text(value: Any) -> str:
    """A --set value as it reads in a network name: text as written, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set `key` ("a.b.c") in the nested mapping, creating mappings on the way."""
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def network_description(network: str, settings: list[str]) -> dict[str, Any]:
    """The network as a scenario would write it: a preset by name, or a YAML file's mapping,
    with --set keys applied (named after them unless the description names itself)."""
    path = Path(network)
    if network in preset_names():
        raw: Any = {"preset": network}
        name = network
    elif path.is_file():
        try:  # bounded as a scenario is: size, alias expansion, keys as text and once each
            _, raw = read_yaml(path, what="network")
        except KeyPathIssue as issue:
            key = format_path(issue.path)
            raise TransitsimError(f"{path}: {key + ': ' if key else ''}{issue.message}") from None
        raw = {"preset": raw} if isinstance(raw, str) else raw
        if not isinstance(raw, dict):
            raise TransitsimError(f"{path}: a network is a mapping of keys (or a preset name)")
        name = raw.get("name") or raw.get("preset") or path.stem
    else:
        raise TransitsimError(
            f"--network {network!r}: neither a preset ({', '.join(preset_names())}) nor a file"
        )
    pairs = [parse_set(item) for item in settings]
    for key, value in pairs:
        _set_dotted(raw, key, value)
    if "name" not in raw or pairs:
        changed = ", ".join(f"{key}={_as_text(value)}" for key, value in pairs)
        raw["name"] = f"{name}[{changed}]" if changed else name
    return raw
