"""The record of what one testbed run created, so that only that is ever removed.

A run writes `/run/transitsim-testbed/<run id>.json` (a root-only folder, atomic writes) before
it creates anything, and keeps it current: its own process (pid and kernel start time), every
namespace it creates (named before `ip netns add`, then its nsfs device and inode), and every
process it starts inside one (pid and start time). Teardown, by the run itself or by the
cleanup of a later one, kills only the recorded processes that are still the same process (same
pid and start time), and deletes only the recorded namespaces that are still the ones the run
made (same inode). Names are never parsed to decide anything: a namespace no record names is
never touched, however much its name looks like the testbed's, and a process the testbed did
not start is never signalled (deleting a namespace's name leaves a process inside it running).
/run is emptied at boot, as are the namespaces it records.
"""

import json
import os
import re
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path

from transitsim.base.atomic import atomic_path
from transitsim.testbed.shell import TestbedError, run

STATE_DIR = Path("/run/transitsim-testbed")
NETNS_DIR = Path("/run/netns")  # where `ip netns` mounts its namespaces
RUN_ID_RE = re.compile(r"^tsb-[0-9]{1,10}-[0-9a-f]{8}$")
MAX_RECORD_BYTES = 1 << 20
MAX_PROCESSES = 4096


def process_start(pid: int) -> int | None:
    """The kernel's start time of a live process (clock ticks since boot), None if none.

    A pid alone can be reused by another process; pid and start time together cannot."""
    if not 0 < pid < 1 << 31:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and ")"
    try:
        return int(fields[19])  # field 22, counting from the state (field 3)
    except (IndexError, ValueError):
        return None


def identity(name: str) -> tuple[int, int] | None:
    """(device, inode) of the namespace mounted as `name`, or None if there is none."""
    try:
        st = os.stat(NETNS_DIR / name)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _private_dir(create: bool) -> bool:
    """Whether STATE_DIR exists (made if `create`); a TestbedError unless it is a folder of this
    user that nobody else may write (records there decide what is deleted and killed)."""
    if create:
        try:
            STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise TestbedError(
                f"testbed: cannot keep its record in {STATE_DIR} ({exc.strerror})"
            ) from None
    try:
        st = os.lstat(STATE_DIR)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise TestbedError(
            f"testbed: {STATE_DIR} is not a private folder of this user: its records are not "
            "trusted (remove it)"
        )
    return True


@dataclass
class Ledger:
    """One run's record: its owner, its namespaces (name -> [device, inode], None until made)
    and the processes it started ([pid, start time])."""

    run_id: str
    owner_pid: int
    owner_start: int
    namespaces: dict[str, list[int] | None] = field(default_factory=dict)
    processes: list[list[int]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"

    @classmethod
    def begin(cls, run_id: str) -> "Ledger":
        """The record of a run this process is about to build, written before anything is."""
        start = process_start(os.getpid())
        if start is None:
            raise TestbedError("testbed: cannot read this process's start time from /proc")
        ledger = cls(run_id, os.getpid(), start)
        ledger.save()
        return ledger

    def save(self) -> None:
        _private_dir(create=True)
        record = {
            "run_id": self.run_id,
            "owner": [self.owner_pid, self.owner_start],
            "namespaces": self.namespaces,
            "processes": self.processes,
        }
        with atomic_path(self.path, shared=False) as tmp:
            tmp.write_text(json.dumps(record) + "\n")

    def intend(self, name: str) -> None:
        """Name a namespace before creating it (a kill right after still leaves it recorded)."""
        self.namespaces[name] = None
        self.save()

    def forget(self, name: str) -> None:
        """`ip netns add` refused the name: it is not this run's to remove."""
        self.namespaces.pop(name, None)
        self.save()

    def created(self, name: str) -> None:
        """The namespace exists now: record which one it is."""
        found = identity(name)
        self.namespaces[name] = list(found) if found else None
        self.save()

    def started(self, pid: int) -> None:
        """A process this run started (inside one of its namespaces)."""
        start = process_start(pid)
        if start is None:
            return  # already gone: nothing to kill later
        alive = [p for p in self.processes if process_start(p[0]) == p[1]]
        self.processes = [*alive[-MAX_PROCESSES:], [pid, start]]
        self.save()

    def owner_alive(self) -> bool:
        return process_start(self.owner_pid) == self.owner_start

    def _kill_started(self) -> None:
        for pid, start in self.processes:
            if pid == os.getpid() or process_start(pid) != start:
                continue  # gone, or the pid now belongs to another process
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)  # it and what it started (its own session)
                else:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.processes = []

    def teardown(self) -> list[str]:
        """Kill the recorded processes, delete the recorded namespaces that are still the ones
        this run made; forget the record once nothing of it is left. Returns what was deleted."""
        self._kill_started()
        removed = []
        for name in reversed(list(self.namespaces)):
            made, now = self.namespaces[name], identity(name)
            if now is None or (made is not None and tuple(made) != now):
                del self.namespaces[name]  # gone, or the name now holds another namespace
                continue
            run(["ip", "netns", "delete", name], check=False)
            if identity(name) is None:
                removed.append(name)
                del self.namespaces[name]
        if self.namespaces:
            self.save()  # what could not be deleted stays recorded for the next cleanup
        else:
            self.path.unlink(missing_ok=True)
        return removed


def _is_int(value: object, low: int = 0, high: int = 1 << 62) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def load(path: Path) -> Ledger | None:
    """The record in `path`, or None for anything that is not a whole, consistent record."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        run_id = record["run_id"]
        owner = record["owner"]
        namespaces = record["namespaces"]
        processes = record["processes"]
    except (OSError, ValueError, RecursionError, TypeError, KeyError):
        return None
    if not (isinstance(run_id, str) and RUN_ID_RE.match(run_id) and path.stem == run_id):
        return None
    name_re = re.compile(rf"^{re.escape(run_id)}-(sw|sw1|h[0-9]{{1,2}})$")
    ok = (
        isinstance(owner, list)
        and len(owner) == 2
        and all(_is_int(v) for v in owner)
        and isinstance(namespaces, dict)
        and all(
            isinstance(name, str)
            and name_re.match(name)
            and (made is None or (isinstance(made, list) and len(made) == 2
                                  and all(_is_int(v) for v in made)))
            for name, made in namespaces.items()
        )
        and isinstance(processes, list)
        and all(
            isinstance(p, list) and len(p) == 2 and all(_is_int(v) for v in p) for p in processes
        )
    )  # fmt: skip
    if not ok:
        return None
    return Ledger(run_id, owner[0], owner[1], dict(namespaces), [list(p) for p in processes])


def cleanup(everything: bool = False) -> list[str]:
    """Tear down every recorded run whose owner is gone (every other run's too if `everything`;
    never this process's own). Unreadable records are ignored, never acted on."""
    if not _private_dir(create=False):
        return []
    removed = []
    for path in sorted(STATE_DIR.glob("tsb-*.json")):
        ledger = load(path)
        if ledger is None:
            continue
        if ledger.owner_alive() and (not everything or ledger.owner_pid == os.getpid()):
            continue
        removed += ledger.teardown()
    return removed
