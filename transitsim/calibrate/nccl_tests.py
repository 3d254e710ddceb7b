"""Read nccl-tests standard output (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`,
`broadcast_perf`, `alltoall_perf`) into a table, refusing what is not one run.

Published logs are seldom the program's whole output: a job's log under `srun -l` or `mpirun
--tag-output` prefixes, a markdown page's indented console block, a header-only excerpt with
rows elided (`...`), NCCL INFO lines between the rows. What is read, wherever it sits
(src/common.cu and util.cu of nccl-tests 2.x):

- the header `# nThread 1 nGpus 1 minBytes 8 ...` (optional: nThread x nGpus divides the rank
  count);
- the `#  Rank  3 Group  0 Pid 1890 on worker-1 device  3 [0x99] NVIDIA H100 ...` lines
  (optional; `Group` absent in old versions): the rank count and the ranks on each host;
- the column header (`size count type redop root time algbw busbw #wrong time ...`; older
  versions without `root`, with `error` for `#wrong`): the first time/algbw/busbw triple is
  out-of-place, the second in-place. Without it the layout is inferred from the rows' field
  count (calibrate/nccl_rows.py);
- one row per size, up to the `# Avg bus bandwidth` footer (its absence is noted).

Without Rank lines the rank count is `ranks` (`--ranks`), else read off busbw / algbw; without
the test's name the collective is `collective` (`--collective`), else read off busbw / algbw too
(calibrate/nccl_ranks.py, with a note saying so). Everything else is noise and skipped. Inside
the table a line that starts with a number is a row and must be whole: a truncated row, text in
a numeric column, or a time that disagrees with its own algbw is refused with its line number.

Sizes follow nccl-tests: all_reduce and broadcast print each rank's buffer; all_gather the
gathered output (ranks x each rank's part: the count column is each rank's elements);
reduce_scatter each rank's input (the count: its output); alltoall each rank's send buffer.
algbw = size / time; busbw = algbw x the collective's factor (busbw_factor). Rows of 0 bytes
(nccl-tests -b 0) are read and kept; the fit leaves them out (calibrate/fit.py).
"""

import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.nccl_ranks import (
    COLLECTIVES,
    MAX_RANKS,
    Bounds,
    Hints,
    bounds,
    busbw_factor,
    infer_collective,
    infer_ranks,
    named_collective,
)
from transitsim.calibrate.nccl_rows import (
    ALGBW_SLACK_GBPS,
    ALGBW_TOLERANCE,
    DTYPE_BYTES,
    IN_PLACE,
    Columns,
    RowFigures,
    clean,
    header_columns,
    is_column_header,
    number,
    read_row,
    row_columns,
    row_start,
    row_text,
    unnumbered,
)

__all__ = [
    "ALGBW_SLACK_GBPS",
    "ALGBW_TOLERANCE",
    "COLLECTIVES",
    "DTYPE_BYTES",
    "IN_PLACE",
    "MAX_FILE_BYTES",
    "MAX_RANKS",
    "MAX_ROWS",
    "Row",
    "Table",
    "busbw_factor",
    "parse_nccl_tests",
    "read_nccl_tests",
    "read_text",
]

MAX_FILE_BYTES = 64 << 20  # an NCCL_DEBUG=INFO log of a large job is megabytes; 64 MiB is not
MAX_ROWS = 4096  # nccl-tests sweeps are tens of sizes
HEADER = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)"
    r"(?:\s+\[[^\]]*\])?\s*(.*?)\s*$"  # the bus id, then the GPU's name ("NVIDIA H100 80GB HBM3")
)
NCCL_VERSION = re.compile(r"NCCL version (\S+)")
AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(.*)$")
TABLE_END = re.compile(r"^(?:```|~~~|#\s*Collective test concluded)")  # a page's fence, the end


