"""The rank's place in the job, from torchrun's environment, and the process group it joins.

torchrun (and `--nproc`) set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; gloo
also honours GLOO_SOCKET_IFNAME and NCCL NCCL_SOCKET_IFNAME for the interface to use. Nothing
here assumes a loopback address: MASTER_ADDR is whatever the launcher says.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from transitsim.base.errors import TransitsimError

BACKENDS = ("simulated", "gloo", "nccl")
ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


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
    if together:
        dist.barrier()
    dist.destroy_process_group()


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
