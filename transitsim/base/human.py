"""Numbers as a person reads them: Gb/s, km, ms, GB, and steps as "158 (mean of 3)".

The report and the verdict print through these, so a table never shows `6.5625e+10` or
`158.333`; the CSV and JSON outputs keep raw SI numbers for scripts.
"""

import math

from transitsim.base.units import format_key_value, key_unit

_BYTES = ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _sig(value: float, digits: int = 4) -> str:
    """`digits` significant figures (trailing zeros dropped), thousands separated."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    shown = f"{value:,.{decimals}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def seconds(value: float | None) -> str:
    """A duration: "6.311 s", "12.34 ms", "45.6 µs", "1,234 s"."""
    if _missing(value):
        return "–"
    magnitude = abs(float(value))
    if magnitude >= 1 or magnitude == 0:
        return f"{_sig(float(value))} s"
    if magnitude >= 1e-3:
        return f"{_sig(float(value) * 1e3)} ms"
    return f"{_sig(float(value) * 1e6)} µs"


def size(value: float | None) -> str:
    """A byte count in the largest decimal unit: "16.63 GB", "31.67 MB", "512 B"."""
    if _missing(value):
        return "–"
    number = float(value)
    for factor, unit in _BYTES:
        if abs(number) >= factor:
            return f"{_sig(number / factor)} {unit}"
    return f"{number:,.0f} B"


def steps(mean: float | None, seeds: int | None = None) -> str:
    """Optimiser steps as a whole number; a mean over seeds says so: "158 (mean of 3)"."""
    if _missing(mean):
        return "–"
    text = f"{round(float(mean)):,}"
    return f"{text} (mean of {seeds})" if seeds and seeds > 1 else text


def ratio(value: float | None) -> str:
    """A speed-up or margin: "1.35x"."""
    if _missing(value):
        return "–"
    return f"{float(value):,.3g}x" if abs(float(value)) < 1000 else f"{float(value):,.0f}x"


def param(key: str, value: object) -> str:
    """A grid value (SI) in its key's unit ("10 Gb/s", "5,000 km"); text as written."""
    if _missing(value):
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"  # as the scenario file writes it
    if not isinstance(value, int | float):
        return str(value)
    if key_unit(key) is None:
        return f"{value:,g}"
    return format_key_value(key, float(value))


def loss(value: float) -> str:
    """A loss target: "3.3", "2.0", "2.482"."""
    text = f"{value:.4g}"
    return text if any(c in text for c in ".e") else text + ".0"
