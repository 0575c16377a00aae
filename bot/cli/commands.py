"""The commands of ``threshold-bot`` and where each lives, loaded only when asked for.

A command's module (and what it imports: the analysis, the App's server stack, W&B...) is
imported when that command runs or shows its help, never for ``--version``, the program's
``--help`` or another command, so start-up stays short (docs/benchmarks.md, "Start-up").  An
optional library that is not installed ends the command with one line naming the extra that
brings it (``bot/adapters/extras.py``).
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

import typer
from typer._click import Command, Context, HelpFormatter  # click, as vendored by typer
from typer.core import TyperCommand

from bot.adapters.extras import install_hint
from bot.cli.errors import PROG, OneLineErrors, fail


class Entry(NamedTuple):
    """Where a command lives (``module:attribute``: its function, or the Typer of a group)
    and its one-line summary: the first line of its docstring (the program's help lists it
    without importing the module)."""

    target: str
    summary: str


COMMANDS: dict[str, Entry] = {
    "review": Entry(
        "bot.cli.review:review_command", "Review a threshold file against a run history."
    ),
    "rebaseline": Entry(
        "bot.cli.rebaseline:rebaseline_command",
        "Write the rule's values into a threshold file, with a provenance comment.",
    ),
    "backtest": Entry(
        "bot.cli.backtest:backtest_command",
        "Replay threshold models over the history: false alarms, detection, recommendation.",
    ),
    "drift": Entry(
        "bot.cli.drift:drift_command",
        "Report the gates that keep failing their newest runs; exit 1 when one drifts.",
    ),
    "sync": Entry(
        "bot.cli.sync:sync_command", "Sync W&B / MLflow run histories into the local run cache."
    ),
    "export": Entry(
        "bot.cli.export:export_command",
        "Export a W&B project's, an MLflow experiment's or a workflow's runs as JSON Lines.",
    ),
    "serve": Entry(
        "bot.cli.serve:serve_command", "Run the webhook server with in-process workers."
    ),
    "worker": Entry(
        "bot.cli.serve:worker_command", "Run workers alone, taking jobs from the shared queue."
    ),
    "watch": Entry(
        "bot.cli.watch:watch_command",
        "Run one round of the drift watch: open, update or close the items of failing gates.",
    ),
    "audit": Entry("bot.cli.audit:audit_command", "List a repository's audit log, newest first."),
    "action": Entry(
        "bot.cli.action:action_command",
        "Review a PR in a GitHub Actions job (what action.yml runs).",
    ),
    "check-config": Entry(
        "bot.cli.check_config:check_config_command",
        "Check a repository config against a checkout: files, gates, sources.",
    ),
    "db": Entry("bot.cli.db:db_app", "Create, upgrade or inspect the store's schema."),
}


def load_command(name: str) -> Command:
    """The click command ``name`` of :data:`COMMANDS`, its module imported now; an optional
    library missing ends the program with the extra to install."""
    module_name, _, attribute = COMMANDS[name].target.partition(":")
    try:
        target: Any = getattr(importlib.import_module(module_name), attribute)
    except ImportError as exc:
        _missing(name, exc)
    if isinstance(target, typer.Typer):
        return typer.main.get_command(target)
    single = typer.Typer(
        add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
    )
    single.command(name)(target)
    return typer.main.get_command(single)


def _missing(name: str, exc: ImportError) -> Any:
    """End ``name`` with the extra to install when ``exc`` is an optional library's absence;
    any other import error is a bug and propagates."""
    hint = install_hint(exc)
    if hint is None:
        raise exc
    fail(f"{name}: {hint}")


class LazyCommands(OneLineErrors):
    """The program's group: its commands are :data:`COMMANDS`, each loaded when used."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return None
        if ctx.resilient_parsing:  # shell completion: never stop on a missing extra
            try:
                return load_command(cmd_name)
            except SystemExit:
                return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)
        return load_command(cmd_name)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary) for name, entry in COMMANDS.items()])

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except ImportError as exc:  # an optional library the command reached only now
            return _missing(ctx.invoked_subcommand or PROG, exc)
