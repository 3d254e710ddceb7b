"""`python -m trainer ...`: the same command line as `transitsim train` (see trainer/cli.py)."""

import os
import sys

from trainer.cli import main
from trainer.distributed.launch import LAUNCHER_PID
from transitsim.base.errors import TransitsimError


def run() -> None:
    """Exit 0 on success, 2 on bad input (one line, no traceback), 130 when interrupted.

    A rank started by `--nproc` says nothing when interrupted: its launcher stops the ranks
    with SIGTERM (which raises KeyboardInterrupt inside an atomic write) after naming the rank
    that failed, and a second line from a stopped rank would race with that one line."""
    try:
        code = main(sys.argv[1:], prog="python -m trainer")
    except TransitsimError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    if code in (130, 143) and not os.environ.get(
        LAUNCHER_PID
    ):  # a launched rank: its launcher speaks
        print("trainer: interrupted (re-run the same command to resume)", file=sys.stderr)
    leave_process(code)


def leave_process(code: int) -> None:
    """A torch.distributed rank (RANK set by torchrun or a launcher) leaves without the
    interpreter's teardown, where gloo's threads can abort a finished rank (`exit_rank`);
    everything else exits normally."""
    if "RANK" in os.environ and "torch.distributed" in sys.modules:
        from trainer.distributed.env import exit_rank

        exit_rank(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
