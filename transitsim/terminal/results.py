"""What a run prints on a terminal: the verdict and its table, the summary per target, the
crossovers, the overlap table, failed jobs and notes. `transitsim run` and `transitsim replay`
print a run's results alike, from here.
"""

import math
import sys
from pathlib import Path

from transitsim.analysis.overlap_verdict import overlap_verdicts
from transitsim.analysis.summary import is_number
from transitsim.base import human
from transitsim.base.errors import escaped_line
from transitsim.base.tables import emit_table
from transitsim.base.units import format_key_value
from transitsim.outputs import NOTES_FILE, RunResult
from transitsim.run import JobsFailed

SUMMARY_HEADERS = {
    "label": "Configuration",
    "network": "Network",
    "reached": "Seeds",
    "steps_to_target": "Steps",
    "time_to_target_s": "Time (s)",
    "bytes_to_target": "Wire bytes",
    "wan_bytes_to_target": "WAN bytes",
    "speedup_vs_baseline": "Speed-up",
    "bottleneck": "Bottleneck",
}
CROSSOVER_HEADERS = {
    "target": "Target",
    "parameter": "Parameter",
    "value": "At",
    "previous_winner": "Was fastest",
    "winner": "Now fastest",
    "runner_up_ratio": "Runner-up / best",
}
MAX_NOTES = 5
OVERLAP_HEADERS = {
    "network": "Network",
    "fastest_without": "Fastest, no overlap",
    "time_without_s": "Time (s)",
    "fastest_with": "Fastest, overlap",
    "time_with_s": "Time (s) ",
    "changed": "Verdict changes",
    "baseline_hidden_share": "Baseline exchange hidden",
}


def format_param(key: str, value: object) -> str:
    """A grid value (SI) as a scenario writes it: rate 1e10 -> "10 Gb/s", 5e6 m -> "5,000 km"."""
    if value is None:
        return "–"
    if not is_number(value):
        return str(value)
    number = float(value)  # type: ignore[arg-type]
    if math.isnan(number):
        return "–"
    return format_key_value(key, number)


def target_title(value: float, name: str, baseline: str | None) -> str:
    """ "Val loss 2.482 (final:A)", with what the speed-up is measured against."""
    text = f"Val loss {value:.3f}" + (f" ({name})" if name.startswith("final:") else "")
    return text + (f"; speed-up vs {baseline}" if baseline else "")


def print_summary(
    result: RunResult, fmt: str = "table", baseline: str | None = None, quiet: bool = False
) -> None:
    """One table per target (table/markdown), or the whole summary (csv/json, raw numbers)."""
    if fmt in ("csv", "json"):
        emit_table(result.summary, fmt)
        return
    for value, name in zip(result.targets, result.target_names, strict=True):
        rows = result.summary[result.summary["target"] == value]
        table = rows[[c for c in SUMMARY_HEADERS if c in rows.columns]]
        title = None if quiet else target_title(value, name, baseline)
        emit_table(table, fmt, title=title, headers=SUMMARY_HEADERS)


def print_crossovers(result: RunResult, fmt: str = "table") -> None:
    """Where the fastest configuration changes along a grid parameter (others held fixed)."""
    table = result.crossovers
    if table.empty or "changed" not in table:
        return
    changes = table[table["changed"]].copy()
    if changes.empty:
        print("No crossovers: the fastest configuration is the same at every grid point.")
        return
    # the decision table's outcome (analysis/decision.py): "B = A" a tie, "C ~ H" cannot separate
    changes["winner"] = changes["winner"].map(lambda w: w or "none reaches it")
    changes["previous_winner"] = changes["previous_winner"].map(
        lambda w: w if isinstance(w, str) and w else "none reaches it"
    )
    held = [p for p in result.params if p in changes.columns]
    if fmt in ("table", "markdown"):
        changes["value"] = [
            format_param(p, v) for p, v in zip(changes["parameter"], changes["value"], strict=True)
        ]
        for key in held:
            changes[key] = changes[key].map(lambda v, key=key: format_param(key, v))
    columns = [*CROSSOVER_HEADERS, *held]
    shown = changes[[c for c in columns if c in changes.columns]]
    title = "Crossovers (other grid parameters held at the values shown)"
    emit_table(shown, fmt, title=title, headers=CROSSOVER_HEADERS)


VERDICT_HEADERS = {
    "held": "Held",
    "where": "Where",
    "fastest": "Fastest (a = b: tie)",
    "cannot_separate": "Cannot separate from",
    "time": "Time to loss",
    "interval": "Seed interval",
    "gap": "Gap",
    "next": "Next",
}


def percent(value: float) -> str:
    """A share as a person reads it: 0.00014 -> "0.014 %", 0.01 -> "1 %", 0.37 -> "37 %"."""
    number = value * 100
    return f"{number:,.0f} %" if number >= 10 else f"{number:.2g} %"


def _lead(margin: float) -> str:
    """How far ahead: a share below 100 % ("37 %"), a ratio above it ("13.2x")."""
    return percent(margin) if margin < 1 else human.ratio(1 + margin)


