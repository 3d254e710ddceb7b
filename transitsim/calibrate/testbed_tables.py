"""The testbed's measured table (docs/testbed/measured.parquet, `transitsim testbed run`) as
tables the fit reads like nccl-tests ones.

One table per (rate, collective, workers) group: each point's median time over its repeats is
the row's time. The testbed's `bytes` is each rank's payload; as nccl-tests prints sizes, an
all_gather row's size is the gathered output (workers x bytes). Read with pyarrow, bounded and
checked like every other input: one line for what is not such a table.
"""

import math
import os
import stat
from pathlib import Path

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.nccl_tests import MAX_FILE_BYTES, MAX_ROWS, Row, Table, busbw_factor

COLUMNS = ("rate_bps", "collective", "workers", "bytes", "median_s")
TESTBED_COLLECTIVES = ("all_reduce", "all_gather")


def _frame(path: Path):  # -> pd.DataFrame
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TransitsimError(f"{path}: no such file") from None
    except OSError as exc:
        raise TransitsimError(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise TransitsimError(f"{path}: not a regular file: not a testbed table")
    if os.stat(path).st_size > MAX_FILE_BYTES:
        raise TransitsimError(f"{path}: more than {MAX_FILE_BYTES:,} bytes: not a testbed table")
    import pyarrow.parquet as pq  # only this command reads Parquet

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises many kinds for a file that is not Parquet
        raise TransitsimError(f"{path}: not a Parquet table ({type(exc).__name__})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise TransitsimError(f"{path}: not a testbed table (no column {', '.join(missing)})")
    if table.num_rows == 0 or table.num_rows > MAX_ROWS:
        raise TransitsimError(f"{path}: {table.num_rows:,} rows (1..{MAX_ROWS:,} expected)")
    return table.select(list(COLUMNS)).to_pandas()


def _number(value, where: str, column: str, integer: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TransitsimError(f"{where}: {column} {value!r} is not a number") from None
    if not math.isfinite(number) or number <= 0 or (integer and number != int(number)):
        kind = "a positive whole number" if integer else "a positive finite number"
        raise TransitsimError(f"{where}: {column} {value!r} is not {kind}")
    return number


def read_testbed_tables(path: Path | str) -> list[tuple[float, Table]]:
    """(shaped rate in b/s, table) for every (rate, collective, workers) group, sorted."""
    path = Path(path)
    frame = _frame(path)
    groups: dict[tuple[float, str, int], list[Row]] = {}
    for index, record in enumerate(frame.itertuples(index=False)):
        where = f"{path}: row {index}"
        collective = record.collective
        if collective not in TESTBED_COLLECTIVES:
            raise TransitsimError(f"{where}: collective {collective!r} (all_reduce or all_gather)")
        rate = _number(record.rate_bps, where, "rate_bps")
        workers = int(_number(record.workers, where, "workers", integer=True))
        payload = int(_number(record.bytes, where, "bytes", integer=True))
        time_s = _number(record.median_s, where, "median_s")
        if workers < 2 or workers > 1 << 20 or payload > 1 << 50:
            raise TransitsimError(f"{where}: {workers} workers, {payload} bytes out of range")
        size = payload * workers if collective == "all_gather" else payload
        algbw = size / time_s / 1e9
        busbw = algbw * busbw_factor(collective, workers)
        row = Row(index, size, size // 4, "float", time_s, algbw, busbw,
                  math.nan, math.nan, math.nan)  # fmt: skip
        groups.setdefault((rate, collective, workers), []).append(row)
    tables = []
    for (rate, collective, workers), rows in sorted(groups.items()):
        sizes = [r.size_bytes for r in rows]
        if len(set(sizes)) != len(sizes):
            raise TransitsimError(
                f"{path}: {collective} on {workers} workers at {rate:g} b/s repeats a size"
            )
        source = f"{path}[{collective}, {workers} workers, {rate / 1e6:g} Mb/s]"
        hosts = {f"h{i}": 1 for i in range(workers)}  # the testbed: one rank per namespace
        table = Table(source, collective, workers, sorted(rows, key=lambda r: r.size_bytes), hosts)
        tables.append((rate, table))
    return tables
