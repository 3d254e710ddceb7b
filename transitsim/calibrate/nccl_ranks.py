"""The rank count and the collective of an nccl-tests table when the log does not say them.

Many published logs lack the `#  Rank` lines (a header-only excerpt, a page that kept the table)
and some lack the test's name. Both are in the table itself: nccl-tests prints busbw = algbw x a
factor of the collective and the rank count n (doc/PERFORMANCE.md; `busbw_factor`):
2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for broadcast
(and reduce, sendrecv, which transitsim does not model). Both figures are printed rounded, so
each row only bounds the ratio (calibrate/nccl_rows.py `ratio_interval`); the rows' bounds
together give n where exactly one whole n fits them all, or nothing. Rows where algbw may be 0
say nothing, and rows that exclude each other are refused, never averaged. A factor of 1 says
nothing of n: a broadcast without Rank lines needs `--ranks`.

Which collective: the name in the text wins (the command line, `# Collective test starting:
all_reduce_perf`); `--collective` where it names none; else the factor where only one family
fits, told apart by the redop (reduce_scatter reduces, all_gather and alltoall do not, and are
not told apart: refused) and, for busbw = algbw, the root (broadcast has redop `none`).
"""

import math
import re
from dataclasses import dataclass

from transitsim.base.errors import TransitsimError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")
UNMODELLED = ("reduce", "sendrecv", "gather", "scatter", "hypercube", "alltoallv")
MAX_RANKS = 1 << 20
PERF = re.compile(r"\b(" + "|".join(COLLECTIVES + UNMODELLED) + r")_perf")  # also _perf_mpi
FORMULA = {"all_reduce": "2(n-1)/n", "broadcast": "1"}  # the others: (n-1)/n


