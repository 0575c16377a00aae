"""Maintainer approvals of a PR's gate values, kept across restarts.

An approval is tied to the gate values it approved: a later push that keeps
every value keeps the approval; one that changes any value does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from sqlalchemy import Integer, select
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.portable import Clipped, Json, Key, Number, UtcDateTime


class Approval(Base):
    """One approval click."""

    __tablename__ = "approvals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(Key(200), index=True)
    pr_number: Mapped[int] = mapped_column(Number, index=True)
    head_sha: Mapped[str] = mapped_column(Key(64))
    approver: Mapped[str] = mapped_column(Clipped(100))
    approved_at: Mapped[datetime] = mapped_column(UtcDateTime)  # aware UTC
    gate_values: Mapped[dict[str, float]] = mapped_column(Json)


def approve(
    session: Session,
    *,
    repo: str,
    pr_number: int,
    head_sha: str,
    approver: str,
    gate_values: Mapping[str, float],
    at: datetime | None = None,
) -> Approval:
    """Store an approval (the caller commits)."""
    row = Approval(
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        approver=approver,
        approved_at=at or datetime.now(UTC),
        gate_values=dict(gate_values),
    )
    session.add(row)
    return row


def latest(session: Session, repo: str, pr_number: int) -> Approval | None:
    """The newest approval of a PR, if any."""
    query = (
        select(Approval)
        .where(Approval.repo == repo, Approval.pr_number == pr_number)
        .order_by(Approval.approved_at.desc(), Approval.id.desc())
        .limit(1)
    )
    return session.scalars(query).first()


def still_valid(approval: Approval | None, gate_values: Mapping[str, float]) -> bool:
    """Whether ``approval`` covers exactly these gate values."""
    return approval is not None and dict(approval.gate_values) == dict(gate_values)


def lookup(sessions: sessionmaker[Session]) -> Callable[[str, int], Approval | None]:
    """``(repo, pr_number) -> latest(...)``, each call in its own session."""

    def find(repo: str, number: int) -> Approval | None:
        with sessions() as session:
            return latest(session, repo, number)

    return find
