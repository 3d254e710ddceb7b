"""The face of transitsim: parses options, calls the library, prints. No logic of its own.

Each command group lives in `transitsim/commands/`; this module wires them together and turns
every user error into one line on stderr and exit code 2 (never a traceback). A process imports
only the module of the command it runs (`transitsim collective` never loads pandas' report
stack or plotly), so a short command starts in a fraction of a second; help lists them all.
"""

import importlib
import sys

import typer

from transitsim import __version__
from transitsim.base.errors import TransitsimError, escaped_line

# command name -> the module in transitsim/commands/ whose register(app) adds it (help order)
COMMANDS = {
    "traces": "traces_cmd",
    "ladder": "ladder_cmd",
    "findings": "findings_cmd",
    "train": "train_cmd",
    "collective": "collective_cmd",
    "run": "run_cmd",
    "replay": "replay_cmd",
    "validate": "validate_cmd",
    "scenario-schema": "validate_cmd",
    "testbed": "testbed_cmd",
    "calibrate": "calibrate_cmd",
}


def _print_version(value: bool) -> None:
    if value:
        print(f"transitsim {__version__}")
        raise typer.Exit(0)


def build_app(argv: list[str] | None = None) -> typer.Typer:
    """The CLI with the command `argv` names registered (every command when it names none)."""
    app = typer.Typer(
        name="transitsim",
        help="Replay training traces through network models to estimate time-to-loss.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _group(
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

    first = next((a for a in argv or [] if not a.startswith("-")), None)
    modules = [COMMANDS[first]] if first in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"transitsim.commands.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: exit 0 on success, 1 when the work failed, 2 on bad input."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        result = build_app(argv)(args=argv, standalone_mode=False)
    except TransitsimError as exc:
        print(f"transitsim: error: {escaped_line(exc)}", file=sys.stderr)
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
        print(f"transitsim: error: {escaped_line(exc.format_message())}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("transitsim: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
