"""Lock rows: a named lock held until a time, for stores without a lock service (SQLite).

Table ``locks``: one row per lock ever taken, ``holder`` (a token unique to one lease) and
``until`` (naive UTC).  A lock is free when its row is missing or its ``until`` has passed,
so a holder that died loses it once its time runs out.  Taking a free lock is one
conditional UPDATE, or an INSERT when the row is missing (a concurrent INSERT of the same
name fails on the primary key: the other process won).  Works the same on SQLite and
PostgreSQL; ``bot.adapters.locks.rows`` renews the rows of held leases.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, DateTime, String, delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc


class LockRow(Base):
    """A named lock and who holds it until when (table ``locks``)."""

    __tablename__ = "locks"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    until: Mapped[datetime] = mapped_column(DateTime)


def try_acquire(sessions: sessionmaker[Session], name: str, holder: str, ttl: float) -> bool:
    """Take lock ``name`` for ``holder`` for ``ttl`` seconds if it is free; whether it was."""
    now = now_utc()
    until = now + timedelta(seconds=ttl)
    with sessions.begin() as session:
        taken = session.execute(
            update(LockRow)
            .where(LockRow.name == name, LockRow.until < now)
            .values(holder=holder, until=until)
            .execution_options(synchronize_session=False)
        )
        if _count(taken):
            return True
    try:
        with sessions.begin() as session:
            session.execute(insert(LockRow).values(name=name, holder=holder, until=until))
    except IntegrityError:  # the row exists (held) or another process inserted it first
        return False
    return True


def holder_of(sessions: sessionmaker[Session], name: str) -> str | None:
    """Who holds lock ``name`` now (its token), or None when it is free."""
    with sessions() as session:
        row = session.get(LockRow, name)
        return row.holder if row is not None and row.until >= now_utc() else None


def take_over(
    sessions: sessionmaker[Session], name: str, old: str, holder: str, ttl: float
) -> bool:
    """Give lock ``name`` to ``holder`` if ``old`` still holds it (a holder known dead)."""
    with sessions.begin() as session:
        done = session.execute(
            update(LockRow)
            .where(LockRow.name == name, LockRow.holder == old)
            .values(holder=holder, until=now_utc() + timedelta(seconds=ttl))
            .execution_options(synchronize_session=False)
        )
        return _count(done) == 1


def renew(sessions: sessionmaker[Session], name: str, holder: str, ttl: float) -> bool:
    """Extend ``holder``'s lock by ``ttl`` seconds from now; False if it holds it no more."""
    with sessions.begin() as session:
        done = session.execute(
            update(LockRow)
            .where(LockRow.name == name, LockRow.holder == holder)
            .values(until=now_utc() + timedelta(seconds=ttl))
            .execution_options(synchronize_session=False)
        )
        return _count(done) == 1


def release(sessions: sessionmaker[Session], name: str, holder: str) -> bool:
    """Free ``holder``'s lock ``name``; False if ``holder`` did not hold it."""
    with sessions.begin() as session:
        done = session.execute(
            delete(LockRow)
            .where(LockRow.name == name, LockRow.holder == holder)
            .execution_options(synchronize_session=False)
        )
        return _count(done) == 1


def _count(result: object) -> int:
    """Rows an UPDATE or DELETE matched."""
    return int(cast(CursorResult[Any], result).rowcount)
