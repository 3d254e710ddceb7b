"""The command line run in this process, and what a refusal must look like: the set-up the CLI
tests share (byo, hostile inputs, calibration, testbed)."""

import contextlib
import io
from pathlib import Path
from typing import Any

from transitsim import cli


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in this process: (exit code, stdout, stderr). An exception other than
    SystemExit escapes and fails the test with its traceback, which is the point."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code: Any = 0
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def assert_refused(argv: list[str], code: int, stderr: str, out: Path | None = None) -> None:
    """Exit 2 with one line, `transitsim: error: ...`, no traceback, and (where `out` is given)
    no output folder left behind."""
    assert code == 2, f"{argv}: exit {code}, stderr {stderr!r}"
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("transitsim: error: "), (argv, stderr)
    assert "Traceback" not in stderr
    if out is not None:
        assert not out.exists(), "a refused command left its output folder"
