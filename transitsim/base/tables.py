"""Printing tables, one way for every command: rich for people, CSV/markdown/JSON for tools.

Table and markdown output format numbers for reading (losses to 3 decimals, bytes with thousands
separators); CSV and JSON keep the raw values so nothing is lost on the way to another program.
"""

import json
import math
import sys
from typing import Any, TextIO

import numpy as np
import pandas as pd
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from transitsim.base.errors import TransitsimError

FORMATS = ("table", "csv", "markdown", "json")
DASH = "–"


def output_format(csv: bool = False, markdown: bool = False, json_: bool = False) -> str:
    """The format chosen by a command's --csv/--markdown/--json flags (at most one)."""
    chosen = [name for name, on in (("csv", csv), ("markdown", markdown), ("json", json_)) if on]
    if len(chosen) > 1:
        raise TransitsimError(f"choose one output format, not {' and '.join(chosen)}")
    return chosen[0] if chosen else "table"


def format_gb(n_bytes: float) -> str:
    """Decimal units, as the published slides print them (12.67 GB = 12,666,777,600 B).

    Gigabytes from 1 GB up, so published-scale tables read as the slides do; smaller runs get the
    largest decimal unit that keeps three significant figures visible (MB, kB, B)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n_bytes) >= size:
            return f"{n_bytes / size:,.2f} {unit}"
    return f"{n_bytes:,.0f} B"


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(value))


def format_cell(column: str, value: Any) -> str:
    """One value as people read it; the column name says what kind of number it is."""
    if _is_missing(value):
        return DASH
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if not isinstance(value, float | np.floating):
        return str(value)
    value = float(value)
    name = column.lower()
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if "loss" in name or name == "target":
        return f"{value:.3f}"
    if "bytes" in name:
        return f"{value:,.0f}"
    if name.endswith("_s"):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}"
    if "step" in name or name == "seeds":
        return f"{value:,.0f}"
    if "rate" in name or "share" in name:
        return f"{value:.4g}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _plain(value: Any) -> Any:
    """A JSON-ready value: numpy scalars become Python ones, NaN becomes null, infinities the
    strings "inf"/"-inf" (strict JSON has neither); containers are converted throughout."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def emit_json(document: Any, out: TextIO | None = None) -> None:
    """Print any JSON-like object as strict JSON (no NaN tokens), indented."""
    (out or sys.stdout).write(json.dumps(_plain(document), indent=2) + "\n")


