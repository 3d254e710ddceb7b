"""The layouts and gaps of real nccl-tests logs, on made-up outputs (tests/nccl_fixtures.py, so
these run without the real files): prefixes, a missing header or column header, 2.19's
per-iteration columns, Rank lines cut to an excerpt, the rank count and the collective read off
busbw / algbw or given, and what stays refused (one line, naming the option that would help)."""

import re

import pytest
from nccl_fixtures import GH200_2X4, H100_2X8

from transitsim.base.errors import TransitsimError
from transitsim.calibrate import parse_nccl_tests

ROW = re.compile(r"^\s*\d+\s+\d+\s+float\s")


def _figures(table) -> list[tuple]:
    return [(r.size_bytes, r.time_s, r.algbw_gbps, r.busbw_gbps, r.in_time_s) for r in table.rows]


def _without(text: str, *words: str) -> str:
    return "\n".join(x for x in text.splitlines() if not any(w in x for w in words)) + "\n"


BASE = parse_nccl_tests(H100_2X8.text(), "h100")


@pytest.mark.parametrize(
    "prefix", ["0: ", "15: ", "[1,0]<stdout>:", "[1,3]<stderr>: ", "   ", "\t", "2024-05-01 "]
)
def test_any_line_prefix_reads_the_same_table(prefix: str) -> None:
    text = "".join(f"{prefix}{line}\r\n" for line in H100_2X8.text().splitlines())
    table = parse_nccl_tests(text, "prefixed")
    assert _figures(table) == _figures(BASE) and table.ranks == 16
    assert table.ranks_per_host == {"node-a017": 8, "node-b203": 8}


def _numbered(text: str) -> str:
    return "".join(f"{i:6d}\t{line}\n" for i, line in enumerate(text.splitlines(), 120))


def test_numbered_lines_read_the_same_table() -> None:
    """A log shown with line numbers (`cat -n`), with its column header and without."""
    assert _figures(parse_nccl_tests(_numbered(H100_2X8.text()), "cat -n")) == _figures(BASE)
    headerless = _numbered(_without(H100_2X8.text(), "size"))
    assert _figures(parse_nccl_tests(headerless, "cat -n, no header")) == _figures(BASE)
    rows = [line for line in H100_2X8.text().splitlines() if ROW.match(line)]
    with pytest.raises(TransitsimError, match="truncated or malformed row"):
        parse_nccl_tests(_numbered("\n".join(rows)), "numbered rows alone: numbers kept")


def test_without_its_header_lines_the_table_says_the_rest() -> None:
    """No command line, nThread header, Rank lines, column header: rows and footer only."""
    bare = _without(H100_2X8.text(), "_perf", "nThread", "Rank", "size")
    table = parse_nccl_tests(bare, "bare")
    assert _figures(table) == _figures(BASE)
    assert (table.collective, table.ranks, table.hosts) == ("all_reduce", 16, 0)
    assert "collective all_reduce inferred from busbw / algbw = 1.875" in table.notes
    assert "16 ranks, from busbw / algbw = 1.875 (all_reduce: 2(n-1)/n)" in table.notes
    given = parse_nccl_tests(bare, "given", "all_reduce", 16)
    assert _figures(given) == _figures(BASE)
    assert not [n for n in given.notes if "inferred" in n or "ranks, from" in n]


def _per_iteration(text: str) -> str:
    """nccl-tests 2.19 -P: i_min i_max i_p99 i_cv% after each group's #wrong."""
    out = []
    for line in text.splitlines():
        if "#wrong" in line:
            line = line.replace("#wrong", "#wrong  i_min  i_max  i_p99  i_cv%")
        elif ROW.match(line):
            fields = line.split()
            fields = fields[:9] + ["1.0", "2.0", "3.0", "4.5"] + fields[9:] + ["1", "2", "3", "4"]
            line = "  ".join(fields)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_per_iteration_columns_of_2_19_are_read_with_or_without_the_header() -> None:
    text = _per_iteration(H100_2X8.text())
    assert _figures(parse_nccl_tests(text, "2.19 -P")) == _figures(BASE)
    headerless = _without(text, "size")
    assert _figures(parse_nccl_tests(headerless, "2.19 -P, no header")) == _figures(BASE)


