"""Units are parsed strictly: the right SI value, or one clear TransitsimError line."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transitsim.base.errors import TransitsimError
from transitsim.base.units import (
    parse_bytes,
    parse_flop_rate,
    parse_frequency_hz,
    parse_length_m,
    parse_rate_bps,
    parse_time_s,
)

PARSERS = (
    parse_rate_bps,
    parse_time_s,
    parse_length_m,
    parse_bytes,
    parse_frequency_hz,
    parse_flop_rate,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("200 Gb/s", 200e9),
        ("200Gb/s", 200e9),
        ("100 Gbps", 100e9),
        ("25 GB/s", 200e9),
        ("1.5 Tb/s", 1.5e12),
        ("10 kb/s", 1e4),
        ("10 Kb/s", 1e4),
        ("3 Mbit/s", 3e6),
        ("1 GiB/s", 8 * 2**30),
        ("2e2 Gb/s", 200e9),
        ("  400 Gb/s ", 400e9),
    ],
)
def test_rates(text: str, bps: float) -> None:
    assert parse_rate_bps(text) == pytest.approx(bps, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 ms", 5e-3),
        ("5 us", 5e-6),
        ("5 \u00b5s", 5e-6),
        ("5 \u03bcs", 5e-6),
        ("7 ns", 7e-9),
        ("2 min", 120.0),
        ("1.5 h", 5400.0),
        ("0 s", 0.0),
    ],
)
def test_times(text: str, seconds: float) -> None:
    assert parse_time_s(text) == pytest.approx(seconds, rel=1e-15)


def test_lengths_frequencies_bytes() -> None:
    assert parse_length_m("1000 km") == 1e6
    assert parse_length_m("3 m") == 3.0
    assert parse_frequency_hz("10 GHz") == 1e10
    assert parse_frequency_hz("1e9 /s") == 1e9
    assert parse_flop_rate("989 TFLOP/s") == pytest.approx(989e12)
    assert parse_flop_rate("2 PFLOPS") == pytest.approx(2e15)
    assert parse_bytes("1 GB") == 1_000_000_000
    assert parse_bytes("1.1 kB") == 1100  # exact, not 1100.0000000000002
    assert parse_bytes("64 KiB") == 65536
    assert parse_bytes("2 MiB") == 2 * 2**20
    assert parse_bytes(4096) == 4096
    assert parse_bytes("4096") == 4096
    assert isinstance(parse_bytes("1 kB"), int)


@pytest.mark.parametrize(
    ("parser", "value", "fragment"),
    [
        (parse_rate_bps, "fast", 'expected a rate like "200 Gb/s", got "fast"'),
        (parse_rate_bps, 200, "the unit is required"),
        (parse_rate_bps, "200", "the unit is required"),
        (parse_rate_bps, "0 Gb/s", "must be positive"),
        (parse_rate_bps, "-1 Gb/s", "must be positive"),
        (parse_rate_bps, "200 gb/s", 'unknown unit "gb/s"'),
        (parse_rate_bps, "200 mb/s", 'unknown unit "mb/s"'),
        (parse_rate_bps, "1e999 Gb/s", "too large"),
        (parse_rate_bps, True, "got True"),
        (parse_rate_bps, None, "got None"),
        (parse_time_s, "5 sec", 'unknown unit "sec"'),
        (parse_time_s, "-5 ms", "must be non-negative"),
        (parse_time_s, "5 Gb/s", 'unknown unit "Gb/s"'),
        (parse_length_m, "10 miles", 'unknown unit "miles"'),
        (parse_length_m, 1000, "the unit is required"),
        (parse_frequency_hz, "0 GHz", "must be positive"),
        (parse_flop_rate, "989 TB/s", 'unknown unit "TB/s"'),
        (parse_bytes, "1.5 B", "not a whole number"),
        (parse_bytes, -3, "must be non-negative"),
        (parse_bytes, 2.5, "the unit is required"),
        (parse_bytes, "lots", 'got "lots"'),
    ],
)
def test_errors_name_the_text_and_the_unit(parser, value, fragment: str) -> None:
    with pytest.raises(TransitsimError) as info:
        parser(value)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_long_values_are_shortened_to_one_line() -> None:
    with pytest.raises(TransitsimError) as info:
        parse_rate_bps("x" * 500 + "\nsecond line")
    message = str(info.value)
    assert "\n" not in message and len(message) < 150


@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.floats(allow_nan=True),
        st.none(),
        st.booleans(),
        st.lists(st.integers(), max_size=3),
    )
)
def test_fuzz_only_transitsim_errors(value: object) -> None:
    for parser in PARSERS:
        try:
            result = parser(value)
        except TransitsimError as exc:
            assert "\n" not in str(exc)
        else:
            assert math.isfinite(result) and result >= 0


@given(
    st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    st.sampled_from(["Gb/s", "Mb/s", "GB/s"]),
)
def test_round_trip_rates(number: float, unit: str) -> None:
    scale = {"Gb/s": 1e9, "Mb/s": 1e6, "GB/s": 8e9}[unit]
    assert parse_rate_bps(f"{number!r} {unit}") == pytest.approx(number * scale, rel=1e-12)


@pytest.mark.parametrize(
    ("parser", "text", "value"),
    [
        (parse_length_m, "2,000 km", 2e6),
        (parse_length_m, "5,000 km", 5e6),
        (parse_rate_bps, "1,600 Gb/s", 1.6e12),
        (parse_time_s, "1,500 ms", 1.5),
        (parse_bytes, "31,666,944", 31_666_944),
        (parse_bytes, "1,024 MiB", 1024 * 2**20),
    ],
)
def test_thousands_separators_are_accepted(parser, text: str, value: float) -> None:
    """The README writes "5,000 km": every quantity takes the separators it prints."""
    assert parser(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["1,5 Gb/s", "2,00 Gb/s", "2,000,00 Gb/s", ",100 Gb/s"])
def test_a_comma_that_groups_no_three_digits_is_refused(text: str) -> None:
    with pytest.raises(TransitsimError, match="like"):
        parse_rate_bps(text)
