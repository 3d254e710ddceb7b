"""Read nccl-tests standard output (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`,
`broadcast_perf`, `alltoall_perf`) into a table, refusing what is not one whole run.

What is read, as nccl-tests 2.x prints it (src/common.cu), wherever it sits in a log:

- the header `# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) ...`;
- the `#  Rank  3 Group  0 Pid 1890 on worker-1 device  3 [0x99] NVIDIA H100 ...` lines (one
  per rank, `Group` absent in old versions): the rank count and the ranks on each host;
- the column header (`size count type redop root time algbw busbw #wrong time ...`, older
  versions without `root`/`redop` or with `error` for `#wrong`): the first time/algbw/busbw
  triple is out-of-place, the second in-place;
- one row per size, up to the `# Out of bounds values` / `# Avg bus bandwidth` footer.

Everything else is noise and skipped: `NCCL INFO`/`WARN` lines, the command line, markdown
around a quoted log, mpirun's `[1,0]<stdout>:` tags, indentation. Inside the table a line that
starts with a number is a row and must be whole: a truncated row, text in a numeric column, or a
time that disagrees with its own algbw is refused with its line number, never skipped.

Sizes follow nccl-tests: all_reduce and broadcast print each rank's buffer; all_gather the
gathered output (ranks x each rank's part); reduce_scatter each rank's input; alltoall each
rank's send buffer. algbw = size / time; busbw = algbw x the collective's factor (busbw_factor).
"""

import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from transitsim.base.errors import TransitsimError

MAX_FILE_BYTES = 64 << 20  # an NCCL_DEBUG=INFO log of a large job is megabytes; 64 MiB is not
MAX_ROWS = 4096  # nccl-tests sweeps are tens of sizes
MAX_RANKS = 1 << 20
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")
DTYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "half": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}
ALGBW_TOLERANCE = 0.05  # relative; nccl-tests rounds algbw to 2 decimals and time to 3-5 digits
ALGBW_SLACK_GBPS = 0.011  # ... so small algbw values are only known to +-0.005 GB/s

IN_PLACE = ("in-place time", "in-place algbw", "in-place busbw")

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # mpirun --tag-output
_HEADER = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)"
)
_PERF = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|broadcast|alltoall)_perf")
_NCCL_VERSION = re.compile(r"NCCL version (\S+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(.*)$")
_INTEGER = re.compile(r"\d+")


def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): busbw = algbw x this."""
    if collective == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if collective == "broadcast":
        return 1.0
    return (ranks - 1) / ranks  # all_gather, reduce_scatter, alltoall


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


def read_nccl_tests(path: Path | str, collective: str | None = None) -> Table:
    """Parse one nccl-tests output file (see the module doc); `collective` overrides the name
    found in the text (e.g. for a table without its command line)."""
    return parse_nccl_tests(read_text(path), str(path), collective)


def _clean(line: str) -> str:
    return _TAG.sub("", line.strip(), count=1).strip()


def _number(token: str, where: str, column: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise TransitsimError(f"{where}: {column} {token!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TransitsimError(f"{where}: {column} {token!r} is not a finite non-negative number")
    return value


def _optional(token: str, where: str, column: str) -> float:
    return math.nan if token.upper() == "N/A" else _number(token, where, column)


@dataclass
class _Columns:
    """Where each figure sits in a row, from the column header."""

    width: int
    size: int
    count: int
    dtype: int
    time: tuple[int, int | None]
    algbw: tuple[int, int | None]
    busbw: tuple[int, int | None]
    redop: int | None


def _columns(tokens: list[str], where: str) -> _Columns:
    names = [t.lower().lstrip("#") for t in tokens]

    def positions(name: str) -> tuple[int, int | None]:
        found = [i for i, n in enumerate(names) if n == name]
        if not found or len(found) > 2:
            raise TransitsimError(f"{where}: column header without one or two {name!r} columns")
        return found[0], (found[1] if len(found) == 2 else None)

    for name in ("size", "count", "type"):
        if name not in names:
            raise TransitsimError(f"{where}: column header without a {name!r} column")
    time, algbw, busbw = positions("time"), positions("algbw"), positions("busbw")
    if not names.index("type") < time[0] < algbw[0] < busbw[0]:
        raise TransitsimError(f"{where}: column header not in nccl-tests' order")
    return _Columns(
        width=len(names),
        size=names.index("size"),
        count=names.index("count"),
        dtype=names.index("type"),
        time=time,
        algbw=algbw,
        busbw=busbw,
        redop=names.index("redop") if "redop" in names else None,
    )


def _is_row(tokens: list[str], cols: _Columns) -> bool:
    """A line inside the table is a row when it starts with a number (but not as a log line's
    `host:pid:tid` does) or has the row's shape with a data type where the type goes."""
    if not tokens or tokens[0].startswith("#"):
        return False
    if tokens[0][0].isdigit() and ":" not in tokens[0]:
        return True
    return len(tokens) == cols.width and tokens[cols.dtype] in DTYPE_BYTES


