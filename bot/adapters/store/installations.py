"""The installations table: where the App is installed and on which repositories.

Kept up to date from ``installation*`` and ``installation_repositories*`` events,
as a record for operators (the periodic re-check works from ``bot.adapters.store.tracked``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc

Sessions = sessionmaker[Session]


class InstallationRow(Base):
    """One installation of the App (table ``installations``)."""

    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    account: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # active | suspended | deleted
    repositories: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of full names
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
    """Create or update an installation; ``repositories`` None keeps the stored list."""
    with sessions.begin() as session:
        row = session.get(InstallationRow, installation_id)
        if row is None:
            row = InstallationRow(id=installation_id, repositories="[]")
            session.add(row)
        row.account = account
        row.status = status
        row.updated_at = now_utc()
        if repositories is not None:
            row.repositories = json.dumps(sorted(set(repositories)))


def change_repositories(
    sessions: Sessions, installation_id: int, added: Iterable[str], removed: Iterable[str]
) -> None:
    """Add and remove repositories of a known installation (unknown: created with them)."""
    with sessions.begin() as session:
        row = session.get(InstallationRow, installation_id)
        if row is None:
            row = InstallationRow(id=installation_id, account="", status="active")
            session.add(row)
            current: set[str] = set()
        else:
            current = set(json.loads(row.repositories))
        row.repositories = json.dumps(sorted((current | set(added)) - set(removed)))
        row.updated_at = now_utc()


def get(sessions: Sessions, installation_id: int) -> Installation | None:
    """The stored installation, or None."""
    with sessions() as session:
        row = session.get(InstallationRow, installation_id)
        return None if row is None else _public(row)


def active(sessions: Sessions) -> list[Installation]:
    """Every installation that is neither suspended nor deleted."""
    with sessions() as session:
        rows = session.scalars(
            select(InstallationRow).where(InstallationRow.status == "active")
        ).all()
        return [_public(r) for r in rows]


def _public(row: InstallationRow) -> Installation:
    return Installation(
        id=row.id,
        account=row.account,
        status=row.status,
        repositories=tuple(json.loads(row.repositories)),
    )
