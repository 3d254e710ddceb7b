"""Hostile input to the distributed launcher (issue 27): `--nproc N` and the ranks it starts.

An abbreviated --nproc, a SIGKILLed launcher, more ranks than the machine holds, a killed rank,
a timeout that is no number of seconds and a MASTER_ADDR that does not resolve: each is one line
and exit 2 (or, for the launcher's death, no rank left running).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from trainer.cli import build_parser  # noqa: E402
from trainer.distributed import launch  # noqa: E402
from transitsim.base.errors import TransitsimError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "trainer", "--preset", "synthetic", "--variant", "B"]
TRAIN += ["--threads", "1", "--backend", "gloo", "--quiet"]


def trainer(
    *argv: str, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m trainer` in its own session, the whole group killed if it overstays (an
    unfixed launcher started ranks that started ranks)."""
    process = subprocess.Popen(
        [*TRAIN, *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def one_line_exit_2(done: subprocess.CompletedProcess, *fragments: str) -> None:
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("trainer: error: "), done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def started(out: Path, *extra: str) -> tuple[subprocess.Popen, list[int]]:
    """A 2-rank gloo run, once both ranks train (its first checkpoint is written)."""
    argv = [*TRAIN, "--steps", "100000", "--set", "ckpt_every=5", "--nproc", "2", "-o", str(out)]
    process = subprocess.Popen(
        [*argv, *extra], cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not list(out.glob("*.ckpt")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    ranks = children(process.pid)
    assert list(out.glob("*.ckpt")) and len(ranks) == 2, "the ranks never started training"
    return process, ranks


def test_an_abbreviated_nproc_is_refused_not_relaunched(tmp_path: Path) -> None:
    """`--npro 2` was read as --nproc 2 but left in the ranks' command lines: every rank
    launched ranks again."""
    done = trainer("--steps", "2", "--npro", "2", "-o", str(tmp_path), timeout=60)
    one_line_exit_2(done, "unrecognized arguments: --npro 2")


def test_the_ranks_get_the_command_line_less_what_argparse_read_as_nproc() -> None:
    parser = build_parser()
    argv = ["--variant", "B", "--set", "workers=4", "--nproc=2", "-o", "x", "--nproc", "4"]
    ranks = ["--variant", "B", "--set", "workers=4", "-o", "x"]
    assert launch.rank_argv(argv, parser.parse_args) == ranks
    # the value of another option that reads like the flag stays: argparse read no --nproc there
    argv = ["--variant", "B", "--set=--nproc=3", "--nproc", "2"]
    assert launch.rank_argv(argv, parser.parse_args) == ["--variant", "B", "--set=--nproc=3"]


def test_a_sigkilled_launcher_takes_its_ranks_with_it(tmp_path: Path) -> None:
    """The ranks were alive 10 s later, training on (or waiting for each other) for ever."""
    process, ranks = started(tmp_path / "out")
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(alive(rank) for rank in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(rank) for rank in ranks), "a rank outlived its launcher by 10 s"
    finally:
        for rank in ranks:
            if alive(rank):
                os.kill(rank, signal.SIGKILL)


def test_a_killed_rank_is_one_line_naming_it(tmp_path: Path) -> None:
    """The survivor printed gloo's RuntimeError traceback (31 lines)."""
    process, ranks = started(tmp_path / "out")
    try:
        rank1 = next(r for r in ranks if b"RANK=1\x00" in Path(f"/proc/{r}/environ").read_bytes())
        os.kill(rank1, signal.SIGKILL)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 2, err
    assert len(err.splitlines()) == 1, err
    assert "rank 1 of 2 killed by SIGKILL" in err and "resume" in err, err


def test_more_ranks_than_the_machine_holds_are_refused_with_the_figure(tmp_path: Path) -> None:
    """`--nproc 64 --set workers=64` started 65 processes that did no step in 150 s while free
    memory fell from 21.9 to 10 GiB."""
    cores = len(os.sched_getaffinity(0))
    ranks = 32 * cores
    done = trainer("--set", f"workers={ranks}", "--nproc", str(ranks), "-o", str(tmp_path))
    one_line_exit_2(done, f"on {cores} core(s)", f"--nproc {2 * cores} or fewer")
    assert not list(tmp_path.iterdir())
    with pytest.raises(TransitsimError, match=r"about 25\.0 GiB \(400 MiB each\).* 10\.0 GiB"):
        launch.check_machine_holds(64, 1, cores=64, available_bytes=10 << 30)
    launch.check_machine_holds(4, 1, cores=2, available_bytes=10 << 30)  # what the tests run


@pytest.mark.parametrize("timeout", ["inf", "nan", "0", "-5", "1e30"])
def test_a_timeout_that_is_no_number_of_seconds_is_one_line(timeout: str) -> None:
    """inf was an OverflowError traceback (timedelta), 0 and negatives c10d's logs."""
    from trainer.cli import main

    argv = ["--variant", "B", "--dry-run", "--backend", "gloo", "--dist-timeout", timeout]
    with pytest.raises(TransitsimError, match=r"--dist-timeout must be a number of seconds"):
        main(argv)


def test_an_unresolvable_master_addr_is_one_line(tmp_path: Path) -> None:
    """40 lines of c10d logs, then the error."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_PORT="29511")
    env["MASTER_ADDR"] = "no-such-host.invalid"
    done = trainer("--steps", "2", "-o", str(tmp_path), "--dist-timeout", "20", env=env)
    one_line_exit_2(done, "MASTER_ADDR 'no-such-host.invalid' does not resolve")


@pytest.mark.parametrize("launched", [True, False])
def test_a_stopped_rank_says_nothing_and_its_launcher_one_line(launched: bool) -> None:
    """The race behind a flaky run: the launcher's SIGTERM reached the surviving rank inside an
    atomic checkpoint write (which turns it into KeyboardInterrupt), and the rank printed
    "trainer: interrupted" before the launcher's one line. A launched rank now stays silent."""
    script = (
        "import trainer.__main__ as entry\n"
        "def interrupted(argv, prog):\n    raise KeyboardInterrupt('signal 15')\n"
        "entry.main = interrupted\nentry.run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", launch.LAUNCHER_PID)}
    if launched:
        env[launch.LAUNCHER_PID] = str(os.getpid())
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130
    if launched:
        assert done.stderr == ""
    else:
        assert done.stderr == "trainer: interrupted (re-run the same command to resume)\n"