def _row(tokens: list[str], cols: _Columns, number: int, source: str) -> tuple[Row, str | None]:
    where = f"{source}:{number}"
    if len(tokens) != cols.width:
        raise TransitsimError(
            f"{where}: truncated or malformed row ({len(tokens)} fields, the header has "
            f"{cols.width})"
        )
    for column, index in (("size", cols.size), ("count", cols.count)):
        if not _INTEGER.fullmatch(tokens[index]):
            raise TransitsimError(f"{where}: {column} {tokens[index]!r} is not a whole number")
    dtype = tokens[cols.dtype]
    if dtype not in DTYPE_BYTES:
        raise TransitsimError(f"{where}: unknown data type {dtype!r}")
    size, count = int(tokens[cols.size]), int(tokens[cols.count])
    if size > 1 << 50:
        raise TransitsimError(f"{where}: size {size:,} bytes is beyond any nccl-tests run")
    in_at = [cols.time[1], cols.algbw[1], cols.busbw[1]]
    figures = [
        _number(tokens[cols.time[0]], where, "time"),
        _number(tokens[cols.algbw[0]], where, "algbw"),
        _number(tokens[cols.busbw[0]], where, "busbw"),
    ] + [
        math.nan if at is None else _optional(tokens[at], where, name)
        for at, name in zip(in_at, IN_PLACE, strict=True)
    ]
    time_us, algbw = figures[0], figures[1]
    if time_us <= 0:
        raise TransitsimError(f"{where}: time {tokens[cols.time[0]]!r} is not positive")
    expected = size / time_us / 1e3  # bytes per microsecond -> GB/s
    if abs(expected - algbw) > ALGBW_SLACK_GBPS + ALGBW_TOLERANCE * max(expected, algbw):
        raise TransitsimError(
            f"{where}: algbw {algbw:g} GB/s disagrees with size / time = {expected:.4g} GB/s "
            "(an edited or corrupt row)"
        )
    redop = tokens[cols.redop] if cols.redop is not None else None
    row = Row(number, size, count, dtype, time_us * 1e-6, algbw, figures[2],
              figures[3] * 1e-6, figures[4], figures[5])  # fmt: skip
    return row, redop


def _collective_named(text: str, source: str) -> str | None:
    """The collective the text names (`all_reduce_perf` on its command line or in `# Collective
    test starting`); refused when it names two."""
    named = list(dict.fromkeys(_PERF.findall(text)))
    if len(named) > 1:
        raise TransitsimError(
            f"{source}: names several tests ({', '.join(n + '_perf' for n in named)}); give one "
            "run per file, or --collective"
        )
    return named[0] if named else None


def _ratio_collective(table_rows: list[Row], ranks: int) -> tuple[str | None, float | None]:
    """The busbw/algbw ratio of the most precise row, and the collective it implies."""
    best = max(table_rows, key=lambda r: r.algbw_gbps)
    if best.algbw_gbps < 1.0:  # two printed decimals: the ratio is not known well enough
        return None, None
    ratio = best.busbw_gbps / best.algbw_gbps
    for name in ("all_reduce", "broadcast", "all_gather"):
        if abs(ratio - busbw_factor(name, ranks)) <= 0.02 * busbw_factor(name, ranks) + 0.006:
            return name, ratio
    return None, ratio


