"""The store's schema version: which Alembic revision a database is at, and upgrading it.

Revisions live in ``bot/adapters/store/migrations/versions`` (ids ``"0001"``, ``"0002"``…);
the revision of a database is the row of its ``alembic_version`` table.  A store made by
release 1 has release 1's tables and no ``alembic_version``: ``current`` reports it as
``LEGACY``, and ``upgrade`` stamps it ``"0001"`` (once its tables are checked to be release
1's) before running the later revisions.

An empty SQLite database is made from a template: every migration run once per process on
an in-memory database, whose statements (``iterdump``) are then replayed, in a third of the
time the migrations take on each file (the tests make hundreds of stores).

Several processes may upgrade the same database at once: each migrates in one transaction
holding a lock (PostgreSQL: a transaction-level advisory lock; SQLite: ``BEGIN EXCLUSIVE``),
and reads the revision again once it holds it, so the first does the work and the others
find the schema at head.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, create_engine, inspect, text

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "alembic_version"
LEGACY = "legacy"  # ``current``: release 1's tables, no alembic_version
RELEASE_1 = "0001"
LOCK_KEY = 0x7468_7265_7368_6F6C  # PostgreSQL advisory lock key of migrations ("threshol")
UPGRADE_HINT = "run `threshold-bot db upgrade`"


class SchemaError(Exception):
    """The database's schema is not the one this version runs on; the message is one line."""


class SchemaOutOfDate(SchemaError):
    """An older revision (or release 1's unversioned schema, or none): upgrade it."""


class SchemaTooNew(SchemaError):
    """A revision this version does not know: the database was upgraded by a newer one."""


class SchemaUnknown(SchemaError):
    """Tables without a revision that are not release 1's: not a store this version made."""


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


@cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head() -> str:
    """The revision this version of the code runs on."""
    revision = _script().get_current_head()
    assert revision is not None, "no migrations"
    return revision


def describe(revision: str | None) -> str:
    """A revision for people: ``"0002"``, ``"empty"`` or ``"release 1 (unversioned)"``."""
    if revision is None:
        return "empty"
    return "release 1 (unversioned)" if revision == LEGACY else revision


def current(engine: Engine) -> str | None:
    """The database's revision; ``LEGACY`` for release 1's tables without one; None if empty."""
    with engine.connect() as conn:
        return _current(conn)


def _current(conn: Connection) -> str | None:
    tables = set(inspect(conn).get_table_names())
    if VERSION_TABLE in tables:
        rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
        if len(rows) > 1:
            raise SchemaUnknown(f"the store has several schema revisions: {', '.join(rows)}")
        if rows:
            return str(rows[0])
        tables.discard(VERSION_TABLE)
    return LEGACY if tables and tables & set(_release_1()) else None


def known(revision: str) -> bool:
    """Whether ``revision`` is one of this version's migrations."""
    try:
        return _script().get_revision(revision) is not None
    except CommandError:
        return False


def _verdict(found: str | None) -> SchemaError | None:
    """Why a database at ``found`` cannot be used as it is; None when it is at head."""
    needed = head()
    if found == needed:
        return None
    if found not in (None, LEGACY) and not known(found):
        return SchemaTooNew(
            f"the store's schema is at revision {found}, newer than this version of "
            f"threshold-bot knows (it runs on {needed}): upgrade threshold-bot"
        )
    return SchemaOutOfDate(
        f"the store's schema is {describe(found)}, this version needs revision {needed}: "
        f"{UPGRADE_HINT}"
    )


def check(engine: Engine) -> None:
    """Raise ``SchemaOutOfDate`` or ``SchemaTooNew`` unless the database is at ``head()``."""
    error = _verdict(current(engine))
    if error is not None:
        raise error


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Create or upgrade the schema to ``head()``; the revisions before and after.

    Raises ``SchemaTooNew`` for a revision this version does not know, and
    ``SchemaUnknown`` for unversioned tables that are not release 1's.
    """
    with engine.connect() as conn, _migration_lock(conn):
        found = _current(conn)
        error = _verdict(found)
        if isinstance(error, SchemaTooNew):
            raise error
        if found is None and conn.dialect.name == "sqlite":
            for statement in _sqlite_template():
                conn.exec_driver_sql(statement)
        elif error is not None:
            if found == LEGACY:
                _check_release_1(conn)
            _migrate(conn, stamp=RELEASE_1 if found == LEGACY else None)
        conn.commit()
    if error is not None:
        what = "created at" if found is None else f"upgraded from {describe(found)} to"
        log.info("store schema %s %s", what, head(), extra={"from_revision": found})
    return found, head()


def _migrate(conn: Connection, *, stamp: str | None = None, to: str = "head") -> None:
    """Run the migrations on ``conn`` (after stamping it ``stamp``); alembic's INFO lines
    (its context, each step) are kept out of the App's logs."""
    config = _config()
    config.attributes["connection"] = conn
    alembic_log = logging.getLogger("alembic")
    level = alembic_log.level
    alembic_log.setLevel(logging.WARNING)
    try:
        if stamp is not None:
            command.stamp(config, stamp)
        command.upgrade(config, to)
    finally:
        alembic_log.setLevel(level)


@contextmanager
def _migration_lock(conn: Connection) -> Iterator[None]:
    """Open the migration's transaction on ``conn`` holding the database-wide lock."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN EXCLUSIVE")  # waits up to the busy timeout
    try:
        yield
    except BaseException:
        conn.rollback()
        raise


@cache
def _sqlite_template() -> tuple[str, ...]:
    """The statements that make an empty SQLite database what every migration makes it."""
    engine = create_engine("sqlite://")
    try:
        with engine.connect() as conn:
            _migrate(conn)
            conn.commit()
            raw = conn.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            dump = raw.iterdump()
            return tuple(s for s in dump if s not in ("BEGIN TRANSACTION;", "COMMIT;"))
    finally:
        engine.dispose()


@cache
def _release_1() -> dict[str, frozenset[str]]:
    """Release 1's tables and their columns, as revision 0001 creates them."""
    engine = create_engine("sqlite://")
    try:
        with engine.connect() as conn:
            _migrate(conn, to=RELEASE_1)
            found = inspect(conn)
            return {
                name: frozenset(c["name"] for c in found.get_columns(name))
                for name in found.get_table_names()
                if name != VERSION_TABLE
            }
    finally:
        engine.dispose()


def _check_release_1(conn: Connection) -> None:
    """Raise ``SchemaUnknown`` unless the unversioned tables are release 1's."""
    expected = _release_1()
    found = inspect(conn)
    present = set(found.get_table_names())
    missing = sorted(set(expected) - present)
    if missing:
        raise SchemaUnknown(
            f"not a store of release 1 (no table {', '.join(missing)}): cannot upgrade it"
        )
    for name, columns in expected.items():
        have = {c["name"] for c in found.get_columns(name)}
        if have != columns:
            differ = ", ".join(sorted(have ^ columns))
            raise SchemaUnknown(
                f"not a store of release 1 (table {name} differs in {differ}): cannot upgrade it"
            )