def _markdown(df: pd.DataFrame, headers: list[str], title: str | None) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"**{escape(title)}**", ""] if title else []
    lines.append("| " + " | ".join(escape(h) for h in headers) + " |")
    lines.append("|" + "|".join("---:" if _is_numeric(df[c]) else "---" for c in df.columns) + "|")
    for row in df.itertuples(index=False):
        cells = [escape(format_cell(c, v)) for c, v in zip(df.columns, row, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _terminal_width(out: TextIO) -> int | None:
    console = Console(file=out)
    return console.width if console.is_terminal else None


def _unbroken(df: pd.DataFrame, column: str, header: str) -> int:
    """The narrowest a column may be: its longest cell where it holds numbers, else its longest
    word that holds a digit ("4.408-4.412", "1,876"), and its header's longest word."""
    cells = [format_cell(column, v) for v in df[column]]
    if _is_numeric(df[column]):
        widest = max((len(c) for c in cells), default=0)
    else:
        words = [w for c in cells for w in c.split() if any(ch.isdigit() for ch in w)]
        widest = max((len(w) for w in words), default=0)
    return max(widest, max((len(w) for w in header.split()), default=0), 1)


def fit_columns(
    df: pd.DataFrame, headers: list[str], width: int
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The columns that fit in width without cutting a number (each at least _unbroken wide,
    plus rich's three characters of border and padding), dropped from the right; and the
    headers of those dropped."""
    needed = [_unbroken(df, c, h) + 3 for c, h in zip(df.columns, headers, strict=True)]
    keep = len(needed)
    while keep > 1 and sum(needed[:keep]) + 1 > width:
        keep -= 1
    return df.iloc[:, :keep], headers[:keep], headers[keep:]


def _widths(df: pd.DataFrame, headers: list[str], width: int) -> list[int]:
    """Each column's width in `width` characters: a number column its widest cell, the text
    columns the rest, shared by how wide they would be, never below their longest number."""
    least = [_unbroken(df, c, h) for c, h in zip(df.columns, headers, strict=True)]
    natural = [
        max([len(h), *(len(format_cell(c, v)) for v in df[c])])
        for c, h in zip(df.columns, headers, strict=True)
    ]
    text = [i for i, c in enumerate(df.columns) if not _is_numeric(df[c])]
    fixed = sum(natural[i] for i in range(len(natural)) if i not in text)
    room = width - 1 - 3 * len(natural) - fixed
    wanted = sum(natural[i] for i in text)
    widths = list(natural)
    if wanted <= room:
        return widths
    pinned: set[int] = set()  # text columns held at their least width
    while True:
        free = [i for i in text if i not in pinned]
        left = room - sum(least[i] for i in pinned)
        share = sum(natural[i] for i in free)
        for i in free:
            widths[i] = natural[i] * left // share if share else least[i]
        short = [i for i in free if widths[i] < least[i]]
        if not short:
            return widths
        for i in short:
            widths[i] = least[i]
            pinned.add(i)


def _rich_table(df: pd.DataFrame, headers: list[str], width: int | None = None) -> Table:
    """Every cell and header as rich Text, never markup: a network called
    "rack[host_link.rate=100 Gb/s]" prints as it is written. In a width, a column is never
    narrower than its numbers (they wrap whole or not at all); long words fold, never "…"."""
    table = Table(header_style="bold")
    widths = _widths(df, headers, width) if width is not None else [None] * len(headers)
    for column, header, size in zip(df.columns, headers, widths, strict=True):
        table.add_column(
            Text(header),
            justify="right" if _is_numeric(df[column]) else "left",
            width=size,
            overflow="fold",
        )
    for row in df.itertuples(index=False):
        table.add_row(*(Text(format_cell(c, v)) for c, v in zip(df.columns, row, strict=True)))
    return table


def print_rich(renderable: Any, out: TextIO | None = None, width: int | None = None) -> None:
    """Print with rich; when piped, as wide as the content needs (rich would wrap at 80);
    width: exactly this wide."""
    out = out or sys.stdout
    console = Console(file=out, highlight=False)
    if width is not None:
        console = Console(file=out, width=width, highlight=False, soft_wrap=False)
    elif not console.is_terminal:
        unbounded = console.options.update_width(100_000)
        width = max(80, Measurement.get(console, unbounded, renderable).maximum)
        console = Console(file=out, width=width, highlight=False, soft_wrap=False)
    console.print(renderable)


def emit_table(
    df: pd.DataFrame,
    fmt: str = "table",
    title: str | None = None,
    headers: dict[str, str] | None = None,
    out: TextIO | None = None,
    width: int | None = None,
) -> None:
    """Print df to stdout (or out) as a rich table, CSV, a markdown table or JSON records.

    headers renames columns for people (table, markdown); CSV and JSON keep the column names.
    width: the rich table's width (default: the terminal's; unbounded when piped). A table
    wider than that wraps its text and drops its last columns, saying which; it never cuts a
    number.
    """
    if fmt not in FORMATS:
        raise TransitsimError(f"unknown output format {fmt!r} (expected one of {FORMATS})")
    out = out or sys.stdout
    shown = [(headers or {}).get(column, column) for column in df.columns]
    if fmt == "csv":
        df.to_csv(out, index=False, lineterminator="\n")
    elif fmt == "json":
        records = [dict(zip(df.columns, row, strict=True)) for row in df.itertuples(index=False)]
        emit_json(records, out)
    elif fmt == "markdown":
        out.write(_markdown(df, shown, title))
    else:
        width = width or _terminal_width(out)
        dropped: list[str] = []
        if width is not None:
            df, shown, dropped = fit_columns(df, shown, width)
        table = _rich_table(df, shown, width)
        if dropped:
            note = f"(not shown at {width} columns: {', '.join(dropped)}; --format csv has all)"
            title = f"{title}\n{note}" if title else note
        # The title as a line of its own: rich wraps a table's title at the table's width, and
        # a long source path split "4 ranks" across two lines.
        print_rich(Group(Text(title, style="italic"), table) if title else table, out, width)


def variant_label(meta: dict[str, Any]) -> str:
    """A short readable name for a run's variant and parameters: "top-k 2d64", "low band 1d256",
    "optics enob8 p8 fs100 fb-sent". The letter is not included (it has its own column)."""
    params = meta.get("variant_params") or {}
    variant = meta.get("variant")
    chunks = f"{params.get('chunk_mode', '')}{params.get('chunk', '')}"
    keep = params.get("keep")
    sparsity = f" k{round(1 / keep)}" if keep and round(1 / keep) != 16 else ""
    if variant == "A":  # the design's A is AdamW; a user's run (imported) says its optimiser
        optimizer = meta.get("optimizer")
        if optimizer is None:
            return "AdamW"
        return f"dense all-reduce ({optimizer})" if optimizer else "dense all-reduce"
    if variant == "B":
        return f"top-k {chunks}{sparsity}"
    if variant == "D":
        return f"calibrated band {chunks}{sparsity}"
    if variant == "G":
        selection = params.get("selection") or params.get("band", "moving")
        return f"{selection} band {chunks} every {params.get('select_every', '?')}{sparsity}"
    if variant in ("H", "H-s", "L"):  # local SGD: how often it syncs, and what it sends
        every = f"h{params.get('inner_steps', '?')}"
        if variant == "H":
            return f"DiLoCo {every}"
        if variant == "H-s":
            fragments, overlap = params.get("fragments", "?"), params.get("overlap", "?")
            return f"Streaming DiLoCo {every} p{fragments} t{overlap}"
        return f"SparseLoCo {every} {chunks}{sparsity}"
    if variant in ("E", "E'"):
        enob = params.get("enob")
        planes = params.get("planes")
        parts = ["optics" if variant == "E" else "optics at switch"]
        parts.append("no-noise" if enob is None else f"enob{enob:g}")
        parts.append("no-quant" if planes is None else f"p{planes}")
        if params.get("fs_every"):
            parts.append(f"fs{params['fs_every']}")
        # E' always names its feedback mode: its default is loopback, not exact.
        if variant == "E'" or params.get("feedback", "exact") != "exact":
            parts.append(f"fb-{params.get('feedback', 'exact')}")
        if chunks != "1d256":
            parts.append(chunks)
        return " ".join(parts) + sparsity
    return f"{params.get('band', 'fixed')} band {chunks}{sparsity}"


def config_labels(metas: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Readable, distinct row labels for configurations ("A AdamW", "C low band 1d256"), from one
    run's metadata each; the learning rate, then the name, tells apart labels that collide."""
    labels = {name: f"{meta['variant']} {variant_label(meta)}" for name, meta in metas.items()}
    for name, meta in metas.items():
        if list(labels.values()).count(labels[name]) > 1:
            lr = (meta.get("variant_params") or {}).get("lr")
            if lr is not None:
                labels[name] = f"{labels[name]} lr{lr:g}"
    for name in metas:
        if list(labels.values()).count(labels[name]) > 1:
            labels[name] = name
    return labels