def parse_nccl_tests(text: str, source: str = "<text>", collective: str | None = None) -> Table:
    """Parse nccl-tests output held in `text` (`source` names it in errors)."""
    if collective is not None and collective not in COLLECTIVES:
        raise TransitsimError(
            f"unknown collective {collective!r} (expected one of {', '.join(COLLECTIVES)})"
        )
    lines = [_clean(line) for line in text.splitlines()]
    if not any(lines):
        raise TransitsimError(f"{source}: empty file: not an nccl-tests output")
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    column_lines = [
        i
        for i, line in enumerate(lines)
        if line.startswith("#") and {"size", "time", "algbw", "busbw"} <= set(line[1:].split())
    ]
    if not headers:
        raise TransitsimError(
            f"{source}: no '# nThread ... nGpus ...' header: not an nccl-tests output"
        )
    if not column_lines:
        raise TransitsimError(f"{source}: no column header ('size count type ... busbw'): no table")
    if len(headers) > 1 or len(column_lines) > 1:
        where = ", ".join(str(i + 1) for i in (headers if len(headers) > 1 else column_lines))
        raise TransitsimError(
            f"{source}: holds {max(len(headers), len(column_lines))} nccl-tests runs (lines "
            f"{where}); give one run per file"
        )
    head = _HEADER.match(lines[headers[0]])
    assert head is not None
    threads, gpus = int(head.group(1)), int(head.group(2))
    table = Table(source, "", 0, [], threads=threads, gpus_per_thread=gpus)
    ranks_seen: dict[int, str] = {}
    for number, line in enumerate(lines, 1):
        match = _RANK.match(line)
        if match:
            rank, host = int(match.group(1)), match.group(2)
            if rank in ranks_seen:
                raise TransitsimError(
                    f"{source}:{number}: rank {rank} listed twice (two runs in one file?)"
                )
            if len(ranks_seen) >= MAX_RANKS:
                raise TransitsimError(f"{source}: more than {MAX_RANKS:,} ranks")
            ranks_seen[rank] = host
        version = _NCCL_VERSION.search(line)
        if version and table.nccl_version is None:
            table.nccl_version = version.group(1)
    start = column_lines[0]
    cols = _columns(lines[start][1:].split(), f"{source}:{start + 1}")
    redops: set[str] = set()
    ended = False
    for index in range(start + 1, len(lines)):
        line, number = lines[index], index + 1
        avg = _AVG.match(line)
        if avg:
            table.avg_busbw_gbps = _number(avg.group(1), f"{source}:{number}", "avg bus bandwidth")
            ended = True
            break
        bounds = _OUT_OF_BOUNDS.match(line)
        if bounds:
            if "OK" not in bounds.group(1).split():
                table.notes.append(f"out of bounds values: {bounds.group(1).strip()}")
            continue
        tokens = line.split()
        if not _is_row(tokens, cols):
            continue  # NCCL INFO lines, blank lines, '#' comments inside the table
        if len(table.rows) >= MAX_ROWS:
            raise TransitsimError(f"{source}: more than {MAX_ROWS:,} rows: not one sweep")
        row, redop = _row(tokens, cols, number, source)
        table.rows.append(row)
        if redop is not None:
            redops.add(redop)
    if not table.rows:
        raise TransitsimError(f"{source}: the table has no rows")
    if not ended:
        table.notes.append("no '# Avg bus bandwidth' footer: the run may have been cut short")
    ranks = len(ranks_seen)
    if ranks and sorted(ranks_seen) != list(range(ranks)):
        raise TransitsimError(f"{source}: the Rank lines do not number the ranks 0..{ranks - 1}")
    named = collective or _collective_named(text, source)
    if not ranks:
        ranks = _ranks_from_ratio(table.rows, named, source)
    table.ranks = ranks
    for host in ranks_seen.values():
        table.ranks_per_host[host] = table.ranks_per_host.get(host, 0) + 1
    table.collective = _settle_collective(table, named, redops, source)
    return table


def _ranks_from_ratio(rows: list[Row], named: str | None, source: str) -> int:
    """Without Rank lines: n from busbw / algbw of the most precise row (all_reduce: 2(n-1)/n,
    all_gather, reduce_scatter, alltoall: (n-1)/n)."""
    best = max(rows, key=lambda r: r.algbw_gbps)
    if named in (None, "broadcast") or best.algbw_gbps < 1.0:
        raise TransitsimError(f"{source}: no '#  Rank ... on HOST device ...' lines: ranks unknown")
    ratio = best.busbw_gbps / best.algbw_gbps
    share = ratio / 2 if named == "all_reduce" else ratio  # (n - 1) / n
    if not 0 < share < 1:
        raise TransitsimError(f"{source}: no Rank lines and busbw/algbw {ratio:.4g} gives no n")
    ranks = round(1 / (1 - share))
    if abs(busbw_factor(named, ranks) - ratio) > 0.01 * ratio + 0.006:
        raise TransitsimError(f"{source}: no Rank lines and busbw/algbw {ratio:.4g} gives no n")
    return ranks


def _settle_collective(table: Table, named: str | None, redops: set[str], source: str) -> str:
    """The collective named (or inferred from busbw/algbw and the redop column), checked
    against the busbw factor nccl-tests applied."""
    inferred, ratio = _ratio_collective(table.rows, table.ranks)
    if named is None:
        if inferred == "all_reduce" and table.ranks == 2:  # 2(n-1)/n = 1, broadcast's factor
            if not redops:
                raise TransitsimError(
                    f"{source}: the text names no test and on 2 ranks busbw = algbw fits "
                    "all_reduce and broadcast alike; give --collective"
                )
            inferred = "all_reduce" if redops - {"none"} else "broadcast"
        if inferred == "all_gather" and redops - {"none"}:
            inferred = "reduce_scatter"  # the only (n-1)/n collective that reduces
        elif inferred == "all_gather":
            raise TransitsimError(
                f"{source}: the text names no test and busbw/algbw = (n-1)/n fits all_gather "
                "and alltoall alike; give --collective"
            )
        if inferred is None:
            raise TransitsimError(f"{source}: the text names no test; give --collective")
        table.notes.append(f"collective {inferred} inferred from busbw / algbw")
        return inferred
    if ratio is not None:
        factor = busbw_factor(named, table.ranks)
        if abs(ratio - factor) > 0.02 * factor + 0.006:
            raise TransitsimError(
                f"{source}: busbw / algbw = {ratio:.4g}, but {named} on {table.ranks} ranks has "
                f"factor {factor:.4g} (wrong collective or rank count?)"
            )
    return named
