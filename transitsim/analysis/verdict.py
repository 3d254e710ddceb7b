"""The answer in words: which configuration reaches each target first, how sure, where it changes.

    verdict(summary, params, labels)
    -> Verdict(sentences=["To loss 3.3, B top-k is fastest below 10 Gb/s, A AdamW from 10 Gb/s
                          up; C band never wins."], table=<one row per outcome>)

One sentence per target, at most two lines of 100 characters: what holds across the grid, ties
named together with their seeds (outcomes.py has the tie rule: less than `tie_margin` apart, or
overlapping seed intervals). What changes with a held axis (overlap, a switch setting) and every
figure behind the sentence go into the table: per target, held group and run of points, the
fastest (or tied) contenders, their time to loss and seed interval, and how far ahead they are.
Generated from the summary alone, so it says only what the numbers say: grid values as swept,
and a contender that reaches the target nowhere is said never to reach it.
"""

import re
import textwrap
from dataclasses import dataclass, replace

import pandas as pd

from transitsim.analysis.outcomes import (
    DEFAULT_TIE_MARGIN,
    Board,
    Outcome,
    Standing,
    board,
    by_held,
    by_winners,
    cannot_separate,
    held_text,
    region_text,
    run_where,
    sweep_runs,
    ties_with,
)
from transitsim.analysis.verdict_table import TABLE_COLUMNS, table_rows
from transitsim.base import human

LINE_CHARS = 100  # a verdict sentence fits in two lines of this many characters
MAX_LINES = 2


@dataclass(frozen=True)
class Winner:
    """The leader at one network point, how far ahead of the next it is, and the point's
    outcome as the decision table says it (decision.py)."""

    network: str
    config: str | None  # None: no configuration reached the target there
    margin: float  # runner-up time / best time (nan when only one reached it)
    outcome: str = ""  # "A", "B = A" (a tie), "C ~ H" (cannot separate); "" when none reached
    call: str = ""  # the leader's call: "leads" or "ties"


@dataclass(frozen=True)
class Verdict:
    """The sentences (one per target) and the table under them (TABLE_COLUMNS)."""

    sentences: list[str]
    table: pd.DataFrame


def winners(rows: pd.DataFrame) -> list[Winner]:
    """Per network (first-appearance order), the leader: the config with the least time to
    target. Where the summary carries the decision's columns (decision.decide), the outcome
    and the call come from there, so every chart says what the verdict says."""
    result = []
    decided = "winner" in rows.columns and "call" in rows.columns
    for network, part in rows.groupby("network", sort=False):
        reached = part.dropna(subset=["time_to_target_s"]).sort_values(
            ["time_to_target_s", "config"], kind="stable"
        )
        if reached.empty:
            result.append(Winner(str(network), None, float("nan")))
            continue
        times = reached["time_to_target_s"].astype(float).tolist()
        margin = times[1] / times[0] if len(times) > 1 and times[0] > 0 else float("nan")
        best = reached.iloc[0]
        outcome = str(best["winner"]) if decided else str(best["config"])
        call = str(best["call"]) if decided else ""
        result.append(Winner(str(network), str(best["config"]), margin, outcome, call))
    return result


def fits(text: str) -> bool:
    """At most MAX_LINES lines of LINE_CHARS characters, wrapped at spaces."""
    return len(textwrap.wrap(text, LINE_CHARS)) <= MAX_LINES


# ---------------------------------------------------------------------------------------------
# Phrases


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _seeds(standings: tuple[Standing, ...]) -> str:
    counts = [s.seeds for s in standings]
    if any(count is None for count in counts):
        return ""
    if len(set(counts)) == 1:
        return f" ({counts[0]} seed{'s' if counts[0] != 1 else ''} each)"
    return f" ({_and([str(count) for count in counts])} seeds)"


