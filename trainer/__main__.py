"""`python -m trainer ...`: the same command line as `transitsim train` (see trainer/cli.py)."""

import sys

from trainer.cli import main
from transitsim.base.errors import TransitsimError


def run() -> None:
    """Exit 0 on success, 2 on bad input (one line, no traceback), 130 when interrupted."""
    try:
        code = main(sys.argv[1:], prog="python -m trainer")
    except TransitsimError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("trainer: interrupted (re-run the same command to resume)", file=sys.stderr)
        sys.exit(130)
    sys.exit(code)


if __name__ == "__main__":
    run()
