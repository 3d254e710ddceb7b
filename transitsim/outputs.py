"""A run's results and their files: what a run produced, and its output folder written as one unit.

`transitsim run` and `transitsim replay` write the same files (timeline, summary, ladder,
report, and optionally one step as Chrome trace events) through `write_outputs`: every file goes
into a staging folder that takes the output folder's place in one rename (base/outfolder.py).
Beside them, always, notes.txt: every note of the run, one a line (the terminal prints a few).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from transitsim.analysis.decision import SUMMARY_DECISION_COLUMNS as DECISION_COLUMNS
from transitsim.analysis.metrics import INTERVAL_COLUMNS, LADDER_COLUMNS, SUMMARY_COLUMNS
from transitsim.analysis.outcomes import DEFAULT_TIE_MARGIN
from transitsim.analysis.preview import preview_html, preview_text, what_else
from transitsim.analysis.verdict import Verdict, verdict
from transitsim.base.atomic import check_writable_file
from transitsim.base.errors import TransitsimError
from transitsim.base.outfolder import check_output_folder, write_folder
from transitsim.report import ReportContext, write_report
from transitsim.scenario import OUTPUT_FILES
from transitsim.sweep import JobResult
from transitsim.traces.chrome_events import write_trace_events

DEFAULT_FILES = ("timeline", "summary", "ladder", "report")
NOTES_FILE = "notes.txt"
# notes.txt's first line: a notes.txt without it is someone else's, and a run must not replace
# the folder that holds it (a common name, unlike the other outputs)
NOTES_HEADER = "# transitsim notes"


@dataclass(repr=False)
class RunResult:
    """Everything a run produced. summary: one row per (config, network, target) with label,
    grid parameters, bottleneck and extrapolated; crossovers: where the fastest config changes
    along each grid parameter; failures: the jobs that failed (the rest are in the tables).
    tie_margin: the verdict's tie threshold (scenario key verdict.tie_margin); extrapolation:
    what the verdict says the numbers are extrapolated to ("extrapolated to 1e9 parameters")."""

    title: str
    timeline: pd.DataFrame
    summary: pd.DataFrame
    ladder: pd.DataFrame
    crossovers: pd.DataFrame
    link_util: pd.DataFrame
    step_events: pd.DataFrame | None
    labels: dict[str, str]
    targets: list[float]
    target_names: list[str]
    params: list[str]
    failures: list[JobResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    question: str = ""
    assumptions: list[str] = field(default_factory=list)
    tie_margin: float = DEFAULT_TIE_MARGIN
    extrapolation: str | None = None
    # per configuration, the mean step its profiled job measured (bring-your-own traces)
    measured_step_s: dict[str, float] = field(default_factory=dict)

    def judgement(self) -> Verdict:
        """The verdict's sentences and table (transitsim.analysis.verdict)."""
        return verdict(
            self.summary,
            self.params,
            self.labels,
            tie_margin=self.tie_margin,
            extrapolation=self.extrapolation,
        )

    @property
    def verdict(self) -> list[str]:
        """The answer in words, one sentence per target (transitsim.analysis.verdict)."""
        return self.judgement().sentences

    @property
    def verdict_table(self) -> pd.DataFrame:
        """What the sentences sum up: per target, held group and run of network points, the
        fastest (or tied) configurations, their time to loss, seed interval and lead
        (transitsim.analysis.verdict.TABLE_COLUMNS)."""
        return self.judgement().table

    @property
    def exit_code(self) -> int:
        """0 when every job ran, 1 when some failed."""
        return 1 if self.failures else 0

    def _more(self) -> str:
        runs = self.timeline["run"].nunique() if "run" in self.timeline.columns else 0
        where = ".summary, .timeline, .verdict_table, .notes"
        if self.failures:
            where += f"; {len(self.failures)} jobs failed: .failures"
        return what_else(self.summary, runs, self.notes, where)

    def __repr__(self) -> str:
        """The verdict, then the summary's head (the dataclass's own repr ran to pages)."""
        return preview_text(self.verdict, self.notes, self.summary, self._more())

    def _repr_html_(self) -> str:
        """A notebook's view: the verdict, the notes, then the summary's head as a table."""
        return preview_html(self.verdict, self.notes, self.summary, self._more())


def _write_csv(frame: pd.DataFrame) -> Callable[[Path], None]:
    return lambda tmp: frame.to_csv(tmp, index=False, lineterminator="\n")


def _write_parquet(frame: pd.DataFrame) -> Callable[[Path], None]:
    plain = frame.copy()
    plain.attrs = {}  # pandas would store attrs as metadata: keep the file plain
    return lambda tmp: plain.to_parquet(tmp, index=False)


def output_names(table_format: str = "parquet") -> dict[str, str]:
    """The file each outputs.files entry writes."""
    return {
        "timeline": f"timeline.{table_format}",
        "summary": "summary.csv",
        "ladder": "ladder.csv",
        "sweep": "sweep.csv",
        "link_util": "link_util.csv",
        "report": "report.html",
        "trace_events": "trace_events.json",
    }


