"""One torch.distributed (gloo over TCP) rank inside a testbed host namespace.

Run as `python -m transitsim.testbed.worker PLAN.json OUT.json` with RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and GLOO_SOCKET_IFNAME set (the launcher does). For every point of the
plan: warm-up calls, then repeats, each after a barrier, with CLOCK_MONOTONIC start and end
times (one clock for every namespace on this machine, so the launcher can take the collective's
time as max end - min start over ranks). Writes its times as JSON.

Repeats are adaptive: after each timed call the ranks all-reduce (max) a 3-number tensor (minus
their start, their end, the seconds the point has taken), outside the timed window, so every
rank holds the same list of collective times and takes the same decision: stop once at least
`repeats` calls are timed and their spread (IQR / median) is under `target_spread`, or at
`max_repeats` calls, or once the point has taken `max_s`. Rank 0 records the 1-minute load
average (os.getloadavg: the whole machine's, namespaces do not separate it) at each point's
start and end. That average counts this run's own ranks (P of them busy during a point), so it
says little about other work; rank 0 therefore also counts, at each point's start and end, the
threads in state R that are neither kernel threads nor in this run's process tree (the
launcher, the ranks and their threads): `foreign_running`, the larger of the two counts. A quiet
machine shows 0.

`hierarchical_all_reduce` (two sites, hosts split in order) is transitsim's `hierarchical`:
a ring reduce-scatter inside each site (point-to-point isend/irecv, member j sends to j + 1:
n - 1 steps of payload / n), gloo's ring all-reduce of each rank's reduced shard among the
corresponding ranks of the sites (a process group per shard index), and a ring all-gather
inside each site (n - 1 steps of payload / n).

The parent's death kills this process (PR_SET_PDEATHSIG), and the whole run has a deadline, so a
killed launcher never leaves ranks waiting on each other.
"""

import ctypes
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Sites:
    """The process groups of a two-site hierarchical all-reduce (created by every rank, in
    the same order, as torch requires)."""

    def __init__(self, sites: int, rank: int, world: int):
        self.per_site = world // sites
        self.site, self.index = divmod(rank, self.per_site)
        self.members = [self.site * self.per_site + j for j in range(self.per_site)]
        self.cross = None
        for j in range(self.per_site):
            group = dist.new_group([s * self.per_site + j for s in range(sites)])
            if j == self.index:
                self.cross = group


def _ring(chunks: list, members: list[int], i: int, reduce: bool) -> None:
    """One ring inside a site: reduce-scatter (member i ends with chunk i + 1 reduced) or
    all-gather (member i starts with chunk i + 1), member i sending to member i + 1."""
    n = len(members)
    right, left = members[(i + 1) % n], members[(i - 1) % n]
    for k in range(n - 1):
        send = (i - k) % n if reduce else (i + 1 - k) % n
        recv = (send - 1) % n
        buf = torch.empty_like(chunks[recv]) if reduce else chunks[recv]
        requests = [dist.isend(chunks[send], right), dist.irecv(buf, left)]
        for request in requests:
            request.wait()
        if reduce:
            chunks[recv].add_(buf)


def _hierarchical(x, sites: Sites):
    chunks = list(torch.tensor_split(x, sites.per_site))
    mine = (sites.index + 1) % sites.per_site

    def call():
        _ring(chunks, sites.members, sites.index, reduce=True)
        dist.all_reduce(chunks[mine], group=sites.cross)
        _ring(chunks, sites.members, sites.index, reduce=False)

    return call


def _op(collective: str, numel: int, world: int, sites: Sites | None = None):
    """The collective as a no-argument call on preallocated float32 tensors."""
    x = torch.ones(numel, dtype=torch.float32)
    if collective == "hierarchical_all_reduce":
        if sites is None:
            raise SystemExit("hierarchical_all_reduce needs sites: 2 in the plan")
        return _hierarchical(x, sites)
    if collective == "all_reduce":
        return lambda: dist.all_reduce(x)
    if collective == "all_gather":
        out = torch.empty(numel * world, dtype=torch.float32)
        return lambda: dist.all_gather_into_tensor(out, x)
    if collective == "broadcast":
        return lambda: dist.broadcast(x, src=0)
    raise SystemExit(f"unknown collective {collective!r}")


