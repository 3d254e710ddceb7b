"""How the report names things for a reader: networks, grid parameters, axes and their units.

Every chart keys its categories by the job's full network id, which is unique in a run; the
names made here are only what a reader sees on an axis or in a legend (hover shows the id
whole). Two networks whose shown names would be the same keep their ids instead, so a reader
never sees one name for two bars. Axes are named for people ("host link rate (Gb/s)", not
`host_link.rate`), in one unit per axis, and shares in %.
"""

import math
import os
import re
from typing import Any

import numpy as np

from transitsim.analysis.outcomes import short_names
from transitsim.base.units import key_unit

# Scenario keys as a reader says them. Unlisted keys: their last part, underscores as spaces.
PARAM_NAMES = {
    "host_link.rate": "host link rate",
    "host_link.length": "host link length",
    "host_link.latency": "host link latency",
    "wan_link.rate": "WAN rate",
    "wan_link.length": "WAN length",
    "wan_link.latency": "WAN latency",
    "wan_link.background": "WAN share held by other traffic",
    "pluggable.host_lane_rate": "host lane rate",
    "pluggable.line_rate": "line rate",
    "switch.aggregator": "switch sums",
    "switch.forwarding_latency": "switch latency",
    "placement.sum": "summed at",
    "placement.transform": "band made at",
    "workers": "workers",
    "oversubscription": "oversubscription",
    "collective": "collective",
    "overlap": "overlap",
}
# Shorter still, where a network's shown name says several values.
SHORT_NAMES = {
    "pluggable.host_lane_rate": "lane",
    "pluggable.line_rate": "line",
    "wan_link.background": "held",
}
# How a network's shown name says a value, where its name alone is clumsy.
PHRASES = {"workers": "{value} workers", "collective": "{value}"}
# Keys whose values are shares of 1, shown in %.
SHARE_KEYS = ("background", "keep", "efficiency", "mfu")
# Counts and ratios that carry no SI unit: the name says what they count.
PLAIN_UNITS = {"oversubscription": "x : 1"}
_BIT_RATES = ((1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"), (1.0, "b/s"))
_SECONDS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTES = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))
_GRID_POINT = re.compile(r"^(?P<base>[^\[]*)\[(?P<body>.*)\](?P<suffix>[^\]]*)$")
_ASSIGNMENT = re.compile(r",\s(?=[\w.]+=)")  # between "k=v" pairs; values may hold "1,000"


def param_name(key: str) -> str:
    """A scenario key as a reader says it: "host_link.rate" -> "host link rate"."""
    if key in PARAM_NAMES:
        return PARAM_NAMES[key]
    return key.rsplit(".", 1)[-1].replace("_", " ")


