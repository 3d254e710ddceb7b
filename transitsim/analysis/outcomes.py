"""Who is fastest at each network point of one target, and who ties with them.

The verdict (verdict.py) and its table are written from these outcomes. Terms:

- a **contender** is a configuration, or a configuration placed one way when a grid sweeps
  where its work happens (`placement.sum`, `placement.transform`): in `in-network-sum` the one
  E run all-gathered and the same run summed at the switch are two answers to the scenario's
  question, so they are two contenders ("E all-gathered", "E summed at the switch");
- a **point** is one grid point (its swept numeric values, "1 Gb/s x 5,000 km") or one listed
  network, within a **held group**: the values of the text axes held along it (overlap, a
  bool such as switch.aggregator, a collective);
- the **calls** at a point (issue 43): the contender with the least mean time **leads**; one
  whose mean is less than `tie_margin` (default 1 %) above the leader's **ties** with it (the
  leader then ties too); one further behind whose interval (uncertainty.py: seeds and the
  evaluation interval) overlaps the leader's **cannot separate** from it: too few seeds or too
  coarse an evaluation to say, and never called fastest or tied; the rest are **behind**. The
  winner set is the leader and those tied with it. So a contender is never "fastest" or "tied
  for fastest" where another leads it by more than the margin with a tight interval.
"""

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from transitsim.analysis.hardware import MARK
from transitsim.analysis.overlap_verdict import base_network
from transitsim.analysis.uncertainty import ONE_SEED, overlaps
from transitsim.base import human

DEFAULT_TIE_MARGIN = 0.01
CONTENDER_AXES = ("placement.sum", "placement.transform")
PLACED = {  # how a contender's name says where its work happens
    ("placement.sum", "receivers"): "all-gathered",
    ("placement.sum", "switch"): "summed at the switch",
    ("placement.sum", "ring"): "ring all-reduced",
    ("placement.transform", "none"): "band on the GPU",
    ("placement.transform", "pluggable"): "band in the pluggable",
    ("placement.transform", "switch"): "band at the switch",
}


@dataclass(frozen=True)
class Contender:
    """One thing the verdict can name as fastest."""

    key: str
    config: str
    name: str  # the configuration's label, disambiguated, with its placement
    short: str  # the shortest unique start of the label, with its placement
    seeds: int | None
    base: str = ""  # the configuration's shortest unique start, without its placement


@dataclass(frozen=True)
class Standing:
    """A contender's figures at one point."""

    key: str
    time_s: float
    lo: float
    hi: float
    kind: str
    seeds: int | None
    rows: tuple[Any, ...] = ()  # the summary rows (index labels) it stands for


LEADS, TIES, UNSURE, BEHIND, NOT_REACHED = "leads", "ties", "cannot separate", "behind", ""
CALLS = (LEADS, TIES, UNSURE, BEHIND, NOT_REACHED)


@dataclass(frozen=True)
class Outcome:
    """One point: the winner set (fastest first), and the first contender outside it."""

    part: str  # "grid" or "listed"
    held: tuple[tuple[str, Any], ...]
    point: str
    values: tuple[Any, ...]  # the point's swept values (grid), for ordering and regions
    standings: tuple[Standing, ...]  # every contender that reached the target, fastest first
    tied: int  # how many of them make the winner set (0: none reached the target here)
    unsure: int = 0  # how many after them the leader cannot be separated from

    @property
    def winners(self) -> tuple[Standing, ...]:
        return self.standings[: self.tied]

    @property
    def unsures(self) -> tuple[Standing, ...]:
        """Contenders behind by more than the margin whose interval overlaps the leader's."""
        return self.standings[self.tied : self.tied + self.unsure]

    @property
    def runner_up(self) -> Standing | None:
        return self.standings[self.tied] if len(self.standings) > self.tied else None

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.winners)

    @property
    def unsure_members(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.unsures)

    @property
    def who(self) -> frozenset[str]:
        """The outcome as a set: a tie of A and B is one outcome whichever is ahead; a leader
        that cannot be separated from B is another outcome than the same leader alone."""
        return frozenset(self.members) | frozenset(f"?{k}" for k in self.unsure_members)

    def call(self, key: str) -> str:
        """This contender's call here (CALLS)."""
        for position, standing in enumerate(self.standings):
            if standing.key == key:
                if position < self.tied:
                    return TIES if self.tie else LEADS
                return UNSURE if position < self.tied + self.unsure else BEHIND
        return NOT_REACHED

    @property
    def tie(self) -> bool:
        return len(self.winners) > 1

    @property
    def margin(self) -> float:
        """A tie: how far its slowest member is behind the fastest; a win: the runner-up."""
        if not self.winners:
            return math.nan
        other = self.winners[-1] if self.tie else self.runner_up
        best = self.winners[0].time_s
        return other.time_s / best - 1 if other is not None and best > 0 else math.nan