@dataclass(frozen=True)
class Style:
    """How much a sentence says: short names, one clause per held group, the placement
    comparison, and the configurations that never win by name."""

    short: bool = False
    detailed: bool = True
    own: int = 9  # how many placement comparisons (the configs that win most first)
    partners: bool = True  # name who a leader ties with
    by_held: bool = True  # say that the pooled answer changes with a held axis
    listed: bool = True  # a clause for the listed networks beside a grid's
    prefix: bool = True  # "with or without overlap: " before what holds for every held value
    tail: str = "full"  # full | short | none
    along: bool = True  # a 1-D sweep told run by run along its axis (False: the leader only)
    apart: int = 9  # how many a leader cannot be separated from are named (the rest counted)
    others: int = 2  # how many other leaders a pooled clause names after the first
    parts: bool = True  # False: the scenario's own question alone (where it has one)


def _apart(b: Board, keys: list[str], style: Style) -> str:
    """ "(cannot separate from H and L)", or "(cannot separate from 4 others)" past style.apart."""
    if not keys:
        return ""
    if len(keys) > style.apart:
        return f" (cannot separate from {len(keys)} other{'s' if len(keys) > 1 else ''})"
    return f" (cannot separate from {_and([b.name(k, style.short) for k in keys])})"


def _who(b: Board, outcome: Outcome, style: Style, verb: bool) -> str:
    """'X is fastest' / 'X' (verb=False, a later run of a winner) / 'X and Y tie' /
    'X leads (cannot separate from Y)'."""
    names = [b.name(key, style.short) for key in outcome.members]
    apart = _apart(b, list(outcome.unsure_members), style)
    if outcome.tie:
        return f"{_and(names)} tie{apart}"
    if apart:
        return f"{names[0]} leads{apart}"
    return f"{names[0]} is fastest" if verb else names[0]


def _tie_seeds(outcome: Outcome) -> str:
    return _seeds(outcome.winners) if outcome.tie else ""


def _along(b: Board, outcomes: list[Outcome], style: Style) -> str:
    """One swept key: 'B is fastest below 10 Gb/s, A and B tie at 10 Gb/s, A from 25 Gb/s up'."""
    key = b.sweep[0]
    runs = sweep_runs(outcomes)
    parts, said = [], False
    for index, run in enumerate(runs):
        where = run_where(runs, index, key)
        if not run[0].winners:
            parts.append(f"none reaches it {where}")
            continue
        parts.append(f"{_who(b, run[0], style, not said)} {where}{_tie_seeds(run[0])}")
        said = said or not (run[0].tie or run[0].unsure)
    return ", ".join(parts)


def _counted(b: Board, outcomes: list[Outcome], style: Style, noun: str, region: bool) -> str:
    """'A is fastest at 15 of the 16 grid points, A and B tie at 1 (1 Gb/s x 5,000 km)';
    listed networks: 'A is fastest on every listed network (3)', 'on 2 of the 3 ..., B on 1'."""
    total = len(outcomes)
    groups = [(members, found) for members, found in by_winners(outcomes) if members]
    if not groups:
        return "no configuration reaches it"
    on = "on" if noun == "listed networks" else "at"
    parts = []
    for rank, (_, found) in enumerate(groups):
        first = found[0]
        seeds = _tie_seeds(first)
        if rank == 0:
            if len(found) == total and on == "on":
                where = _every_listed(b, total)
            elif len(found) == total:
                where = f"at every one of the {total} {noun}"
            else:
                where = f"{on} {len(found)} of the {total} {noun}"
            parts.append(f"{_who(b, first, style, True)} {where}{seeds}")
            continue
        at = f" ({region_text(found, b.sweep)})" if region else ""
        parts.append(f"{_who(b, first, style, False)} {on} {len(found)}{at}{seeds}")
    return ", ".join(parts)


def _every_listed(b: Board, total: int) -> str:
    """'on every listed network (3)'; one network beside a grid: 'on the listed network'; one
    network alone (`transitsim replay`): nothing to say where."""
    if total > 1:
        return f"on every listed network ({total})"
    return "on the listed network" if any(o.part == "grid" for o in b.outcomes) else ""


def _either(keys: list[str]) -> str:
    """The prefix of a clause that holds for every value of the held keys."""
    others = [k for k in keys if k != "overlap"]
    whatever = f"whatever the {' and '.join(others)}" if others else ""
    if "overlap" in keys:
        return "with or without overlap" + (f", {whatever}" if whatever else "")
    return whatever


