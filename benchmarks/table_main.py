"""The command line the table benchmarks share: read a folder of nccl-tests outputs (default
../shared/nccl-tests), print the benchmark's lines, its wall time on stderr; one line and exit 2
when the folder is not there."""

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "nccl-tests"


def table_main(name: str, table_lines: Callable[[Path], Iterable[str]], argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else SHARED
    if not folder.is_dir():
        print(f"{name}: {folder} is not a folder of nccl-tests outputs", file=sys.stderr)
        return 2
    start = time.perf_counter()
    for line in table_lines(folder):
        print(line)
    print(f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0
