"""The ``threshold-bot`` command line: one module per command, composed here (docs/cli.md)."""

from __future__ import annotations

import typer

from bot.cli.audit import audit_command
from bot.cli.errors import PROG, OneLineErrors
from bot.cli.review import review_command
from bot.cli.serve import serve_command, worker_command
from bot.cli.sync import sync_command

app = typer.Typer(
    cls=OneLineErrors,
    name=PROG,
    help="Review pull requests that change CI regression thresholds.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _main() -> None:
    """Review pull requests that change CI regression thresholds."""


app.command("review")(review_command)
app.command("sync")(sync_command)
app.command("serve")(serve_command)
app.command("worker")(worker_command)
app.command("audit")(audit_command)