@dataclass
class Board:
    """Every outcome of one target, with the names and axes they were found on."""

    outcomes: list[Outcome]
    contenders: dict[str, Contender]
    sweep: list[str]
    held: list[str]
    split: list[str] = field(default_factory=list)  # configs split into placed contenders
    tie_margin: float = DEFAULT_TIE_MARGIN
    # per (part, held, point): the summary rows there that did not reach the target
    unreached: dict[tuple, list[Any]] = field(default_factory=dict)

    def name(self, key: str, short: bool = False) -> str:
        contender = self.contenders[key]
        return contender.short if short else contender.name


def _numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def short_names(names: dict[str, str]) -> dict[str, str]:
    """Each name's shortest start, in whole words, that no other name starts with ("E optics,
    sender feedback" -> "E" beside "E' loopback feedback" -> "E' loopback")."""
    words = {key: name.split() for key, name in names.items()}
    result = {}
    for key, tokens in words.items():
        for count in range(1, len(tokens) + 1):
            start = tokens[:count]
            if not any(other[:count] == start for k, other in words.items() if k != key):
                result[key] = " ".join(start).rstrip(",;:")
                break
        else:
            result[key] = names[key]
        if tokens and tokens[-1] == MARK.strip() and not result[key].endswith(MARK):
            result[key] += MARK  # seeds on different hardware: the mark stays (hardware.py)
    return result


def contender_axes(rows: pd.DataFrame, params: list[str]) -> list[str]:
    """The placement keys a grid sweeps (each of their values makes its own contenders)."""
    return [k for k in params if k in CONTENDER_AXES and rows[k].dropna().nunique() > 1]


def _placed(axes: list[str], row: dict[str, Any]) -> str:
    parts = []
    for key in axes:
        value = row.get(key)
        if not _missing(value):
            parts.append(PLACED.get((key, str(value)), f"{key.split('.')[-1]} {value}"))
    return " ".join(parts)


