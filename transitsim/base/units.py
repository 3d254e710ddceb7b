"""Strict parsing of quantities with explicit units ("200 Gb/s", "5 ms", "1000 km", "1 GB").

Scenarios say what they mean in SI units; everything below the scenario layer sees plain floats
in bits/s, seconds, metres, bytes and Hz. A bare number is refused (except for byte counts), so a
"200" that meant Gb/s can never silently become 200 b/s.
"""

import json
import math
import re
from decimal import Decimal

from transitsim.base.errors import TransitsimError

# Whole part with optional thousands separators ("5,000 km", as the README writes them); a comma
# that does not group three digits ("1,5 Gb/s") is refused, never read as a decimal point.
_WHOLE = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_NUMBER = rf"[+-]?(?:{_WHOLE}(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY = re.compile(rf"\s*(?P<number>{_NUMBER})\s*(?P<unit>\S.*?)?\s*")

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _rate_units() -> dict[str, float]:
    """bits/s and bytes/s with SI (and binary, for bytes) prefixes: 'Gb/s', 'Gbps', 'GB/s'..."""
    units: dict[str, float] = {}
    for prefix, scale in _SI.items():
        for bit_unit in ("b/s", "bit/s", "bps"):
            units[prefix + bit_unit] = scale
        for byte_unit in ("B/s", "Bps"):
            units[prefix + byte_unit] = 8 * scale
    for prefix, scale in _BINARY.items():
        units[prefix + "B/s"] = 8 * scale
        units[prefix + "b/s"] = scale
    return units


_RATE_UNITS = _rate_units()
_TIME_UNITS = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ns": 1e-9,
    "ps": 1e-12,
    "min": 60.0,
    "h": 3600.0,
}
_LENGTH_UNITS = {"m": 1.0, "km": 1e3, "cm": 1e-2, "mm": 1e-3}
_BYTE_UNITS = {
    "B": 1.0,
    "kB": 1e3,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "PB": 1e15,
    **{prefix + "B": scale for prefix, scale in _BINARY.items()},
}
_FREQUENCY_UNITS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9, "THz": 1e12, "/s": 1.0}
_FLOP_RATE_UNITS = {
    prefix + unit: scale
    for prefix, scale in {**_SI, "E": 1e18}.items()
    for unit in ("FLOP/s", "FLOPS", "flop/s")
}


def show_value(value: object, limit: int = 60) -> str:
    """A user's value as it should appear in a one-line error message (quoted, shortened)."""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse(
    text: object,
    units: dict[str, float],
    what: str,
    example: str,
    allow_zero: bool,
) -> Decimal:
    """Number times unit scale, refusing anything that is not exactly '<number> <known unit>'.

    Decimal arithmetic keeps '1.1 kB' exactly 1100 bytes; callers convert to float or int.
    """
    expected = f"expected {what} like {json.dumps(example, ensure_ascii=False)}"
    if isinstance(text, bool) or not isinstance(text, str):
        if isinstance(text, int | float):
            raise TransitsimError(f"{expected} (the unit is required), got {show_value(text)}")
        raise TransitsimError(f"{expected}, got {show_value(text)}")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise TransitsimError(f"{expected}, got {show_value(text)}")
    unit = match.group("unit")
    if unit is None:
        raise TransitsimError(f"{expected} (the unit is required), got {show_value(text)}")
    if unit.startswith(","):
        raise TransitsimError(
            f"{expected}: a comma must group three digits (2,000), got {show_value(text)}"
        )
    if unit not in units:
        raise TransitsimError(f"{expected}: unknown unit {show_value(unit)} in {show_value(text)}")
    try:
        number = match.group("number").replace(",", "")
        value = Decimal(number) * Decimal(repr(units[unit]))
        as_float = float(value)
    except ArithmeticError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise TransitsimError(f"{expected}, got {show_value(text)} (too large)")
    if as_float < 0 or (as_float == 0 and not allow_zero):
        sign = "non-negative" if allow_zero else "positive"
        raise TransitsimError(f"{expected}: must be {sign}, got {show_value(text)}")
    return value


# What a quantity may be: beyond these a value is a typo whose result would be inf or nan
# ("1e-300 b/s" makes every transfer take forever), never a question worth simulating.
RATE_RANGE_BPS = (1.0, 1e18)
MAX_DURATION_S = 1e9  # about 32 years
MAX_LENGTH_M = 1e10  # 10 million km
FREQUENCY_RANGE_HZ = (1.0, 1e18)
FLOP_RATE_RANGE = (1.0, 1e24)
MAX_BYTES = 2**50  # a pebibyte


