"""Every real nccl-tests output in the steering repo's shared/nccl-tests/ (and more/) is read as
its source describes it (shared/nccl-tests/README.md, more/SOURCES.txt): rows, rank count,
collective, sizes; and `transitsim calibrate nccl-tests FILE -o NET` writes a network from each.

The files are others' (not in the repository); they sit in ../shared beside the checkout here
and in CI. Where that folder exists these tests run (a file in it that EXPECTED does not list
fails, so that a new one is looked at); only without the folder are they skipped.

Variants made from two real files (one new layout with every header line, one old layout
without any) must read the same rows: prefixes of `srun -l`, `mpirun --tag-output` and
timestamps added or removed, indentation, CRLF, '...' elisions and NCCL INFO lines between the
rows, the header lines removed (the rank count then read off busbw / algbw, or given).
"""

import re
from pathlib import Path

import pytest
import yaml
from test_hostile_fuzz import assert_refused, run_cli

from transitsim.base.errors import TransitsimError
from transitsim.calibrate import parse_nccl_tests, read_nccl_tests
from transitsim.calibrate.model import exchange_for

SHARED = Path(__file__).resolve().parents[2] / "shared" / "nccl-tests"
GIB, MIB = 1 << 30, 1 << 20
# file -> (rows, of them of 0 bytes, ranks, collective, first size, last size, --collective
# needed: the file names no test and its factor fits all_gather and alltoall alike)
EXPECTED = {
    "alps-2x1-gh200-all_reduce.txt": (8, 0, 2, "all_reduce", MIB, 128 * MIB, None),
    "alps-2x4-gh200-all_reduce.txt": (25, 0, 8, "all_reduce", 8, 128 * MIB, None),
    "more/deepops-2xdgxa100-ib-all_reduce.txt": (30, 0, 16, "all_reduce", 8, 4 * GIB, None),
    "more/deepops-2xdgx1-v100-roce-all_reduce.txt": (29, 0, 16, "all_reduce", 8, 2 * GIB, None),
    "more/awsome-2xp4de-a100-efa-all_reduce.txt": (29, 0, 16, "all_reduce", 8, 2 * GIB, None),
    # the excerpt: the 0-byte row, '...', then 64 MiB .. 2 GiB (6 rows): 7 rows read, 0 B kept
    "more/awsome-2xp5-h100-efa-eks-all_reduce-excerpt.txt": (
        7,
        1,
        16,
        "all_reduce",
        0,
        2 * GIB,
        None,
    ),  # fmt: skip
    "more/awsome-p5-awsbatch-8rank-all_reduce.txt": (32, 0, 8, "all_reduce", 8, 16 * GIB, None),
    "more/gcp-a3high-2x8-h100-tcpx-all_gather.txt": (
        10,
        0,
        16,
        "all_gather",
        MIB,
        512 * MIB,
        "all_gather",
    ),  # fmt: skip
}
WITH_RANK_LINES = {"alps-2x1-gh200-all_reduce.txt", "alps-2x4-gh200-all_reduce.txt"}


def real_files() -> list[str]:
    """Every nccl-tests table in shared/nccl-tests/ and more/, relative names."""
    if not SHARED.is_dir():
        return []
    found = [*SHARED.glob("*.txt"), *SHARED.glob("more/*.txt")]
    skip = ("LICENSE", "SOURCES", "README")
    return sorted(str(p.relative_to(SHARED)) for p in found if not p.name.startswith(skip))


NEEDS_SHARED = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is not here")


@NEEDS_SHARED
def test_every_real_file_is_listed() -> None:
    assert real_files() == sorted(EXPECTED)


@NEEDS_SHARED
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_file_reads_as_its_source_says(name: str) -> None:
    rows, empty, ranks, collective, first, last, option = EXPECTED[name]
    table = read_nccl_tests(SHARED / name, option)
    assert len(table.rows) == rows
    assert sum(r.size_bytes == 0 for r in table.rows) == empty
    assert (table.ranks, table.collective) == (ranks, collective)
    sizes = [r.size_bytes for r in table.rows]
    assert sizes == sorted(set(sizes)) and (sizes[0], sizes[-1]) == (first, last)
    assert all(r.time_s > 0 and r.in_time_s > 0 for r in table.rows)
    inferred = [n for n in table.notes if "ranks, from busbw / algbw" in n]
    if name.split("/")[-1] in WITH_RANK_LINES:
        assert not inferred and sum(table.ranks_per_host.values()) == ranks
    else:
        assert len(inferred) == 1 and inferred[0].startswith(f"{ranks} ranks")
        assert table.ranks_per_host == {}
    if option is not None:  # the file does not say which test: refused without the option
        with pytest.raises(TransitsimError, match="fits all_gather and alltoall alike"):
            read_nccl_tests(SHARED / name)


