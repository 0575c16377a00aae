"""The audit log: every command and approval, who asked, and what came of it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    BindParameter,
    DateTime,
    Integer,
    String,
    Text,
    exists,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.adapters.store.db import Base


class AuditEntry(Base):
    """One audited action."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    repo: Mapped[str] = mapped_column(String(200), index=True)
    pr_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    actor: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(40))  # rebaseline, approve, retry, help, ...
    outcome: Mapped[str] = mapped_column(String(40))  # done, refused, dry_run, failed, ...
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    delivery_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")


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
    one is added (SQLite runs one writer at a time).  Returns None when added, else the
    time from which the action may run again (the caller commits).
    """
    now = at or datetime.now(UTC)
    recent = (
        AuditEntry.repo == repo,
        AuditEntry.pr_number == pr_number,
        AuditEntry.action == action,
        AuditEntry.outcome != ignore,
        AuditEntry.at > now - cooldown,
    )
    row: dict[str, BindParameter[Any]] = {
        "at": literal(now, DateTime(timezone=True)),
        "repo": literal(repo),
        "pr_number": literal(pr_number),
        "actor": literal(actor),
        "action": literal(action),
        "outcome": literal(outcome),
        "detail": literal({}, JSON),
        "delivery_id": literal(delivery_id),
        "message": literal(message),
    }
    values = select(*row.values()).where(~exists().where(*recent))
    added = session.execute(insert(AuditEntry).from_select(list(row), values))
    if added.rowcount:  # type: ignore[attr-defined]
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