def is_share(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in SHARE_KEYS


def axis_unit(key: str, values: list[float]) -> tuple[str, float]:
    """(unit, divisor) one axis shows its key's values in: the largest prefix the smallest
    non-zero value reaches ("Gb/s" for 1 Gb/s .. 1.6 Tb/s), % for shares, "" for counts."""
    if is_share(key):
        return "%", 0.01
    last = key.rsplit(".", 1)[-1]
    if last in PLAIN_UNITS:
        return PLAIN_UNITS[last], 1.0
    unit = key_unit(key)
    finite = [abs(v) for v in values if isinstance(v, int | float) and math.isfinite(v) and v]
    smallest = min(finite) if finite else 1.0
    scales = {"b/s": _BIT_RATES, "s": _SECONDS, "B": _BYTES}.get(unit or "")
    if unit == "m":
        return ("km", 1e3) if smallest >= 1e3 else ("m", 1.0)
    if scales is None:
        return (unit or "", 1.0)
    for factor, name in scales:
        if smallest >= factor:
            return name, factor
    return scales[-1][1], scales[-1][0]


def number(value: float, digits: int = 4) -> str:
    """A tick number: four significant figures, thousands separated, no trailing zeros."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else "–"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    shown = f"{value:,.{decimals}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def axis_title(key: str, values: list[float]) -> str:
    """ "host link rate (Gb/s)", "WAN share held by other traffic (%)", "workers"."""
    unit, _ = axis_unit(key, values)
    return f"{param_name(key)} ({unit})" if unit else param_name(key)


def axis_ticks(key: str, values: list[float]) -> tuple[list[float], list[str]]:
    """Tick positions (the values themselves, SI) and their labels in the axis's unit."""
    _, divisor = axis_unit(key, values)
    ticks = sorted({float(v) for v in values if math.isfinite(float(v))})
    return ticks, [number(v / divisor) for v in ticks]


def value_text(key: str, value: Any, values: list[float] | None = None) -> str:
    """One grid value in its axis's unit, for a heatmap cell's axis ("10", "1,000")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    _, divisor = axis_unit(key, values if values is not None else [float(value)])
    return number(float(value) / divisor)


def held_phrase(key: str, value: Any) -> str:
    """A held parameter in a chart title: "no overlap", "summed at switch", "workers 64"."""
    if isinstance(value, bool | np.bool_):
        return f"{param_name(key)}: {'yes' if value else 'no'}"
    shown = value if isinstance(value, str) else _with_unit(key, value)
    if key == "overlap":
        return {"none": "no overlap", "–": "no overlap", "buckets": "with overlap"}.get(
            shown, f"overlap: {shown}"
        )
    return f"{param_name(key)} {shown}"


def _with_unit(key: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, int | float):
        return str(value)
    unit, divisor = axis_unit(key, [float(value)])
    if unit == "%":
        return f"{number(100 * float(value))} %"
    return f"{number(float(value) / divisor)} {unit}".strip()


def _parse(network: str) -> tuple[str, list[tuple[str, str]], str] | None:
    """A grid point "rack[host_link.rate=10 Gb/s] +overlap" as (base, [(key, value)], suffix)."""
    found = _GRID_POINT.match(network)
    if not found:
        return None
    pairs = []
    for part in _ASSIGNMENT.split(found.group("body")):
        key, sep, value = part.partition("=")
        if not sep:
            return None
        pairs.append((key.strip(), value.strip()))
    return found.group("base"), pairs, found.group("suffix")


def _share_text(value: str) -> str:
    """ "0.25" -> "25 %"; a value that is not a number (a CSV of shares) as written."""
    try:
        return f"{number(100 * float(value))} %"
    except ValueError:
        return value


def _suffix(suffix: str) -> str:
    """ " +overlap" -> "overlap": the run's own tags after the grid point, said plainly."""
    return " · ".join(word.lstrip("+") for word in suffix.split() if word.lstrip("+"))


def network_names(networks: list[str]) -> dict[str, str]:
    """Short display names, one per network id, never the same for two ids.

    A grid point shows only the values that vary across the run's grid points ("1 Gb/s · 10 km
    · overlap"), named where two share a unit; its base name too unless every network is a
    point of one grid. Listed networks keep their names ("+overlap" as "· overlap")."""
    networks = list(dict.fromkeys(networks))
    parsed = {name: _parse(name) for name in networks}
    points = {name: p for name, p in parsed.items() if p is not None}
    bases = {p[0] for p in points.values()}
    keep_base = len(bases) > 1 or len(points) < len(networks)
    values: dict[str, set[str]] = {}
    for _, pairs, _ in points.values():
        for key, value in pairs:
            values.setdefault(key, set()).add(value)
    varying = [key for key, seen in values.items() if len(seen) > 1]
    units = [key_unit(key) or "" for key in varying]
    shown: dict[str, str] = {}
    for name in networks:
        point = points.get(name)
        if point is None:
            base, _, suffix = name.partition(" +")
            parts = [base] + ([_suffix("+" + suffix)] if suffix else [])
            shown[name] = " · ".join(parts)
            continue
        base, pairs, suffix = point
        parts = [base] if keep_base and base else []
        own = [key for key, _ in pairs if key in varying] or [key for key, _ in pairs]
        for key, value in pairs:
            if key not in own:  # held across the grid: said once, by the chart, not per name
                continue
            unit = key_unit(key) or ""
            alone = bool(unit) and units.count(unit) == 1  # its unit says which value it is
            if is_share(key):
                value = _share_text(value)
            name_word = SHORT_NAMES.get(key, param_name(key))
            if value in ("true", "false"):  # as a scenario writes a switch setting
                parts.append(f"{name_word}: {'yes' if value == 'true' else 'no'}")
            elif key in PHRASES:
                parts.append(PHRASES[key].format(value=value))
            else:
                parts.append(value if alone else f"{name_word} {value}")
        if suffix.strip():
            parts.append(_suffix(suffix))
        shown[name] = " · ".join(parts) or name
    counts: dict[str, int] = {}
    for label in shown.values():
        counts[label] = counts.get(label, 0) + 1
    return {name: label if counts[label] == 1 else name for name, label in shown.items()}


def cut_apart(names: list[str], limit: int) -> list[str]:
    """Names cut to `limit` characters for an axis, still told apart: cut at the end where that
    keeps them distinct; else what they share up front is dropped ("…tier 03 · overlap"); else
    each keeps its head and tail; else they stay whole."""

    def distinct(shown: list[str]) -> bool:
        return len(set(shown)) == len(set(names))

    ends = [n if len(n) <= limit else n[: limit - 1] + "…" for n in names]
    if distinct(ends):
        return ends
    common = len(os.path.commonprefix(list(dict.fromkeys(names))))
    cut = names[0].rfind(" ", 0, common + 1)  # the word they differ in starts after this space
    common = max(names[0].rfind(" ", 0, cut), 0) if cut > 0 else 0  # keep the word before it
    tails = ["…" + n[common:].lstrip() if common else n for n in names]
    if distinct(tails) and all(len(t) <= limit for t in tails):
        return tails
    head, tail = (limit - 1) // 2, limit - 1 - (limit - 1) // 2
    middles = [n if len(n) <= limit else n[:head] + "…" + n[-tail:] for n in names]
    return middles if distinct(middles) else list(names)


def config_tags(configs: list[str], labels: dict[str, str], variants: dict[str, str]) -> dict:
    """A few characters per configuration for a heatmap cell: the label's first word ("A",
    "E'") where that is short and unique, else its variant letter, else the shortest start of
    each label that no other label starts with ("H DiLoCo every 50"; never a number a reader
    must look up)."""
    words = {c: labels.get(c, c).replace(" †", "").split() or [c] for c in configs}
    for pick in (
        lambda c: words[c][0],
        lambda c: variants.get(c, ""),
    ):
        tags = {c: pick(c) for c in configs}
        if all(0 < len(t) <= 6 for t in tags.values()) and len(set(tags.values())) == len(tags):
            return tags
    # the first word where it is unique, else the first and the last ("H 50", "H 10")
    firsts = [w[0] for w in words.values()]
    tags = {
        c: w[0] if firsts.count(w[0]) == 1 or len(w) == 1 else f"{w[0]} {w[-1]}"
        for c, w in words.items()
    }
    if len(set(tags.values())) == len(tags) and all(len(t) <= 10 for t in tags.values()):
        return tags
    return short_names({c: labels.get(c, c) for c in configs})