@NEEDS_SHARED
def test_the_all_gather_sizes_are_the_gathered_whole() -> None:
    """nccl-tests' all_gather size is the gathered output and its count each rank's elements:
    the model's exchange moves each rank's part, size / ranks = count x 4 B."""
    table = read_nccl_tests(SHARED / "more/gcp-a3high-2x8-h100-tcpx-all_gather.txt", "all_gather")
    for row in table.rows:
        assert row.size_bytes == row.count * 4 * table.ranks
        exchange = exchange_for("all_gather", "ring_allgather", table.ranks, row.size_bytes)
        assert exchange.payload_bytes == row.count * 4


@NEEDS_SHARED
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_calibrate_writes_a_network_from_each_real_file(name: str, tmp_path: Path) -> None:
    _, _, ranks, collective, _, _, option = EXPECTED[name]
    out = tmp_path / "net.yaml"
    argv = ["calibrate", "nccl-tests", str(SHARED / name), "-o", str(out)]
    code, stdout, stderr = run_cli([*argv, *(["--collective", option] if option else [])])
    assert code == 0, stderr
    assert yaml.safe_load(out.read_text())["workers"] == ranks
    assert f"{collective} as transitsim's" in stdout and f"{ranks} ranks" in stdout
    if option is None and name.split("/")[-1] not in WITH_RANK_LINES:
        assert "ranks, from busbw / algbw" in stderr  # the note says the count was inferred


# Variants of a real file: each function takes and returns the file's lines
NOISE = [
    "nid005471:204199:204199 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    "nid005487:155257:155301 [3] NCCL WARN NET/OFI Request 0x7f2a completed with error",
    "  ...",
    "",
    "[...]",
]


def _rows_at(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if re.search(r"\d\s+(float|half|bfloat16)\s", line)]


def _interleave(lines: list[str]) -> list[str]:
    """NCCL INFO / WARN lines, '...' and blank lines between the rows."""
    out, rows = [], set(_rows_at(lines))
    for index, line in enumerate(lines):
        out.append(line)
        if index in rows:
            out.append(NOISE[index % len(NOISE)])
    return out


def _strip_header(lines: list[str]) -> list[str]:
    """No '# nThread', '# Using devices', Rank or command lines: a header-only excerpt."""
    drop = ("nThread", "Rank", "Using devices", "_perf", "nccl-tests version")
    return [line for line in lines if not any(word in line for word in drop)]


def _rows_only(lines: list[str]) -> list[str]:
    rows = _rows_at(lines)
    return lines[rows[0] : rows[-1] + 1]


VARIANTS = {
    "as published": lambda lines: lines,
    "dedented": lambda lines: [line.strip() for line in lines],
    "srun -l": lambda lines: [f"0: {line.strip()}" for line in lines],
    "srun -l, 2 digits": lambda lines: [f"12: {line}" for line in lines],
    "mpirun tags": lambda lines: [f"[1,0]<stdout>:{line.strip()}" for line in lines],
    "indented tags": lambda lines: [f"   [1,0]<stdout>:{line.strip()}  " for line in lines],
    "stderr tags": lambda lines: [f"[1,0]<stderr>: {line}" for line in lines],
    "timestamps": lambda lines: [
        f"2024-05-01T12:00:{i % 60:02d}.123Z {x}" for i, x in enumerate(lines)
    ],  # fmt: skip
    "trailing spaces": lambda lines: [line + "   \t " for line in lines],
    "INFO lines and '...'": _interleave,
    "tagged INFO lines": lambda lines: [
        f"[1,{i % 3}]<stdout>:{x}" for i, x in enumerate(_interleave(lines))
    ],  # fmt: skip
    "no header": _strip_header,
    "no column header": lambda lines: [line for line in lines if "size" not in line],
    "rows only": _rows_only,
    "rows only, srun -l, INFO": lambda lines: [f"0: {x}" for x in _interleave(_rows_only(lines))],
}
BASES = {  # a new-layout file with every header line, an old-layout file without any
    "alps-2x4-gh200-all_reduce.txt": 8,
    "more/deepops-2xdgxa100-ib-all_reduce.txt": 16,
}


