"""How the command line fails: one line on stderr, ``threshold-bot: error: …``, never a traceback.

Bad input or usage exits with status 2 (``UsageProblem``, or click's usage errors).  A bare
``threshold-bot`` prints the help on stderr and exits 2, as click does for a group without
a command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer._click import Context, HelpFormatter  # click, as vendored by typer
from typer._click.exceptions import NoArgsIsHelpError
from typer.core import TyperGroup

PROG = "threshold-bot"


class UsageProblem(Exception):
    """Bad input or usage: reported on one line, exit status 2; ``details`` (hints, e.g. the
    config lines that would declare a gate) follow on the next lines as written."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


class OneLineErrors(TyperGroup):
    """Usage errors (unknown option, missing value...) as one line on stderr, status 2; the
    commands' one-line helps are wrapped in ``--help``, never cut."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                text = command.short_help or (command.help or "").split("\n\n")[0]
                rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
        except typer.Abort:
            if not standalone_mode:
                raise
            fail("aborted", 1)
        except NoArgsIsHelpError as exc:  # a bare command: the help, status 2
            if not standalone_mode:
                raise
            exc.show()
            sys.exit(exc.exit_code)
        except typer.TyperException as exc:  # click's usage errors, as vendored by typer
            if not standalone_mode:
                raise
            format_message = getattr(exc, "format_message", None)
            message = format_message() if callable(format_message) else str(exc)
            message = message.replace("Value error, ", "")  # pydantic's prefix, via typer
            fail(f"{message} (see '{_command(exc)} --help')", getattr(exc, "exit_code", 2))
        if standalone_mode:
            sys.exit(result if isinstance(result, int) else 0)
        return result


def _command(exc: Exception) -> str:
    """The command a usage error is about: ``threshold-bot review``, ``threshold-bot db
    upgrade``; ``threshold-bot`` for the program's own options and unknown commands."""
    ctx: Context | None = getattr(exc, "ctx", None)
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join([PROG, *reversed(names)])


def fail(message: str, status: int = 2, details: str = "") -> NoReturn:
    """Print ``threshold-bot: error: message`` (one line) and ``details`` below it; exit."""
    text = " ".join(message.split())
    print(f"{PROG}: error: {text}", file=sys.stderr)
    if details:
        print(details.rstrip("\n"), file=sys.stderr)
    sys.exit(status)
