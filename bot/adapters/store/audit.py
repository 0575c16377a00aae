"""The audit log: every command and approval, who asked, and what came of it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Integer, String, Text, select
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


def entries(session: Session, repo: str, *, limit: int = 200) -> Sequence[AuditEntry]:
    """The newest entries of a repository, newest first."""
    query = (
        select(AuditEntry)
        .where(AuditEntry.repo == repo)
        .order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        .limit(limit)
    )
    return session.scalars(query).all()