def _stat(path: str) -> list[str] | None:
    """/proc/.../stat split after the command (which may hold spaces), or None if gone."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split() or None


def foreign_running(own_root: int) -> float:
    """Threads running or runnable now that are not kernel threads and not descendants of
    own_root (this run's launcher); NaN (unknown) if /proc cannot be read, never an error that
    would end the measurement."""
    try:
        return float(len(foreign_running_pids(own_root)))
    except OSError:
        return float("nan")


def foreign_running_pids(own_root: int) -> list[int]:
    """The process of each such thread (a process once per running thread). Bounded: one pass
    over /proc."""
    parents: dict[int, int] = {}
    running: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(f"/proc/{entry}/stat")
        try:  # a process that exits meanwhile leaves a short or empty line: skip it
            pid, ppid, flags = int(entry), int(fields[1]), int(fields[6])
        except (TypeError, IndexError, ValueError):
            continue
        parents[pid] = ppid
        if flags & 0x00200000 or pid == 2 or ppid == 2:  # PF_KTHREAD: the kernel's own threads
            continue
        try:
            tasks = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        for tid in tasks:
            task = _stat(f"/proc/{entry}/task/{tid}/stat")
            if task and task[0] == "R":
                running.append(pid)

    def ours(pid: int) -> bool:
        for _ in range(64):  # an ancestry deeper than this is not a process tree we made
            if pid == own_root:
                return True
            if pid <= 1 or pid not in parents:
                return False
            pid = parents[pid]
        return False

    return [pid for pid in running if not ours(pid)]


def main(plan_path: str, out_path: str) -> None:
    _die_with_parent()
    plan = json.loads(Path(plan_path).read_text())
    deadline = _now() + float(plan["deadline_s"])
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo",
        rank=rank,
        world_size=world,
        timeout=__import__("datetime").timedelta(seconds=float(plan["timeout_s"])),
    )
    sites = Sites(int(plan["sites"]), rank, world) if int(plan.get("sites", 1)) > 1 else None
    results = []
    for point in plan["points"]:
        late = torch.tensor([1.0 if _now() > deadline else 0.0])
        dist.all_reduce(late, op=dist.ReduceOp.MAX)  # every rank stops at the same point
        if float(late[0]) > 0:
            break
        load_start = os.getloadavg()[0]
        foreign = foreign_running(os.getppid()) if rank == 0 else 0.0
        call = _op(point["collective"], point["bytes"] // 4, world, sites)
        for _ in range(point["warmup"]):
            dist.barrier()
            call()
        starts, ends, stop = _repeat(call, point, deadline)
        if rank == 0:
            later = foreign_running(os.getppid())
            foreign = math.nan if math.isnan(foreign) or math.isnan(later) else max(foreign, later)
        results.append({**point, "starts": starts, "ends": ends, "stop": stop,
                        "load_start": load_start, "load_end": os.getloadavg()[0],
                        "foreign_running": foreign})  # fmt: skip
    dist.barrier()
    dist.destroy_process_group()
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps({"rank": rank, "world": world, "points": results}))
    tmp.replace(out_path)


def _spread(times: list[float]) -> float:
    """IQR / median, as measure.summarise computes a point's spread (numpy's percentiles)."""
    q25, median, q75 = np.percentile(times, [25, 50, 75])
    return float((q75 - q25) / median) if median > 0 else float("inf")


def _repeat(call, point: dict, deadline: float) -> tuple[list[float], list[float], str]:
    """Timed calls until the spread target, the repeat cap or the point's time cap (every rank
    decides alike from the same all-reduced times)."""
    low = int(point["repeats"])
    high = max(low, int(point.get("max_repeats", low)))
    target = float(point.get("target_spread", 0.0))
    max_s = float(point.get("max_s", float("inf")))
    began = _now()
    starts, ends, times = [], [], []
    stop = "max repeats"
    for _ in range(high):
        dist.barrier()
        t0 = _now()
        call()
        t1 = _now()
        starts.append(t0)
        ends.append(t1)
        late = 1.0 if t1 - began >= max_s or t1 > deadline else 0.0
        agreed = torch.tensor([-t0, t1, late], dtype=torch.float64)
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
        times.append(float(agreed[1] + agreed[0]))
        if len(times) >= low:
            if target > 0 and _spread(times) < target:
                stop = "spread"
                break
            if float(agreed[2]) > 0:
                stop = "time"
                break
    return starts, ends, stop


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
