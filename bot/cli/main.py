"""The ``threshold-bot`` command line: one module per command, loaded when it runs
(``bot/cli/commands.py``; docs/cli.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.cli.commands import LazyCommands
from bot.cli.errors import PROG

app = typer.Typer(
    cls=LazyCommands,
    name=PROG,
    help="Review pull requests that change CI regression thresholds.",
    add_completion=True,  # --install-completion / --show-completion
    no_args_is_help=True,  # a bare threshold-bot: the help on stderr, status 2 (click's way)
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only for --version: start-up

        typer.echo(f"{PROG} {version(PROG)}")
        raise typer.Exit()


@app.callback()
def _main(
    _show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Review pull requests that change CI regression thresholds."""
