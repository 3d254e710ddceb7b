"""The summary as a compact HTML table in human units, sortable by clicking a column heading.

Each cell shows "6.311 s", "16.63 GB", "300 (mean of 2)"; its raw number rides along in
data-v, so sorting is numeric. Where the summary says how sure a time is (time_to_target_s_lo
/ _hi and `interval`), an Interval column shows it ("60.1 s–66.5 s, 95 % t, 3 seeds"). The
full-precision table is summary.csv.
"""

import math
from typing import Any

import pandas as pd

from transitsim.base import human
from transitsim.report.common import esc
from transitsim.report.names import network_names

MAX_TABLE_ROWS = 500
# (heading, how a row's cell is shown, the raw value it sorts by)
_COLUMNS = (
    "Configuration",
    "Network",
    "Target",
    "Steps",
    "Time",
    "Wire",
    "WAN / LAN",
    "Speed-up",
    "Bottleneck",
)
INTERVAL_HEADING = "Interval"
_KINDS = {"t95": "95 % t", "range": "range"}

SORT_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var up = th.getAttribute('data-up') !== '1';
    th.closest('tr').querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-up'); });
    if (up) { th.setAttribute('data-up', '1'); }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
      var nx = parseFloat(x), ny = parseFloat(y);
      var cmp = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
      if (isNaN(nx) && !isNaN(ny)) { cmp = 1; } else if (!isNaN(nx) && isNaN(ny)) { cmp = -1; }
      return up ? cmp : -cmp;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def _seeds(row: pd.Series) -> int | None:
    reached = str(row.get("reached", ""))
    if "/" in reached:
        return int(reached.split("/", 1)[0] or 0)
    seeds = _number(row.get("seeds"))
    return None if math.isnan(seeds) else int(seeds)


def has_intervals(summary: pd.DataFrame) -> bool:
    """The summary says how sure each time to target is (analysis adds these columns)."""
    return all(c in summary for c in ("time_to_target_s_lo", "time_to_target_s_hi"))


def interval_cell(row: pd.Series) -> tuple[str, str]:
    """ "60.1 s–66.5 s, 95 % t, 3 seeds" / "one seed" / "–", sorted by the low end."""
    low, high = _number(row.get("time_to_target_s_lo")), _number(row.get("time_to_target_s_hi"))
    kind = str(row.get("interval", "") or "")
    if kind == "nan":
        kind = ""
    if math.isnan(low) or math.isnan(high):
        return "–", ""
    if kind == "one seed" or (not kind and low == high):
        return "one seed", f"{low!r}"
    seeds = _seeds(row)
    count = f", {seeds} seeds" if seeds else ""
    name = _KINDS.get(kind, kind)
    shown = f"{human.seconds(low)}–{human.seconds(high)}" + (f", {name}" if name else "") + count
    return shown, f"{low!r}"


def _split_text(wire: float, wan: float) -> str:
    """Wire bytes split into those that crossed a WAN link and the rest: "1.2 GB / 40 GB"."""
    if math.isnan(wire) or math.isnan(wan):
        return human.size(math.nan)
    return f"{human.size(wan)} / {human.size(wire - wan)}"


def summary_rows(summary: pd.DataFrame, labels: dict[str, str]) -> list[list[tuple[str, str]]]:
    """Per summary row, (shown text, sort value) per column of the table."""
    names = network_names(list(dict.fromkeys(summary["network"].astype(str))))
    intervals = has_intervals(summary)
    rows = []
    for _, row in summary.iterrows():
        config = str(row["config"])
        steps = _number(row.get("steps_to_target"))
        time_s = _number(row.get("time_to_target_s"))
        wire = _number(row.get("bytes_to_target"))
        wan = _number(row.get("wan_bytes_to_target"))
        speedup = _number(row.get("speedup_vs_baseline"))
        reached = str(row.get("reached", ""))
        steps_text = human.steps(steps, _seeds(row))
        if math.isnan(steps) and reached:
            steps_text = f"not reached ({reached})"
        cells = [
            (labels.get(config, str(row.get("label", config))), config),
            (names[str(row["network"])], str(row["network"])),
            (human.loss(float(row["target"])), f"{float(row['target'])!r}"),
            (steps_text, "" if math.isnan(steps) else f"{steps!r}"),
            (human.seconds(time_s), "" if math.isnan(time_s) else f"{time_s!r}"),
            (human.size(wire), "" if math.isnan(wire) else f"{wire!r}"),
            (_split_text(wire, wan), "" if math.isnan(wan) else f"{wan!r}"),
            (human.ratio(speedup), "" if math.isnan(speedup) else f"{speedup!r}"),
            (str(row.get("bottleneck", "")), str(row.get("bottleneck", ""))),
        ]
        if intervals:
            cells.insert(5, interval_cell(row))
        rows.append(cells)
    return rows


def summary_html(summary: pd.DataFrame | None, labels: dict[str, str]) -> str:
    """The summary as an escaped, sortable HTML table (every cell through html.escape)."""
    if summary is None or not len(summary):
        return "<p class='note'>no summary rows</p>"
    shown = summary.head(MAX_TABLE_ROWS)
    headings = list(_COLUMNS)
    if has_intervals(summary):
        headings.insert(5, INTERVAL_HEADING)
    header = "".join(f"<th title='click to sort'>{esc(c)}</th>" for c in headings)
    body = []
    for cells in summary_rows(shown, labels):
        body.append(
            "<tr>"
            + "".join(
                f"<td data-v='{esc(v)}'"
                + (f" title='{esc(v)}'" if index == 1 else "")  # the network's full id
                + f">{esc(t)}</td>"
                for index, (t, v) in enumerate(cells)
            )
            + "</tr>"
        )
    more = (
        f"<p class='note'>first {MAX_TABLE_ROWS} of {len(summary)} rows (all in summary.csv)</p>"
        if len(summary) > MAX_TABLE_ROWS
        else ""
    )
    table = (
        f"<table class='sortable'><thead><tr>{header}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return f"<div class='wide'>{table}</div>{more}"