def board(
    rows: pd.DataFrame,
    params: list[str],
    labels: dict[str, str],
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> Board:
    """The outcome at every point of one target's summary rows."""
    axes = contender_axes(rows, params)
    others = [p for p in params if p not in axes]
    sweep_rows = [p for p in others if p in rows and _numeric(rows[p])]
    # grid rows carry a swept numeric value (else any grid value but overlap, which listed
    # networks carry too); the rest are listed networks
    markers = sweep_rows or [p for p in params if p != "overlap"]
    grid_mask = rows[markers].notna().any(axis=1) if markers else pd.Series(False, rows.index)
    sweep = [p for p in sweep_rows if rows.loc[grid_mask, p].dropna().nunique() >= 2]
    held = [p for p in others if p not in sweep_rows and rows[p].dropna().astype(str).nunique() > 1]
    records = rows.to_dict("records")
    for record, grid, label in zip(records, grid_mask.tolist(), rows.index, strict=True):
        record["_rows"] = [label]
        placed = _placed(axes, record)
        record["config"] = str(record["config"])
        record["vkey"] = f"{record['config']}|{placed}" if placed else record["config"]
        record["_part"] = "grid" if grid else "listed"
        record["_held"] = tuple((k, record[k]) for k in held if not _missing(record.get(k)))
        record["_point"] = _point(record, record["_part"], sweep)
    records = _merge_placements(records)
    contenders = _contender_names(records, labels)
    points: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        points.setdefault((record["_part"], record["_held"], record["_point"]), []).append(record)
    outcomes = []
    unreached: dict[tuple, list[Any]] = {}
    for (part, held_values, point), at in points.items():
        values = tuple(at[0][k] for k in sweep) if part == "grid" else ()
        outcomes.append(_outcome(part, held_values, point, values, at, tie_margin))
        missed = [row for r in at if math.isnan(_time(r)) for row in r["_rows"]]
        unreached[(part, held_values, point)] = missed
    outcomes.sort(key=lambda o: o.part != "grid")  # stable: the grid's points, then the listed
    has_grid = any(o.part == "grid" for o in outcomes)
    placed_configs = {c.config for c in contenders.values() if c.key != c.config}
    split = [c for c in dict.fromkeys(r["config"] for r in records) if c in placed_configs]
    sweep = sweep if has_grid else []
    return Board(outcomes, contenders, sweep, held, split, tie_margin, unreached)


def _time(record: dict[str, Any]) -> float:
    value = record.get("time_to_target_s")
    return math.nan if _missing(value) else float(value)


def _merge_placements(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A configuration whose placements give the same times at every point (a top-k B, which
    nothing sums) is one contender, not one per placement."""
    times: dict[str, dict[tuple, set[float | None]]] = {}
    keys: dict[str, set[str]] = {}
    for r in records:
        at = (r["_part"], r["_held"], r["_point"])
        time_s = _time(r)
        times.setdefault(r["config"], {}).setdefault(at, set()).add(
            None if math.isnan(time_s) else time_s
        )
        keys.setdefault(r["config"], set()).add(r["vkey"])
    alike = {
        config
        for config, found in times.items()
        if len(keys[config]) > 1 and all(len(v) == 1 for v in found.values())
    }
    merged: list[dict[str, Any]] = []
    seen: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r["config"] in alike:
            r = {**r, "vkey": r["config"]}
        at = (r["_part"], r["_held"], r["_point"], r["vkey"])
        if at not in seen:
            seen[at] = r
            merged.append(r)
        else:
            seen[at]["_rows"] = [*seen[at]["_rows"], *r["_rows"]]
    return merged


def _base_names(records: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str]:
    """Each config's label; labels that collide are told apart by variant id, else by config."""
    variants = {r["config"]: str(r.get("variant", r["config"])) for r in records}
    configs = list(variants)
    names = {config: labels.get(config, config) for config in configs}
    for config in configs:
        same = [c for c in configs if names[c] == names[config]]
        if len(same) > 1:
            by_variant = len({variants[c] for c in same}) == len(same)
            names = names | {
                c: f"{labels.get(c, c)} ({variants[c] if by_variant else c})" for c in same
            }
    return names


def _contender_names(records: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Contender]:
    base = _base_names(records, labels)
    short_base = short_names(base)
    contenders: dict[str, Contender] = {}
    for record in records:
        key, config = record["vkey"], record["config"]
        if key in contenders:
            continue
        placed = key[len(config) + 1 :] if key != config else ""
        seeds = record.get("seeds")
        comma = ", " if ", " in base[config] else " "  # "E optics, sender feedback, summed ..."
        contenders[key] = Contender(
            key=key,
            config=config,
            name=f"{base[config]}{comma}{placed}" if placed else base[config],
            short=f"{short_base[config]} {placed}".strip(),
            seeds=None if _missing(seeds) else int(seeds),
            base=short_base[config],
        )
    return contenders


def _point(row: dict[str, Any], part: str, sweep: list[str]) -> str:
    """A point's name: its swept values ("1 Gb/s x 5,000 km"), or a listed network's name."""
    if part == "listed":
        return base_network(str(row["network"]))
    if not sweep:
        return "the grid"
    return " x ".join(human.param(k, row[k]) for k in sweep if not _missing(row[k]))


def _standing(row: dict[str, Any]) -> Standing:
    time_s = _time(row)
    lo, hi = row.get("time_to_target_s_lo"), row.get("time_to_target_s_hi")
    kind, seeds = row.get("interval"), row.get("seeds")
    return Standing(
        key=row["vkey"],
        time_s=time_s,
        lo=time_s if _missing(lo) else float(lo),
        hi=time_s if _missing(hi) else float(hi),
        kind=kind if isinstance(kind, str) and kind else ONE_SEED,
        seeds=None if _missing(seeds) else int(seeds),
        rows=tuple(row.get("_rows", ())),
    )


def _outcome(
    part: str,
    held: tuple[tuple[str, Any], ...],
    point: str,
    values: tuple[Any, ...],
    at: list[dict[str, Any]],
    tie_margin: float,
) -> Outcome:
    reached = [r for r in at if not math.isnan(_time(r))]
    standings = [_standing(r) for r in sorted(reached, key=lambda r: (_time(r), r["vkey"]))]
    if not standings:
        return Outcome(part, held, point, values, (), 0)
    best = standings[0]
    tied = [best, *(other for other in standings[1:] if ties_with(best, other, tie_margin))]
    later = [other for other in standings[1:] if not ties_with(best, other, tie_margin)]
    unsure = [other for other in later if cannot_separate(best, other)]
    rest = [other for other in later if not cannot_separate(best, other)]
    return Outcome(part, held, point, values, tuple(tied + unsure + rest), len(tied), len(unsure))


def ties_with(best: Standing, other: Standing, tie_margin: float) -> bool:
    """The tie rule: a mean less than tie_margin behind the leader's."""
    return best.time_s > 0 and other.time_s / best.time_s - 1 < tie_margin


def cannot_separate(best: Standing, other: Standing) -> bool:
    """Further behind than the margin, but the intervals overlap: the seeds (or the evaluation
    interval) cannot tell which is faster."""
    return overlaps((best.lo, best.hi), (other.lo, other.hi))


# ---------------------------------------------------------------------------------------------
# Outcomes grouped, for the sentences and the table


def sweep_runs(outcomes: list[Outcome]) -> list[list[Outcome]]:
    """Consecutive outcomes (in sweep order) with the same winner set."""
    ordered = sorted(outcomes, key=lambda o: o.values)
    runs: list[list[Outcome]] = []
    for outcome in ordered:
        if runs and runs[-1][0].who == outcome.who:
            runs[-1].append(outcome)
        else:
            runs.append([outcome])
    return runs


def run_where(runs: list[list[Outcome]], index: int, key: str) -> str:
    run = runs[index]
    start = human.param(key, run[0].values[0])
    if len(runs) == 1:
        return f"at all {len(run)} values of {key}"
    if index == 0:
        return f"below {human.param(key, runs[1][0].values[0])}"
    if index == len(runs) - 1:
        return f"from {start} up" if len(run) > 1 else f"at {start}"
    if len(run) == 1:
        return f"at {start}"
    return f"from {start} to {human.param(key, run[-1].values[0])}"


def region_text(outcomes: list[Outcome], keys: list[str]) -> str:
    """The points an outcome holds: each one when few, else the values of each key."""
    if len(outcomes) <= 4 or not keys:
        return "; ".join(o.point for o in outcomes)
    return "; ".join(
        f"{key} "
        + ", ".join(
            human.param(key, v)
            for v in sorted({o.values[i] for o in outcomes if not _nan(o.values[i])})
        )
        for i, key in enumerate(keys)
    )


def _nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def by_winners(outcomes: list[Outcome]) -> list[tuple[frozenset[str], list[Outcome]]]:
    """Outcomes by winner set, the most points first (ties of count in first-appearance order)."""
    groups: dict[frozenset[str], list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.who, []).append(outcome)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def held_text(held: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join(f"{key} {human.param(key, value)}" for key, value in held)


def by_held(outcomes: list[Outcome]) -> dict[tuple, list[Outcome]]:
    groups: dict[tuple, list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.held, []).append(outcome)
    return groups
