"""The drift watch's durable record: one row per repository and threshold file.

A row says whether an item (an issue, or a rebaseline PR) is open for the file, which
one, what was last written to it (a fingerprint), and which worker is acting on it: a
worker *claims* the row with a lease before it touches GitHub, so several processes, or
a restart after ``kill -9``, never act on the same file at once (an expired lease is
taken over).  A closed item leaves the row ``idle``, and the next drift opens a new item on
the same row; rows are deleted only with their repository (``forget_repo``: deleted or
transferred).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import (
    CursorResult,
    DateTime,
    Integer,
    String,
    UniqueConstraint,
    delete,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import DeliveryRow, now_utc
from bot.adapters.store.installations import InstallationRow
from bot.adapters.store.leases import RELEASED, Leased, free_for, taken_by
from bot.adapters.store.portable import (
    CLEAN_TEXT,
    Clipped,
    GitHubId,
    Json,
    Key,
    Number,
    upsert_insert,
)

Sessions = sessionmaker[Session]
ItemState = Literal["idle", "open"]


class DriftItemRow(Leased, Base):
    """The item of one threshold file (table ``drift_items``)."""

    __tablename__ = "drift_items"
    __table_args__ = (UniqueConstraint("repo", "file"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    installation_id: Mapped[int] = mapped_column(GitHubId)
    repo: Mapped[str] = mapped_column(Key(200), index=True)
    file: Mapped[str] = mapped_column(Key(1024))
    state: Mapped[str] = mapped_column(String(16), default="idle")
    mode: Mapped[str] = mapped_column(Clipped(16), default="issue")
    issue: Mapped[int | None] = mapped_column(Number, nullable=True)
    pull: Mapped[int | None] = mapped_column(Number, nullable=True)
    branch: Mapped[str] = mapped_column(Key(300), default="")
    fingerprint: Mapped[str] = mapped_column(Clipped(64), default="")  # of the body written
    values: Mapped[dict[str, str]] = mapped_column(Json, default=dict)  # gate -> literal committed
    note: Mapped[str] = mapped_column(CLEAN_TEXT, default="")  # why no issue could be opened
    shown: Mapped[str] = mapped_column(Clipped(64), default="")  # the drift the item shows
    dismissed: Mapped[str] = mapped_column(Clipped(64), default="")  # one a maintainer closed
    opened_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # the file's last rebaseline PR the watch opened and saw merged, and when it was merged
    rebaselined: Mapped[int | None] = mapped_column(Number, nullable=True)
    rebaselined_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


@dataclass(frozen=True)
class DriftItem:
    """A row as plain values; ``state`` ``open`` means an issue or PR is open for the file."""

    repo: str
    file: str
    installation_id: int
    state: ItemState = "idle"
    mode: str = "issue"
    issue: int | None = None
    pull: int | None = None
    branch: str = ""
    fingerprint: str = ""
    values: dict[str, str] = field(default_factory=dict)
    note: str = ""
    shown: str = ""  # which drift the item shows (its gates and onsets)
    dismissed: str = ""  # the drift of an item a maintainer closed: not opened again
    opened_at: datetime | None = None
    closed_at: datetime | None = None
    rebaselined: int | None = None  # the last rebaseline PR merged (kept across items)
    rebaselined_at: datetime | None = None  # when it was merged

    def opened(self, *, mode: str, issue: int | None = None, pull: int | None = None) -> DriftItem:
        """This item, open as ``mode`` with these numbers (a new item: nothing written yet)."""
        return replace(
            self,
            state="open",
            mode=mode,
            issue=issue,
            pull=pull,
            fingerprint="",
            values={},
            note="",
            dismissed="",
            opened_at=now_utc(),
            closed_at=None,
        )

    def pull_closed(self) -> DriftItem:
        """This item after a maintainer closed its PR unmerged: an issue stays open, its PR
        forgotten (another ``/rebaseline`` may follow); without an issue the drift is
        dismissed."""
        if self.issue is None:
            return self.closed(by_maintainer=True)
        return replace(self, pull=None, values={}, fingerprint="")

    def closed(self, *, by_maintainer: bool = False) -> DriftItem:
        """This item after its issue / PR was closed: idle, numbers kept for the record; one
        a maintainer closed leaves its drift dismissed."""
        dismissed = self.shown if by_maintainer else ""
        return replace(
            self,
            state="idle",
            fingerprint="",
            values={},
            dismissed=dismissed,
            closed_at=now_utc(),
        )

    def merged(self, pull: int, at: datetime | None = None) -> DriftItem:
        """This item closed by the merge of its rebaseline PR ``pull`` (at ``at``, naive
        UTC; None: now), which is kept as the file's last rebaseline."""
        return replace(self.closed(), rebaselined=pull, rebaselined_at=at or now_utc())


def _public(row: DriftItemRow) -> DriftItem:
    return DriftItem(
        repo=row.repo,
        file=row.file,
        installation_id=row.installation_id,
        state="open" if row.state == "open" else "idle",
        mode=row.mode,
        issue=row.issue,
        pull=row.pull,
        branch=row.branch,
        fingerprint=row.fingerprint,
        values=dict(row.values or {}),
        note=row.note,
        shown=row.shown,
        dismissed=row.dismissed,
        opened_at=row.opened_at,
        closed_at=row.closed_at,
        rebaselined=row.rebaselined,
        rebaselined_at=row.rebaselined_at,
    )


