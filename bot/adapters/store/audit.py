"""The audit log: every command and approval, who asked, and what came of it."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    Integer,
    Table,
    exists,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.adapters.store.db import Base
from bot.adapters.store.portable import CLEAN_TEXT, Clipped, Json, Key, Number, UtcDateTime

# The first key of the advisory locks ``claim`` takes on PostgreSQL (two-int4 form, a key
# space of its own beside the one-bigint locks of bot.adapters.locks).
CLAIM_LOCKS = 0x61756474  # "audt"


class AuditEntry(Base):
    """One audited action."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)  # aware UTC
    repo: Mapped[str] = mapped_column(Key(200), index=True)
    pr_number: Mapped[int | None] = mapped_column(Number, nullable=True)
    actor: Mapped[str] = mapped_column(Clipped(100))
    action: Mapped[str] = mapped_column(Clipped(40))  # rebaseline, approve, retry, help, ...
    outcome: Mapped[str] = mapped_column(Clipped(40))  # done, refused, dry_run, failed, ...
    detail: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    delivery_id: Mapped[str | None] = mapped_column(Key(100), nullable=True)
    message: Mapped[str] = mapped_column(CLEAN_TEXT, default="")


TABLE: Table = AuditEntry.__table__  # type: ignore[assignment]


def add(
    session: Session,
    *,
    repo: str,
    actor: str,
    action: str,
    outcome: str,
    pr_number: int | None = None,
    detail: dict[str, Any] | None = None,
    delivery_id: str | None = None,
    message: str = "",
    at: datetime | None = None,
) -> AuditEntry:
    """Add an audit entry to ``session`` (the caller commits)."""
    entry = AuditEntry(
        at=at or datetime.now(UTC),
        repo=repo,
        pr_number=pr_number,
        actor=actor,
        action=action,
        outcome=outcome,
        detail=detail or {},
        delivery_id=delivery_id,
        message=message,
    )
    session.add(entry)
    return entry


def claim(
    session: Session,
    *,
    repo: str,
    pr_number: int,
    actor: str,
    action: str,
    outcome: str,
    delivery_id: str,
    message: str,
    cooldown: timedelta,
    ignore: str,
    at: datetime | None = None,
) -> datetime | None:
    """Add an entry for ``action`` on PR ``pr_number`` unless one was added less than
    ``cooldown`` ago (entries whose outcome is ``ignore`` do not count).

    One ``INSERT … SELECT … WHERE NOT EXISTS`` statement, so of two concurrent claims only
    one is added: SQLite runs one writer at a time; on PostgreSQL (read committed, where two
    such statements could both see no entry) the claim first takes a transaction-level
    advisory lock on (repo, PR, action), held until the caller commits.  Returns None when
    added, else the time from which the action may run again (the caller commits).
    """
    now = at or datetime.now(UTC)
    if session.get_bind().dialect.name == "postgresql":
        key = zlib.crc32(f"{repo}#{pr_number}:{action}".encode()) - 2**31  # a signed int4
        session.execute(select(func.pg_advisory_xact_lock(CLAIM_LOCKS, key)))
    recent = (
        AuditEntry.repo == repo,
        AuditEntry.pr_number == pr_number,
        AuditEntry.action == action,
        AuditEntry.outcome != ignore,
        AuditEntry.at > now - cooldown,
    )
    given = {
        "at": now,
        "repo": repo,
        "pr_number": pr_number,
        "actor": actor,
        "action": action,
        "outcome": outcome,
        "detail": {},
        "delivery_id": delivery_id,
        "message": message,
    }
    columns = TABLE.c
    row: dict[str, BindParameter[Any]] = {
        name: literal(value, columns[name].type) for name, value in given.items()
    }
    values = select(*row.values()).where(~exists().where(*recent))
    added = session.execute(insert(TABLE).from_select(list(row), values).returning(TABLE.c.id))
    if added.first() is not None:  # (psycopg gives no rowcount for INSERT … SELECT)
        return None
    latest = session.scalars(select(func.max(AuditEntry.at)).where(*recent)).one()
    return (latest.replace(tzinfo=UTC) if latest.tzinfo is None else latest) + cooldown


def set_outcome(
    session: Session, *, delivery_id: str, action: str, message: str, outcome: str
) -> None:
    """Set the outcome of the entry a delivery added for ``action`` and ``message``."""
    query = update(AuditEntry).where(
        AuditEntry.delivery_id == delivery_id,
        AuditEntry.action == action,
        AuditEntry.message == message,
    )
    session.execute(query.values(outcome=outcome))


def entries(session: Session, repo: str, *, limit: int = 200) -> Sequence[AuditEntry]:
    """The newest entries of a repository, newest first."""
    query = (
        select(AuditEntry)
        .where(AuditEntry.repo == repo)
        .order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        .limit(limit)
    )
    return session.scalars(query).all()
