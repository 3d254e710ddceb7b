"""`--nproc N`: start N ranks of this same command on this machine, on loopback.

Each child is `python -m trainer <the same options, without --nproc>` with the environment
torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
MASTER_PORT), and LAUNCHER_PID: a rank dies with the launcher (PR_SET_PDEATHSIG, set as the rank
joins, see env.die_with_launcher), even when the launcher is SIGKILLed, and a rank never
launches ranks itself. When one child fails or the launcher is interrupted, the rest are stopped
(SIGTERM, then SIGKILL after a grace period), so no rank is left waiting on a dead peer; the one
line printed names the rank that failed (the survivors, which lost it, exit quietly with
LOST_PEER_EXIT).

Nothing here imports torch: the launcher only starts processes.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from transitsim.base.errors import TransitsimError

LOOPBACK = "127.0.0.1"
GRACE_S = 10.0
POLL_S = 0.2
LAUNCHER_PID = "TRANSITSIM_LAUNCHER_PID"  # set in each rank's environment: its launcher
LOST_PEER_EXIT = 75  # a rank whose collective failed because another rank is gone (EX_TEMPFAIL)
RANKS_PER_CORE = 2  # one thread each: 4 gloo ranks ran on 2 cores; 64 did no step in 150 s
# A rank's memory before its model: torch, gloo and the corpus. Measured peak RSS per rank:
# 390-410 MiB (synthetic preset), 520-580 MiB (shakespeare, 1-4 workers per rank).
RANK_BASE_BYTES = 400 << 20
MAX_TIMEOUT_S = 86_400.0  # --dist-timeout: a day; longer is a typo (inf overflowed timedelta)
LAUNCHER_FLAGS = ("nproc",)  # what the launcher consumes; every other option goes to the ranks


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def rank_argv(argv: list[str], parse: Callable[[list[str]], argparse.Namespace]) -> list[str]:
    """argv without the launcher's flags, checked by what argparse parses: the ranks' options
    must parse to the launcher's own, less LAUNCHER_FLAGS. `--nproc N` and `--nproc=N` are the
    only spellings (abbreviations such as `--npro` are off), and nothing after `--` is one."""
    out, skip, options = [], False, True
    for item in argv:
        if skip:
            skip = False
        elif options and item == "--":
            options = False
            out.append(item)
        elif options and item == "--nproc":
            skip = True
        elif not (options and item.startswith("--nproc=")):
            out.append(item)
    wanted = {**vars(parse(argv)), **dict.fromkeys(LAUNCHER_FLAGS)}
    if vars(parse(out)) != wanted:
        raise TransitsimError(
            "--nproc: cannot pass this command line on to the ranks without the launcher's "
            "own options; write --nproc N once, before any --"
        )
    return out


def check_timeout(timeout_s: object) -> float:
    """--dist-timeout: seconds in (0, a day]; inf, NaN, 0 and negatives were an OverflowError
    traceback or c10d's logs."""
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not 0 < timeout_s <= MAX_TIMEOUT_S
    ):
        raise TransitsimError(
            f"--dist-timeout must be a number of seconds in (0, {MAX_TIMEOUT_S:,.0f}], "
            f"got {timeout_s!r}"
        )
    return float(timeout_s)


def check_machine_holds(
    nproc: int,
    threads: int,
    model_bytes: int = 0,
    cores: int | None = None,
    available_bytes: int | None = None,
) -> None:
    """Refuse, with the figures, ranks this machine cannot run: more threads than
    RANKS_PER_CORE per core, or more memory than is free (RANK_BASE_BYTES + the model's)."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    if nproc * threads > RANKS_PER_CORE * cores:
        most = max(RANKS_PER_CORE * cores // threads, 1)
        each = "" if threads == 1 else f" of {threads} threads"
        raise TransitsimError(
            f"--nproc {nproc}: {nproc * threads} rank thread(s) on {cores} core(s); this "
            f"machine runs at most {RANKS_PER_CORE} a core: --nproc {most} or fewer{each}"
        )
    free = available_bytes if available_bytes is not None else memory_available()
    per_rank = RANK_BASE_BYTES + model_bytes
    if free is not None and nproc * per_rank > free:
        raise TransitsimError(
            f"--nproc {nproc}: the ranks need about {nproc * per_rank / 2**30:.1f} GiB "
            f"({per_rank / 2**20:,.0f} MiB each), but {free / 2**30:.1f} GiB is available"
        )


def memory_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (None where the system does not say)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def launch(argv: list[str], nproc: int, parse: Callable[[list[str]], argparse.Namespace]) -> int:
    """Run N ranks of `python -m trainer argv`; 0 when all succeed, else one TransitsimError
    naming the rank that failed."""
    command = [sys.executable, "-m", "trainer", *rank_argv(argv, parse)]
    return launch_command(command, nproc, name_failure=True)


def launch_command(
    command: list[str], nproc: int, quiet_ranks: bool = True, name_failure: bool = False
) -> int:
    """Run N ranks of `command` with torchrun's environment on loopback; the first failing
    rank's exit code, else 0. name_failure: a failure is one TransitsimError line naming the
    rank (or, where that rank said why in its own line, exit code 2 and nothing more)."""
    port = free_port()
    base = dict(os.environ, MASTER_ADDR=LOOPBACK, MASTER_PORT=str(port), WORLD_SIZE=str(nproc))
    base["LOCAL_WORLD_SIZE"] = str(nproc)
    base[LAUNCHER_PID] = str(os.getpid())
    children: list[subprocess.Popen] = []
    stopping = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stopping["signal"] = signum

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stopped: set[int] = set()
    try:
        for rank in range(nproc):
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
            out = subprocess.DEVNULL if rank and quiet_ranks else None  # rank 0 reports
            children.append(subprocess.Popen(command, env=env, stdout=out))
        code = _wait(children, stopping)
    finally:
        stopped = _stop(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping["signal"]:
        return 128 + stopping["signal"]
    if code and name_failure:
        message = _failure(children, stopped)
        if message is None:
            return 2  # the rank printed its own one-line error
        raise TransitsimError(message)
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


def _stop(children: list[subprocess.Popen]) -> set[int]:
    """Stop the children still running; returns the ranks it stopped."""
    running = [(rank, child) for rank, child in enumerate(children) if child.poll() is None]
    for _, child in running:
        child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    for _, child in running:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return {rank for rank, _ in running}


def _failure(children: list[subprocess.Popen], stopped: set[int]) -> str | None:
    """One line: which rank failed first, and how (not those that only lost it, nor those the
    launcher stopped); None where that rank exited 2, having printed its own line."""
    codes = {rank: child.returncode for rank, child in enumerate(children)}
    culprits = [
        rank
        for rank, code in codes.items()
        if rank not in stopped and code not in (0, LOST_PEER_EXIT)
    ]
    resume = "rerun the same command to resume from its last checkpoint"
    if not culprits:
        lost = sorted(rank for rank, code in codes.items() if code == LOST_PEER_EXIT)
        return f"rank(s) {', '.join(map(str, lost))} lost contact with the others; {resume}"
    rank = culprits[0]
    code = codes[rank]
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    elif code == 2:
        return None
    else:
        how = f"exited with code {code}"
    return f"rank {rank} of {len(children)} {how}: stopped the others; {resume}"
