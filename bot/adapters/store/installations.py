"""The installations table: where the App is installed and on which repositories.

Kept up to date from ``installation*`` and ``installation_repositories*`` events,
as a record for operators (the periodic re-check works from ``bot.adapters.store.tracked``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, String, select
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.portable import CLEAN_TEXT, Clipped, GitHubId, upsert_insert

Sessions = sessionmaker[Session]


class InstallationRow(Base):
    """One installation of the App (table ``installations``)."""

    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(GitHubId, primary_key=True)
    account: Mapped[str] = mapped_column(Clipped(200))
    status: Mapped[str] = mapped_column(String(16))  # active | suspended | deleted
    repositories: Mapped[str] = mapped_column(CLEAN_TEXT, default="[]")  # JSON list of names
    updated_at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class Installation:
    """An installation and its selected repositories (``owner/name``)."""

    id: int
    account: str
    status: str
    repositories: tuple[str, ...]


def upsert(
    sessions: Sessions,
    installation_id: int,
    account: str,
    status: str,
    repositories: Iterable[str] | None = None,
) -> None:
    """Create or update an installation; ``repositories`` None keeps the stored list.

    One ``INSERT … ON CONFLICT DO UPDATE``: two deliveries of a new installation at once
    never collide."""
    values = {"account": account, "status": status, "updated_at": now_utc()}
    if repositories is not None:
        values["repositories"] = json.dumps(sorted(set(repositories)))
    with sessions.begin() as session:
        insert = upsert_insert(session)(InstallationRow)
        session.execute(
            insert.values(
                {"id": installation_id, "repositories": "[]", **values}
            ).on_conflict_do_update(index_elements=["id"], set_=values)
        )


def change_repositories(
    sessions: Sessions, installation_id: int, added: Iterable[str], removed: Iterable[str]
) -> None:
    """Add and remove repositories of a known installation (unknown: created with them).

    The row is made if missing, then read locked (``FOR UPDATE`` on PostgreSQL; SQLite's
    insert already holds the one write lock), so concurrent changes all count."""
    now = now_utc()
    with sessions.begin() as session:
        session.execute(
            upsert_insert(session)(InstallationRow)
            .values(id=installation_id, account="", status="active", repositories="[]")
            .values(updated_at=now)
            .on_conflict_do_nothing(index_elements=["id"])
        )
        row = session.scalars(
            select(InstallationRow)
            .where(InstallationRow.id == installation_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).one()
        current = set(json.loads(row.repositories))
        row.repositories = json.dumps(sorted((current | set(added)) - set(removed)))
        row.updated_at = now


def get(sessions: Sessions, installation_id: int) -> Installation | None:
    """The stored installation, or None."""
    with sessions() as session:
        row = session.get(InstallationRow, installation_id)
        return None if row is None else _public(row)


def active(sessions: Sessions) -> list[Installation]:
    """Every installation that is neither suspended nor deleted."""
    with sessions() as session:
        rows = session.scalars(
            select(InstallationRow)
            .where(InstallationRow.status == "active")
            .order_by(InstallationRow.id)
        ).all()
        return [_public(r) for r in rows]


def _public(row: InstallationRow) -> Installation:
    return Installation(
        id=row.id,
        account=row.account,
        status=row.status,
        repositories=tuple(json.loads(row.repositories)),
    )