def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): busbw = algbw x this."""
    if collective == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if collective == "broadcast":
        return 1.0
    return (ranks - 1) / ranks  # all_gather, reduce_scatter, alltoall


def formula(collective: str) -> str:
    return FORMULA.get(collective, "(n-1)/n")


@dataclass(frozen=True)
class Bounds:
    """Where busbw / algbw lies, all rows together (low > high: the rows disagree)."""

    low: float
    high: float
    shown: float  # the middle of [low, high]; where the rows disagree, the largest row's
    low_line: int  # the rows that set the bounds (named when they disagree)
    high_line: int

    @property
    def agree(self) -> bool:
        return self.low <= self.high


def bounds(intervals: list[tuple[int, float, float]], largest: float) -> Bounds | None:
    """The intersection of the rows' (line, low, high) intervals; None without any. `largest`:
    busbw / algbw as the row with the largest algbw prints it."""
    if not intervals:
        return None
    low = max(intervals, key=lambda i: i[1])
    high = min(intervals, key=lambda i: i[2])
    shown = (low[1] + high[2]) / 2 if low[1] <= high[2] else largest
    return Bounds(low[1], high[2], shown, low[0], high[0])


@dataclass(frozen=True)
class Hints:
    """What else the log says of the rank count."""

    listed: int | None = None  # the Rank lines, when they number 0..n-1
    given: int | None = None  # --ranks
    multiple: int = 1  # nThread x nGpus: n is a multiple of it
    above: int = 0  # the highest rank listed + 1 (an excerpt's Rank lines)
    per_rank: int | None = None  # size / (count x type size), where every row gives the same

    @property
    def known(self) -> int | None:
        return self.listed if self.listed is not None else self.given


def _rank_span(collective: str, low: float, high: float) -> tuple[int, float]:
    """The whole n >= 2 whose factor lies in [low, high]: (first, last), last may be inf."""
    scale = 2.0 if collective == "all_reduce" else 1.0  # the factor is scale x (n-1)/n
    share_low, share_high = low / scale, high / scale
    if share_low >= 1.0:
        return 2, 1  # above the factor of any n: none
    first = 2 if share_low <= 0.5 else math.ceil(1.0 / (1.0 - share_low) - 1e-9)
    last = math.inf if share_high >= 1.0 else math.floor(1.0 / (1.0 - share_high) + 1e-9)
    return first, last


def rank_candidates(collective: str, found: Bounds, hints: Hints) -> list[int] | None:
    """The rank counts that fit the bounds and the hints (None: too many to list)."""
    if collective == "broadcast":
        return None
    first, last = _rank_span(collective, found.low, found.high)
    first = max(first, hints.above, 2)
    last = min(last, MAX_RANKS)
    if hints.known is not None:
        first, last = max(first, hints.known), min(last, hints.known)
    if last - first > 100_000:
        return None
    return [n for n in range(first, int(last) + 1) if n % hints.multiple == 0]


def named_collective(text: str, option: str | None, source: str) -> str | None:
    """The collective the text names (`all_reduce_perf` on its command line or in `# Collective
    test starting`), checked against `--collective`; refused when it names several or one that
    transitsim does not model."""
    named = list(dict.fromkeys(PERF.findall(text)))
    if option is not None:
        if named and option not in named:
            shown = ", ".join(n + "_perf" for n in named)
            raise TransitsimError(f"{source}: --collective {option}, but the text names {shown}")
        return option
    if len(named) > 1:
        raise TransitsimError(
            f"{source}: names several tests ({', '.join(n + '_perf' for n in named)}); give one "
            "run per file, or --collective"
        )
    if named and named[0] in UNMODELLED:
        raise TransitsimError(
            f"{source}: a {named[0]}_perf run; transitsim calibrates from "
            f"{', '.join(c + '_perf' for c in COLLECTIVES)}"
        )
    return named[0] if named else None


def _fits(collective: str, found: Bounds, hints: Hints) -> bool:
    if collective == "broadcast":
        return found.low <= 1.0 <= found.high
    candidates = rank_candidates(collective, found, hints)
    return candidates is None or bool(candidates)


def _disagree(found: Bounds, source: str, give: str) -> TransitsimError:
    return TransitsimError(
        f"{source}: busbw / algbw differs between rows (line {found.low_line}: at least "
        f"{found.low:.5g}, line {found.high_line}: at most {found.high:.5g}): not one run of "
        f"one collective; give {give}"
    )


def infer_collective(
    found: Bounds | None, hints: Hints, redops: set[str], roots: set[int], source: str
) -> tuple[str, int | None, str]:
    """(collective, rank count if that settles it, note) from the factor (module doc)."""
    if found is None:
        raise TransitsimError(
            f"{source}: the text names no test and no row is large enough to tell it by "
            "busbw / algbw; give --collective"
        )
    if not found.agree:
        raise _disagree(found, source, "--collective and --ranks")
    reduces = bool(redops - {"none"}) if redops else None  # None: no redop column
    rings = rank_candidates("all_reduce", found, hints)
    ring = rings is None or any(n > 2 for n in rings)  # n = 2: a factor of 1, as broadcast's
    share = _fits("all_gather", found, hints)
    one = _fits("broadcast", found, hints)
    note = f"collective {{}} inferred from busbw / algbw = {found.shown:.4g}"
    if ring and not share and not one:
        return "all_reduce", None, note.format("all_reduce")
    if share and not ring and not one:
        if reduces:
            return "reduce_scatter", None, note.format("reduce_scatter")
        alike = "all_gather and alltoall"
        if reduces is None:  # no redop column: reduce_scatter too
            alike = "all_gather, reduce_scatter and alltoall"
        raise TransitsimError(
            f"{source}: the text names no test and busbw/algbw = (n-1)/n fits {alike} alike; "
            "give --collective"
        )
    if one and not ring and not share:
        if reduces is False:
            return "broadcast", None, note.format("broadcast")
        if reduces is None:
            raise TransitsimError(
                f"{source}: the text names no test and on 2 ranks busbw = algbw fits all_reduce "
                "and broadcast alike; give --collective"
            )
        if roots - {-1} or rings != [2]:
            raise TransitsimError(
                f"{source}: the text names no test, and busbw = algbw with a reduction fits "
                "reduce or sendrecv (not modelled) or all_reduce on 2 ranks; give --collective"
            )
        return "all_reduce", 2, note.format("all_reduce") + " with a reduction: 2 ranks"
    if not (ring or share or one):
        on = f" on {hints.known} ranks" if hints.known is not None else ""
        raise TransitsimError(
            f"{source}: the text names no test and busbw / algbw = {found.shown:.4g} fits no "
            f"collective{on} (all_reduce 2(n-1)/n, broadcast 1, the others (n-1)/n); give "
            "--collective" + (" or another --ranks" if hints.given is not None else "")
        )
    raise TransitsimError(
        f"{source}: the text names no test and busbw / algbw = {found.shown:.4g} fits several "
        "collectives (the rows are too small to tell); give --collective"
    )


def infer_ranks(
    collective: str, found: Bounds | None, hints: Hints, source: str
) -> tuple[int, str]:
    """(rank count, note) from the factor of `collective` (module doc); refused naming --ranks
    where no single whole n fits."""
    what = "no '#  Rank' lines"
    if collective == "broadcast":
        raise TransitsimError(
            f"{source}: {what}, and broadcast's busbw = algbw says nothing of the rank count; "
            "give --ranks N"
        )
    if found is None:
        raise TransitsimError(
            f"{source}: {what}, and no row is large enough to read the rank count off busbw / "
            "algbw; give --ranks N"
        )
    if not found.agree:
        raise _disagree(found, source, "--ranks N")
    candidates = rank_candidates(collective, found, hints)
    rule = f"{collective}: {formula(collective)}"
    if candidates == []:
        raise TransitsimError(
            f"{source}: {what}, and busbw / algbw = {found.shown:.4g} fits no rank count of "
            f"{rule} (another collective?); give --ranks N"
        )
    if candidates is not None and len(candidates) > 1 and hints.per_rank in candidates:
        count = hints.per_rank
        return count, (
            f"{count} ranks, from busbw / algbw = {found.shown:.4g} ({rule}, which fits "
            f"{candidates[0]}..{candidates[-1]}) and size / count"
        )
    if candidates is None or len(candidates) > 1:
        span = "many" if candidates is None else f"{candidates[0]}..{candidates[-1]}"
        raise TransitsimError(
            f"{source}: {what}, and busbw / algbw = {found.shown:.4g} is not precise enough to "
            f"tell the rank count ({rule} fits {span}); give --ranks N"
        )
    return candidates[0], f"{candidates[0]} ranks, from busbw / algbw = {found.shown:.4g} ({rule})"
