"""What the App asked GitHub to redeliver, and how far its deliveries have been looked at.

Table ``redeliveries``: one row per delivery GUID (``X-GitHub-Delivery``) GitHub was asked
to send again: how many times, the id of the failed attempt the last request named, and
when (``bot.features.redelivery``).  Rows go after ``DEDUPE_DAYS``, when GitHub
can no longer redeliver (``purge``).  Table ``scan_marks``: per listing (``name``), the time
of the newest attempt a complete look has seen, where the next look starts.  Times are
naive UTC.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, DateTime, Integer, String, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import DEDUPE_DAYS, DeliveryRow, now_utc
from bot.adapters.store.portable import GitHubId, Key, upsert_insert
from bot.core.redelivery import Asked

Sessions = sessionmaker[Session]
LOOKUP_BATCH = 500  # GUIDs per query


class RedeliveryRow(Base):
    """A delivery GitHub was asked to send again (table ``redeliveries``)."""

    __tablename__ = "redeliveries"

    guid: Mapped[str] = mapped_column(Key(64), primary_key=True)
    times: Mapped[int] = mapped_column(Integer)
    hook_delivery_id: Mapped[int] = mapped_column(GitHubId)  # the failed attempt last named
    asked_at: Mapped[datetime] = mapped_column(DateTime, index=True)


class ScanMark(Base):
    """How far a listing has been looked at (table ``scan_marks``)."""

    __tablename__ = "scan_marks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    scanned_to: Mapped[datetime] = mapped_column(DateTime)


def _batches(guids: Collection[str]) -> list[list[str]]:
    items = sorted(set(guids))
    return [items[i : i + LOOKUP_BATCH] for i in range(0, len(items), LOOKUP_BATCH)]


def received(sessions: Sessions, guids: Collection[str]) -> set[str]:
    """The GUIDs among ``guids`` the deliveries table holds (received, whatever came of it)."""
    found: set[str] = set()
    with sessions() as session:
        for batch in _batches(guids):
            query = select(DeliveryRow.id).where(DeliveryRow.id.in_(batch))
            found.update(session.execute(query).scalars())
    return found


def asked(sessions: Sessions, guids: Collection[str]) -> dict[str, Asked]:
    """What GitHub was asked for the GUIDs among ``guids`` it was asked to redeliver."""
    found: dict[str, Asked] = {}
    row = RedeliveryRow
    with sessions() as session:
        for batch in _batches(guids):
            query = select(row.guid, row.times, row.hook_delivery_id).where(row.guid.in_(batch))
            for guid, times, attempt in session.execute(query):
                found[guid] = Asked(times, attempt)
    return found


def record_asked(sessions: Sessions, guid: str, hook_delivery_id: int) -> None:
    """Record that GitHub was asked to redeliver ``guid``, naming attempt ``hook_delivery_id``
    (one more time if it was asked before)."""
    now = now_utc()
    values = {"guid": guid, "times": 1, "hook_delivery_id": hook_delivery_id, "asked_at": now}
    with sessions.begin() as session:
        statement = upsert_insert(session)(RedeliveryRow).values(values)
        again = {
            "times": RedeliveryRow.times + 1,
            "hook_delivery_id": hook_delivery_id,
            "asked_at": now,
        }
        session.execute(statement.on_conflict_do_update(index_elements=["guid"], set_=again))


def mark(sessions: Sessions, name: str) -> datetime | None:
    """Where the listing ``name`` was looked at up to (aware UTC); None before the first look."""
    with sessions() as session:
        found = session.get(ScanMark, name)
        return None if found is None else found.scanned_to.replace(tzinfo=UTC)


def set_mark(sessions: Sessions, name: str, scanned_to: datetime) -> None:
    """Record that ``name`` has been looked at up to ``scanned_to`` (aware or naive UTC)."""
    when = scanned_to.astimezone(UTC).replace(tzinfo=None) if scanned_to.tzinfo else scanned_to
    with sessions.begin() as session:
        insert = upsert_insert(session)
        statement = insert(ScanMark).values(name=name, scanned_to=when)
        session.execute(
            statement.on_conflict_do_update(index_elements=["name"], set_={"scanned_to": when})
        )


def purge(sessions: Sessions) -> int:
    """Forget the requests older than ``DEDUPE_DAYS`` (GitHub redelivers no older delivery);
    how many."""
    old = now_utc() - timedelta(days=DEDUPE_DAYS)
    with sessions.begin() as session:
        result = session.execute(delete(RedeliveryRow).where(RedeliveryRow.asked_at < old))
        return int(cast(CursorResult[Any], result).rowcount)
