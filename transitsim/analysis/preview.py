"""A result's first look in a terminal or notebook: the verdict, a few notes, then the summary's
head. Both `transitsim.simulate`'s SimulationResult and `run_scenario`'s RunResult show this, so
`repr(result)` is a few lines to read, not thousands of characters of dataclass fields."""

from html import escape

import pandas as pd

HEAD_ROWS = 8  # summary rows a preview shows
HEAD_COLUMNS = ("label", "network", "target", "reached", "time_to_target_s", "interval", "call")
SHOWN_NOTES = 2


def summary_head(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's first rows, in the columns a reader looks at first."""
    columns = [c for c in HEAD_COLUMNS if c in summary.columns]
    return summary[columns].head(HEAD_ROWS)


def what_else(summary: pd.DataFrame, runs: int, notes: list[str], attributes: str) -> str:
    """The line under the head: how much is not shown and where to find it."""
    shown = min(len(summary), HEAD_ROWS)
    return f"{shown} of {len(summary)} summary rows; {runs} runs, {len(notes)} notes ({attributes})"


def preview_text(verdict: list[str], notes: list[str], summary: pd.DataFrame, more: str) -> str:
    """The verdict, the first notes and the summary's head in at most 100 columns of table."""
    lines = [f"Verdict: {line}" for line in verdict] or ["(no targets: no verdict)"]
    lines += [f"note: {note}" for note in notes[:SHOWN_NOTES]]
    with pd.option_context("display.width", 100, "display.max_columns", 10):
        head = summary_head(summary).to_string(index=False, max_colwidth=40)
    return "\n".join([*lines, head, more])


def preview_html(verdict: list[str], notes: list[str], summary: pd.DataFrame, more: str) -> str:
    """A notebook's view of the same: the verdict, the notes, then the head as a table."""
    parts = [f"<p><b>Verdict:</b> {escape(line)}</p>" for line in verdict]
    parts += [f"<p><i>note: {escape(note)}</i></p>" for note in notes[:SHOWN_NOTES]]
    head = summary_head(summary)
    parts.append(head.to_html(index=False, float_format=lambda v: f"{v:.4g}"))
    parts.append(f"<p>{escape(more)}</p>")
    return "".join(parts)