def _seed_span(b: Board, keys: list[str]) -> str:
    counts = sorted({b.contenders[k].seeds for k in keys if b.contenders[k].seeds is not None})
    if not counts:
        return ""
    if len(counts) == 1:
        return f"{counts[0]} seed{'s' if counts[0] != 1 else ''} each"
    return f"{counts[0]}-{counts[-1]} seeds"


def _leader(b: Board, outcomes: list[Outcome], style: Style, noun: str) -> str:
    """The contender that leads the most points by mean, and how: 'A is fastest at 12 of the
    16 grid points, ties at 2 (with B; 2 seeds each) and leads at 2 (cannot separate from C)';
    then who else leads alone."""
    total = len(outcomes)
    alone: dict[str, int] = {}
    tied: dict[str, int] = {}
    unsure: dict[str, int] = {}
    partners: dict[str, dict[str, None]] = {}
    apart: dict[str, dict[str, None]] = {}
    for outcome in outcomes:
        if outcome.tie:
            for key in outcome.members:
                tied[key] = tied.get(key, 0) + 1
                partners.setdefault(key, {}).update(
                    dict.fromkeys(m for m in outcome.members if m != key)
                )
        elif outcome.unsure:
            key = outcome.members[0]
            unsure[key] = unsure.get(key, 0) + 1
            apart.setdefault(key, {}).update(dict.fromkeys(outcome.unsure_members))
        elif outcome.winners:
            alone[outcome.members[0]] = alone.get(outcome.members[0], 0) + 1
    keys = list(dict.fromkeys([*alone, *tied, *unsure]))
    if not keys:
        return "no configuration reaches it"

    def count(k: str) -> tuple[int, int]:
        return alone.get(k, 0) + tied.get(k, 0) + unsure.get(k, 0), alone.get(k, 0)

    lead = max(keys, key=count)
    on = "on" if noun == "listed networks" else "at"
    every = f"at every one of the {total} {noun}"
    if on == "on":
        every = _every_listed(b, total)
    won, drew, led = alone.get(lead, 0), tied.get(lead, 0), unsure.get(lead, 0)
    name = b.name(lead, style.short)
    if won == total:
        text = f"{name} is fastest {every}"
    else:
        clauses = []
        first = True

        def where(n: int) -> str:
            return (
                every if n == total else f"{on} {n} of the {total} {noun}" if first else f"{on} {n}"
            )

        if won:
            clauses.append(f"is fastest {where(won)}")
            first = False
        if drew:
            with_ = [*partners.get(lead, {})]
            seeds = _seed_span(b, [lead, *with_])
            named = [b.name(k, style.short) for k in with_]
            inside = [f"with {_and(named)}"] if style.partners and named else []
            inside += [seeds] if seeds else []
            company = f" ({'; '.join(inside)})" if inside else ""
            verb = "ties" if clauses else "ties for fastest"
            clauses.append(f"{verb} {where(drew)}{company}")
            first = False
        if led:
            clauses.append(f"leads {where(led)}{_apart(b, [*apart.get(lead, {})], style)}")
        text = f"{name} {_and(clauses)}"
    alone_word = " alone" if tied or unsure else ""
    named = {lead}
    for key in [k for k in alone if k != lead][: style.others]:
        text += f", {b.name(key, style.short)}{alone_word} {on} {alone[key]}"
        named.add(key)
    for key in [k for k in unsure if k != lead][: style.others]:
        text += f", {b.name(key, style.short)} leads {on} {unsure[key]}"
        text += _apart(b, [*apart.get(key, {})], style)
        named.add(key)
    # every leader is named or counted: a sentence never drops one that leads a point
    rest = [k for k in dict.fromkeys([*alone, *unsure]) if k not in named]
    if rest:
        points = sum(alone.get(k, 0) + unsure.get(k, 0) for k in rest)
        many = len(rest) > 1
        text += f", {len(rest)} other{'s' if many else ''} lead{'' if many else 's'} {on} {points}"
    return text


