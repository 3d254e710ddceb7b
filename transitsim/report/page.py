"""The page: the answer first, then the evidence, then what the numbers assume.

First screen (1400 x 900): the title, the question, the verdict in words and the winner map.
Below: the evidence panels, the sortable summary, and the assumptions, notes, fallbacks and
failed jobs of the run. plotly.js is inlined once, with the first figure; ids are fixed, so the
same inputs give the same bytes.
"""

import re

import pandas as pd

from transitsim.report.common import Panel, ReportContext, esc
from transitsim.report.table import SORT_SCRIPT, summary_html

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0.8em auto; max-width: 1320px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.45em; margin: 0.2em 0; } h2 { font-size: 1.2em; margin-top: 1.8em; }
h3 { font-size: 1em; margin-bottom: 0.3em; }
.question { margin: 0.3em 0; color: #333; }
.verdict { background: #eef5ff; border-left: 4px solid #0072B2; padding: 0.35em 0.8em;
           margin: 0.4em 0; }
.verdict p { margin: 0.2em 0; font-size: 1.02em; }
.alert { color: #a00; font-weight: 600; margin: 0.3em 0; }
nav { margin: 1em 0; } nav a { margin-right: 1em; } .note { color: #666; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; } th, td { padding: 2px 8px; }
th { background: #eee; text-align: left; cursor: pointer; white-space: nowrap; }
th[data-up='1']::after { content: ' ▲'; } tr:nth-child(even) td { background: #f8f8f8; }
td { white-space: nowrap; } .wide { overflow-x: auto; max-height: 36em; overflow-y: auto; }
td.names { white-space: normal; min-width: 12em; max-width: 26em; }
ul.facts li { margin: 0.15em 0; } h2.first { margin: 0.5em 0 0 0; font-size: 1.05em; }
section#winner .note { margin: 0.1em 0; }
"""
_FALLBACK_WORDS = ("replayed as", "fallback", "falls back", "instead")


def _figure_html(panel: Panel, inline_js: bool) -> str:
    assert panel.figure is not None
    panel.figure.update_layout(template="plotly_white")
    if panel.figure.layout.height is None:
        panel.figure.update_layout(height=460)
    return panel.figure.to_html(
        full_html=False,
        include_plotlyjs=inline_js,
        div_id=f"plot-{panel.key}",
        config={"displaylogo": False, "responsive": True},
    )


FACTS_SHOWN = 8  # items of a list shown open; the rest fold under "N more" (a click opens them)


def _facts(heading: str, items: list[str], empty: str) -> str:
    if not items:
        return f"<h3>{esc(heading)}</h3><p class='note'>{esc(empty)}</p>"

    def listed(some: list[str]) -> str:
        return "<ul class='facts'>" + "".join(f"<li>{esc(item)}</li>" for item in some) + "</ul>"

    body = listed(items[:FACTS_SHOWN])
    if len(items) > FACTS_SHOWN:
        rest = items[FACTS_SHOWN:]
        body += f"<details><summary>{len(rest)} more</summary>{listed(rest)}</details>"
    return f"<h3>{esc(heading)} ({len(items)})</h3>{body}"


# a run's name as traces name it: the configuration, then -s and the seed
_RUN = re.compile(r"\b[\w.+'-]+-s\d+\b")


def grouped(notes: list[str]) -> list[str]:
    """Notes that say the same of several runs, once, naming the runs: a run of 3 seeds on 12
    networks wrote 36 lines that differed only in the run's name. A note naming no run, or two,
    stays as it is."""
    runs: dict[tuple[str, str], list[str]] = {}  # (text before the run, after it) -> runs
    for note in notes:
        names = _RUN.findall(note)
        if len(names) == 1:
            before, after = _RUN.split(note)
            runs.setdefault((before, after), []).append(names[0])
        else:
            runs.setdefault((note, ""), [])
    lines = []
    for (before, after), names in runs.items():
        if not names:
            lines.append(before)
        elif len(names) == 1:
            lines.append(f"{before}{names[0]}{after}")
        else:
            lines.append(f"{before}each of {len(names)} runs{after} ({', '.join(names)})")
    return lines


def split_notes(notes: list[str]) -> tuple[list[str], list[str]]:
    """(fallbacks, other notes): a note saying something was replayed another way is a fallback."""
    fallbacks = [n for n in notes if any(word in n.lower() for word in _FALLBACK_WORDS)]
    return fallbacks, [n for n in notes if n not in fallbacks]


def render_html(
    title: str,
    panels: list[Panel],
    summary: pd.DataFrame,
    labels: dict[str, str] | None = None,
    context: ReportContext | None = None,
) -> str:
    """The whole page: header with question and verdict, the panels in order (the first one, the
    winner map, right under the verdict), the summary table, then the run's assumptions."""
    labels = labels or {}
    context = context or ReportContext()
    verdict = context.verdict or []
    header = f"<h1>{esc(title)}</h1>"
    if context.question:
        header += f"<p class='question'><b>Question.</b> {esc(context.question)}</p>"
    if verdict:
        header += (
            "<div id='verdict' class='verdict'>"
            + "".join(f"<p>{esc(line)}</p>" for line in verdict)
            + "</div>"
        )
    if context.failures:
        header += (
            f"<p class='alert'>{len(context.failures)} job(s) failed: they are missing from "
            "every chart and table (<a href='#assumptions'>which, and why</a>).</p>"
        )
    parts = []
    inline_js = True
    for index, panel in enumerate(panels):
        body = f"<p class='note'>{esc(panel.note)}</p>"
        if panel.figure is not None:
            body += _figure_html(panel, inline_js)
            inline_js = False
        body += panel.html  # built escaped (a table)
        heading = "<h2 class='first'>" if index == 0 else "<h2>"  # the winner map: compact
        parts.append(
            f"<section id='{panel.key}'>{heading}{esc(panel.heading)}</h2>{body}</section>"
        )
    fallbacks, notes = split_notes(grouped(list(context.notes)))
    facts = (
        _facts("Assumptions", list(context.assumptions), "none recorded")
        + _facts("Notes", notes, "none")
        + _facts("Fallbacks", fallbacks, "none: every exchange ran as asked")
        + _facts("Failed jobs", list(context.failures), "none: every job ran")
    )
    later = panels[1:]
    nav = "".join(f"<a href='#{p.key}'>{esc(p.heading)}</a>" for p in later)
    nav += "<a href='#summary'>Summary</a><a href='#assumptions'>Assumptions and notes</a>"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<header>{header}</header>"
        + (parts[0] if parts else "")
        + f"<nav>Evidence: {nav}</nav>"
        + "".join(parts[1:])
        + f"<section id='summary'><h2>Summary</h2>{summary_html(summary, labels)}</section>"
        + f"<section id='assumptions'><h2>Assumptions, notes and failed jobs</h2>{facts}"
        + "</section>"
        + f"<script>{SORT_SCRIPT}</script></body></html>\n"
    )
