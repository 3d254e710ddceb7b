"""`transitsim train ...`: the torch trainer's command line, loaded only when it is used.

transitsim itself never needs torch, so the trainer is imported inside the command, and a
missing torch is one line that says how to install it. Options are parsed by trainer/cli.py,
the same parser as `python -m trainer`, so every option passes through untouched.
"""

import importlib.util
import sys

import typer

INSTALL_HINT = "transitsim train needs torch: pip install -e '.[train]'"


def train_command(ctx: typer.Context) -> int:
    """Train one variant and write its trace (options: transitsim train --help)."""
    if importlib.util.find_spec("torch") is None:
        print(f"transitsim: error: {INSTALL_HINT}", file=sys.stderr)
        raise typer.Exit(2)
    from trainer.cli import main

    return main(list(ctx.args), prog="transitsim train")


def register(app: typer.Typer) -> None:
    """Add `transitsim train` to the main app; every argument goes to the trainer's parser."""
    app.command(
        "train",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
        help="Train one variant (A-F, E') and write its trace: transitsim train --help.",
    )(train_command)
