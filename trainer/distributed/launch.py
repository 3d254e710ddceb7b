"""`--nproc N`: start N ranks of this same command on this machine, on loopback.

Each child is `python -m trainer <the same options, without --nproc>` with the environment
torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
MASTER_PORT). When one child fails or the launcher is interrupted, the rest are stopped
(SIGTERM, then SIGKILL after a grace period), so no rank is left waiting on a dead peer.
"""

import os
import signal
import socket
import subprocess
import sys
import time

LOOPBACK = "127.0.0.1"
GRACE_S = 10.0
POLL_S = 0.2


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def without_nproc(argv: list[str]) -> list[str]:
    """argv minus `--nproc N` / `--nproc=N`."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == "--nproc":
            skip = True
        elif not item.startswith("--nproc="):
            out.append(item)
    return out


def launch(argv: list[str], nproc: int) -> int:
    """Run N ranks of `python -m trainer argv`; the first failing rank's exit code, else 0."""
    return launch_command([sys.executable, "-m", "trainer", *without_nproc(argv)], nproc)


def launch_command(command: list[str], nproc: int, quiet_ranks: bool = True) -> int:
    """Run N ranks of `command` with torchrun's environment on loopback."""
    port = free_port()
    base = dict(os.environ, MASTER_ADDR=LOOPBACK, MASTER_PORT=str(port), WORLD_SIZE=str(nproc))
    base["LOCAL_WORLD_SIZE"] = str(nproc)
    children: list[subprocess.Popen] = []
    stopping = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stopping["signal"] = signum

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for rank in range(nproc):
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
            out = subprocess.DEVNULL if rank and quiet_ranks else None  # rank 0 reports
            children.append(subprocess.Popen(command, env=env, stdout=out))
        code = _wait(children, stopping)
    finally:
        _stop(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping["signal"]:
        return 128 + stopping["signal"]
    return code


def _wait(children: list[subprocess.Popen], stopping: dict[str, int]) -> int:
    """Until all exit (0), one fails (its code) or a signal arrives."""
    while not stopping["signal"]:
        codes = [child.poll() for child in children]
        failed = [code for code in codes if code not in (None, 0)]
        if failed:
            return failed[0]
        if all(code == 0 for code in codes):
            return 0
        time.sleep(POLL_S)
    return 0


def _stop(children: list[subprocess.Popen]) -> None:
    running = [child for child in children if child.poll() is None]
    for child in running:
        child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    for child in running:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