def _part_clause(b: Board, part: str, style: Style) -> str:
    """The grid's (or the listed networks') clause: one for every held group when they agree;
    else one per held group (detailed) or the leader over all of them."""
    outcomes = [o for o in b.outcomes if o.part == part]
    if not outcomes:
        return ""
    groups = by_held(outcomes)
    listed = part == "listed"
    noun = "listed networks" if listed else "grid points"

    def describe(found: list[Outcome]) -> str:
        if not listed and len(b.sweep) == 1 and style.along:
            return _along(b, found, style)
        if not style.detailed:
            return _leader(b, found, style, noun)
        return _counted(b, found, style, noun, region=not listed)

    shapes = {tuple((o.point, o.who) for o in found) for found in groups.values()}
    keys = list(dict.fromkeys(k for held in groups for k, _ in held))
    if len(shapes) == 1:
        prefix = _either(keys) if len(groups) > 1 and style.prefix else ""
        return (f"{prefix}: " if prefix else "") + describe(next(iter(groups.values())))
    if style.detailed:
        return "; ".join(
            f"with {held_text(held)}: {describe(found)}" for held, found in groups.items()
        )
    noun = "listed networks" if listed else "points"
    by = f" (by {' and '.join(keys)}: table below)" if style.by_held else ""
    return _leader(b, outcomes, style, noun) + by


def _own_question(b: Board, style: Style) -> list[str]:
    """Per configuration a grid places two ways: which placement is faster, and by how much
    (a difference the tie rule calls a tie is counted as one)."""
    clauses = []
    grid = [o for o in b.outcomes if o.part == "grid"]

    def standing(config: str) -> tuple[int, int]:  # points won alone, points in the winner set
        alone = sum(
            not o.tie and b.contenders[o.members[0]].config == config for o in grid if o.winners
        )
        within = sum(any(b.contenders[k].config == config for k in o.members) for o in grid)
        return alone, within

    for config in sorted(b.split, key=standing, reverse=True)[: style.own]:
        keys = [k for k, c in b.contenders.items() if c.config == config and k != config]
        wins: dict[str, list[float]] = {}
        ties = unsure = compared = 0
        for outcome in b.outcomes:
            found = sorted((s for s in outcome.standings if s.key in keys), key=lambda s: s.time_s)
            if outcome.part != "grid" or len(found) < 2:
                continue
            compared += 1
            if any(ties_with(found[0], other, b.tie_margin) for other in found[1:]):
                ties += 1
                continue
            if any(cannot_separate(found[0], other) for other in found[1:]):
                unsure += 1
                continue
            wins.setdefault(found[0].key, []).append(found[-1].time_s / found[0].time_s)
        if not wins:
            if ties or unsure:  # the question still has its answer: they cannot be told apart
                names = _and([b.name(k, style.short) for k in keys])
                said = [f"tie at {ties}"] if ties else []
                said += [f"cannot be separated at {unsure}"] if unsure else []
                clauses.append(f"{names} {' and '.join(said)} of {compared} points")
            continue
        best = max(wins, key=lambda k: len(wins[k]))
        ratios = wins[best]
        slower = _and([b.name(k, style.short) for k in keys if k != best])
        where = (
            "at every point"
            if len(ratios) == compared
            else f"at {len(ratios)} of {compared} points"
        )
        low, high = human.ratio(min(ratios)), human.ratio(max(ratios))
        spread = low if low == high else f"{low[:-1]}-{high}"
        tail = f", ties at {ties}" if ties else ""
        tail += f", cannot separate at {unsure}" if unsure else ""
        clauses.append(f"{b.name(best, style.short)} beats {slower} {where} ({spread}){tail}")
    return clauses


