"""The ownership rule without namespaces (issue 27): cleanup acts on ledgers only, and only on
what a ledger says is still the run's own. Here the record folder and the namespace folder are
temporary folders, a namespace is a file in the second (same device and inode rule), and
`ip netns delete` removes that file, so the rule is checked on any machine, root or not."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transitsim.testbed import ledger
from transitsim.testbed.ledger import Ledger, cleanup, load, process_start


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Private record folder, fake /run/netns, and `ip` calls recorded (delete removes)."""
    state, netns_dir = tmp_path / "state", tmp_path / "netns"
    netns_dir.mkdir()
    monkeypatch.setattr(ledger, "STATE_DIR", state)
    monkeypatch.setattr(ledger, "NETNS_DIR", netns_dir)
    calls: list[list[str]] = []

    def fake_run(argv, check=True):
        calls.append(argv)
        if argv[:3] == ["ip", "netns", "delete"]:
            (netns_dir / argv[3]).unlink(missing_ok=True)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(ledger, "run", fake_run)
    return state, netns_dir, calls


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _record(run_id: str, owner: tuple[int, int], names: list[str], netns_dir: Path) -> Ledger:
    """A run that made `names` (fake namespaces) and recorded them, owned by `owner`."""
    record = Ledger(run_id, *owner)
    for name in names:
        (netns_dir / name).touch()
        record.intend(name)
        record.created(name)
    return record


def test_a_dead_runs_own_namespaces_are_removed_and_nothing_else(dirs):
    state, netns_dir, calls = dirs
    dead = _dead_pid()
    run_id = f"tsb-{dead}-0123abcd"
    _record(run_id, (dead, 1), [f"{run_id}-sw", f"{run_id}-h0"], netns_dir)
    foreign = [f"tsb-{dead}-beef-sw", "tsb-4194305-abcd-sw", "tsb-99999999999999999999-abcd-sw"]
    for name in foreign:
        (netns_dir / name).touch()  # named like the testbed's, in no record
    assert sorted(cleanup()) == [f"{run_id}-h0", f"{run_id}-sw"]
    assert sorted(p.name for p in netns_dir.iterdir()) == sorted(foreign)
    assert list(state.iterdir()) == []  # nothing left of the run: its record goes too
    assert all(argv[3].startswith(run_id) for argv in calls)


def test_a_name_that_now_holds_another_namespace_is_not_deleted(dirs):
    state, netns_dir, calls = dirs
    dead = _dead_pid()
    run_id = f"tsb-{dead}-0123abcd"
    _record(run_id, (dead, 1), [f"{run_id}-sw"], netns_dir)
    (netns_dir / "other").write_text("another namespace")  # made while the run's still exists,
    os.replace(netns_dir / "other", netns_dir / f"{run_id}-sw")  # so another inode, same name
    assert cleanup() == []
    assert (netns_dir / f"{run_id}-sw").exists() and calls == []


def test_a_live_runs_namespaces_stay_unless_all(dirs):
    state, netns_dir, _ = dirs
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = process_start(live.pid)
        assert start is not None
        run_id = f"tsb-{live.pid}-0123abcd"
        _record(run_id, (live.pid, start), [f"{run_id}-sw"], netns_dir)
        assert cleanup() == []
        assert cleanup(everything=True) == [f"{run_id}-sw"]
        assert live.poll() is None  # the owner is not one of the processes the run started
    finally:
        live.kill()
        live.wait()


def test_a_reused_pid_is_not_the_owner(dirs):
    """The owner's pid is alive but is another process (other start time): the run is dead."""
    _, netns_dir, _ = dirs
    run_id = f"tsb-{os.getpid()}-0123abcd"
    start = process_start(os.getpid())
    assert start is not None
    _record(run_id, (os.getpid(), start + 1), [f"{run_id}-sw"], netns_dir)
    assert cleanup() == [f"{run_id}-sw"]


def test_only_recorded_processes_are_killed_and_only_if_they_are_the_same_process(dirs):
    _, netns_dir, _ = dirs
    started = subprocess.Popen(["sleep", "30"], start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        dead = _dead_pid()
        run_id = f"tsb-{dead}-0123abcd"
        record = _record(run_id, (dead, 1), [f"{run_id}-h0"], netns_dir)
        record.started(started.pid)
        record.processes.append([other.pid, process_start(other.pid) + 1])  # a reused pid
        record.save()
        cleanup()
        assert started.wait(timeout=5) == -9
        assert other.poll() is None
    finally:
        for proc in (started, other):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    "content",
    [
        "{",
        "[]",
        '{"run_id": "tsb-1-0123abcd"}',
        '{"run_id": "tsb-1-0123abcd", "owner": [1, "x"], "namespaces": {}, "processes": []}',
        '{"run_id": "tsb-1-0123abcd", "owner": [1, 1], "namespaces": {"eth0": null}, '
        '"processes": []}',
        '{"run_id": "tsb-1-0123abcd", "owner": [1, 1], "namespaces": '
        '{"tsb-2-0123abcd-sw": null}, "processes": []}',
        "\udcff",
    ],
)
def test_an_unreadable_record_is_ignored_never_acted_on(dirs, content):
    state, netns_dir, calls = dirs
    state.mkdir(mode=0o700)
    path = state / "tsb-1-0123abcd.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    (netns_dir / "tsb-2-0123abcd-sw").touch()
    (netns_dir / "eth0").touch()
    assert load(path) is None
    assert cleanup() == [] and calls == []
    assert path.exists()


def test_a_record_folder_others_may_write_is_not_trusted(dirs):
    state, _, _ = dirs
    state.mkdir(mode=0o700)
    state.chmod(0o777)
    with pytest.raises(ledger.TestbedError, match="not a private folder"):
        cleanup()


def test_the_record_is_written_before_the_namespace_and_names_it(dirs):
    state, netns_dir, _ = dirs
    record = Ledger.begin("tsb-1-0123abcd")
    record.intend("tsb-1-0123abcd-sw")
    saved = json.loads((state / "tsb-1-0123abcd.json").read_text())
    assert saved["namespaces"] == {"tsb-1-0123abcd-sw": None}
    assert saved["owner"] == [os.getpid(), process_start(os.getpid())]
    assert (state.stat().st_mode & 0o777) == 0o700
    assert ((state / "tsb-1-0123abcd.json").stat().st_mode & 0o077) == 0