def test_the_old_layout_without_a_header_is_read_from_its_field_count() -> None:
    """Pre-2.13 rows (no root): 12 fields; the same sweep."""
    rows = []
    for line in H100_2X8.text().splitlines():
        if ROW.match(line):
            fields = line.split()
            line = "  ".join(fields[:4] + fields[5:])
        rows.append(line)
    table = parse_nccl_tests(_without("\n".join(rows), "size"), "old, no header")
    assert _figures(table) == _figures(BASE) and table.ranks == 16


def test_an_excerpt_s_rank_lines_give_hosts_no_count() -> None:
    lines = H100_2X8.text().splitlines()
    kept = [x for x in lines if "Rank" not in x or re.search(r"Rank\s+(0|15) ", x)]
    at = next(i for i, x in enumerate(kept) if "Rank 15" in x)
    table = parse_nccl_tests("\n".join([*kept[:at], "...", *kept[at:]]), "excerpt")
    assert table.ranks == 16 and table.ranks_per_host == {}
    assert any("list 2 rank(s), not 0..n-1" in note for note in table.notes)


def test_the_table_ends_at_the_page_s_fence() -> None:
    """Prose after a console block is not a row, even when it starts with a number."""
    text = _without(GH200_2X4.text(), "Avg bus", "Out of bounds", "concluded")
    table = parse_nccl_tests(text + "2 nodes, 4 GH200 each.\n", "page")
    assert len(table.rows) == len(GH200_2X4.sizes)
    assert any("cut short" in note for note in table.notes)


def _one_row_edited(text: str, size: int, column: int, value: str) -> str:
    out = []
    for line in text.splitlines():
        fields = line.split()
        if ROW.match(line) and int(fields[0]) == size:
            fields[column] = value
            line = "  ".join(fields)
        out.append(line)
    return "\n".join(out) + "\n"


def _last_row(text: str) -> list[str]:
    return [line for line in text.splitlines() if ROW.match(line)][-1].split()


REFUSED = {  # what the one line must say -> the text, its --collective and --ranks
    "times the CPU (nccl-tests -C 1)": (
        H100_2X8.text().replace("root     time", "root  cputime"),
        None,
        None,
    ),
    "a sendrecv_perf run": (
        H100_2X8.text().replace("all_reduce_perf", "sendrecv_perf"),
        None,
        None,
    ),
    "--collective all_gather, but the text names all_reduce_perf": (
        H100_2X8.text(),
        "all_gather",
        None,
    ),
    "--ranks 8, but the '#  Rank' lines list 16 ranks": (H100_2X8.text(), None, 8),
    "--ranks must lie in 2..": (H100_2X8.text(), None, 1),
    "busbw / algbw differs between rows": (  # the largest row's busbw made 8 ranks' factor
        _one_row_edited(
            _without(H100_2X8.text(), "Rank"),
            8 << 30,
            7,
            f"{float(_last_row(H100_2X8.text())[6]) * 1.75:.2f}",
        ),
        None,
        None,
    ),
    "is not precise enough to tell the rank count (all_reduce: 2(n-1)/n fits": (
        "\n".join(  # rows up to 16 KiB: algbw of a few 0.1 GB/s, known to 0.005
            x
            for x in _without(GH200_2X4.text(), "Rank").splitlines()
            if not ROW.match(x) or int(x.split()[0]) <= 16 << 10
        ),
        None,
        None,
    ),
}


@pytest.mark.parametrize("reason", sorted(REFUSED))
def test_what_cannot_be_read_is_refused_in_one_line(reason: str) -> None:
    text, collective, ranks = REFUSED[reason]
    with pytest.raises(TransitsimError) as caught:
        parse_nccl_tests(text, "made-up", collective, ranks)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_an_imprecise_all_gather_s_rank_count_comes_from_size_and_count() -> None:
    """64 ranks: (n-1)/n = 0.984, printed to 2 decimals at a few GB/s fits 50..100 ranks;
    nccl-tests' count (each rank's elements) settles it."""
    rows = []
    for size, us in ((16 << 20, 4000.0), (32 << 20, 7000.0)):
        algbw = size / us / 1e3
        busbw = algbw * 63 / 64
        rows.append(
            f"{size:12d}  {size // 4 // 64:12d}  float  none  -1  {us:7.1f}  {algbw:6.2f}  "
            f"{busbw:6.2f}  0  {us:7.1f}  {algbw:6.2f}  {busbw:6.2f}  0"
        )
    table = parse_nccl_tests("\n".join(rows), "all_gather, 64 ranks", "all_gather")
    assert table.ranks == 64
    assert any(n.startswith("64 ranks") and "size / count" in n for n in table.notes)