def _bounded(value: float, low: float, high: float, what: str, text: object, unit: str) -> float:
    if value < low or value > high:
        raise TransitsimError(
            f"{what} must lie between {low:g} and {high:g} {unit}, got {show_value(text)}"
        )
    return value


def parse_rate_bps(text: object) -> float:
    """A positive data rate in bits per second ('200 Gb/s', '25 GB/s', '100 Gbps')."""
    value = float(_parse(text, _RATE_UNITS, "a rate", "200 Gb/s", allow_zero=False))
    return _bounded(value, *RATE_RANGE_BPS, "a rate", text, "b/s")


def parse_time_s(text: object) -> float:
    """A non-negative duration in seconds ('5 ms', '2 us', '1.5 h')."""
    value = float(_parse(text, _TIME_UNITS, "a duration", "5 ms", allow_zero=True))
    return _bounded(value, 0.0, MAX_DURATION_S, "a duration", text, "s")


def parse_length_m(text: object) -> float:
    """A non-negative length in metres ('1000 km', '3 m')."""
    value = float(_parse(text, _LENGTH_UNITS, "a length", "1000 km", allow_zero=True))
    return _bounded(value, 0.0, MAX_LENGTH_M, "a length", text, "m")


def parse_frequency_hz(text: object) -> float:
    """A positive frequency in Hz ('10 GHz', '1e9 /s')."""
    value = float(_parse(text, _FREQUENCY_UNITS, "a frequency", "10 GHz", allow_zero=False))
    return _bounded(value, *FREQUENCY_RANGE_HZ, "a frequency", text, "Hz")


def parse_flop_rate(text: object) -> float:
    """A positive compute rate in FLOP per second ('989 TFLOP/s', '2 PFLOPS')."""
    value = float(_parse(text, _FLOP_RATE_UNITS, "a compute rate", "989 TFLOP/s", allow_zero=False))
    return _bounded(value, *FLOP_RATE_RANGE, "a compute rate", text, "FLOP/s")


def parse_bytes(text: object) -> int:
    """A non-negative whole number of bytes ('1 GB', '64 KiB', or a plain integer like 4096)."""
    expected = 'expected a size like "1 GB"'
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise TransitsimError(f"{expected}: must be non-negative, got {text}")
        count = text
    elif isinstance(text, str) and re.fullmatch(rf"\s*\+?{_WHOLE}\s*", text):
        count = int(text.replace(",", ""))
    else:
        value = _parse(text, _BYTE_UNITS, "a size", "1 GB", allow_zero=True)
        if value != value.to_integral_value():
            raise TransitsimError(
                f"{expected}: not a whole number of bytes, got {show_value(text)}"
            )
        count = int(value)
    if count > MAX_BYTES:
        raise TransitsimError(f"a size must be at most {MAX_BYTES:,} bytes, got {show_value(text)}")
    return count


# Units of the scenario keys a grid may sweep (their values arrive in SI units).
KEY_UNITS = {
    "rate": "b/s",
    "host_lane_rate": "b/s",
    "line_rate": "b/s",
    "agg_rate": "b/s",
    "length": "m",
    "latency": "s",
    "overhead": "s",
    "forwarding_latency": "s",
    "agg_slot_size": "B",
}
_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))


def key_unit(key: str) -> str | None:
    """The SI unit of a (dotted) scenario key such as "wan_link.rate", or None."""
    return KEY_UNITS.get(key.rsplit(".", 1)[-1])


def format_key_value(key: str, value: float) -> str:
    """A grid value (SI) as a scenario writes it: rate 1e10 -> "10 Gb/s", 5e6 m -> "5,000 km"
    (parse_* read it back: thousands separators are accepted)."""
    unit = key_unit(key)
    if unit is None or value == 0:
        return f"{value:,g}"
    if unit == "m":
        return f"{value / 1e3:,g} km" if abs(value) >= 1e3 else f"{value:,g} m"
    scales = _SMALL if unit == "s" else _PREFIXES
    for factor, prefix in scales:
        if abs(value) >= factor or factor == scales[-1][0]:
            return f"{value / factor:,g} {prefix}{unit}"
    return f"{value:,g} {unit}"
