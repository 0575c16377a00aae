"""The threshold dashboard's durable record: one row per repository.

A row says which issue is the repository's dashboard, the body the App last wrote to it (so an
edit by anyone else can be reverted, and a ticked checkbox told from one already acted on), a
fingerprint of what it shows, the notes of what was asked through its checkboxes (newest
first, at most ``NOTES_KEPT``), and a note on why no dashboard could be written (e.g. no
``issues`` permission).  As the drift items (``bot.adapters.store.drift``), a worker *claims*
the row with a lease before it touches GitHub, so two workers, or a webhook and a round, never
write the issue at once (an expired lease is taken over); only the holder saves.

Bounds: a body is at most ``BODY_LIMIT`` characters (GitHub's limit on an issue body: longer
is refused with ``ValueError``), a note at most ``NOTE_LIMIT`` (cut), ``NOTES_KEPT`` notes.
Rows are deleted only with their repository (``forget_repo``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, DateTime, delete, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.leases import RELEASED, Leased, free_for, taken_by
from bot.adapters.store.portable import (
    CLEAN_TEXT,
    Clipped,
    GitHubId,
    Json,
    Key,
    Number,
    clean,
    upsert_insert,
)

Sessions = sessionmaker[Session]
BODY_LIMIT = 65_536  # characters: GitHub refuses a longer issue body
NOTE_LIMIT = 500  # characters of one note
NOTES_KEPT = 10  # the newest notes kept


class DashboardRow(Leased, Base):
    """The dashboard of one repository (table ``dashboards``)."""

    __tablename__ = "dashboards"

    repo: Mapped[str] = mapped_column(Key(200), primary_key=True)
    installation_id: Mapped[int] = mapped_column(GitHubId)
    issue: Mapped[int | None] = mapped_column(Number, nullable=True)
    body: Mapped[str] = mapped_column(CLEAN_TEXT, default="")  # the body the App last wrote
    fingerprint: Mapped[str] = mapped_column(Clipped(64), default="")
    notes: Mapped[list[str]] = mapped_column(Json, default=list)  # newest first
    note: Mapped[str] = mapped_column(CLEAN_TEXT, default="")  # why no dashboard was written
    updated_at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class Dashboard:
    """A row as plain values; ``issue`` None: no dashboard issue (yet)."""

    repo: str
    installation_id: int
    issue: int | None = None
    body: str = ""  # the last body the App wrote (at most ``BODY_LIMIT`` characters)
    fingerprint: str = ""
    notes: tuple[str, ...] = ()  # what was asked through its checkboxes, newest first
    note: str = ""  # e.g. no ``issues`` permission

    def __post_init__(self) -> None:
        if len(self.body) > BODY_LIMIT:
            raise ValueError(
                f"a dashboard body of {len(self.body)} characters (at most {BODY_LIMIT})"
            )

    def noted(self, line: str) -> Dashboard:
        """This dashboard with ``line`` as its newest note (cut to ``NOTE_LIMIT``), keeping the
        ``NOTES_KEPT`` newest."""
        return replace(self, notes=(clean(line, NOTE_LIMIT), *self.notes)[:NOTES_KEPT])


def _public(row: DashboardRow) -> Dashboard:
    notes = row.notes if isinstance(row.notes, list) else []
    return Dashboard(
        repo=row.repo,
        installation_id=row.installation_id,
        issue=row.issue,
        body=row.body[:BODY_LIMIT],
        fingerprint=row.fingerprint,
        notes=tuple(str(n)[:NOTE_LIMIT] for n in notes[:NOTES_KEPT]),
        note=row.note,
    )


def claim(
    sessions: Sessions, *, repo: str, installation_id: int, owner: str, seconds: float
) -> Dashboard | None:
    """Take the row of ``repo`` (created if new) for ``seconds``; None when another owner holds
    an unexpired lease.  The claim is one conditional UPDATE: atomic on every engine, so two
    workers never both get it; its holder may claim it again (renewal)."""
    now = now_utc()
    with sessions.begin() as session:  # the row, unless there (another worker made it first)
        session.execute(
            upsert_insert(session)(DashboardRow)
            .values(repo=repo, installation_id=installation_id, body="", fingerprint="")
            .values(notes=[], note="", updated_at=now)
            .on_conflict_do_nothing(index_elements=["repo"])
        )
    with sessions.begin() as session:
        taken = session.execute(
            update(DashboardRow)
            .where(
                DashboardRow.repo == repo,
                free_for(DashboardRow, owner, now),
            )
            .values(**taken_by(owner, seconds, now), installation_id=installation_id)
        )
        if taken.rowcount != 1:  # type: ignore[attr-defined]
            return None
        row = session.scalars(select(DashboardRow).where(DashboardRow.repo == repo)).one()
        return _public(row)


def save(sessions: Sessions, dashboard: Dashboard, owner: str) -> bool:
    """Write ``dashboard`` to its row if ``owner`` still holds the lease; whether it did."""
    with sessions.begin() as session:
        done = session.execute(
            update(DashboardRow)
            .where(DashboardRow.repo == dashboard.repo, DashboardRow.lease_owner == owner)
            .values(
                issue=dashboard.issue,
                body=dashboard.body,
                fingerprint=dashboard.fingerprint,
                notes=[clean(n, NOTE_LIMIT) for n in dashboard.notes[:NOTES_KEPT]],
                note=dashboard.note,
                updated_at=now_utc(),
            )
        )
        return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def release(sessions: Sessions, repo: str, owner: str) -> None:
    """Give the row's lease back (a no-op when ``owner`` no longer holds it)."""
    with sessions.begin() as session:
        session.execute(
            update(DashboardRow)
            .where(DashboardRow.repo == repo, DashboardRow.lease_owner == owner)
            .values(**RELEASED)
        )


def get(sessions: Sessions, repo: str) -> Dashboard | None:
    """The row of ``repo``, or None."""
    with sessions() as session:
        row = session.scalars(select(DashboardRow).where(DashboardRow.repo == repo)).first()
        return None if row is None else _public(row)


def forget_repo(session: Session, repo: str) -> int:
    """Delete the row of ``repo``; how many (the caller commits)."""
    done = session.execute(delete(DashboardRow).where(DashboardRow.repo == repo))
    return int(cast(CursorResult[Any], done).rowcount)
