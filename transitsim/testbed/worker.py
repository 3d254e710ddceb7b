"""One torch.distributed (gloo over TCP) rank inside a testbed host namespace.

Run as `python -m transitsim.testbed.worker PLAN.json OUT.json` with RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and GLOO_SOCKET_IFNAME set (the launcher does). For every point of the
plan: warm-up calls, then repeats, each after a barrier, with CLOCK_MONOTONIC start and end
times (one clock for every namespace on this machine, so the launcher can take the collective's
time as max end - min start over ranks). Writes its times as JSON.

The parent's death kills this process (PR_SET_PDEATHSIG), and the whole run has a deadline, so a
killed launcher never leaves ranks waiting on each other.
"""

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

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


def _op(collective: str, numel: int, world: int):
    """The collective as a no-argument call on preallocated float32 tensors."""
    x = torch.ones(numel, dtype=torch.float32)
    if collective == "all_reduce":
        return lambda: dist.all_reduce(x)
    if collective == "all_gather":
        out = torch.empty(numel * world, dtype=torch.float32)
        return lambda: dist.all_gather_into_tensor(out, x)
    if collective == "broadcast":
        return lambda: dist.broadcast(x, src=0)
    raise SystemExit(f"unknown collective {collective!r}")


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
    results = []
    for point in plan["points"]:
        if _now() > deadline:
            break
        call = _op(point["collective"], point["bytes"] // 4, world)
        starts, ends = [], []
        for k in range(point["warmup"] + point["repeats"]):
            dist.barrier()
            t0 = _now()
            call()
            t1 = _now()
            if k >= point["warmup"]:
                starts.append(t0)
                ends.append(t1)
        results.append({**point, "starts": starts, "ends": ends})
    dist.barrier()
    dist.destroy_process_group()
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps({"rank": rank, "world": world, "points": results}))
    tmp.replace(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
