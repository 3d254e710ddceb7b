"""The table under the verdict: what each sentence sums up, point by point.

One row per target, held group (the overlap, a switch setting: what a sentence says "with or
without") and run of points with the same outcome (one swept key), or outcome (a grid of two or
more keys; listed networks): the fastest (or tied) configurations; those the leader cannot be
told apart from (outcomes.py: intervals that overlap, means further apart than the tie margin);
the fastest one's time to loss over those points, each one's interval, how far ahead (a win) or
apart (a tie) they are, who comes next, and from how many seeds. The report shows it as it is;
the terminal prints it under the sentences (commands/run_cmd.py).
"""

import math
from typing import Any

from transitsim.analysis.outcomes import (
    Board,
    Outcome,
    by_held,
    by_winners,
    held_text,
    region_text,
    run_where,
    sweep_runs,
)
from transitsim.analysis.uncertainty import ONE_SEED, RANGE, T95
from transitsim.base import human

TABLE_COLUMNS = [
    "target",
    "held",
    "where",
    "points",
    "outcome",
    "fastest",
    "cannot_separate",
    "time_s_min",
    "time_s_max",
    "interval",
    "margin_min",
    "margin_max",
    "next",
    "seeds",
]


def _interval_text(outcomes: list[Outcome], key: str) -> str:
    """One winner's seed interval: its bounds at one point, its half-width over several."""
    standings = [s for o in outcomes for s in o.winners if s.key == key]
    kind = standings[0].kind
    name = {T95: "95 % t", RANGE: "range", ONE_SEED: "one seed"}.get(kind, kind)
    if kind == ONE_SEED:
        return name
    if len(standings) == 1:
        low, high = human.seconds(standings[0].lo), human.seconds(standings[0].hi)
        return f"{low} ({name})" if low == high else f"{low}-{high} ({name})"
    widths = [(s.hi - s.lo) / 2 / s.time_s * 100 for s in standings if s.time_s > 0]
    low, high = min(widths), max(widths)
    shown = f"±{low:.2g} %" if f"{low:.2g}" == f"{high:.2g}" else f"±{low:.2g}-{high:.2g} %"
    return f"{shown} ({name})"


def _table_row(b: Board, target: float, outcomes: list[Outcome], where: str) -> dict[str, Any]:
    first = outcomes[0]
    if not first.winners:
        return {
            "target": target,
            "held": held_text(first.held),
            "where": where,
            "points": len(outcomes),
            "outcome": "not reached",
            "fastest": "",
            "cannot_separate": "",
            "interval": "",
            "next": "",
            "seeds": "",
        }
    best = [o.winners[0].time_s for o in outcomes]
    margins = [o.margin for o in outcomes if not math.isnan(o.margin)]
    following = [o.runner_up.key for o in outcomes if o.runner_up is not None]
    nxt = max(dict.fromkeys(following), key=following.count) if following else None
    seeds = [s.seeds for s in first.winners]
    return {
        "target": target,
        "held": held_text(first.held),
        "where": where,
        "points": len(outcomes),
        "outcome": "tie" if first.tie else "leads" if first.unsure else "fastest",
        "fastest": " = ".join(b.name(key) for key in first.members),
        "cannot_separate": " / ".join(b.name(key) for key in first.unsure_members),
        "time_s_min": min(best),
        "time_s_max": max(best),
        "interval": " / ".join(_interval_text(outcomes, key) for key in first.members),
        "margin_min": min(margins) if margins else math.nan,
        "margin_max": max(margins) if margins else math.nan,
        "next": b.name(nxt) if nxt is not None else "",
        "seeds": ", ".join("?" if s is None else str(s) for s in seeds),
    }


def table_rows(b: Board, target: float) -> list[dict[str, Any]]:
    """Per part and held group: a row per run of points (one swept key) or per winner set."""
    rows = []
    for part in ("grid", "listed"):
        for found in by_held([o for o in b.outcomes if o.part == part]).values():
            if part == "grid" and len(b.sweep) == 1:
                runs = sweep_runs(found)
                for index, run in enumerate(runs):
                    rows.append(_table_row(b, target, run, run_where(runs, index, b.sweep[0])))
                continue
            groups = by_winners(found)
            for rank, (_, group) in enumerate(groups):
                if part == "listed":
                    where = "; ".join(o.point for o in group)
                elif len(groups) == 1:
                    where = f"all {len(group)} points"
                elif rank == 0 and len(group) > 4:  # the rest are named in their own rows
                    where = f"the other {len(group)} points"
                else:
                    where = region_text(group, b.sweep)
                rows.append(_table_row(b, target, group, where))
    return rows
