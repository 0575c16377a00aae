"""``threshold-bot audit --repo owner/name``: the audit log of a repository, newest first.

Registered by ``bot.cli.main`` as ``app.command("audit")(audit_command)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from bot.adapters.store import audit
from bot.adapters.store.audit import AuditEntry
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.schema import SchemaError
from bot.cli.errors import fail
from bot.core.formatting import iso_date_time, plural
from bot.core.render.terminal import plain

COLUMNS = ("when (UTC)", "PR", "actor", "action", "outcome", "command", "detail")


def audit_table(repo: str, rows: Sequence[AuditEntry]) -> Table:
    """One row per entry; every cell is plain text: no Rich markup is interpreted, and the
    terminal escape sequences and control characters of outside text are dropped."""
    title = Text(plain(f"audit log of {repo}: {plural(len(rows), 'entry', 'entries')}"))
    table = Table(title=title, title_justify="left")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for row in rows:
        cells = (
            iso_date_time(row.at),
            f"#{row.pr_number}" if row.pr_number is not None else "",
            row.actor,
            row.action,
            row.outcome,
            row.message,
            json.dumps(row.detail, sort_keys=True) if row.detail else "",
        )
        table.add_row(*(Text(plain(cell)) for cell in cells))
    return table


def _check_store(database_url: str) -> None:
    """A usage error for a malformed URL or a SQLite file that does not exist."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise typer.BadParameter("not a SQLAlchemy URL", param_hint="--database-url") from None
    path = url.database if url.get_backend_name() == "sqlite" else None
    if path not in (None, "", ":memory:") and not Path(str(path)).is_file():
        raise typer.BadParameter(f"no store at {path}", param_hint="--database-url")


def audit_command(
    repo: str = typer.Option(..., "--repo", help="The repository, owner/name."),
    database_url: str = typer.Option(
        "sqlite:///threshold-bot.db",
        "--database-url",
        envvar="DATABASE_URL",
        help="SQLAlchemy URL of the App's store.",
    ),
    limit: int = typer.Option(200, "--limit", min=1, help="Show at most this many entries."),
) -> None:
    """List a repository's audit log, newest first.

    The commands and approvals the App recorded for the repository, from its store.
    """
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise typer.BadParameter(f"{repo[:100]!r}: expected owner/name", param_hint="--repo")
    _check_store(database_url)
    engine = make_engine(database_url)
    try:
        with init_db(engine)() as session:
            rows = audit.entries(session, repo, limit=limit)
    except SchemaError as exc:  # not this version's schema: `threshold-bot db upgrade`
        fail(str(exc))
    except SQLAlchemyError as exc:
        raise typer.BadParameter(f"cannot read the store: {exc.__class__.__name__}") from None
    finally:
        engine.dispose()
    Console().print(audit_table(repo, rows))
