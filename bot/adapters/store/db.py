"""The SQLAlchemy engine and declarative base shared by every table module."""

from __future__ import annotations

import importlib

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import DeclarativeBase, sessionmaker

# Table modules register themselves on ``Base.metadata`` when imported;
# ``init_db`` imports each so ``create_all`` sees every table.
TABLE_MODULES: tuple[str, ...] = (
    "bot.adapters.store.audit",
    "bot.adapters.store.approvals",
    "bot.adapters.store.deliveries",
    "bot.adapters.store.installations",
    "bot.adapters.store.tracked",
    "bot.adapters.store.drift",
    "bot.adapters.store.runs",
    "bot.adapters.store.health",
    "bot.adapters.store.reports",
)
DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a SQLite write waits for another writer's lock


class Base(DeclarativeBase):
    """Declarative base of every table."""


def make_engine(url: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout (seconds) and cross-thread use."""
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
    return create_engine(url, pool_pre_ping=True)


def init_db(engine: Engine) -> sessionmaker:  # type: ignore[type-arg]
    """Create every table (idempotent) and return a session factory."""
    for module in TABLE_MODULES:
        importlib.import_module(module)
    Base.metadata.create_all(engine)
    return sessionmaker(engine, expire_on_commit=False)
