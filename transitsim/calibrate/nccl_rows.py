"""The lines of an nccl-tests table as they sit in a real log: found under whatever the launcher
or the page put before them, laid out from the column header or, without one, from the rows.

Real logs are rarely the program's bare output: `srun -l` puts `0: ` before each line, `mpirun
--tag-output` `[1,0]<stdout>:`, a markdown page indents its console block, a collector adds a
timestamp, a listing its line numbers. `clean` strips the known prefixes (`unnumbered` the
line numbers); what is left before a `#` marker or a row's `size count type` (`clean`,
`row_text`) is cut there, so an unknown prefix costs nothing either. nccl-tests changed its
columns over the years (no `root` before 2.13, `error` for `#wrong`, per-iteration columns in
2.19): `header_columns` reads them by name, and `row_columns` infers them from a row's field
count when the header was not copied.

Each row is checked whole (`read_row`): a truncated row, text in a numeric column or an algbw that
disagrees with size / time is refused with its line number, never skipped. With each row comes
what the rank count and the collective are inferred from (calibrate/nccl_ranks.py): the redop,
the root, and the interval busbw / algbw lies in, given how many digits nccl-tests printed.
"""

import math
import re
from dataclasses import dataclass

from transitsim.base.errors import TransitsimError

MAX_SIZE_BYTES = 1 << 50
# No collective of one nccl-tests row takes hours, and no link carries 10 TB/s (NVLink 5 is
# 1.8 TB/s a GPU): a row beyond either is corrupt, and a fit through it would be nonsense.
MAX_TIME_US = 1e10
MAX_BANDWIDTH_GBPS = 1e4
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
GROUPS = (4, 8)  # time algbw busbw #wrong, and 2.19's -P adds i_min i_max i_p99 i_cv%

