"""Issue 45 item 6: every refusal is one line and exit 2, on every command. Walks the whole CLI
(every leaf command of every group, found from the app itself, so a command added later is
covered) and gives each an unknown option and a word for each of its numeric options: each
must be refused before any work, in one line `transitsim: error: ...`, exit 2, no
traceback."""

import typing

import pytest
import typer
from cli_run import assert_refused, run_cli

from transitsim.cli import build_app


def leaf_commands() -> dict[str, typing.Any]:
    """'group sub' -> the (typer's click) command, for every command that runs (not a group)."""
    found: dict[str, typing.Any] = {}

    def visit(command: typing.Any, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                visit(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    visit(typer.main.get_command(build_app()), [])
    return found


COMMANDS = leaf_commands()


def numeric(hint: typing.Any) -> bool:
    """An int or float option, optional or not (a bool is a flag)."""
    kinds = typing.get_args(hint) or (hint,)
    return any(kind in (int, float) for kind in kinds)


def bad_values(command: typing.Any) -> list[list[str]]:
    """An argv tail per numeric option (from the command's own type hints): a word for it."""
    hints = typing.get_type_hints(command.callback)
    tails = []
    for param in command.params:
        if getattr(param, "is_flag", True) or not param.opts:
            continue
        if numeric(hints.get(param.name)):
            tails.append([max(param.opts, key=len), "lots"])
    return tails


CASES = [
    pytest.param(name, tail, id=f"{name} {' '.join(tail)}")
    for name, command in COMMANDS.items()
    for tail in [["--no-such-option"], *bad_values(command)]
]


def test_the_walk_finds_the_commands_of_every_group() -> None:
    for name in ("replay", "run", "traces import", "calibrate nccl-tests", "testbed run"):
        assert name in COMMANDS, sorted(COMMANDS)
    assert len(CASES) > 2 * len(COMMANDS)  # the numeric options were found too


@pytest.mark.parametrize("name, tail", CASES)
def test_a_wrong_option_is_one_line_and_exit_2(name: str, tail: list[str]) -> None:
    argv = [*name.split(), *tail]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