def _figures(table) -> list[tuple]:
    return [
        (r.size_bytes, r.count, r.dtype, r.time_s, r.algbw_gbps, r.busbw_gbps, r.in_time_s)
        for r in table.rows
    ]


@NEEDS_SHARED
@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("crlf", [False, True])
def test_variants_of_a_real_file_read_the_same_rows(base: str, variant: str, crlf: bool) -> None:
    original = read_nccl_tests(SHARED / base)
    lines = VARIANTS[variant](SHARED.joinpath(base).read_text().splitlines())
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    ranks = BASES[base]
    for given in (None, ranks):
        table = parse_nccl_tests(text, variant, None, given)
        assert _figures(table) == _figures(original), (variant, given)
        assert (table.ranks, table.collective) == (ranks, "all_reduce")
        inferred = any("ranks, from busbw / algbw" in note for note in table.notes)
        has_ranks = any(re.search(r"#\s*Rank\s+\d", line) for line in lines)
        assert inferred == (given is None and not has_ranks), table.notes


DEEPOPS_A100 = "more/deepops-2xdgxa100-ib-all_reduce.txt"
DISAGREE = {  # what the one line says -> (file, options)
    "--ranks 16, but the '#  Rank' lines list 8": ("alps-2x4-gh200-all_reduce.txt", "16"),
    "busbw / algbw = 1.875 fits no collective on 12 ranks": (DEEPOPS_A100, "12"),
    "all_reduce on 12 ranks has factor 1.833": (DEEPOPS_A100, "12", "--collective", "all_reduce"),
    "--collective all_gather, but the text names all_reduce_perf": (
        "alps-2x4-gh200-all_reduce.txt",
        "8",
        "--collective",
        "all_gather",
    ),  # fmt: skip
    "nThread x nGpus = 4 does not divide it": ("alps-2x4-gh200-all_reduce.txt", "8", "-"),
}


@NEEDS_SHARED
@pytest.mark.parametrize("reason", sorted(DISAGREE))
def test_options_that_disagree_with_the_log_are_refused(reason: str, tmp_path: Path) -> None:
    """--ranks against the Rank lines, the header or (without them) busbw / algbw; --collective
    against the test the text names."""
    name, ranks, *extra = DISAGREE[reason]
    source, out = SHARED / name, tmp_path / "net.yaml"
    if extra == ["-"]:  # the same file run with 4 GPUs per process and the Rank lines elided
        text = source.read_text().replace("nGpus 1", "nGpus 4")
        source, extra, ranks = tmp_path / "edited.txt", [], "6"
        source.write_text("\n".join(x for x in text.splitlines() if "Rank" not in x))
    argv = ["calibrate", "nccl-tests", str(source), "-o", str(out), "--ranks", ranks, *extra]
    code, stdout, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
    assert reason in stderr and not out.exists() and not stdout


def summary() -> list[str]:
    """One line per real file: rows, ranks, collective as read, and the worst fitted error
    line `calibrate nccl-tests` prints (the fit's accuracy is reported, not tested, here)."""
    import tempfile

    out = [f"{'file':54} {'rows':>4} {'0 B':>3} {'ranks':>5}  {'collective':11} worst fitted"]
    for name in real_files():
        option = EXPECTED.get(name, (None,) * 7)[6]
        table = read_nccl_tests(SHARED / name, option)
        with tempfile.TemporaryDirectory() as folder:
            argv = ["calibrate", "nccl-tests", str(SHARED / name), "-o", f"{folder}/net.yaml"]
            code, stdout, stderr = run_cli([*argv, *(["--collective", option] if option else [])])
        worst = re.search(r"worst \|error\| [\d.]+ % \([^)]*\)", stdout)
        empty = sum(r.size_bytes == 0 for r in table.rows)
        shown = worst[0] if code == 0 and worst else f"exit {code}: {stderr.strip()}"
        out.append(
            f"{name:54} {len(table.rows):4d} {empty:3d} {table.ranks:5d}  {table.collective:11} "
            f"{shown}"
        )
    return out


if __name__ == "__main__":  # python tests/test_nccl_real_logs.py: the table of the real files
    print("\n".join(summary()))
