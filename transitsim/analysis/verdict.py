"""The answer in words: which configuration reaches each target first, and where that changes.

    verdict_sentences(summary, params, labels)
    -> ["To loss 3.3, B top-k 2d64 is fastest below 10 Gb/s, A AdamW from 10 Gb/s up; C low
        band 1d256 and E optics never win."]

Generated from the summary alone (time to target per configuration, network and target), so
it says only what the numbers say: grid values as swept (no interpolation between them), a
configuration that reaches a target on no network is said to never reach it. The CLI prints
these sentences and the report opens on them.
"""

from dataclasses import dataclass

import pandas as pd

from transitsim.base import human


@dataclass(frozen=True)
class Winner:
    """The fastest configuration at one network point and how far ahead of the next it is."""

    network: str
    config: str | None  # None: no configuration reached the target there
    margin: float  # runner-up time / best time (nan when only one reached it)


def winners(rows: pd.DataFrame) -> list[Winner]:
    """Per network (first-appearance order), the config with the least time to target."""
    result = []
    for network, part in rows.groupby("network", sort=False):
        reached = part.dropna(subset=["time_to_target_s"]).sort_values(
            "time_to_target_s", kind="stable"
        )
        if reached.empty:
            result.append(Winner(str(network), None, float("nan")))
            continue
        times = reached["time_to_target_s"].astype(float).tolist()
        margin = times[1] / times[0] if len(times) > 1 and times[0] > 0 else float("nan")
        result.append(Winner(str(network), str(reached["config"].iloc[0]), margin))
    return result


def numeric_params(rows: pd.DataFrame, params: list[str]) -> list[str]:
    """Grid parameters that vary numerically over these rows (an axis a verdict can run along)."""
    found = []
    for key in params:
        if key not in rows or not pd.api.types.is_numeric_dtype(rows[key]):
            continue
        if pd.api.types.is_bool_dtype(rows[key]):
            continue
        if rows[key].dropna().nunique() >= 2:
            found.append(key)
    return found


def _names(configs: list[str], labels: dict[str, str]) -> str:
    named = [labels.get(c, c) for c in configs]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _along(points: pd.DataFrame, key: str, labels: dict[str, str]) -> str:
    """'B is fastest below 10 Gb/s, A from 10 Gb/s up' along one swept key (others held)."""
    best = (
        points.dropna(subset=["time_to_target_s"])
        .sort_values("time_to_target_s", kind="stable")
        .groupby(key, sort=True)
        .head(1)
        .sort_values(key, kind="stable")
    )
    if best.empty:
        return "no configuration reaches it"
    segments: list[tuple[str, float]] = []  # (config, first value of its run)
    for value, config in zip(best[key], best["config"], strict=True):
        if not segments or segments[-1][0] != config:
            segments.append((str(config), float(value)))
    if len(segments) == 1:
        count = best[key].nunique()
        name = labels.get(segments[0][0], segments[0][0])
        return f"{name} is fastest at every {key} swept ({count} values)"
    parts = []
    for index, (config, start) in enumerate(segments):
        name = labels.get(config, config)
        if index == 0:
            parts.append(f"{name} is fastest below {human.param(key, segments[1][1])}")
        elif index == len(segments) - 1:
            parts.append(f"{name} from {human.param(key, start)} up")
        else:
            end = human.param(key, segments[index + 1][1])
            parts.append(f"{name} from {human.param(key, start)} to below {end}")
    return ", ".join(parts)


def _region(won: pd.DataFrame, keys: list[str]) -> str:
    """The grid points a (minority) winner holds: each one when few, else the keys' values."""
    if len(won) <= 4:
        return "; ".join(
            " x ".join(human.param(key, value) for key, value in zip(keys, row, strict=True))
            for row in won[keys].itertuples(index=False)
        )
    return "; ".join(
        f"{key} {', '.join(human.param(key, v) for v in sorted(won[key].dropna().unique()))}"
        for key in keys
    )


def _on_grid(points: pd.DataFrame, keys: list[str], labels: dict[str, str]) -> str:
    best = (
        points.dropna(subset=["time_to_target_s"])
        .sort_values("time_to_target_s", kind="stable")
        .groupby("network", sort=False)
        .head(1)
    )
    if best.empty:
        return "no configuration reaches it"
    counts = best["config"].value_counts()
    total = points["network"].nunique()
    if len(counts) == 1:
        config = str(counts.index[0])
        return f"{labels.get(config, config)} is fastest at every one of the {total} grid points"
    parts = []
    for rank, (config, count) in enumerate(counts.items()):
        name = labels.get(config, config)
        if rank == 0:
            parts.append(f"{name} is fastest at {count} of the {total} grid points")
        else:
            won = best[best["config"] == config]
            parts.append(f"{name} at {count} ({_region(won, keys)})")
    return ", ".join(parts)