def _tail(b: Board, style: Style, leaders_named: bool = True) -> list[str]:
    """What never wins and never reaches the target. The short form says "the others" only
    where the sentence names every leader; else it counts."""
    won = {key for o in b.outcomes for key in o.members}
    unsure = {key for o in b.outcomes for key in o.unsure_members}
    reached = {s.key for o in b.outcomes for s in o.standings}
    never_win = [k for k in b.contenders if k in reached and k not in won | unsure]
    never_reach = [k for k in b.contenders if k not in reached]
    single = [k for k in b.contenders if k in won | unsure and b.contenders[k].seeds == 1]
    one_seed = []  # said in every style: a verdict resting on one seed says so
    if single:  # by configuration: its placements are the same seed
        names = list(dict.fromkeys(b.contenders[k].base or b.name(k, True) for k in single))
        one_seed = [f"{_and(names)} from 1 seed" + (" each" if len(names) > 1 else "")]
    if style.tail == "none":
        return one_seed
    if style.tail == "short" and leaders_named:
        if never_win and never_reach:
            verb = "reaches" if len(never_reach) == 1 else "reach"
            return [f"the others never win ({len(never_reach)} never {verb} it)", *one_seed]
        if never_win:
            return ["the others never win", *one_seed]
        return (["the others never reach it"] if never_reach else []) + one_seed
    if style.tail == "short":  # counted: "the others" would take in leaders left unnamed
        counted = []
        if never_win:
            counted.append(f"{len(never_win)} never win{'s' if len(never_win) == 1 else ''}")
        if never_reach:
            verb = "reaches" if len(never_reach) == 1 else "reach"
            counted.append(f"{len(never_reach)} never {verb} it")
        return counted + one_seed
    parts = []
    if never_win:
        names = [b.name(k, style.short) for k in never_win]
        parts.append(f"{_and(names)} never win{'s' if len(names) == 1 else ''}")
    if never_reach:
        names = [b.name(k, style.short) for k in never_reach]
        parts.append(f"{_and(names)} never {'reaches' if len(names) == 1 else 'reach'} it")
    return parts + one_seed


_POOLED = Style(short=True, detailed=False)
_TERSE = Style(
    short=True, detailed=False, own=1, partners=False, by_held=False, listed=False, prefix=False
)
_BASES = (  # the most said first; the first that fits in two lines is the sentence
    Style(),
    Style(short=True),
    Style(short=True, tail="short"),
    Style(short=True, tail="short", listed=False),
    _POOLED,
    replace(_POOLED, tail="short"),
    replace(_POOLED, own=1, tail="short"),
    replace(_POOLED, own=1, partners=False, by_held=False, tail="short"),
    replace(_POOLED, own=1, partners=False, by_held=False, prefix=False, tail="short"),
    replace(_TERSE, tail="short"),
    replace(_TERSE, parts=False, tail="none"),  # a placement question answered, and only that
    replace(_TERSE, own=0, tail="short"),
    replace(_TERSE, own=0, tail="none"),
    # a 1-D sweep whose runs of tied winners do not fit: who leads, pooled over the axis
    replace(_POOLED, along=False, tail="short"),
    replace(_TERSE, along=False, own=0, tail="short"),
    replace(_POOLED, along=False, own=0, tail="short", others=1),
    replace(_TERSE, along=False, own=0, tail="short", others=1),
    replace(_TERSE, along=False, own=0, tail="none", others=0),
)


# each style names every contender a leader cannot be separated from, then two, then counts them
STYLES = tuple(replace(style, apart=apart) for style in _BASES for apart in (9, 2, 0))


def compose(b: Board, target: float, extrapolation: str | None, style: Style) -> str:
    """One target's sentence in one style."""
    head = f"To loss {human.loss(target)}" + (f" ({extrapolation})" if extrapolation else "")
    if not any(o.winners for o in b.outcomes):
        return f"{head}, no configuration reaches it."
    grid = _part_clause(b, "grid", style)
    listed = _part_clause(b, "listed", style) if style.listed or not grid else ""
    said, _, rest = grid.partition(": ")
    if rest and listed.startswith(f"{said}: ") and said.startswith("with"):
        listed = listed[len(said) + 2 :]  # "with or without overlap" once for both clauses
    parts = [c for c in (grid, listed) if c]
    merged = _one_winner_both(b, style, grid, listed)
    if merged:
        parts = [merged]
    clauses = _own_question(b, style)  # the scenario's own question first
    if style.parts or not clauses:
        clauses += parts or ["no configuration reaches it"]
    said = "; ".join(clauses)
    leaders = {key for o in b.outcomes if o.winners for key in o.members}
    if not style.parts:  # the own question alone: who else leads is still said, counted
        clauses += _unnamed_leaders(b, style, said)
        said = "; ".join(clauses)
    named = all(_says(said, b.name(k, style.short)) for k in leaders)
    clauses += _tail(b, style, leaders_named=named)
    text = f"{head}, " + "; ".join(clauses) + "."
    for gap, closed in (("  ", " "), (" .", "."), (" ;", ";"), (" ,", ",")):
        text = text.replace(gap, closed)  # a phrase with nothing to say where
    return text


