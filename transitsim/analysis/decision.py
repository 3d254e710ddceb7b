"""The decision table: one call per target, point and contender, that everything else prints.

Issue 43: the verdict sentence, the verdict table, the crossovers table, the table with and
without overlap, the star chart's change lines, the winner heatmap and the summary were each
worked out on their own (the fastest by mean here, intervals that overlap there), and said
different things. Here the outcome at every point (outcomes.py: leads, ties, cannot separate,
behind) is written once into the summary, as two columns every reader takes it from:

- `call`: this row's call at its point ("leads", "ties", "cannot separate", "behind", or ""
  where it does not reach the target);
- `winner`: the point's outcome in words, the same on every row of the point: "A AdamW" (leads,
  apart from every other), "B top-k = A AdamW" (a tie), "C low band ~ H DiLoCo every 50" (C
  leads by mean; its interval overlaps H's: the seeds cannot separate them).

`decision_table` gives the same calls as a table, a row per target, point and contender.
"""

from typing import Any

import pandas as pd

from transitsim.analysis.outcomes import (
    DEFAULT_TIE_MARGIN,
    LEADS,
    TIES,
    Board,
    Outcome,
    board,
    held_text,
)

DECISION_COLUMNS = [
    "target",
    "part",
    "held",
    "point",
    "contender",
    "config",
    "time_s",
    "lo",
    "hi",
    "interval",
    "seeds",
    "call",
    "behind",
    "winner",
]
SUMMARY_DECISION_COLUMNS = ("call", "winner")  # what decide adds to the summary
UNSURE_MARK = " ~ "  # "C ~ H": C leads by mean, the intervals cannot separate them
TIE_MARK = " = "


def winner_text(b: Board, outcome: Outcome, short: bool = False) -> str:
    """The point's outcome in words: "A", "B = A" (a tie), "C ~ H" (cannot separate)."""
    if not outcome.winners:
        return ""
    text = TIE_MARK.join(b.name(key, short) for key in outcome.members)
    unsure = [b.name(key, short) for key in outcome.unsure_members]
    return text + "".join(UNSURE_MARK + name for name in unsure)


def boards(
    summary: pd.DataFrame,
    params: list[str],
    labels: dict[str, str],
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> dict[float, Board]:
    """Every target's board (outcomes.board), in the summary's target order."""
    return {
        float(target): board(summary[summary["target"] == target], params, labels, tie_margin)
        for target in dict.fromkeys(summary["target"].tolist())
    }


def decide(
    summary: pd.DataFrame,
    params: list[str],
    labels: dict[str, str],
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> pd.DataFrame:
    """The summary with its `call` and `winner` columns (the module docstring)."""
    frame = summary.copy()
    frame["call"] = ""
    frame["winner"] = ""
    if frame.empty or "time_to_target_s" not in frame:
        return frame
    params = [p for p in params if p in frame.columns]
    calls: dict[Any, str] = {}
    texts: dict[Any, str] = {}
    for found in boards(frame, params, labels, tie_margin).values():
        for outcome in found.outcomes:
            said = winner_text(found, outcome)
            for standing in outcome.standings:
                for row in standing.rows:
                    calls[row] = outcome.call(standing.key)
            for row in _rows_at(found, outcome):
                texts[row] = said
    frame["call"] = [calls.get(i, "") for i in frame.index]
    frame["winner"] = [texts.get(i, "") for i in frame.index]
    return frame


def _rows_at(found: Board, outcome: Outcome) -> list[Any]:
    """Every summary row of a point, those that reached the target and those that did not."""
    rows = [row for s in outcome.standings for row in s.rows]
    return rows + list(found.unreached.get((outcome.part, outcome.held, outcome.point), ()))


def decision_table(
    summary: pd.DataFrame,
    params: list[str],
    labels: dict[str, str],
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> pd.DataFrame:
    """A row per target, point and contender that reached the target: its mean and interval,
    its call, and how far behind the leader it is (time / leader's time - 1)."""
    if summary.empty or "time_to_target_s" not in summary:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    params = [p for p in params if p in summary.columns]
    rows = []
    for target, found in boards(summary, params, labels, tie_margin).items():
        for outcome in found.outcomes:
            said = winner_text(found, outcome)
            best = outcome.standings[0].time_s if outcome.standings else float("nan")
            for standing in outcome.standings:
                rows.append(
                    {
                        "target": target,
                        "part": outcome.part,
                        "held": held_text(outcome.held),
                        "point": outcome.point,
                        "contender": found.name(standing.key),
                        "config": found.contenders[standing.key].config,
                        "time_s": standing.time_s,
                        "lo": standing.lo,
                        "hi": standing.hi,
                        "interval": standing.kind,
                        "seeds": standing.seeds,
                        "call": outcome.call(standing.key),
                        "behind": standing.time_s / best - 1 if best > 0 else float("nan"),
                        "winner": said,
                    }
                )
    return pd.DataFrame(rows, columns=DECISION_COLUMNS)


def in_winner_set(call: str) -> bool:
    """Whether a row's call makes it fastest or tied for fastest at its point."""
    return call in (LEADS, TIES)
