"""Where a periodic job resumes what a run's budget cut (``bot.core.budget``).

Table ``drift_cursors`` (the drift watch's, ``bot.features.drift.rounds``): per key
(``installation:ID``, ``repository:OWNER/NAME``, ``round``) the position the next round
starts at.  A row exists only while something is cut; ``stored`` reads them all in one
query, so a round costs one read and a write per cut.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.portable import Key, upsert_insert

Sessions = sessionmaker[Session]


class DriftCursorRow(Base):
    """Where the next round resumes one cut scope (table ``drift_cursors``)."""

    __tablename__ = "drift_cursors"

    key: Mapped[str] = mapped_column(Key(300), primary_key=True)
    position: Mapped[str] = mapped_column(Key(1024))
    updated_at: Mapped[datetime] = mapped_column(DateTime)


def repository_key(repo: str) -> str:
    """The cursor key of one repository (``OWNER/NAME``)."""
    return f"repository:{repo}"


def forget_repo(session: Session, repo: str) -> None:
    """Delete ``repo``'s cursor, if any: it was deleted or moved away (the caller commits)."""
    session.execute(delete(DriftCursorRow).where(DriftCursorRow.key == repository_key(repo)))


def stored(sessions: Sessions) -> dict[str, str]:
    """Every stored cursor: key -> position."""
    with sessions() as session:
        rows = session.execute(select(DriftCursorRow.key, DriftCursorRow.position)).all()
        return {str(k): str(p) for k, p in rows}


def put(sessions: Sessions, key: str, position: str | None) -> None:
    """Store where ``key`` resumes (None: nothing of it is cut any more, the row goes)."""
    with sessions.begin() as session:
        if position is None:
            session.execute(delete(DriftCursorRow).where(DriftCursorRow.key == key))
            return
        values = {"position": position, "updated_at": now_utc()}
        session.execute(
            upsert_insert(session)(DriftCursorRow)
            .values(key=key, **values)
            .on_conflict_do_update(index_elements=["key"], set_=values)
        )
