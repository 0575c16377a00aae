"""``threshold-bot watch``: one round of the App's drift watch, now.

The App runs the watch every ``RECHECK_SECONDS`` (15 minutes by default), once across all
its processes; this command runs one round at
once with the same settings (the environment, then ``.env``), for an operator who wants
to see what it would do, or to drive it from cron instead.  ``--repo`` limits the round to
some repositories.  Prints one line per threshold file it acted on; exit status 1 when a
repository could not be read.
"""

from __future__ import annotations

from typing import Annotated

import typer

from bot.adapters.github.app import client_factory
from bot.adapters.history.factory import source_factory
from bot.adapters.locks import make_locks
from bot.adapters.settings import SettingsError, load_settings
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.schema import SchemaError
from bot.app import logs, owners
from bot.cli.errors import fail
from bot.features.dashboard.write import DashboardStep
from bot.features.drift.rounds import remote_sources, watch_round
from bot.features.drift.watch import WatchOptions


def watch_command(
    repo: Annotated[
        list[str] | None,
        typer.Option(
            "--repo",
            metavar="OWNER/NAME",
            help="Only this repository (repeat for more); default: every installed one.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run one round of the drift watch: open, update or close the items of failing gates."""
    try:
        settings = load_settings("worker")
    except SettingsError as exc:
        fail(str(exc))
    logs.configure(  # logs: stderr; results: stdout
        settings.log_level,
        settings.secret_values(),
        repeat_seconds=settings.log_repeat_seconds,
        repeat_burst=settings.log_repeat_burst,
    )
    engine = make_engine(settings.database_url)
    locks = make_locks(settings, engine, str(owners.current()), gone=owners.is_gone)
    try:
        try:
            sessions = init_db(engine)
        except SchemaError as exc:  # not this version's schema: `threshold-bot db upgrade`
            fail(str(exc))
        report = watch_round(
            sessions,
            client_factory(settings),
            remote_sources(settings, source_factory(settings, sessions)),
            WatchOptions.of(settings, locks, DashboardStep.of(settings)),
            repos=frozenset(repo or ()),
        )
    finally:
        locks.close()
        engine.dispose()
    for watched in report.repositories:
        if watched.problem:
            typer.echo(f"{watched.repo}: not watched: {watched.problem}")
        for acted in watched.acted:
            number = f" #{acted.number}" if acted.number else ""
            detail = f" ({acted.detail})" if acted.detail else ""
            typer.echo(f"{watched.repo}: {acted.file}: {acted.action}{number}{detail}")
        if watched.finished:
            typer.echo(f"{watched.repo}: {watched.finished}")
    for installation in report.stopped_early:
        typer.echo(f"installation {installation}: stopped early (rate limit)")
    for cut in report.cut:
        at = f" at {cut.resume}" if cut.resume else ""
        who = "" if cut.scope == "repository" else f"installation {cut.installation_id}: "
        typer.echo(f"{who}{cut.repo}: cut{at} ({cut.reason} spent); resumes there next round")
    if report.failed or any(r.problem for r in report.repositories):
        raise typer.Exit(1)
