"""One rank that trains every run of a JSON list ([{"config": {...}, "out": DIR}]) in turn.

    python -m trainer.distributed.batch RUNS.json   (under torchrun, or launch_command)

Joining the process group once and training all runs in it keeps the start-up cost to one
torch import per rank: the equivalence test and benchmarks/check_equivalence.py use it.
"""

import json
import os
import sys
from pathlib import Path

import torch

from trainer.config import RunConfig
from trainer.distributed.env import LostRank, exit_lost_peer, exit_rank, join, leave, rank_env
from trainer.distributed.exchange import ProcessGroupExchange
from trainer.distributed.launch import LAUNCHER_PID
from trainer.loop.run import train
from transitsim.base.errors import TransitsimError


def main() -> None:
    """Exit 0; a lost peer under --nproc/launch_command: LOST_PEER_EXIT, quietly (the launcher
    names the rank that died); another error: one line, exit 2."""
    try:
        _train_all()
    except LostRank as exc:
        if os.environ.get(LAUNCHER_PID):
            exit_lost_peer()
        print(f"trainer: error: {exc}", file=sys.stderr)
        exit_rank(2)
    except TransitsimError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr)
        exit_rank(2)
    exit_rank(0)  # not the interpreter's teardown, where gloo's threads can abort (exit_rank)


def _train_all() -> None:
    runs = json.loads(Path(sys.argv[1]).read_text())
    env = rank_env()
    device = torch.device("cpu")
    join("gloo", env, 120.0, device)
    finished = False
    try:
        for run in runs:
            cfg = RunConfig.from_dict(run["config"])
            exchange = ProcessGroupExchange(cfg.workers, device, "float32", "gloo")
            train(cfg, Path(run["out"]), exchange=exchange, device=device, say=lambda _: None)
        finished = True
    finally:
        leave(together=finished)


if __name__ == "__main__":
    main()