def claim(
    sessions: Sessions,
    *,
    repo: str,
    file: str,
    installation_id: int,
    owner: str,
    seconds: float,
) -> DriftItem | None:
    """Take the row of ``repo``/``file`` (created if new) for ``seconds``; None when another
    owner holds an unexpired lease.  The claim is one conditional UPDATE: atomic on every
    engine, so two workers never both get it."""
    now = now_utc()
    with sessions.begin() as session:  # the row, unless there (another worker made it first)
        new = {"installation_id": installation_id, "repo": repo, "file": file}
        session.execute(
            upsert_insert(session)(DriftItemRow)
            .values(**new, state="idle", mode="issue", branch="", fingerprint="", values={})
            .values(note="", shown="", dismissed="", updated_at=now)
            .on_conflict_do_nothing(index_elements=["repo", "file"])
        )
    with sessions.begin() as session:
        taken = session.execute(
            update(DriftItemRow)
            .where(
                DriftItemRow.repo == repo,
                DriftItemRow.file == file,
                free_for(DriftItemRow, owner, now),
            )
            .values(**taken_by(owner, seconds, now), installation_id=installation_id)
        )
        if taken.rowcount != 1:  # type: ignore[attr-defined]
            return None
        row = session.scalars(
            select(DriftItemRow).where(DriftItemRow.repo == repo, DriftItemRow.file == file)
        ).one()
        return _public(row)


def save(sessions: Sessions, item: DriftItem, owner: str) -> bool:
    """Write ``item`` to its row if ``owner`` still holds the lease; whether it did."""
    with sessions.begin() as session:
        done = session.execute(
            update(DriftItemRow)
            .where(
                DriftItemRow.repo == item.repo,
                DriftItemRow.file == item.file,
                DriftItemRow.lease_owner == owner,
            )
            .values(
                state=item.state,
                mode=item.mode,
                issue=item.issue,
                pull=item.pull,
                branch=item.branch,
                fingerprint=item.fingerprint,
                values=dict(item.values),
                note=item.note,
                shown=item.shown,
                dismissed=item.dismissed,
                opened_at=item.opened_at,
                closed_at=item.closed_at,
                rebaselined=item.rebaselined,
                rebaselined_at=item.rebaselined_at,
                updated_at=now_utc(),
            )
        )
        return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def release(sessions: Sessions, repo: str, file: str, owner: str) -> datetime | None:
    """Give the row's lease back; the row's ``updated_at`` as ``owner`` leaves it (its
    *stamp*, see ``stamps``), None when ``owner`` no longer held the lease (a no-op)."""
    with sessions.begin() as session:
        done = session.execute(
            update(DriftItemRow)
            .where(
                DriftItemRow.repo == repo,
                DriftItemRow.file == file,
                DriftItemRow.lease_owner == owner,
            )
            .values(**RELEASED)
        )
        if done.rowcount != 1:  # type: ignore[attr-defined]
            return None
        return session.scalar(  # in the same transaction: no other owner wrote in between
            select(DriftItemRow.updated_at).where(
                DriftItemRow.repo == repo, DriftItemRow.file == file
            )
        )


def stamps(sessions: Sessions, repo: str) -> dict[str, datetime]:
    """Per file of ``repo``, its row's ``updated_at``: every ``save`` sets it, so a row whose
    stamp is the one ``release`` returned was not written since.  Rows under a lease (being
    written, or left by a worker that died) are left out.  One query."""
    with sessions() as session:
        rows = session.execute(
            select(DriftItemRow.file, DriftItemRow.updated_at).where(
                DriftItemRow.repo == repo, DriftItemRow.lease_owner.is_(None)
            )
        ).all()
    return {file: at for file, at in rows}


def get(sessions: Sessions, repo: str, file: str) -> DriftItem | None:
    """The row of ``repo``/``file``, or None."""
    with sessions() as session:
        row = session.scalars(
            select(DriftItemRow).where(DriftItemRow.repo == repo, DriftItemRow.file == file)
        ).first()
        return None if row is None else _public(row)


def by_number(sessions: Sessions, repo: str, number: int) -> DriftItem | None:
    """The open item whose issue or PR is ``number`` in ``repo``, or None."""
    with sessions() as session:
        row = session.scalars(
            select(DriftItemRow)
            .where(
                DriftItemRow.repo == repo,
                DriftItemRow.state == "open",
                or_(DriftItemRow.issue == number, DriftItemRow.pull == number),
            )
            .order_by(DriftItemRow.id)
        ).first()
        return None if row is None else _public(row)


def of_repo(sessions: Sessions, repo: str) -> list[DriftItem]:
    """Every row of ``repo`` (open or idle), by file."""
    with sessions() as session:
        rows = session.scalars(
            select(DriftItemRow).where(DriftItemRow.repo == repo).order_by(DriftItemRow.file)
        ).all()
        return [_public(r) for r in rows]


def forget_repo(session: Session, repo: str) -> int:
    """Delete every row of ``repo``; how many (the caller commits)."""
    done = session.execute(delete(DriftItemRow).where(DriftItemRow.repo == repo))
    return int(cast(CursorResult[Any], done).rowcount)


def installation_ids(sessions: Sessions) -> list[int]:
    """The installations the App has heard of and not lost: active installations, and
    those of recent deliveries unless suspended or deleted since."""
    with sessions() as session:
        rows = session.execute(select(InstallationRow.id, InstallationRow.status)).all()
        status = {int(i): str(s) for i, s in rows}
        seen = session.scalars(
            select(DeliveryRow.installation_id)
            .where(DeliveryRow.installation_id.is_not(None))
            .distinct()
        ).all()
    ids = {i for i, s in status.items() if s == "active"}
    ids |= {int(i) for i in seen if i is not None and status.get(int(i), "active") == "active"}
    return sorted(ids)
