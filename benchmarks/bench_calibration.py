"""Issue 42's calibration that predicts, on every real nccl-tests table: what `transitsim
calibrate nccl-tests FILE` fits and predicts by default, beside a plain alpha-beta line.

    python benchmarks/bench_calibration.py [FOLDER]

FOLDER (default: ../shared/nccl-tests beside the checkout) holds the real outputs (`*.txt` and
`more/*.txt`, not LICENSE/SOURCES/README). Per file, one markdown row: the rows read (of them at
least 64 KiB), the ranks, the parameters fitted (on all rows; on the rows left after the
hold-out), the fit's worst / median |error| on the rows it saw and on every second size held
out, alpha-beta's two figures, and whether issue 42's targets hold (fitted 10 % / 3 %, held out
15 % / 5 %). docs/calibration.md holds this output; tests/test_calibrate_holdout.py checks that
it still does.
"""

import sys
from pathlib import Path

from transitsim.calibrate.accuracy import (
    HELD_OUT_MEDIAN_TOLERANCE,
    HELD_OUT_TOLERANCE,
    Accuracy,
    Errors,
    accuracy,
)
from transitsim.calibrate.nccl_fit import NCCL_MIN_SIZE_BYTES, calibrate_nccl
from transitsim.calibrate.nccl_search import MEDIAN_TOLERANCE
from transitsim.calibrate.nccl_tests import read_nccl_tests

sys.path.insert(0, str(Path(__file__).resolve().parent))  # table_main.py, beside this script
from table_main import table_main  # noqa: E402

# how a file must be read where it does not say: the gcp table names no test and its busbw /
# algbw fits all_gather and alltoall alike; its source (more/SOURCES.txt) says all_gather
COLLECTIVE = {"gcp-a3high-2x8-h100-tcpx-all_gather.txt": "all_gather"}
TOLERANCE = 0.10
HEADER = (
    "| file | rows (>= 64 KiB) | ranks | parameters (all rows; held-out fit) "
    "| fitted worst / median | held out worst / median "
    "| alpha-beta fitted | alpha-beta held out | targets |"
)


def real_files(folder: Path) -> list[Path]:
    found = [*folder.glob("*.txt"), *folder.glob("more/*.txt")]
    skip = ("LICENSE", "SOURCES", "README")
    return sorted(p for p in found if not p.name.startswith(skip))


def measure(path: Path) -> tuple[int, int, int, Accuracy]:
    """(rows, rows >= 64 KiB, ranks, the command's default Accuracy) of one file."""
    table = read_nccl_tests(path, COLLECTIVE.get(path.name))
    cache: dict = {}
    final = calibrate_nccl([table], coefficient_cache=cache)

    def refit(sizes: list[int]):
        return calibrate_nccl([table], holdout=sizes, coefficient_cache=cache)

    found = accuracy(final, refit, table.collective, table.ranks)
    big = sum(r.size_bytes >= NCCL_MIN_SIZE_BYTES for r in table.rows)
    return len(table.rows), big, table.ranks, found


def missed(found: Accuracy) -> list[str]:
    """Which of the four targets the file misses."""
    out = []
    if found.fitted.worst > TOLERANCE:
        out.append("fitted worst")
    if found.fitted.median > MEDIAN_TOLERANCE:
        out.append("fitted median")
    held = found.held_out
    if held is None or held.worst > HELD_OUT_TOLERANCE:
        out.append("held-out worst")
    if held is None or held.median > HELD_OUT_MEDIAN_TOLERANCE:
        out.append("held-out median")
    return out


def _pair(errors: Errors | None) -> str:
    if errors is None:
        return "-"
    return f"{errors.worst * 100:.1f} % / {errors.median * 100:.1f} %"


def table_lines(folder: Path) -> list[str]:
    """The markdown table, header first."""
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for path in real_files(folder):
        rows, big, ranks, found = measure(path)
        name = path.relative_to(folder).as_posix()
        misses = missed(found)
        verdict = "met" if not misses else "not met: " + ", ".join(misses)
        lines.append(
            f"| `{name}` | {rows} ({big}) | {ranks} | {found.parameters}; "
            f"{found.held_parameters if found.held_parameters is not None else '-'} "
            f"| {_pair(found.fitted)} | {_pair(found.held_out)} "
            f"| {_pair(found.alpha_beta_fitted)} | {_pair(found.alpha_beta_held_out)} "
            f"| {verdict} |"
        )
    return lines


def main(argv: list[str]) -> int:
    return table_main("bench_calibration", table_lines, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