def _says(text: str, name: str) -> bool:
    """Whether `text` names `name` as a whole name ("C" is not inside "C2" or "H-s's")."""
    return re.search(rf"(?<![\w']){re.escape(name)}(?![\w'])", text) is not None


def _unnamed_leaders(b: Board, style: Style, said: str) -> list[str]:
    """ "C leads on 2 of the 4 listed networks": leaders by mean the own question leaves out."""
    clauses = []
    for part, noun in (("grid", "grid points"), ("listed", "listed networks")):
        outcomes = [o for o in b.outcomes if o.part == part]
        led: dict[str, int] = {}
        for outcome in outcomes:
            if outcome.winners:
                led[outcome.members[0]] = led.get(outcome.members[0], 0) + 1
        on = "on" if part == "listed" else "at"
        clauses += [
            f"{b.name(key, True)} leads {on} {n} of the {len(outcomes)} {noun}"
            for key, n in led.items()
            if not _says(said, b.name(key, True))
        ]
    return clauses


def _one_winner_both(b: Board, style: Style, grid: str, listed: str) -> str:
    """ "A is fastest at all 3 x values and on every listed network": one winner of both."""
    prefix, _, body = grid.rpartition(": ") if ": " in grid else ("", "", grid)
    for key in b.contenders:
        lead = f"{b.name(key, style.short)} is fastest "
        if body.startswith(lead) and listed.startswith(lead):
            first, second = body[len(lead) :], listed[len(lead) :]
            if ", " not in first and ", " not in second and ";" not in first + second:
                return (f"{prefix}: " if prefix else "") + f"{lead}{first} and {second}"
    return ""


def sentence(b: Board, target: float, extrapolation: str | None = None) -> str:
    """The most the verdict can say in two lines: the first style that fits, else shortened."""
    text = ""
    for style in STYLES:
        text = compose(b, target, extrapolation, style)
        if fits(text):
            return text
    width = LINE_CHARS * MAX_LINES
    while not fits(text):
        width -= 10
        text = textwrap.shorten(text, width, placeholder=" … (see the table).")
    return text


# ---------------------------------------------------------------------------------------------
# Entry points


def verdict(
    summary: pd.DataFrame | None,
    params: list[str] | None = None,
    labels: dict[str, str] | None = None,
    *,
    tie_margin: float = DEFAULT_TIE_MARGIN,
    extrapolation: str | None = None,
) -> Verdict:
    """Sentences and table for every target of the summary, in its target order."""
    if summary is None or summary.empty or "time_to_target_s" not in summary:
        return Verdict([], pd.DataFrame(columns=TABLE_COLUMNS))
    labels = labels or {}
    params = [p for p in (params or []) if p in summary.columns]
    sentences, rows = [], []
    for target in dict.fromkeys(summary["target"].tolist()):
        found = board(summary[summary["target"] == target], params, labels, tie_margin)
        sentences.append(sentence(found, float(target), extrapolation))
        rows += table_rows(found, float(target))
    return Verdict(sentences, pd.DataFrame(rows, columns=TABLE_COLUMNS))


def verdict_sentences(
    summary: pd.DataFrame | None,
    params: list[str] | None = None,
    labels: dict[str, str] | None = None,
    *,
    tie_margin: float = DEFAULT_TIE_MARGIN,
    extrapolation: str | None = None,
) -> list[str]:
    """One sentence per target (empty without a summary): `verdict(...).sentences`."""
    return verdict(
        summary, params, labels, tie_margin=tie_margin, extrapolation=extrapolation
    ).sentences
