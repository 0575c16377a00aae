"""The SQLAlchemy engine and declarative base shared by every table module; ``init_db``;
``unavailable`` (an error that says the database could not be reached) and ``identity``
(which run of the database server this is)."""

from __future__ import annotations

import importlib

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import DeclarativeBase, sessionmaker

from bot.adapters.store import schema

# Table modules register themselves on ``Base.metadata`` when imported; ``init_db`` imports
# each.  The schema itself is made by the migrations (``bot.adapters.store.schema``).
TABLE_MODULES: tuple[str, ...] = (
    "bot.adapters.store.audit",
    "bot.adapters.store.approvals",
    "bot.adapters.store.deliveries",
    "bot.adapters.store.installations",
    "bot.adapters.store.tracked",
    "bot.adapters.store.drift",
    "bot.adapters.store.cursors",
    "bot.adapters.store.runs",
    "bot.adapters.store.health",
    "bot.adapters.store.reports",
    "bot.adapters.store.locks",
    "bot.adapters.store.periodic",
    "bot.adapters.store.redeliveries",
    "bot.adapters.store.dashboards",
)
DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a SQLite write waits for another writer's lock
DEFAULT_POOL_SIZE = 10  # PostgreSQL connections kept open (the App: its workers + 4)
CONNECT_TIMEOUT = 10  # seconds a PostgreSQL connect may take (a host dropping packets)


class Base(DeclarativeBase):
    """Declarative base of every table."""


def make_engine(
    url: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, pool_size: int = DEFAULT_POOL_SIZE
) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout (seconds) and cross-thread use;
    PostgreSQL a pool of ``pool_size`` (+ 20 overflow) connections in the UTC time zone
    that give up connecting after ``CONNECT_TIMEOUT`` seconds."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout},
            pool_pre_ping=True,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={round(busy_timeout * 1000)}")
            cur.close()

        return engine
    if url.startswith("postgresql"):
        return create_engine(
            url,
            pool_pre_ping=True,
            pool_size=pool_size,
            max_overflow=20,
            connect_args={"options": "-c timezone=UTC", "connect_timeout": CONNECT_TIMEOUT},
        )
    return create_engine(url, pool_pre_ping=True)


def init_db(engine: Engine, upgrade: bool = False) -> sessionmaker:  # type: ignore[type-arg]
    """Check the schema and return a session factory.

    An empty database is created by running every migration; one at an older revision (or
    release 1's) raises ``schema.SchemaOutOfDate`` unless ``upgrade``, which upgrades it; one
    at a newer revision raises ``schema.SchemaTooNew``.  Safe from several processes at once.
    """
    for module in TABLE_MODULES:
        importlib.import_module(module)
    found = schema.current(engine)
    if found is None or (upgrade and found != schema.head()):
        schema.upgrade(engine)  # under a lock, reading the revision again
    elif found != schema.head():
        schema.check(engine)  # raises, unless another process just upgraded it
    return sessionmaker(engine, expire_on_commit=False)


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or dropped the connection
    (a server restarting or down, a network cut; SQLite's file locked too long): worth
    trying again once it is back, unlike an error in the statement itself."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


_STARTED = text("SELECT pg_postmaster_start_time()")


def identity(engine: Engine) -> str | None:
    """Which run of the database server answers: PostgreSQL's start time, which changes
    when the server restarts (whatever was under way then may be lost); None for SQLite,
    whose file has no server.  Raises when the database cannot be reached."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        return str(conn.execute(_STARTED).scalar())
