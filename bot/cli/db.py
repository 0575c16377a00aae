"""``threshold-bot db upgrade`` and ``threshold-bot db current``: the store's schema version.

Registered by ``bot.cli.main`` as the ``db`` group.  The store is ``--database-url``, else
``DATABASE_URL`` (the environment, then ``.env``), as for ``serve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from sqlalchemy import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from bot.adapters.settings import SettingsError, load_settings
from bot.adapters.store import schema
from bot.adapters.store.db import make_engine
from bot.cli.errors import OneLineErrors, fail

db_app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    help="Create, upgrade or inspect the store's schema.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store (default: DATABASE_URL).",
        show_default=False,
    ),
]


def _url(database_url: str | None) -> str:
    if database_url is None:
        try:
            database_url = load_settings().database_url
        except SettingsError as exc:
            fail(str(exc))
    try:
        make_url(database_url)
    except ArgumentError:
        raise typer.BadParameter("not a SQLAlchemy URL", param_hint="--database-url") from None
    return database_url


def _missing_file(url: str) -> bool:
    """A SQLite URL whose file does not exist (reading it must not create it)."""
    parsed = make_url(url)
    path = parsed.database if parsed.get_backend_name() == "sqlite" else None
    return path not in (None, "", ":memory:") and not Path(str(path)).is_file()


def _unreachable(exc: SQLAlchemyError) -> NoReturn:
    cause = getattr(exc, "orig", None)  # the driver's error, without SQLAlchemy's notes
    first = str(cause if cause is not None else exc).splitlines()
    fail(f"cannot use the store: {first[0] if first else exc.__class__.__name__}")


@contextmanager
def _store(url: str) -> Iterator[Engine]:
    """An engine on the store, disposed at the end; a schema error or an unreachable
    database ends the command with one line."""
    engine = make_engine(url)
    try:
        yield engine
    except schema.SchemaError as exc:
        fail(str(exc))
    except SQLAlchemyError as exc:
        _unreachable(exc)
    finally:
        engine.dispose()


@db_app.command("upgrade")
def upgrade_command(database_url: DatabaseUrl = None) -> None:
    """Create the store's schema, or upgrade it to the one this version runs on."""
    with _store(_url(database_url)) as engine:
        found, now = schema.upgrade(engine)
    if found == now:
        typer.echo(f"the store is at revision {now} already: up to date")
    elif found is None:
        typer.echo(f"created the store at revision {now}")
    else:
        typer.echo(f"upgraded the store from {schema.describe(found)} to revision {now}")


@db_app.command("current")
def current_command(database_url: DatabaseUrl = None) -> None:
    """Print the store's schema revision and whether it is up to date (exit status 1 if not)."""
    url = _url(database_url)
    needed = schema.head()
    found: str | None = None
    if not _missing_file(url):
        with _store(url) as engine:
            found = schema.current(engine)
    if found == needed:
        typer.echo(f"{needed}: up to date")
        return
    if found not in (None, schema.LEGACY) and not schema.known(str(found)):
        typer.echo(f"{found}: newer than this version of threshold-bot (it runs on {needed})")
    else:
        typer.echo(
            f"{schema.describe(found)}: out of date, this version needs {needed} "
            f"(run `threshold-bot db upgrade`)"
        )
    raise typer.Exit(1)