def owned_names(trace_events: Path | None = None, out_dir: Path | None = None) -> set[str]:
    """Every name a run may leave in its output folder (any table format), so a folder holding
    only these is an earlier run's and may be replaced as a whole."""
    names = {*output_names("parquet").values(), *output_names("csv").values(), NOTES_FILE}
    inside = _events_inside(trace_events, out_dir)
    return names | ({inside} if inside else set())


def _events_inside(trace_events: Path | None, out_dir: Path | None) -> str | None:
    """The name of --trace-events when it is a file in the output folder itself."""
    if trace_events is None or out_dir is None:
        return None
    inside = Path(trace_events).absolute().parent.resolve() == Path(out_dir).absolute().resolve()
    return Path(trace_events).name if inside else None


def check_outputs_writable(out_dir: Path, trace_events: Path | None = None) -> None:
    """Before any work: out_dir can take a run's outputs, and --trace-events can be written."""
    check_output_folder(out_dir, owned_names(trace_events, out_dir))
    notes = Path(out_dir) / NOTES_FILE
    if notes.is_file() and not _our_notes(notes):
        raise TransitsimError(
            f"output folder {out_dir}: holds files that are not transitsim outputs "
            f"({NOTES_FILE}); a run replaces the whole folder, so give an empty or new one"
        )
    if trace_events is not None and not _events_inside(trace_events, out_dir):
        check_writable_file(trace_events, what="--trace-events file")


def write_outputs(
    result: RunResult,
    out_dir: Path,
    files: list[str] | tuple[str, ...] = DEFAULT_FILES,
    table_format: str = "parquet",
    trace_events: Path | None = None,
) -> list[Path]:
    """Write the chosen outputs into out_dir as one unit (`transitsim.base.outfolder`: staged, then
    swapped in whole), the report last (slowest); a --trace-events file elsewhere after it."""
    unknown = [name for name in files if name not in OUTPUT_FILES]
    if unknown:
        raise TransitsimError(f"unknown output(s) {', '.join(unknown)} (known: {OUTPUT_FILES})")
    out_dir = Path(out_dir)
    check_outputs_writable(out_dir, trace_events)
    names = output_names(table_format)
    tables = {
        "timeline": result.timeline,
        "summary": result.summary,
        "ladder": result.ladder,
        "sweep": result.crossovers,
        "link_util": result.link_util,
    }
    writers: dict[str, Callable[[Path], object]] = {}
    for name in ("timeline", "summary", "ladder", "sweep", "link_util"):
        if name in files:
            file_name = names[name]
            table = tables[name]
            writers[file_name] = (
                _write_parquet(table) if file_name.endswith(".parquet") else _write_csv(table)
            )
    inside = _events_inside(trace_events, out_dir)
    events_names = [names["trace_events"]] if "trace_events" in files else []
    events_names += [inside] if inside else []
    outside = Path(trace_events) if trace_events is not None and not inside else None
    events = result.step_events
    for file_name in [*events_names, *([str(outside)] if outside else [])]:
        if events is None:
            result.notes.append(
                f"no trace events written to {file_name}: no network of at most 64 workers replayed"
            )
    if events is not None:
        for file_name in events_names:
            writers[file_name] = lambda path, events=events: write_trace_events(path, events)
    writers[NOTES_FILE] = lambda path: _write_notes(result, path)
    if "report" in files:
        writers[names["report"]] = lambda path: _write_report(result, path)
    written = write_folder(out_dir, writers, owned_names(trace_events, out_dir))
    if outside is not None and events is not None:
        written.append(write_trace_events(outside, events))
    result.files.extend(written)
    return written


def _our_notes(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(NOTES_HEADER)) == NOTES_HEADER.encode()
    except OSError:
        return False


def notes_text(title: str, notes: list[str]) -> str:
    """notes.txt: the header line with the run's title, then one note a line (a note is one
    line already), or a line saying there are none."""
    lines = [" ".join(note.split()) for note in notes] or ["(no notes)"]
    return "".join(f"{line}\n" for line in [f"{NOTES_HEADER}: {title}", *lines])


def _write_notes(result: RunResult, path: Path) -> None:
    path.write_text(notes_text(result.title, result.notes), encoding="utf-8")


def _write_report(result: RunResult, path: Path) -> Path:
    sweep = None
    if result.params and len(result.summary):
        grid_rows = result.summary.dropna(subset=result.params, how="all")
        # the winner map reads every other numeric column as a swept key: no intervals here
        # (a summary read back from before a column existed, e.g. the WAN/LAN split, lacks it)
        figures = [c for c in SUMMARY_COLUMNS if c not in INTERVAL_COLUMNS and c in result.summary]
        decided = [c for c in DECISION_COLUMNS if c in result.summary.columns]
        sweep = grid_rows[[*figures, *decided, *result.params]]
    return write_report(
        path,
        result.timeline,
        result.summary,
        result.ladder if len(result.ladder) else pd.DataFrame(columns=list(LADDER_COLUMNS)),
        link_util=result.link_util,
        sweep=sweep,
        title=result.title,
        labels=result.labels,
        context=ReportContext(
            question=result.question,
            verdict=result.verdict,
            params=result.params,
            assumptions=result.assumptions,
            notes=result.notes,
            failures=[failure.describe_failure() for failure in result.failures],
            measured_step_s=result.measured_step_s,
        ),
    )
