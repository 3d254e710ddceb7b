"""The testbed never touches what it did not create (issue 27), on real namespaces.

Namespaces named like the testbed's but made here by hand (a dead creator's pid, a pid beyond
pid_max, pid 1, a live pid, a pid no integer type holds), one with a process inside, survive
`testbed down`, `testbed down --all` and a tiny `testbed run`, and the process lives. A process
someone put in a killed run's own namespace survives that run's cleanup, while the process the
run started does not. Names carry a fresh random tag per test run, so a killed test never
leaves anything that looks like another run's; every test removes its own in a finally.
Skips with the reason where namespaces cannot be made."""

import io
import os
import re
import secrets
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from netns_skip import needs_netns

from transitsim.cli import main
from transitsim.testbed import ledger, netns

REPO = Path(__file__).resolve().parents[1]


def cli(argv: list) -> tuple[int, str, str]:
    """main(argv) in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _make(name: str) -> None:
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=15)


def _inside(name: str, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", name, *argv], start_new_session=True)


def _remove(names: list[str], procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()  # our own process, by its pid
        proc.wait(timeout=10)
    for name in names:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=15)


def _mine_left() -> list[str]:
    """Namespaces and records of testbeds this process built (an 8-hex-digit tag)."""
    mine = re.compile(rf"^tsb-{os.getpid()}-[0-9a-f]{{8}}")
    names = [n for n in netns.list_namespaces() if mine.match(n)]
    records = [p.name for p in ledger.STATE_DIR.glob("*.json") if mine.match(p.name)]
    return names + records


@needs_netns
def test_foreign_namespaces_and_their_process_survive_down_and_a_run(tmp_path):
    pytest.importorskip("torch", reason="the tiny `testbed run` needs torch")
    tag = secrets.token_hex(2)
    dead = _dead_pid()
    foreign = [
        f"tsb-{dead}-{tag}-sw",
        f"tsb-{dead}-{tag}-h0",
        f"tsb-4194305-{tag}-sw",  # beyond any pid_max: never alive
        f"tsb-1-{tag}-sw",
        f"tsb-{os.getpid()}-{tag}-h0",  # a live pid: only `--all` took these before
        f"tsb-99999999999999999999-{tag}-sw",  # made every testbed command fail before
    ]
    made, procs = [], []
    try:
        for name in foreign:
            _make(name)
            made.append(name)
        procs.append(_inside(foreign[0], ["sleep", "60"]))
        _wait_until_execed(procs[0], "sleep")
        out = tmp_path / "tb"
        for argv in (
            ["testbed", "down"],
            ["testbed", "down", "--all"],
            ["testbed", "run", "--rates", "200 Mb/s", "--workers", "2", "--sizes",
             "64 KiB,128 KiB", "--calibrate", "64 KiB", "--collectives", "all-reduce",
             "--budget", "0.2", "--min-repeats", "2", "--max-repeats", "3", "--warmup", "0",
             "-q", "-o", out],
        ):  # fmt: skip
            code, stdout, err = cli(argv)
            assert code == 0, (argv, err)
            assert not any(name in stdout for name in foreign), stdout
            assert set(foreign) <= set(netns.list_namespaces()), argv
            assert procs[0].poll() is None, f"{argv} killed a process it did not start"
        # the run wrote its whole report (issue 22) and left nothing of its own behind
        assert {"measured.parquet", "comparison.csv", "summary.json", "report.html"} <= {
            p.name for p in out.iterdir()
        }
        assert "predicted points" in (out / "report.html").read_text()
        assert _mine_left() == []
    finally:
        _remove(made, procs)


def _child_testbed() -> tuple[subprocess.Popen, str, int]:
    """A python child that builds a 1-host testbed, starts `sleep` in it as the testbed's
    process, prints the run id and that pid, then waits to be killed."""
    code = (
        "import time, subprocess\n"
        "from transitsim.testbed.netns import Testbed, Shaping\n"
        "tb = Testbed(1, Shaping.for_rate(50e6)).up()\n"
        "p = subprocess.Popen(tb.exec_argv(0, ['sleep', '60']), start_new_session=True)\n"
        "tb.started(p.pid)\n"
        "print(tb.run_id, p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    run_id, pid = child.stdout.readline().split()
    return child, run_id, int(pid)


@needs_netns
def test_a_process_someone_put_in_a_killed_runs_namespace_is_not_killed():
    child, run_id, started = _child_testbed()
    names = [f"{run_id}-sw", f"{run_id}-h0"]
    procs = [child]
    try:
        child.kill()  # SIGKILL: the run cleans nothing up
        child.wait(timeout=10)
        guest = _inside(f"{run_id}-h0", ["sleep", "60"])  # not the testbed's
        procs.append(guest)
        _wait_until_execed(guest, "sleep")  # else cleanup can remove the netns before setns
        removed = netns.cleanup_leftovers()
        assert set(names) <= set(removed)
        assert not set(names) & set(netns.list_namespaces())
        assert guest.poll() is None
        assert ledger.process_start(started) is None or _is_zombie(started)
    finally:
        _remove(names, procs)
        if ledger.process_start(started) is not None:
            os.kill(started, 9)  # a process of the test's own child


def _wait_until_execed(proc: subprocess.Popen, program: str, timeout_s: float = 10.0) -> None:
    """Wait (bounded) until `ip netns exec` has entered the namespace and exec'd `program`:
    a cleanup that runs before then removes the namespace under it ("Invalid argument")."""
    deadline = time.monotonic() + timeout_s
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while time.monotonic() < deadline and proc.poll() is None:
        if cmdline.read_bytes().split(b"\0")[0].endswith(program.encode()):
            return
        time.sleep(0.01)
    raise AssertionError(f"{program} did not start inside the namespace (rc {proc.poll()})")


def _is_zombie(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "Z"
