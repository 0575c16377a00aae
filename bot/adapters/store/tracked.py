"""Open threshold PRs and the history sources they read, for the periodic re-check."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import CursorResult, Integer, UniqueConstraint, delete, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.adapters.store.db import Base
from bot.adapters.store.portable import (
    Clipped,
    GitHubId,
    Json,
    Key,
    Number,
    UtcDateTime,
    upsert_insert,
)
from bot.core.models import SourceSpec

DUE = "due"  # the conclusion of a PR whose re-review is owed (see ``mark_due``)


class TrackedPull(Base):
    """One open PR whose review reads remote history (re-reviewed when new runs arrive)."""

    __tablename__ = "tracked_pulls"
    __table_args__ = (UniqueConstraint("repo", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    installation_id: Mapped[int] = mapped_column(GitHubId)
    repo: Mapped[str] = mapped_column(Key(200), index=True)
    number: Mapped[int] = mapped_column(Number)
    head_sha: Mapped[str] = mapped_column(Key(64))
    sources: Mapped[list[dict[str, object]]] = mapped_column(Json)
    conclusion: Mapped[str] = mapped_column(Clipped(32), default="")
    reviewed_at: Mapped[datetime] = mapped_column(UtcDateTime)


@dataclass(frozen=True)
class Tracked:
    """A tracked PR as plain values."""

    installation_id: int
    repo: str
    number: int
    head_sha: str
    sources: tuple[SourceSpec, ...]
    conclusion: str = ""  # of the last review; "neutral": the history could not be read;
    # ``DUE``: a re-review was cut or failed (``mark_due``): the next re-check redoes it


def track(
    session: Session,
    *,
    installation_id: int,
    repo: str,
    number: int,
    head_sha: str,
    sources: Sequence[SourceSpec],
    conclusion: str = "",
    at: datetime | None = None,
) -> None:
    """Record (or refresh) an open PR and its sources (the caller commits).

    One ``INSERT … ON CONFLICT DO UPDATE``: two reviews of the PR at once never collide."""
    values = {
        "installation_id": installation_id,
        "head_sha": head_sha,
        "sources": [spec.model_dump(mode="json", exclude_defaults=True) for spec in sources],
        "conclusion": conclusion,
        "reviewed_at": at or datetime.now(UTC),
    }
    insert = upsert_insert(session)(TrackedPull).values(repo=repo, number=number, **values)
    session.execute(insert.on_conflict_do_update(index_elements=["repo", "number"], set_=values))


def untrack(session: Session, repo: str, number: int) -> None:
    """Forget a PR (closed, or no longer reading remote history); the caller commits."""
    session.execute(
        delete(TrackedPull).where(TrackedPull.repo == repo, TrackedPull.number == number)
    )


def mark_due(session: Session, pulls: Sequence[tuple[str, int]]) -> None:
    """Mark the tracked PRs ``(repo, number)`` as owed a re-review: the next re-check reviews
    them whether or not their sources changed (the caller commits)."""
    for repo, number in pulls:
        session.execute(
            update(TrackedPull)
            .where(TrackedPull.repo == repo, TrackedPull.number == number)
            .values(conclusion=DUE)
        )


def untrack_repo(session: Session, repo: str) -> int:
    """Forget every PR of ``repo`` (deleted, transferred, archived); how many (the caller
    commits)."""
    done = session.execute(delete(TrackedPull).where(TrackedPull.repo == repo))
    return int(cast(CursorResult[Any], done).rowcount)


def tracked(session: Session, installation_id: int | None = None) -> list[Tracked]:
    """Every tracked PR (of one installation when ``installation_id`` is given), grouped by
    repository (ordered by repo, then number)."""
    query = select(TrackedPull).order_by(TrackedPull.repo, TrackedPull.number)
    if installation_id is not None:
        query = query.where(TrackedPull.installation_id == installation_id)
    rows = session.scalars(query)
    return [
        Tracked(
            installation_id=row.installation_id,
            repo=row.repo,
            number=row.number,
            head_sha=row.head_sha,
            sources=tuple(SourceSpec.model_validate(s) for s in row.sources),
            conclusion=row.conclusion,
        )
        for row in rows
    ]