TAG = re.compile(r"^\[[^\]\s]*?\d+,\d+\]<\w+>:")  # mpirun --tag-output: [1,0]<stdout>:
LABEL = re.compile(r"^(?:P\d+\s+)?\d+:\s")  # srun -l / --label: "0: ", "12: "
MARKER = re.compile(
    r"#\s*(?:nThread\s|Rank\s+\d|Avg bus bandwidth|Out of bounds values|Collective test"
    r"|Using devices|nccl-tests version|\s*\(B\)|\s+out-of-place|\s*$)"  # and the bare '#'
)
ROW_START = re.compile(
    r"(?<![\w.+:-])\d+\s+\d+\s+(?:" + "|".join(sorted(DTYPE_BYTES, key=len, reverse=True)) + r")"
    r"(?!\S)"
)
LINE_NUMBER = re.compile(r"^\s*(\d+)(?:[\t:|]|\s|$)")
NUMBER_TEXT = re.compile(r"[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
INTEGER = re.compile(r"\d+")
ROOT_TEXT = re.compile(r"-?\d+")


def unnumbered(lines: list[str]) -> list[str]:
    """The lines without the numbers of a listing (`cat -n`, an editor's copy): stripped only
    where every non-blank line starts with its own line number, counting up by one, and some
    line is a `#` line behind it (rows alone of a `-i 1` sweep count up by one too)."""
    numbers = [LINE_NUMBER.match(line) for line in lines]
    first = next((int(m.group(1)) - i for i, m in enumerate(numbers) if m), None)
    if first is None or any(
        line.strip() and (m is None or int(m.group(1)) != first + i)
        for i, (line, m) in enumerate(zip(lines, numbers, strict=True))
    ):
        return lines
    out = [line[m.end() :] if m else line for line, m in zip(lines, numbers, strict=True)]
    return out if any(line.lstrip().startswith("#") for line in out) else lines


def clean(line: str) -> str:
    """The line without indentation, trailing spaces, `srun -l` labels and mpirun tags (nested,
    as an indented block of tagged lines has them), and without any other prefix before an
    nccl-tests `#` marker."""
    text = line.strip()
    for _ in range(4):
        stripped = LABEL.sub("", TAG.sub("", text, count=1).strip(), count=1).strip()
        if stripped == text:
            break
        text = stripped
    if not text.startswith("#") and "#" in text:
        at = text.index("#")
        if MARKER.match(text, at) or is_column_header(text[at:]):
            return text[at:]
    return text


def is_column_header(text: str) -> bool:
    """`#  size  count  type ... time  algbw  busbw ...` (any version)."""
    if not text.startswith("#"):
        return False
    names = {name.lower() for name in text[1:].split()}
    return {"size", "algbw", "busbw"} <= names and bool(names & {"time", "cputime"})


def row_start(text: str) -> str | None:
    """The text from where a row (`size count type ...`) starts in the line, if one does."""
    found = ROW_START.search(text)
    return text[found.start() :] if found else None


@dataclass(frozen=True)
class Columns:
    """Where each figure sits in a row: from the column header, or inferred from a row."""

    width: int
    size: int
    count: int
    dtype: int
    time: tuple[int, int | None]
    algbw: tuple[int, int | None]
    busbw: tuple[int, int | None]
    redop: int | None
    root: int | None = None
    wrong: tuple[int, ...] = ()  # the #wrong columns (not the old `error` ones)
    inferred: bool = False


def header_columns(text: str, where: str) -> Columns:
    """The columns named by the header line `text` (which starts with `#`)."""
    names = [t.lower().lstrip("#") for t in text[1:].split()]
    if "cputime" in names:
        raise TransitsimError(
            f"{where}: the table times the CPU (nccl-tests -C 1), not the collective; give a run "
            "without -C"
        )

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
    return Columns(
        width=len(names),
        size=names.index("size"),
        count=names.index("count"),
        dtype=names.index("type"),
        time=time,
        algbw=algbw,
        busbw=busbw,
        redop=names.index("redop") if "redop" in names else None,
        root=names.index("root") if "root" in names else None,
        wrong=tuple(i for i, n in enumerate(names) if n == "wrong"),
    )


def row_columns(tokens: list[str], where: str) -> Columns:
    """Without a column header: the layout of the row `tokens`, from its field count. A row is
    `size count type`, then `redop` (from 2.0) and `root` (from 2.13), then the out-of-place
    and the in-place groups (time algbw busbw #wrong; 2.19's per-iteration figures make 8)."""
    for group in GROUPS:
        for groups in (2, 1):
            prefix = len(tokens) - group * groups
            if prefix not in (3, 4, 5):
                continue
            if prefix >= 4 and NUMBER_TEXT.fullmatch(tokens[3]):
                break  # a number where the redop goes: not this layout
            if prefix == 5 and not ROOT_TEXT.fullmatch(tokens[4]):
                break
            second = prefix + group if groups == 2 else None
            return Columns(
                width=len(tokens),
                size=0,
                count=1,
                dtype=2,
                time=(prefix, second),
                algbw=(prefix + 1, None if second is None else second + 1),
                busbw=(prefix + 2, None if second is None else second + 2),
                redop=3 if prefix >= 4 else None,
                root=4 if prefix == 5 else None,
                inferred=True,
            )
    raise TransitsimError(
        f"{where}: no column header, and a row of {len(tokens)} fields is not a layout "
        "nccl-tests prints (size count type [redop [root]] time algbw busbw #wrong, twice)"
    )


def row_text(text: str, cols: Columns) -> str | None:
    """The row in a line inside the table, or None for noise. A line that starts with a number
    (not a log line's `host:pid:tid`) is a row and must be whole, as is one with the row's shape
    and a data type where the type goes; a row behind an unknown prefix (a timestamp) starts
    at `size count type`."""
    tokens = text.split()
    if not tokens or tokens[0].startswith("#"):
        return None
    if tokens[0][0].isdigit() and ":" not in tokens[0]:
        if INTEGER.fullmatch(tokens[0]):
            return text
        typed = len(tokens) > cols.dtype and tokens[cols.dtype] in DTYPE_BYTES
        return row_start(text) or (text if typed else None)  # a date before it, or a bad size
    if len(tokens) == cols.width and tokens[cols.dtype] in DTYPE_BYTES:
        return text
    return row_start(text)


def number(token: str, where: str, column: str) -> float:
    """A finite non-negative number, or a one-line refusal naming the column."""
    try:
        value = float(token)
    except ValueError:
        raise TransitsimError(f"{where}: {column} {token!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TransitsimError(f"{where}: {column} {token!r} is not a finite non-negative number")
    return value


def _check_plausible(out: list[float], inside: list[float], where: str) -> None:
    """Refuse a row whose time or bandwidth no real run measures (NaN: not printed)."""
    for (time_us, algbw, busbw), place in ((out, "out-of-place"), (inside, "in-place")):
        if time_us > MAX_TIME_US:
            raise TransitsimError(
                f"{where}: {place} time {time_us:.4g} us is more than {MAX_TIME_US:.0e} us (hours "
                "for one collective): not a measurement"
            )
        for name, value in (("algbw", algbw), ("busbw", busbw)):
            if value > MAX_BANDWIDTH_GBPS:
                raise TransitsimError(
                    f"{where}: {place} {name} {value:.4g} GB/s is more than any link carries "
                    f"({MAX_BANDWIDTH_GBPS:,.0f} GB/s): not a measurement"
                )


def half_unit(token: str) -> float:
    """Half the last printed digit's unit: how far the printed value may be from the true one
    (nccl-tests prints 2, 1 or 0 decimals, or an exponent, as the width allows)."""
    match = NUMBER_TEXT.fullmatch(token)
    if match is None:
        return math.inf
    decimals = len(match.group(2) or "")
    return 0.5 * 10.0 ** (int(match.group(3) or 0) - decimals)


def ratio_interval(size: int, texts: tuple[str, str, str]) -> tuple[float, float] | None:
    """Where busbw / algbw lies for one (time, algbw, busbw) group, as printed: algbw is known
    to its last digit and, more precisely for large rows, from size / time to the time's last
    digit; busbw to its last digit. None when algbw may be 0."""
    time, algbw, busbw = (float(t) for t in texts)
    h_time, h_algbw, h_busbw = (half_unit(t) for t in texts)
    low, high = max(algbw - h_algbw, 0.0), algbw + h_algbw
    if time > h_time:
        from_time = (size / (time + h_time) / 1e3, size / (time - h_time) / 1e3)
        if max(low, from_time[0]) <= min(high, from_time[1]):  # both hold: the tighter
            low, high = max(low, from_time[0]), min(high, from_time[1])
    if low <= 0:
        return None
    slack = 1e-9
    return max(busbw - h_busbw, 0.0) / high * (1 - slack), (busbw + h_busbw) / low * (1 + slack)


@dataclass(frozen=True)
class RowFigures:
    """What a row says besides its Row: what the rank count and the collective are read from."""

    redop: str | None
    root: int | None
    wrong: float  # the #wrong columns' sum (0 where N/A or absent)
    ratios: tuple[tuple[float, float], ...]  # busbw / algbw intervals, out- and in-place


def read_row(tokens: list[str], cols: Columns, where: str) -> tuple[dict, RowFigures]:
    """The row's fields (Row's, but `line`), checked whole, and its RowFigures."""
    if len(tokens) != cols.width:
        what = "the first row has" if cols.inferred else "the header has"
        raise TransitsimError(
            f"{where}: truncated or malformed row ({len(tokens)} fields, {what} {cols.width})"
        )
    for column, index in (("size", cols.size), ("count", cols.count)):
        if not INTEGER.fullmatch(tokens[index]):
            raise TransitsimError(f"{where}: {column} {tokens[index]!r} is not a whole number")
    dtype = tokens[cols.dtype]
    if dtype not in DTYPE_BYTES:
        raise TransitsimError(f"{where}: unknown data type {dtype!r}")
    size, count = int(tokens[cols.size]), int(tokens[cols.count])
    if size > MAX_SIZE_BYTES:
        raise TransitsimError(f"{where}: size {size:,} bytes is beyond any nccl-tests run")
    groups = [(cols.time[0], cols.algbw[0], cols.busbw[0])]
    second = (cols.time[1], cols.algbw[1], cols.busbw[1])
    if second[0] is not None and second[1] is not None and second[2] is not None:
        groups.append((second[0], second[1], second[2]))
    names = ("time", "algbw", "busbw")
    out = [number(tokens[i], where, name) for i, name in zip(groups[0], names, strict=True)]
    inside = [math.nan] * 3
    if len(groups) == 2:  # N/A where nccl-tests had nothing to print
        inside = [
            math.nan if tokens[i].upper() == "N/A" else number(tokens[i], where, name)
            for i, name in zip(groups[1], IN_PLACE, strict=True)
        ]
    time_us, algbw = out[0], out[1]
    if time_us <= 0:
        raise TransitsimError(f"{where}: time {tokens[cols.time[0]]!r} is not positive")
    _check_plausible(out, inside, where)
    expected = size / time_us / 1e3  # bytes per microsecond -> GB/s
    if abs(expected - algbw) > ALGBW_SLACK_GBPS + ALGBW_TOLERANCE * max(expected, algbw):
        raise TransitsimError(
            f"{where}: algbw {algbw:g} GB/s disagrees with size / time = {expected:.4g} GB/s "
            "(an edited or corrupt row)"
        )
    ratios = []
    for group, figures in zip(groups, (out, inside), strict=False):  # in-place: if printed
        if all(math.isfinite(f) for f in figures) and figures[0] > 0:
            interval = ratio_interval(size, (tokens[group[0]], tokens[group[1]], tokens[group[2]]))
            if interval is not None:
                ratios.append(interval)
    root = None
    if cols.root is not None and ROOT_TEXT.fullmatch(tokens[cols.root]):
        root = int(tokens[cols.root])
    wrong = 0.0
    for index in cols.wrong:
        try:
            value = float(tokens[index])
        except ValueError:
            continue  # N/A (nccl-tests -c 0) or text: not a count of wrong values
        wrong += value if math.isfinite(value) and value > 0 else 0.0
    fields = {
        "size_bytes": size,
        "count": count,
        "dtype": dtype,
        "time_s": time_us * 1e-6,
        "algbw_gbps": algbw,
        "busbw_gbps": out[2],
        "in_time_s": inside[0] * 1e-6,
        "in_algbw_gbps": inside[1],
        "in_busbw_gbps": inside[2],
    }
    redop = tokens[cols.redop] if cols.redop is not None else None
    return fields, RowFigures(redop, root, wrong, tuple(ratios))
