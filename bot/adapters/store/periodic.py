"""Which period each periodic job last ran for: one claim per period across all processes.

Table ``periodic_runs``: a row per job with the start of the last period claimed, who
claimed it and when its run started and finished.  ``claim_period`` is atomic on SQLite and
PostgreSQL: a conditional UPDATE that moves ``period_start`` forward, or the INSERT of the
job's first row (a concurrent INSERT fails on the primary key: the other process won).
Times are naive UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import CursorResult, DateTime, String, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc


class PeriodicRun(Base):
    """The last period claimed for a periodic job (table ``periodic_runs``)."""

    __tablename__ = "periodic_runs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    period_start: Mapped[datetime] = mapped_column(DateTime)
    holder: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


def claim_period(
    sessions: sessionmaker[Session], name: str, period_start: datetime, holder: str
) -> bool:
    """Claim the period of job ``name`` starting at ``period_start`` (UTC) for ``holder``;
    True for exactly one caller per job and period, across every process."""
    start = _naive(period_start)
    values = {"period_start": start, "holder": holder, "started_at": now_utc()}
    with sessions.begin() as session:
        moved = session.execute(
            update(PeriodicRun)
            .where(PeriodicRun.name == name, PeriodicRun.period_start < start)
            .values(finished_at=None, **values)
            .execution_options(synchronize_session=False)
        )
        if int(cast(CursorResult[Any], moved).rowcount):
            return True
    try:
        with sessions.begin() as session:
            session.execute(insert(PeriodicRun).values(name=name, **values))
    except IntegrityError:  # the job has a row: this period (or a later one) is claimed
        return False
    return True


def finish(sessions: sessionmaker[Session], name: str, period_start: datetime, holder: str) -> None:
    """Record that ``holder``'s run of ``name`` for ``period_start`` has finished."""
    with sessions.begin() as session:
        session.execute(
            update(PeriodicRun)
            .where(
                PeriodicRun.name == name,
                PeriodicRun.period_start == _naive(period_start),
                PeriodicRun.holder == holder,
            )
            .values(finished_at=now_utc())
            .execution_options(synchronize_session=False)
        )


def _naive(value: datetime) -> datetime:
    """``value`` as naive UTC (aware values converted, naive ones taken as UTC)."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
