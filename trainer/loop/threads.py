"""`threads = 0` (auto): as many torch threads as there are cores nobody else is using, re-read
as the run goes.

Why adapt rather than fix a number: on a quiet 2-core machine two intra-op threads ran a step
faster than one, but as soon as another process wanted a core the same two threads ran several
times slower than one (an OpenMP barrier waits for the thread the kernel has parked). Neither
fixed count is right on a shared machine, so the count follows how many other threads are
runnable right now: the kernel's count of runnable tasks (/proc/loadavg's fourth field) less this
process's own. The figure is instantaneous (the load averages lag by a minute), costs two small
reads, and is sampled a few times per check, so one waking daemon does not halve the threads.
Results do not depend on the count (spec §4's determinism; tests/test_threads.py checks it).
"""

import os
import statistics
import time
from pathlib import Path

import torch

CHECK_EVERY = 5  # steps between two looks at the machine
SAMPLES = 5  # readings per look, SAMPLE_GAP_S apart; their median decides
SAMPLE_GAP_S = 0.002
UP_AFTER = 3  # looks in a row that find a core free before a thread is added back


def cores() -> int:
    return len(os.sched_getaffinity(0))


def _running_tasks() -> int | None:
    """Runnable tasks on the machine now, this one included (/proc/loadavg "R/total")."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_running() -> int:
    """This process's threads in state R."""
    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "R":
            count += 1
    return max(count, 1)


def others_running() -> int | None:
    """Threads of other processes that want a core now (median of SAMPLES readings); None
    where the system does not say."""
    readings = []
    for i in range(SAMPLES):
        total = _running_tasks()
        if total is None:
            return None
        readings.append(max(total - _own_running(), 0))
        if i + 1 < SAMPLES:
            time.sleep(SAMPLE_GAP_S)
    return int(statistics.median(readings))


def free_cores(limit: int | None = None) -> int:
    """Cores not wanted by another process, at least 1 and at most `limit` (default: all)."""
    n = cores() if limit is None else min(cores(), limit)
    others = others_running()
    return n if others is None else max(1, min(n, cores() - others))


class ThreadGovernor:
    """Sets torch's intra-op threads every CHECK_EVERY steps: down at once when another process
    wants a core, up only after UP_AFTER looks in a row find it free."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.threads = free_cores(limit)
        self.free_looks = 0
        self.history: list[int] = [self.threads]
        torch.set_num_threads(self.threads)

    def before_step(self, step: int) -> None:
        if step % CHECK_EVERY:
            return
        want = free_cores(self.limit)
        if want < self.threads:
            self.threads, self.free_looks = want, 0
        elif want > self.threads:
            self.free_looks += 1
            if self.free_looks >= UP_AFTER:
                self.threads, self.free_looks = self.threads + 1, 0
        else:
            self.free_looks = 0
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        self.history.append(self.threads)
