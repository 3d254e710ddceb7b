"""One rank of a torch.distributed run: join the group, train, leave.

Every rank runs trainer.loop.run.train with a ProcessGroupExchange; rank 0 writes the trace and
checkpoints, the others only compute and exchange.
"""

from collections.abc import Callable
from pathlib import Path

from trainer.config import RunConfig
from trainer.distributed.env import join, leave, rank_env
from trainer.loop.run import RunResult, StepReport, run_device, train
from transitsim.base.errors import TransitsimError


def train_distributed(
    cfg: RunConfig,
    out_dir: Path,
    *,
    backend: str,
    wire_dtype: str = "float32",
    timeout_s: float = 600.0,
    on_step: Callable[[StepReport], None] | None = None,
    **options,
) -> tuple[int, RunResult]:
    """Train this rank's part of the run; returns (rank, result)."""
    from trainer.distributed.exchange import ProcessGroupExchange

    env = rank_env()
    if cfg.workers % env.world:
        raise TransitsimError(
            f"{cfg.workers} workers do not split evenly over WORLD_SIZE={env.world} processes; "
            f"use --set workers=N with N a multiple of {env.world}"
        )
    device = run_device(cfg, env.local_rank)
    join(backend, env, timeout_s, device)
    finished = False
    try:
        exchange = ProcessGroupExchange(cfg.workers, device, wire_dtype, backend)
        result = train(
            cfg,
            out_dir,
            exchange=exchange,
            device=device,
            on_step=on_step if env.rank == 0 else None,
            **options,
        )
        finished = True
    finally:
        leave(together=finished)
    return env.rank, result
