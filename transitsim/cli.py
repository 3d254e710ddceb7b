"""The face of transitsim: parses options, calls the library, prints. No logic of its own.

Each command group lives in `transitsim/commands/`; this module wires them together and turns
every user error into one line on stderr and exit code 2 (never a traceback).
"""

import sys

import typer

from transitsim import __version__
from transitsim.commands import (
    collective_cmd,
    findings_cmd,
    ladder_cmd,
    replay_cmd,
    run_cmd,
    testbed_cmd,
    traces_cmd,
    train_cmd,
    validate_cmd,
)
from transitsim.errors import TransitsimError

app = typer.Typer(
    name="transitsim",
    help="Replay training traces through network models to estimate time-to-loss.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"transitsim {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Replay training traces through network models to estimate time-to-loss.

    Every command takes -q/--quiet; `transitsim COMMAND --help` shows its options.
    """


for module in (
    traces_cmd,
    ladder_cmd,
    findings_cmd,
    train_cmd,
    collective_cmd,
    run_cmd,
    replay_cmd,
    validate_cmd,
    testbed_cmd,
):
    module.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: exit 0 on success, 1 when the work failed, 2 on bad input."""
    try:
        result = app(args=argv, standalone_mode=False)
    except TransitsimError as exc:
        print(f"transitsim: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("transitsim: aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:  # click's usage errors, as bundled by typer
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            sys.exit(0)
        print(f"transitsim: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("transitsim: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
