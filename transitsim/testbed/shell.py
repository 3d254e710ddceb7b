"""The testbed's one way to run `ip` and `tc`: bounded in time, failures as one-line errors."""

import subprocess

from transitsim.base.errors import TransitsimError

COMMAND_TIMEOUT_S = 15.0


class TestbedError(TransitsimError):
    """The testbed cannot be built here (not root, tools missing, namespaces refused)."""

    __test__ = False  # not a pytest test class despite the name


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """argv with a timeout; with `check`, a non-zero exit is a TestbedError naming its last line."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise TestbedError(
            f"testbed: {' '.join(argv)!r} did not finish in {COMMAND_TIMEOUT_S:g} s"
        ) from None
    except OSError as exc:
        raise TestbedError(f"testbed: cannot run {argv[0]} ({exc.strerror})") from None
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise TestbedError(f"testbed: {' '.join(argv)} failed: {detail[-1] if detail else '?'}")
    return done