def _on_networks(points: pd.DataFrame, labels: dict[str, str]) -> str:
    found = [w for w in winners(points) if w.config is not None]
    if not found:
        return "no configuration reaches it"
    by_config: dict[str, list[str]] = {}
    for winner in found:
        by_config.setdefault(str(winner.config), []).append(winner.network)
    if len(by_config) == 1:
        config = next(iter(by_config))
        return f"{labels.get(config, config)} is fastest on every network ({len(found)})"
    return "fastest: " + "; ".join(
        f"{labels.get(c, c)} on {', '.join(nets)}" for c, nets in by_config.items()
    )


def _held_groups(rows: pd.DataFrame, held: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """Rows split by the grid keys held along the axis (text keys such as placement.sum)."""
    if not held:
        return [("", rows)]
    groups = []
    for values, part in rows.groupby(held, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        text = ", ".join(f"{k} {human.param(k, v)}" for k, v in zip(held, values, strict=True))
        groups.append((f"with {text}: ", part))
    return groups


def _either(held: list[str]) -> str:
    """The prefix of one clause that holds for every value of the held keys."""
    others = [k for k in held if k != "overlap"]
    if not others:
        return "with or without overlap: "
    whatever = f"whatever the {', '.join(others)}"
    return f"with or without overlap, {whatever}: " if "overlap" in held else f"{whatever}: "


def _clauses(groups: list[tuple[str, pd.DataFrame]], held: list[str], body) -> list[str]:
    """One clause per held group, or one for all of them when every group says the same."""
    bodies = [(prefix, body(part)) for prefix, part in groups]
    if len(bodies) > 1 and len({text for _, text in bodies}) == 1:
        return [_either(held) + bodies[0][1]]
    return [prefix + text for prefix, text in bodies]


def sentence(rows: pd.DataFrame, target: float, params: list[str], labels: dict[str, str]) -> str:
    """The verdict for one target over every network point of the summary."""
    # grid points are the rows with a value on a numeric sweep axis; a text axis every row
    # carries (overlap over listed networks too) splits the listed networks, not makes them grid
    sweep = [p for p in params if pd.api.types.is_numeric_dtype(rows[p])] or params
    grid = rows.dropna(subset=sweep, how="all") if sweep else rows.iloc[0:0]
    listed = rows.drop(index=grid.index)
    keys = numeric_params(grid, params)
    clauses = []
    if len(grid):
        held = [k for k in params if k not in keys and k in grid and grid[k].nunique() > 1]

        def on_grid(part: pd.DataFrame) -> str:
            if len(keys) == 1:
                return _along(part, keys[0], labels)
            if keys:
                return _on_grid(part, keys, labels)
            return _on_networks(part, labels)

        clauses += _clauses(_held_groups(grid, held), held, on_grid)
    if len(listed):
        prefix = "on the listed networks, " if len(grid) else ""
        common = [p for p in params if listed[p].notna().all() and listed[p].nunique() > 1]
        listed_clauses = _clauses(
            _held_groups(listed, common), common, lambda part: _on_networks(part, labels)
        )
        clauses += [prefix + clause for clause in listed_clauses]
    configs = list(dict.fromkeys(rows["config"].astype(str)))
    won = {w.config for w in winners(rows) if w.config is not None}
    reached = set(rows.dropna(subset=["time_to_target_s"])["config"].astype(str))
    never_reach = [c for c in configs if c not in reached]
    never_win = [c for c in configs if c in reached and c not in won]
    tail = []
    if never_win:
        tail.append(f"{_names(never_win, labels)} never win{'s' if len(never_win) == 1 else ''}")
    if never_reach:
        verb = "reaches" if len(never_reach) == 1 else "reach"
        tail.append(f"{_names(never_reach, labels)} never {verb} it")
    text = f"To loss {human.loss(target)}, " + "; ".join(clauses)
    return text + ("; " + "; ".join(tail) if tail else "") + "."


def verdict_sentences(
    summary: pd.DataFrame, params: list[str] | None = None, labels: dict[str, str] | None = None
) -> list[str]:
    """One sentence per target, in the summary's target order (empty without a summary)."""
    if summary is None or summary.empty or "time_to_target_s" not in summary:
        return []
    labels = labels or {}
    params = [p for p in (params or []) if p in summary.columns]
    return [
        sentence(summary[summary["target"] == target], float(target), params, labels)
        for target in dict.fromkeys(summary["target"].tolist())
    ]
