"""The rank's place in the job, from torchrun's environment, and the process group it joins.

torchrun (and `--nproc`) set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; gloo
also honours GLOO_SOCKET_IFNAME and NCCL NCCL_SOCKET_IFNAME for the interface to use. Nothing
here assumes a loopback address: MASTER_ADDR is whatever the launcher says.
"""

import ctypes
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from trainer.distributed.launch import LAUNCHER_PID, check_timeout
from transitsim.base.errors import TransitsimError

BACKENDS = ("simulated", "gloo", "nccl")
ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class LostRank(TransitsimError):
    """A collective failed because another rank is gone (killed, crashed, or stopped answering):
    one line, not gloo's traceback. Under --nproc the rank exits quietly (LOST_PEER_EXIT) and
    the launcher names the rank that died."""


def exit_lost_peer() -> None:
    """Under --nproc, a rank that lost a peer leaves with LOST_PEER_EXIT at once: a normal
    interpreter exit runs the destructors of gloo's still-joinable threads, and C++ then prints
    "terminate called without an active exception" and aborts (a second stderr line, on CI)."""
    from trainer.distributed.launch import LOST_PEER_EXIT

    exit_rank(LOST_PEER_EXIT)


def exit_rank(code: int) -> None:
    """Leave the process with `code` now, its streams flushed, skipping the interpreter's
    teardown. A rank that finished, left the group together with the others and wrote
    everything still aborted there ("terminate called without an active exception", 3 Dec 2026:
    rank 1 of a 400-step testbed run whose trace was complete), which turned a good run into a
    failed one; every write of a run is atomic and done before this."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def collective(call: Callable[[], object], rank: int) -> object:
    """Run one torch.distributed call; a RuntimeError from it (gloo's "Connection reset by
    peer", a timeout) is LostRank."""
    try:
        return call()
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LostRank(
            f"rank {rank}: lost contact with another rank, which died or stopped answering "
            f"({first[:160]})"
        ) from None


def die_with_launcher(environ: Mapping[str, str] = os.environ) -> None:
    """Under --nproc: be killed when the launcher dies, even by SIGKILL (the kernel sends
    SIGKILL on the parent's exit), and exit at once if it already has."""
    launcher = environ.get(LAUNCHER_PID)
    if not launcher:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the launcher's own stop is all there is
    if str(os.getppid()) != launcher:  # it died before the line above: nobody will stop us
        os.kill(os.getpid(), signal.SIGKILL)


def check_master(env: "RankEnv") -> None:
    """MASTER_ADDR must resolve before the process group tries it (an unresolvable name printed
    40 lines of c10d logs before its error)."""
    try:
        socket.getaddrinfo(env.master_addr, env.master_port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise TransitsimError(
            f"rank {env.rank}: MASTER_ADDR {env.master_addr!r} does not resolve ({reason})"
        ) from None


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world: int
    local_rank: int
    master_addr: str
    master_port: int


def rank_env(environ: Mapping[str, str] = os.environ) -> RankEnv:
    """This process's rank and rendezvous address; one clear error when they are missing."""
    missing = [key for key in ENV_KEYS if not environ.get(key)]
    if missing:
        raise TransitsimError(
            f"a torch.distributed backend needs {', '.join(missing)} in the environment: "
            "launch with torchrun --nproc-per-node N -m trainer ..., or add --nproc N"
        )
    try:
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        local_rank = int(environ.get("LOCAL_RANK", "0"))
        port = int(environ["MASTER_PORT"])
    except ValueError:
        raise TransitsimError(
            "RANK, WORLD_SIZE, LOCAL_RANK and MASTER_PORT must be integers"
        ) from None
    if world < 1 or not 0 <= rank < world or not 0 < port < 65536 or local_rank < 0:
        raise TransitsimError(
            f"bad rank environment: RANK={rank}, WORLD_SIZE={world}, MASTER_PORT={port}"
        )
    return RankEnv(rank, world, local_rank, environ["MASTER_ADDR"], port)


def check_backend(backend: str, device: str) -> None:
    if backend not in BACKENDS:
        raise TransitsimError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    if backend == "nccl" and device != "cuda":
        raise TransitsimError("--backend nccl needs --device cuda (NCCL runs on GPUs only)")
    if backend == "nccl" and not dist.is_nccl_available():
        raise TransitsimError("--backend nccl: this torch was built without NCCL")
    if backend == "gloo" and not dist.is_gloo_available():
        raise TransitsimError("--backend gloo: this torch was built without gloo")


def join(backend: str, env: RankEnv, timeout_s: float, device: torch.device) -> None:
    """Join the job's process group (blocks until all WORLD_SIZE ranks have arrived)."""
    die_with_launcher()
    timeout_s = check_timeout(timeout_s)
    check_master(env)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(
            backend,
            init_method=f"tcp://{_host(env.master_addr)}:{env.master_port}",
            rank=env.rank,
            world_size=env.world,
            timeout=timedelta(seconds=timeout_s),
        )
    except (RuntimeError, ValueError) as exc:  # torch's DistStoreError is a RuntimeError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TransitsimError(
            f"rank {env.rank} could not join {env.master_addr}:{env.master_port} ({first[:200]})"
        ) from None


def leave(together: bool = False) -> None:
    """Leave the group. together (every rank finished its work): first wait for all of them,
    so that no rank tears down its connections (and rank 0 its store) while another is still
    writing or tearing down; a rank once aborted at exit ("terminate called without an active
    exception") when they left apart. After a failure a rank leaves at once: the others may
    never arrive."""
    if not dist.is_initialized():
        return
    try:
        if together:
            collective(dist.barrier, dist.get_rank())
    finally:
        dist.destroy_process_group()


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
