"""Hostile output paths and concurrent or killed runs (issue 15, kinds 1 and 6).

Every writer refuses a path it cannot write before any work, in one line with exit 2; a run's
outputs are one unit, so a killed rerun leaves the previous run whole and two runs into one
folder at once both finish, leaving one whole set.
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from test_run_cli import run_cli, write_test_trace

from transitsim.base import outfolder

SCENARIO = "traces: [traces/]\nnetworks: [8x200g-switch]\ntargets: [{target}]\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-out")
    for variant in ("A", "C"):
        write_test_trace(folder / "traces", variant, 0)
    (folder / "s.yaml").write_text(SCENARIO.format(target=3.5), encoding="utf-8")
    (folder / "a_file").write_text("not a folder\n", encoding="utf-8")
    (folder / "with_dir" / "report.html").mkdir(parents=True)
    (folder / "foreign").mkdir()
    (folder / "foreign" / "notes.txt").write_text("mine\n", encoding="utf-8")
    os.mkfifo(folder / "fifo")
    return folder


def _argv(work: Path, kind: str) -> list[str]:
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    logs = str(work / "traces")  # no .jsonl there: the writability check must come first
    return {
        "run": ["run", str(work / "s.yaml"), "--serial", "-q", "-o"],
        "replay": ["replay", trace, "--network", "8x200g-switch", "-o"],
        "schema": ["scenario-schema", "-o"],
        "import": ["traces", "import", logs, "-o"],
        "train": ["train", "--variant", "A", "--steps", "2", "--quiet", "-o"],
        "events": ["run", str(work / "s.yaml"), "--serial", "-q", "-o", str(work / "ev-out")]
        + ["--trace-events"],
        # inputs that are not there: the output is checked before they are read
        "profile": ["traces", "import", "--profile", str(work / "none.json.gz"), "-o"],
        "calibrate": ["calibrate", "nccl-tests", str(work / "none.txt"), "-o"],
        "reference": ["scenario-reference", "-o"],
        "compare": ["testbed", "compare", str(work / "none.parquet"), "-o"],
        "testbed": ["testbed", "run", "-o"],
        "ttl": ["testbed", "ttl", "-o"],
    }[kind]


BAD_PATHS = [
    ("run", "/proc/transitsim-x", "cannot write in /proc"),
    ("run", "{work}/a_file", "exists and is not a folder"),
    ("run", "{work}/fifo", "exists and is not a folder"),
    ("run", "{work}/a_file/below", "is a file, not a folder"),
    ("run", "{work}/with_dir", "report.html/"),
    ("run", "{work}/foreign", "notes.txt"),
    ("replay", "/proc/transitsim-x", "cannot write in /proc"),
    ("replay", "{work}/a_file", "exists and is not a folder"),
    ("schema", "/proc/transitsim-x/s.json", "cannot write in /proc"),
    ("schema", "{work}/with_dir", "is a folder, not a file"),
    ("schema", "{work}/fifo", "not a regular file"),
    ("schema", "{work}/" + "n" * 300 + ".json", "longer than"),
    ("import", "/proc/transitsim-x", "cannot write in /proc"),
    ("import", "{work}/a_file", "exists and is not a folder"),
    ("train", "/proc/transitsim-x", "cannot write in /proc"),
    ("train", "{work}/a_file", "exists and is not a folder"),
    ("events", "/proc/transitsim-x/e.json", "cannot write in /proc"),
    ("events", "{work}/with_dir", "is a folder, not a file"),
]


@pytest.mark.parametrize(("kind", "path", "message"), BAD_PATHS)
def test_unwritable_output_is_one_line_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str], kind: str, path: str, message: str
) -> None:
    before = sorted(p.name for p in work.rglob("*"))
    code, stdout, stderr = run_cli([*_argv(work, kind), path.format(work=work)], capsys)
    assert code == 2, stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("transitsim: error: ")
    assert message in stderr
    assert sorted(p.name for p in work.rglob("*")) == before  # nothing written, no probe left


LONG = "n" * 256  # one byte over a file system's name limit (ENAMETOOLONG)


@pytest.mark.parametrize(
    ("kind", "path"),
    [(kind, "{work}/" + LONG) for kind in ("run", "replay", "import", "profile", "train",
                                            "compare", "testbed", "ttl")]
    + [(kind, "{work}/" + LONG + "/x.yaml") for kind in ("schema", "reference", "calibrate")]
    + [("events", "{work}/" + LONG + "/e.json"), ("run", "{work}/" + "n" * 245),
       ("import", "{work}/" + "/".join(["n" * 250] * 17))],
)  # fmt: skip
def test_a_name_over_the_file_system_limit_is_one_line_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str], kind: str, path: str
) -> None:
    """Regression (issue 45): ENAMETOOLONG came as a traceback, in import only after all the
    work; every command that takes -o now checks the name first."""
    before = sorted(p.name for p in work.rglob("*"))
    code, _, stderr = run_cli([*_argv(work, kind), path.format(work=work)], capsys)
    assert code == 2, stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("transitsim: error: ")
    assert "bytes (a file system allows 255" in stderr or "bytes (at most" in stderr
    assert sorted(p.name for p in work.rglob("*")) == before


def test_validate_catches_an_unwritable_outputs_dir(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = work / "bad-out.yaml"
    bad.write_text(SCENARIO.format(target=3.5) + "outputs: {dir: /proc/transitsim-x}\n")
    code, _, stderr = run_cli(["validate", str(bad)], capsys)
    assert code == 2 and "outputs.dir" in stderr and "/proc" in stderr
    assert len(stderr.splitlines()) == 1


def _outputs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_killed_rerun_leaves_the_previous_run_whole(work: Path, tmp_path: Path) -> None:
    """A rerun with another target, killed while it writes, leaves every file of the first run
    (all for target 3.5) and none of the second; the next run removes its staging folder."""
    out = tmp_path / "out"
    (tmp_path / "traces").symlink_to(work / "traces")
    first = tmp_path / "first.yaml"
    first.write_text(SCENARIO.format(target=3.5) + "outputs: {files: [summary, ladder, report]}\n")
    argv = [sys.executable, "-m", "transitsim.cli", "run", "--serial", "-q", "-o", str(out)]
    done = subprocess.run([*argv, str(first)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _outputs(out) == ["ladder.csv", "notes.txt", "report.html", "summary.csv"]
    old = {name: (out / name).read_bytes() for name in _outputs(out)}

    second = tmp_path / "second.yaml"  # more outputs and another target: any mix would show
    second.write_text(
        SCENARIO.format(target=3.0)
        + "outputs: {files: [timeline, summary, ladder, sweep, link_util, report]}\n"
    )
    process = subprocess.Popen([*argv, str(second)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    staged: list[Path] = []
    while time.monotonic() < deadline and process.poll() is None and not staged:
        staged = [p for p in tmp_path.glob(".out.*.tmp") if any(p.iterdir())]
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, "the rerun ended before it could be killed"
    assert staged, "the rerun was killed before it staged anything"
    assert {name: (out / name).read_bytes() for name in _outputs(out)} == old
    assert set(pd.read_csv(out / "summary.csv")["target"]) == {3.5}

    done = subprocess.run([*argv, str(second)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _outputs(out) == sorted(
        ["ladder.csv", "link_util.csv", "report.html", "summary.csv", "sweep.csv"]
        + ["timeline.parquet", "notes.txt"]
    )
    assert set(pd.read_csv(out / "summary.csv")["target"]) == {3.0}
    assert not list(tmp_path.glob(".*.tmp")), "a staging folder was left behind"


def test_two_runs_into_one_folder_at_once_both_succeed(work: Path, tmp_path: Path) -> None:
    """Real processes, three rounds of two at once: both exit 0, the folder holds one whole
    set (every file from the same run), and no staging folder stays."""
    (tmp_path / "traces").symlink_to(work / "traces")
    scenarios = []
    for target in (3.5, 3.0):
        path = tmp_path / f"t{target}.yaml"
        path.write_text(SCENARIO.format(target=target))
        scenarios.append(path)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "transitsim.cli", "run", "--serial", "-q", "-o", str(out)]
    for _ in range(3):
        runs = [subprocess.Popen([*argv, str(s)], stderr=subprocess.PIPE) for s in scenarios]
        for process in runs:
            _, err = process.communicate(timeout=180)
            assert process.returncode == 0, err.decode()
        assert _outputs(out) == [
            *["ladder.csv", "notes.txt", "report.html", "summary.csv", "timeline.parquet"]
        ]
        targets = set(pd.read_csv(out / "summary.csv")["target"])
        ladder_targets = set(pd.read_csv(out / "ladder.csv")["target"])
        assert targets in ({3.5}, {3.0}) and ladder_targets == targets  # one run's whole set
        assert not list(tmp_path.glob(".*.tmp"))


def test_stale_staging_is_removed_only_when_its_writer_is_gone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    live, dead = tmp_path / ".out.live.tmp", tmp_path / ".out.dead.tmp"
    for folder in (live, dead):
        folder.mkdir()
        (folder / "summary.csv").write_text("x\n")
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer holds its staging folder's lock
    try:
        outfolder.remove_stale_staging(out)
        assert live.is_dir() and not dead.exists()
    finally:
        os.close(fd)
    outfolder.remove_stale_staging(out)
    assert not live.exists()


def test_a_failing_writer_leaves_the_old_folder_and_no_staging(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("old\n")

    def boom(path: Path) -> None:
        path.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        outfolder.write_folder(
            out,
            {"summary.csv": lambda p: p.write_text("new\n"), "report.html": boom},
            {"summary.csv", "report.html"},
        )
    assert _outputs(out) == ["summary.csv"] and (out / "summary.csv").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_sigterm_while_writing_leaves_no_temporary_files(tmp_path: Path) -> None:
    """SIGTERM (or SIGHUP) while a folder is staged or a file is written: the old outputs
    stay and nothing hidden is left beside them (it stayed until the next run)."""
    from transitsim.base.atomic import atomic_path

    def terminated(path: Path) -> None:
        path.write_text("half", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGTERM)

    out = tmp_path / "out"
    outfolder.write_folder(out, {"summary.csv": lambda p: p.write_text("old")}, ["summary.csv"])
    with pytest.raises(KeyboardInterrupt):
        outfolder.write_folder(out, {"summary.csv": terminated}, ["summary.csv"])
    assert (out / "summary.csv").read_text() == "old"
    with pytest.raises(KeyboardInterrupt), atomic_path(tmp_path / "one.csv") as tmp:
        terminated(tmp)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers put back


# --- issue 27: folders removed meanwhile, temp files of killed writers -------------------------

MOMENTS = [  # (outfolder function, its call that first finds the parent gone)
    ("remove_stale_staging", 1),  # before the staging folder is made
    ("check_writable_file", 1),  # before the first file is written into it
    ("check_writable_file", 3),  # between two files
    ("_parent_locked", 2),  # before it is published
    ("_publish", 1),  # while it is published
]


@pytest.mark.parametrize(("function", "call"), MOMENTS)
def test_a_run_whose_parent_folder_is_removed_meanwhile_is_one_line(
    work: Path, tmp_path: Path, capsys, monkeypatch, function: str, call: int
) -> None:
    """3 of these 5 moments ended in a traceback (FileNotFoundError, OSError from pandas)."""
    import shutil

    parent = tmp_path / "parent"
    parent.mkdir()
    original = getattr(outfolder, function)
    calls = []

    def removing(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            shutil.rmtree(parent)
        return original(*args, **kwargs)

    monkeypatch.setattr(outfolder, function, removing)
    argv = ["run", str(work / "s.yaml"), "--serial", "-q", "-o", str(parent / "out")]
    code, _, stderr = run_cli(argv, capsys)
    assert len(calls) >= call, "the moment was never reached"
    assert code == 2, stderr
    assert stderr.count("\n") == 1 and "was removed while the run wrote" in stderr, stderr
    assert [p.name for p in tmp_path.iterdir()] == [], "something was left behind"


def _killed_writer(target: Path) -> subprocess.Popen:
    """A process inside atomic_path(target), its temp file written, waiting to be killed."""
    code = (
        "import sys, time\nfrom transitsim.base.atomic import atomic_path\n"
        "with atomic_path(sys.argv[1]) as tmp:\n"
        "    tmp.write_bytes(b'half')\n    print('writing', flush=True)\n    time.sleep(120)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "writing\n"
    return process


def test_a_killed_import_leaves_a_temp_file_the_next_one_removes(tmp_path: Path, capsys) -> None:
    """A SIGKILLed import left `.<run>.parquet.<random>.tmp` in the traces folder for ever;
    a temp file a live writer holds is never removed."""
    import logfactory as lf

    log = tmp_path / "run.jsonl"
    records = lf.records([4.0, 3.5, 3.2], variant="band")
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    out = tmp_path / "traces"
    out.mkdir()
    name = f"{records[0]['name']}.parquet"
    killed = _killed_writer(out / name)
    killed.kill()
    killed.wait(timeout=30)
    other = _killed_writer(out / "other-run-s0.parquet")  # alive: its temp file must stay
    try:
        assert len(list(out.glob(".*.tmp"))) == 2
        code, _, stderr = run_cli(["traces", "import", str(log), "-o", str(out), "-q"], capsys)
        assert code == 0, stderr
        assert [p.name for p in out.glob(".*.tmp")] == [
            p.name for p in out.glob(".other-run-s0.parquet.*.tmp")
        ]
        assert len(list(out.glob(".*.tmp"))) == 1 and (out / name).is_file()
    finally:
        other.kill()
        other.wait(timeout=30)