@dataclass(frozen=True)
class Row:
    """One size of a sweep: the out-of-place figures, and the in-place ones (nan if N/A)."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    time_s: float
    algbw_gbps: float  # GB/s, as printed (1e9 bytes per second)
    busbw_gbps: float
    in_time_s: float
    in_algbw_gbps: float
    in_busbw_gbps: float


@dataclass
class Table:
    """One nccl-tests run: what it measured, on how many ranks, on which hosts."""

    source: str
    collective: str
    ranks: int
    rows: list[Row]
    ranks_per_host: dict[str, int] = field(default_factory=dict)
    gpu_names: set[str] = field(default_factory=set)  # the Rank lines' device names
    threads: int = 1
    gpus_per_thread: int = 1
    nccl_version: str | None = None
    avg_busbw_gbps: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> int:
        return len(self.ranks_per_host)


def read_text(path: Path | str, what: str = "nccl-tests output") -> str:
    """The file's text, bounded and checked before it is opened (a FIFO would block forever,
    /dev/zero never ends, a folder or a binary file is not a log)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TransitsimError(f"{path}: no such file") from None
    except OSError as exc:
        raise TransitsimError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise TransitsimError(f"{path}: is a folder, not an {what} file")
    if not stat.S_ISREG(mode):
        raise TransitsimError(f"{path}: not a regular file (a pipe or a device is not an {what})")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TransitsimError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise TransitsimError(f"{path}: more than {MAX_FILE_BYTES:,} bytes: not an {what}")
    if b"\x00" in raw:
        raise TransitsimError(f"{path}: binary data (NUL bytes): not an {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TransitsimError(f"{path}: not UTF-8 text: not an {what}") from None


def read_nccl_tests(
    path: Path | str, collective: str | None = None, ranks: int | None = None
) -> Table:
    """Parse one nccl-tests output file (see the module doc); `collective` and `ranks` are for
    a log that does not say them (refused where it says otherwise)."""
    return parse_nccl_tests(read_text(path), str(path), collective, ranks)


def _table_start(lines: list[str], source: str) -> tuple[int, Columns]:
    """Where the rows begin and how they are laid out: after the column header, else at the
    first row (its field count gives the layout)."""
    headers = [i for i, line in enumerate(lines) if HEADER.match(line)]
    column_lines = [i for i, line in enumerate(lines) if is_column_header(line)]
    if len(headers) > 1 or len(column_lines) > 1:
        where = ", ".join(str(i + 1) for i in (headers if len(headers) > 1 else column_lines))
        raise TransitsimError(
            f"{source}: holds {max(len(headers), len(column_lines))} nccl-tests runs (lines "
            f"{where}); give one run per file"
        )
    if column_lines:
        start = column_lines[0]
        return start + 1, header_columns(lines[start], f"{source}:{start + 1}")
    for index, line in enumerate(lines):
        row = row_start(line)
        if row is not None:
            return index, row_columns(row.split(), f"{source}:{index + 1}")
    raise TransitsimError(
        f"{source}: no column header ('size count type ... busbw') and no rows: no nccl-tests table"
    )


def _read_rows(lines: list[str], table: Table, source: str) -> list[RowFigures]:
    """The table's rows into `table` (with its footer's notes); each row's RowFigures."""
    start, cols = _table_start(lines, source)
    figures: list[RowFigures] = []
    ended = False
    for index in range(start, len(lines)):
        line, line_no = lines[index], index + 1
        avg = AVG.match(line)
        if avg:
            table.avg_busbw_gbps = number(avg.group(1), f"{source}:{line_no}", "avg bus bandwidth")
            ended = True
            break
        if TABLE_END.match(line):
            break
        bounds_ = OUT_OF_BOUNDS.match(line)
        if bounds_:
            if "OK" not in bounds_.group(1).split():
                table.notes.append(f"out of bounds values: {bounds_.group(1).strip()}")
            continue
        text = row_text(line, cols)
        if text is None:
            continue  # NCCL INFO lines, blank lines, '...', '#' comments inside the table
        if len(table.rows) >= MAX_ROWS:
            raise TransitsimError(f"{source}: more than {MAX_ROWS:,} rows: not one sweep")
        fields, extra = read_row(text.split(), cols, f"{source}:{line_no}")
        table.rows.append(Row(line_no, **fields))
        figures.append(extra)
    if not table.rows:
        raise TransitsimError(f"{source}: the table has no rows")
    if not ended:
        table.notes.append("no '# Avg bus bandwidth' footer: the run may have been cut short")
    wrong = sum(1 for f in figures if f.wrong > 0)
    if wrong:
        table.notes.append(f"{wrong} row(s) with #wrong > 0: nccl-tests found wrong results")
    return figures


def _ranks_listed(lines: list[str], table: Table, source: str) -> dict[int, str]:
    """The `#  Rank` lines (rank -> host) and the NCCL version, from anywhere in the log."""
    seen: dict[int, str] = {}
    for line_no, line in enumerate(lines, 1):
        match = RANK.match(line)
        if match:
            rank, host = int(match.group(1)), match.group(2)
            if rank in seen:
                raise TransitsimError(
                    f"{source}:{line_no}: rank {rank} listed twice (two runs in one file?)"
                )
            if len(seen) >= MAX_RANKS or rank >= MAX_RANKS:
                raise TransitsimError(f"{source}: more than {MAX_RANKS:,} ranks")
            seen[rank] = host
            if match.group(4):
                table.gpu_names.add(match.group(4)[:80])
        version = NCCL_VERSION.search(line)
        if version and table.nccl_version is None:
            table.nccl_version = version.group(1)
    return seen


def _per_rank(table: Table) -> int | None:
    """size / (count x type size), where every row with elements gives the same whole number:
    the rank count for all_gather, reduce_scatter and alltoall (nccl-tests' count is a rank's)."""
    found = set()
    for row in table.rows:
        if row.count > 0:
            whole, left = divmod(row.size_bytes, row.count * DTYPE_BYTES[row.dtype])
            found.add(whole if left == 0 else 0)
    return found.pop() if len(found) == 1 and 0 not in found else None


def _bounds(table: Table, figures: list[RowFigures]) -> Bounds | None:
    """busbw / algbw over every row's figures, out- and in-place (nccl_ranks.bounds)."""
    pairs = zip(table.rows, figures, strict=True)
    intervals = [(row.line, *interval) for row, f in pairs for interval in f.ratios]
    best = max(table.rows, key=lambda r: r.algbw_gbps)
    shown = best.busbw_gbps / best.algbw_gbps if best.algbw_gbps > 0 else math.nan
    return bounds(intervals, shown)


def _check_factor(table: Table, found: Bounds | None, source: str) -> None:
    """The collective and rank count, however found, against busbw / algbw: within the bounds
    every row sets (exact, as nccl-tests computes busbw from algbw), or where the rows
    disagree, within 2 % of the most precise row's."""
    factor = busbw_factor(table.collective, table.ranks)
    if found is not None and found.agree:
        ratio = found.shown
        fits = found.low * (1 - 1e-6) <= factor <= found.high * (1 + 1e-6)
    else:
        best = max(table.rows, key=lambda r: r.algbw_gbps)
        if best.algbw_gbps < 1.0:  # two printed decimals: the ratio is not known well enough
            return
        ratio = best.busbw_gbps / best.algbw_gbps
        fits = abs(ratio - factor) <= 0.02 * factor + 0.006
    if not fits:
        raise TransitsimError(
            f"{source}: busbw / algbw = {ratio:.4g}, but {table.collective} on {table.ranks} "
            f"ranks has factor {factor:.4g} (wrong collective or rank count?)"
        )


def parse_nccl_tests(
    text: str, source: str = "<text>", collective: str | None = None, ranks: int | None = None
) -> Table:
    """Parse nccl-tests output held in `text` (`source` names it in errors; `collective` and
    `ranks` as in read_nccl_tests)."""
    if collective is not None and collective not in COLLECTIVES:
        raise TransitsimError(
            f"unknown collective {collective!r} (expected one of {', '.join(COLLECTIVES)})"
        )
    if ranks is not None and not 2 <= ranks <= MAX_RANKS:
        raise TransitsimError(f"--ranks must lie in 2..{MAX_RANKS:,}, got {ranks}")
    lines = [clean(line) for line in unnumbered(text.splitlines())]
    if not any(lines):
        raise TransitsimError(f"{source}: empty file: not an nccl-tests output")
    table = Table(source, "", 0, [])
    figures = _read_rows(lines, table, source)
    head = next((m for m in map(HEADER.match, lines) if m), None)
    if head is not None:
        table.threads, table.gpus_per_thread = int(head.group(1)), int(head.group(2))
    seen = _ranks_listed(lines, table, source)
    hints = _hints(table, seen, ranks, source)
    named = named_collective(text, collective, source)
    found = _bounds(table, figures)
    count = hints.known
    if named is None:
        redops = {f.redop for f in figures if f.redop is not None}
        roots = {f.root for f in figures if f.root is not None}
        named, settled, note = infer_collective(found, hints, redops, roots, source)
        table.notes.append(note)
        count = count if count is not None else settled
    if count is None:
        count, note = infer_ranks(named, found, hints, source)
        table.notes.append(note)
    table.collective, table.ranks = named, count
    if hints.listed is not None:
        for host in seen.values():
            table.ranks_per_host[host] = table.ranks_per_host.get(host, 0) + 1
    _check_factor(table, found, source)
    return table


def _hints(table: Table, seen: dict[int, str], ranks: int | None, source: str) -> Hints:
    """What the log and `--ranks` say of the rank count, checked against each other."""
    listed = len(seen) if seen and sorted(seen) == list(range(len(seen))) else None
    above = max(seen) + 1 if seen else 0
    multiple = max(table.threads * table.gpus_per_thread, 1)
    if ranks is not None:
        if listed is not None and ranks != listed:
            raise TransitsimError(
                f"{source}: --ranks {ranks}, but the '#  Rank' lines list {listed} ranks"
            )
        if ranks < above:
            raise TransitsimError(f"{source}: --ranks {ranks}, but the log lists rank {above - 1}")
        if ranks % multiple:
            raise TransitsimError(
                f"{source}: --ranks {ranks}, but the header's nThread x nGpus = {multiple} does "
                "not divide it"
            )
    if seen and listed is None:
        table.notes.append(
            f"the '#  Rank' lines list {len(seen)} rank(s), not 0..n-1 (an excerpt?): the rank "
            "count is read elsewhere, the hosts not at all"
        )
    return Hints(listed, ranks, multiple, above, _per_rank(table))