def _span(low: float, high: float, show) -> str:
    """ "32.24-103.2 s" (one unit said once), "12 ms-1.2 s", or one value when both show alike."""
    if low != low:
        return "–"
    first, last = show(low), show(high)
    if first == last:
        return first
    if first.endswith("x") and last.endswith("x"):
        return f"{first[:-1]}-{last}"
    number, _, unit = first.rpartition(" ")
    if number and last.endswith(f" {unit}"):
        return f"{number}-{last}"
    return f"{first}-{last}"


def verdict_rows(table, target: float):
    """One target's verdict table as the terminal shows it (numbers in human units)."""
    rows = table[table["target"] == target].copy()
    times = zip(rows["time_s_min"], rows["time_s_max"], strict=True)
    rows["time"] = [_span(lo, hi, human.seconds) for lo, hi in times]
    margins = zip(rows["margin_min"], rows["margin_max"], rows["outcome"], strict=True)
    rows["gap"] = [
        "–" if lo != lo else _span(lo, hi, _lead) + (" apart" if kind == "tie" else " ahead")
        for lo, hi, kind in margins
    ]
    rows.loc[rows["outcome"] == "not reached", "fastest"] = "none reaches it"
    columns = list(VERDICT_HEADERS)
    if not rows["held"].astype(bool).any():
        columns.remove("held")
    if not rows["cannot_separate"].fillna("").astype(bool).any():
        columns.remove("cannot_separate")
    return rows[columns]


def print_verdict(result: RunResult, tables: bool = True, again: bool = False) -> None:
    """The answer in words, each sentence then (tables=True) the table under it."""
    judgement = result.judgement()
    prefix = "Verdict (as above)" if again else "Verdict"
    for line in judgement.sentences:
        print(f"{prefix}: {line}")
    if not tables or judgement.table.empty:
        return
    rule = (
        f"tie: less than {percent(result.tie_margin)} apart; cannot separate: further apart, "
        "intervals overlap"
    )
    for value in result.targets:
        rows = verdict_rows(judgement.table, value)
        if len(rows):
            title = f"Verdict to loss {human.loss(value)}, point by point ({rule})"
            emit_table(rows, "table", title=title, headers=VERDICT_HEADERS)


def baseline_configs(result: RunResult, baseline: str | None) -> set[str]:
    """The configs a scenario's baseline names: by config, label or variant id."""
    if baseline is None:
        return set()
    timeline = result.timeline
    pairs = dict(zip(timeline["config"], timeline["variant"], strict=False))
    return {
        config
        for config, variant in pairs.items()
        if baseline in (config, variant, result.labels.get(config, config))
    }


def print_overlap(result: RunResult, baseline: str | None, fmt: str = "table") -> None:
    """With an overlap axis: per target, the fastest configuration without and with overlap."""
    table = overlap_verdicts(result.summary, result.timeline, baseline_configs(result, baseline))
    if table.empty:
        return
    for column in ("fastest_without", "fastest_with"):
        table[column] = table[column].map(lambda c: result.labels.get(c, c) if c else "–")
    if fmt in ("table", "markdown"):
        table["changed"] = table["changed"].map({True: "yes", False: "no"})
        table["baseline_hidden_share"] = table["baseline_hidden_share"].map(
            lambda v: "–" if v != v else f"{v:.0%}"
        )
    for value, name in zip(result.targets, result.target_names, strict=True):
        rows = table[table["target"] == value][list(OVERLAP_HEADERS)]
        title = f"Overlap with backward, to val loss {value:.3f}" + (
            f" ({name})" if name.startswith("final:") else ""
        )
        emit_table(rows, fmt, title=title, headers=OVERLAP_HEADERS)


def notes_file(result: RunResult) -> Path | None:
    """The notes.txt this run wrote (None when it wrote no outputs)."""
    return next((path for path in result.files if Path(path).name == NOTES_FILE), None)


def report_problems(result: RunResult, quiet: bool = False, all_notes: bool = False) -> None:
    """Failed jobs (one line each) and, unless quiet, the run's caveats, on stderr: the first
    MAX_NOTES, and where the rest are (notes.txt, --notes); all_notes: every one."""
    for failure in result.failures:
        print(
            f"transitsim: job failed: {escaped_line(failure.describe_failure())}", file=sys.stderr
        )
    if quiet and not all_notes:
        return
    shown = result.notes if all_notes else result.notes[:MAX_NOTES]
    for note in shown:
        print(f"note: {note}", file=sys.stderr)
    hidden = len(result.notes) - len(shown)
    if hidden:
        path = notes_file(result)
        where = f"in {path}; " if path is not None else ""
        text = f"note: ... and {hidden} more notes ({where}--notes prints them all)"
        print(text, file=sys.stderr)


def report_all_failed(exc: JobsFailed) -> int:
    """Nothing to summarise: every job's reason, and exit code 1 (the work failed)."""
    for failure in exc.failures:
        print(
            f"transitsim: job failed: {escaped_line(failure.describe_failure())}", file=sys.stderr
        )
    print("transitsim: every job failed; nothing written", file=sys.stderr)
    return 1
