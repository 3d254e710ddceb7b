"""Scenario files' YAML plumbing, so that every mistake can be reported as one line.

`transitsim.scenario` validates the data with pydantic; this module reads the file, checks its keys,
finds the line of a key path and puts pydantic's errors in our words, which `load_scenario` joins
into e.g.
`quickstart.yaml:12: networks[0].host_link.rate: expected a rate like "200 Gb/s", got "fast"`.
"""

import json
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from transitsim.base.errors import TransitsimError
from transitsim.base.units import show_value

_TEXT_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_YAML_BYTES = 1 << 20  # the shipped scenarios are a few kB; a 45 MB list took 3.6 GB
MAX_YAML_NODES = 200_000  # values after alias expansion


class KeyPathIssue(Exception):
    """A problem found after pydantic validation, with the key path it belongs to."""

    def __init__(self, path: tuple[str | int, ...], message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.line = line  # when the path cannot find it (a key that is not text)


# ---------------------------------------------------------------------------------------------
# YAML with line numbers


def read_yaml(path: Path, what: str = "scenario") -> tuple[yaml.Node | None, Any]:
    """The YAML's node tree (for line numbers) and its data.

    Bounded before anything is built: the bytes read (at most MAX_YAML_BYTES + 1, so a device
    or pipe that never ends cannot hang it either), and the size the document would have with
    every alias expanded (nine levels of nine aliases are 387 million nodes), so no file can
    hang the loader. Keys are checked (`check_keys`, which raises KeyPathIssue) on the tree as
    written, before merge keys (<<) are flattened into it. `what` names the file in errors."""
    try:
        size = path.stat().st_size if path.is_file() else 0
        if size > MAX_YAML_BYTES:
            raise TransitsimError(
                f"{path}: {size:,} bytes is too large for a {what} (at most {MAX_YAML_BYTES:,})"
            )
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise TransitsimError(
                f"{path}: more than {MAX_YAML_BYTES:,} bytes is too large for a {what}"
            )
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise TransitsimError(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        raise TransitsimError(f"{path}: is a folder, not a {what} file") from None
    except UnicodeDecodeError:
        raise TransitsimError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise TransitsimError(f"{path}: cannot read ({exc.strerror})") from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is not None:
            check_expanded_size(node, path)
            check_keys(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"{mark.line + 1}:" if mark else ""
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise TransitsimError(f"{path}:{line} invalid YAML: {problem}") from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TransitsimError(f"{path}: invalid YAML: {first}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return node, data


def check_expanded_size(root: yaml.Node, path: Path | str) -> None:
    """Raise when the document, aliases expanded, exceeds MAX_YAML_NODES or refers to itself.

    Aliases share node objects, so sizes are summed once per node (linear in the file)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_YAML_NODES:
                raise TransitsimError(
                    f"{path}: the document expands (aliases included) to more than "
                    f"{MAX_YAML_NODES:,} values (an alias bomb?)"
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            line = node.start_mark.line + 1
            raise TransitsimError(f"{path}:{line}: invalid YAML: an alias refers to itself")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_keys(node: yaml.Node | None, path: tuple[str | int, ...] = ()) -> None:
    """Keys must be text and appear once (YAML would silently keep the last of two).

    A merge key (<<) brings in keys that a key written beside it may override, as YAML says:
    only keys written in the mapping itself are compared."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # the merged mapping is checked where it is written (its anchor)
            if key_node.tag != _TEXT_TAG:
                line = key_node.start_mark.line + 1
                raise KeyPathIssue(
                    path, f"key {show_value(key_node.value)} must be text (quote it)", line
                )
            if key_node.value in seen:
                line = key_node.start_mark.line + 1
                raise KeyPathIssue((*path, key_node.value), "duplicate key", line)
            seen.add(key_node.value)
            check_keys(value_node, (*path, key_node.value))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            check_keys(item, (*path, index))


def line_of(node: yaml.Node | None, path: tuple[str | int, ...]) -> int:
    """The line of the deepest part of `path` present in the YAML (1 when nothing matches)."""
    line = node.start_mark.line + 1 if node is not None else 1
    for part in path:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    line, node = key_node.start_mark.line + 1, value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


# ---------------------------------------------------------------------------------------------
# Pydantic errors as key paths and messages in our words


def visible_path(
    loc: tuple[Any, ...], data: Any, root: type[BaseModel], error_type: str
) -> tuple[str | int, ...]:
    """Pydantic's error location without its union tags: only keys the user wrote or could."""
    shown: list[str | int] = []
    current, kinds = data, [root]
    for index, part in enumerate(loc):
        is_key = (
            isinstance(part, int)
            or part in fields_of(kinds)
            or any(is_dict(kind) for kind in kinds)
        )
        kinds = descend(kinds, part)
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        elif index == len(loc) - 1 and (is_key or error_type == "extra_forbidden"):
            current = None  # a missing key, or an unknown one
        else:
            continue  # a union member's tag, not a key
        shown.append(part)
    return tuple(shown)


def format_path(path: tuple[Any, ...]) -> str:
    """('networks', 0, 'host_link') -> 'networks[0].host_link'; odd keys in ["..."]."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return text


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types behind Annotated / unions / Optional."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, type(int | None)):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    return [annotation]


def _is_model(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel)


def is_dict(kind: Any) -> bool:
    return typing.get_origin(kind) is dict


def fields_of(kinds: list[Any]) -> set[str]:
    return {name for kind in kinds if _is_model(kind) for name in kind.model_fields}


def descend(kinds: list[Any], part: Any) -> list[Any]:
    """The types one step further along an error location (tags keep their model)."""
    result: list[Any] = []
    for kind in kinds:
        if _is_model(kind) and part in kind.model_fields:
            result.extend(_unwrap(kind.model_fields[part].annotation))
        elif _is_model(kind) and isinstance(part, str):
            if any(part in typing.get_args(f.annotation) for f in kind.model_fields.values()):
                result.append(kind)  # discriminator tag of this union member
        elif typing.get_origin(kind) is list and isinstance(part, int):
            result.extend(_unwrap(typing.get_args(kind)[0]))
        elif is_dict(kind) and isinstance(part, str):
            result.extend(_unwrap(typing.get_args(kind)[1]))
    return result


def _allowed_keys(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    kinds: list[Any] = [root]
    for part in loc:
        kinds = descend(kinds, part)
    return sorted(fields_of(kinds))


def error_message(error: Any, root: type[BaseModel]) -> str:
    """One pydantic error in our words."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(root, error["loc"][:-1]))
        return f"unknown key (allowed: {allowed})" if allowed else "unknown key"
    if kind == "missing":
        return "missing required key"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"]))
    if kind == "literal_error":
        return f"expected {ctx['expected']}, got {show_value(value)}"
    if kind == "union_tag_invalid":
        return (
            f"unknown {ctx['discriminator'].strip(chr(39))} {show_value(ctx['tag'])} "
            f"(expected {ctx['expected_tags']})"
        )
    if kind == "union_tag_not_found":
        return f"missing required key {ctx['discriminator'].strip(chr(39))}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping of keys, got {show_value(value)}"
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length', 1)} item(s), got {show_value(value)}"
    if kind == "list_type":
        return f"expected a list, got {show_value(value)}"
    message = str(error["msg"])
    return f"{message[:1].lower()}{message[1:]}, got {show_value(value)}"


def first_error(exc: ValidationError, root: type[BaseModel], data: Any) -> tuple[str, str]:
    """(key path, message) of the first pydantic error, for messages without line numbers."""
    error = exc.errors()[0]
    shown = visible_path(error["loc"], data, root, error["type"])
    return format_path(shown), error_message(error, root)
