"""Whether the store can durably keep a write: its file, the disk, and a real write.

SQLite keeps writing through open connections into a database file that was deleted
(or replaced) under it, and a full disk can go unnoticed until the next write that
needs a new page.  ``StoreFile`` remembers which file the store (or the embedded
queue) opened and tells when the path no longer names it; ``check`` adds the free
space left on its disk and a real write (one heartbeat row, table ``heartbeat``) for
``GET /healthz`` (``bot.app.health``).  On PostgreSQL only the write is checked.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import DateTime, Engine, Integer, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base

_ROW = 1  # the one heartbeat row


class StoreUnavailable(Exception):
    """The store cannot durably keep writes now; the message says why."""


class HeartbeatRow(Base):
    """The time of the last successful health check (table ``heartbeat``, one row)."""

    __tablename__ = "heartbeat"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class StoreFile:
    """A SQLite file opened: its path and identity (device, inode), and what it holds."""

    path: Path
    identity: tuple[int, int]
    what: str = "database file"

    @classmethod
    def of(cls, engine: Engine) -> StoreFile | None:
        """The file behind ``engine`` as it is now; None unless a SQLite file."""
        database = engine.url.database
        if engine.dialect.name != "sqlite" or database in (None, "", ":memory:"):
            return None
        return cls.at(Path(str(database)))

    @classmethod
    def at(cls, path: Path, what: str = "database file") -> StoreFile:
        """The file at ``path`` as it is now (``what``: how messages name it)."""
        path = path.resolve()
        found = os.stat(path)
        return cls(path, (found.st_dev, found.st_ino), what)

    def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the path still names the file opened."""
        try:
            found = os.stat(self.path)
        except OSError:
            raise StoreUnavailable(f"the {self.what} {self.path} was deleted") from None
        if (found.st_dev, found.st_ino) != self.identity:
            raise StoreUnavailable(f"the {self.what} {self.path} was replaced")


def check(sessions: sessionmaker[Session], file: StoreFile | None, min_free: int) -> None:
    """Raise ``StoreUnavailable`` (or the database's error) unless a write is durable now.

    For a SQLite file: the file must still be on disk and its disk must have
    ``min_free`` bytes free.  Then the heartbeat row is written and committed.
    """
    if file is not None:
        file.check()
        free = shutil.disk_usage(file.path.parent).free
        if free < min_free:
            raise StoreUnavailable(f"the disk of {file.path} is full ({free} bytes free)")
    now = datetime.now(UTC).replace(tzinfo=None)
    try:
        with sessions.kw["bind"].begin() as conn:
            if not conn.execute(update(HeartbeatRow).values(at=now)).rowcount:
                conn.execute(insert(HeartbeatRow).values(id=_ROW, at=now))
    except IntegrityError:  # another process inserted the row first: update it
        with sessions.kw["bind"].begin() as conn:
            conn.execute(update(HeartbeatRow).values(at=now))
