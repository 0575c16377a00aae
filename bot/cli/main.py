"""The ``threshold-bot`` command line: one module per command, composed here (docs/cli.md)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated

import typer

from bot.cli.action import action_command
from bot.cli.audit import audit_command
from bot.cli.backtest import backtest_command
from bot.cli.check_config import check_config_command
from bot.cli.db import db_app
from bot.cli.drift import drift_command
from bot.cli.errors import PROG, OneLineErrors
from bot.cli.export import export_command
from bot.cli.rebaseline import rebaseline_command
from bot.cli.review import review_command
from bot.cli.serve import serve_command, worker_command
from bot.cli.sync import sync_command
from bot.cli.watch import watch_command

app = typer.Typer(
    cls=OneLineErrors,
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


app.command("review")(review_command)
app.command("rebaseline")(rebaseline_command)
app.command("backtest")(backtest_command)
app.command("drift")(drift_command)
app.command("sync")(sync_command)
app.command("export")(export_command)
app.command("serve")(serve_command)
app.command("worker")(worker_command)
app.command("watch")(watch_command)
app.command("audit")(audit_command)
app.command("action")(action_command)
app.command("check-config")(check_config_command)
app.add_typer(db_app, name="db")
