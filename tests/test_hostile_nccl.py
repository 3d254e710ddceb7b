"""Hostile nccl-tests files, generated: hypothesis mutates nccl-tests outputs (lines deleted,
duplicated, swapped or cut short, a field replaced by hostile text or numbers, junk inserted,
the file cut at any byte) and feeds them to the parser and to `transitsim calibrate nccl-tests`.

The promise checked for every example: the parser returns a whole table (rows in file order,
positive finite times, the algbw that nccl-tests printed consistent with size / time, a rank
count of at least 1) or raises TransitsimError, never anything else; the command exits 2 with
exactly one line on stderr and writes nothing, or exits 0 with a network file that loads as
`replay --network` loads it. Random text is either refused or read the same way.

The outputs mutated are made up in nccl-tests' exact layout (tests/nccl_fixtures.py: a markdown
page's indented console block, NCCL INFO lines inside the table, 2.17 and 2.18 columns), not the
real files, which are not in the repository: the fuzzing runs wherever the suite does.
"""

import math
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from cli_run import assert_refused, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nccl_fixtures import GH200_2X1, GH200_2X4, SWEEPS

from transitsim.base.errors import TransitsimError
from transitsim.calibrate import parse_nccl_tests
from transitsim.calibrate.nccl_tests import ALGBW_SLACK_GBPS, ALGBW_TOLERANCE
from transitsim.scenario import network_from_dict

TEXTS = {name: sweep.text() for name, sweep in sorted(SWEEPS.items())}
SMALL = [GH200_2X1.name, GH200_2X4.name]  # quick to fit
EXAMPLES = int(os.environ.get("TRANSITSIM_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
PARSE_FUZZ = settings(FUZZ, max_examples=EXAMPLES * 2)  # the parser alone is quicker

HOSTILE_FIELDS = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "-1",
            "0",
            "0.0",
            "1e999",
            "1e-320",
            "N/A",
            "",
            "1,5",
            "0x10",
            "2" * 40,
            "float",
            "sum",
            "#",
            "-",
            "１２",
            "\x00",
            "\t",
            "12 34",
            "é",
        ]  # fmt: skip
    ),
    st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


@st.composite
def mutated(draw, names: list[str]) -> str:
    """An nccl-tests output with one to three hostile edits."""
    lines = TEXTS[draw(st.sampled_from(names))].splitlines()
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "cut", "field", "junk"]))
        event(kind)
        if kind == "delete":
            del lines[at]
        elif kind == "duplicate":
            lines.insert(at, lines[at])
        elif kind == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == "cut":
            lines[at] = lines[at][: draw(st.integers(0, max(len(lines[at]) - 1, 0)))]
        elif kind == "field":
            fields = lines[at].split()
            if fields:
                fields[draw(st.integers(0, len(fields) - 1))] = draw(HOSTILE_FIELDS)
                lines[at] = "  ".join(fields)
        else:
            lines.insert(at, draw(st.text(max_size=60)))
    text = "\n".join(lines)
    if draw(st.booleans()):  # the file cut short at any character
        text = text[: draw(st.integers(0, len(text)))]
    return text


def assert_whole(table) -> None:
    """What a table that was not refused must be."""
    assert table.ranks >= 1 and table.rows
    assert table.collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                "alltoall")  # fmt: skip
    lines = [row.line for row in table.rows]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    for row in table.rows:
        assert math.isfinite(row.time_s) and row.time_s > 0 and row.size_bytes >= 0
        expected = row.size_bytes / (row.time_s * 1e6) / 1e3
        slack = ALGBW_SLACK_GBPS + ALGBW_TOLERANCE * max(expected, row.algbw_gbps)
        assert abs(expected - row.algbw_gbps) <= slack * (1 + 1e-9)
    if table.ranks_per_host:
        assert sum(table.ranks_per_host.values()) == table.ranks


@PARSE_FUZZ
@given(text=mutated(sorted(TEXTS)))
def test_the_parser_reads_a_whole_table_or_refuses(text: str) -> None:
    try:
        table = parse_nccl_tests(text, "fuzz")
    except TransitsimError as exc:
        assert "\n" not in str(exc)
        event("refused")
        return
    event("read")
    assert_whole(table)


@PARSE_FUZZ
@given(text=st.text(max_size=400))
def test_random_text_is_refused_or_read_whole(text: str) -> None:
    try:
        table = parse_nccl_tests(text, "random")
    except TransitsimError:
        return
    assert_whole(table)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_output_cut_at_every_line_is_read_whole_or_refused(name: str) -> None:
    """Exhaustive over where a copy-paste or a killed run stops: each prefix of whole lines."""
    lines = TEXTS[name].splitlines()
    footer = next(i for i, line in enumerate(lines) if "Avg bus bandwidth" in line)
    read = 0
    for end in range(len(lines) + 1):
        try:
            table = parse_nccl_tests("\n".join(lines[:end]), name)
        except TransitsimError:
            continue
        read += 1
        assert_whole(table)
        cut = any("cut short" in note for note in table.notes)
        assert cut == (end <= footer)  # cut before its footer: read, but said to be cut short
    assert read >= 3


@FUZZ
@given(text=mutated(SMALL))
def test_calibrate_keeps_the_one_line_promise(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "table.txt", Path(folder) / "net.yaml"
        source.write_text(text, encoding="utf-8")
        code, stdout, stderr = run_cli(["calibrate", "nccl-tests", str(source), "-o", str(out)])
        if code == 2:
            event("refused")
            assert_refused(["calibrate"], code, stderr)
            assert not out.exists() and not stdout
            return
        event("calibrated")
        assert code == 0, stderr
        spec = network_from_dict(yaml.safe_load(out.read_text()))
        assert spec.workers >= 2 and spec.host_link.payload_bps > 0
        assert sorted(p.name for p in Path(folder).iterdir()) == ["net.yaml", "table.txt"]
