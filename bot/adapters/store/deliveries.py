"""The deliveries table: every accepted webhook, the source of truth for the job queue.

A delivery is stored before the webhook is answered, then moves through
``queued -> running -> done | retry | failed`` (or straight to ``ignored`` when no
handler wants it).  The queue only carries delivery ids: anything not ``done``,
``failed`` or ``ignored`` is re-enqueued after a crash.  ``claim`` is one atomic
``UPDATE`` so a delivery enqueued twice still runs once at a time; a running
delivery holds a lease its worker renews, and a lease that runs out (the worker
died) lets another worker take it over; so does a holder known to be dead (a
crashed process on the same host: ``recoverable(gone=...)``).  Only the deliveries a
process's threads hold in hand are renewed; one it holds that no thread runs (a claim or
closing write cut off by the database going away) is put back by ``release_orphans``.

Ignored deliveries are stored without their body (the webhook drops it).  Finished
deliveries (``done``, ``failed``, ``ignored``) are deleted ``retention`` after they
finished (``purge``, hourly through ``purge_job``); their ids are kept at least
``DEDUPE_DAYS`` (GitHub redelivers only deliveries of the past three days), with the
body dropped once the retention has passed, so a redelivery is still recognised.

Timestamps are stored as naive UTC and returned as aware UTC.  The statements are
built once with bound parameters (plain Core, no ORM unit of work) since they run
for every delivery, and on SQLite the writes of one process take turns on a lock.

Over the ~400-line guideline on purpose: every operation on the one table (intake,
claim, lease, retry, recovery, retention) shares those prepared statements and the
write lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    DateTime,
    Engine,
    Integer,
    RowMapping,
    String,
    Table,
    bindparam,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import DEFAULT_BUSY_TIMEOUT, Base, make_engine
from bot.adapters.store.portable import CLEAN_TEXT, Clipped, GitHubId, Key

log = logging.getLogger(__name__)

Status = Literal["queued", "running", "retry", "done", "failed", "ignored"]
OPEN: tuple[Status, ...] = ("queued", "running", "retry")
FINISHED: tuple[Status, ...] = ("done", "failed", "ignored")
DEDUPE_DAYS = 3.0  # GitHub redelivers the deliveries of the past three days only
PURGE_BATCH = 1000  # rows deleted per transaction
MAX_ERROR_CHARS = 2000

Sessions = sessionmaker[Session]


class DeliveryRow(Base):
    """One webhook delivery (table ``deliveries``)."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(Key(64), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(Key(64))
    action: Mapped[str | None] = mapped_column(Clipped(64))
    installation_id: Mapped[int | None] = mapped_column(GitHubId)
    body: Mapped[str] = mapped_column(CLEAN_TEXT)
    received_at: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[str] = mapped_column(String(16), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(CLEAN_TEXT)
    outcome: Mapped[str | None] = mapped_column(Clipped(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime)
    claimed_by: Mapped[str | None] = mapped_column(Clipped(200))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)


@dataclass(frozen=True)
class NewDelivery:
    """What the webhook endpoint stores."""

    id: str
    event: str
    action: str | None
    installation_id: int | None
    body: str
    status: Status = "queued"
    outcome: str | None = None


@dataclass(frozen=True)
class Delivery:
    """A stored delivery as the worker and tests see it."""

    id: str
    event: str
    action: str | None
    installation_id: int | None
    body: str
    received_at: datetime
    status: Status
    attempts: int
    last_error: str | None
    outcome: str | None
    next_attempt_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Recorded:
    """Result of ``add``: whether the delivery is new (or re-opened) and its status."""

    accepted: bool  # True: stored now, or a failed delivery re-opened; enqueue it
    status: Status
    duplicate: bool


# SQLite has one writer at a time, and a writer that finds the file locked sleeps in
# steps of up to 100 ms.  Taking turns on a lock within the process instead keeps
# the webhook's insert fast while worker threads update their deliveries.
_SQLITE_WRITES = threading.Lock()

T: Table = DeliveryRow.__table__  # type: ignore[assignment]
_C = T.c

_INSERT = insert(T)
_GET = select(T).where(_C.id == bindparam("b_id"))
_STATUS = select(_C.status).where(_C.id == bindparam("b_id"))
_REOPEN = (
    update(T)
    .where(_C.id == bindparam("b_id"), _C.status == "failed")
    .values(
        status="queued",
        attempts=0,
        body=bindparam("b_body"),  # the redelivery's: the stored one may have been purged
        updated_at=bindparam("b_now"),
        finished_at=None,
    )
)
_CLAIM = (
    update(T)
    .where(
        _C.id == bindparam("b_id"),
        or_(
            _C.status == "queued",
            (_C.status == "retry")
            & or_(_C.next_attempt_at.is_(None), _C.next_attempt_at <= bindparam("b_due")),
            (_C.status == "running") & (_C.lease_until < bindparam("b_now")),
        ),
    )
    .values(
        status="running",
        attempts=_C.attempts + 1,
        claimed_by=bindparam("b_owner"),
        lease_until=bindparam("b_lease"),
        next_attempt_at=None,
        updated_at=bindparam("b_now"),
    )
)
_CLOSE = (
    update(T)
    .where(_C.id == bindparam("b_id"))
    .values(
        status=bindparam("b_status"),
        lease_until=None,
        claimed_by=None,
        updated_at=bindparam("b_now"),
        finished_at=bindparam("b_now"),
        outcome=func.coalesce(bindparam("b_outcome", type_=_C.outcome.type), _C.outcome),
        last_error=func.coalesce(bindparam("b_error", type_=_C.last_error.type), _C.last_error),
    )
)
_RETRY = (
    update(T)
    .where(_C.id == bindparam("b_id"))
    .values(
        status="retry",
        last_error=bindparam("b_error"),
        next_attempt_at=bindparam("b_at"),
        lease_until=None,
        claimed_by=None,
        updated_at=bindparam("b_now"),
    )
)
_RENEW = (
    update(T)
    .where(
        _C.status == "running",
        _C.claimed_by == bindparam("b_owner"),
        _C.id.in_(bindparam("b_ids", expanding=True)),
    )
    .values(lease_until=bindparam("b_lease"))
)


# The connection whose commit fills the write-ahead log past this many pages copies
# it into the database file (a checkpoint: ~20 ms for the default 1,000 pages).
# The webhook's own connections only do it far later, so the checkpoints fall to the
# workers' connections, off the answer path; the limit only bounds the log if no
# worker ever writes.
INTAKE_CHECKPOINT_PAGES = 20_000


def intake_sessions(sessions: Sessions, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> Sessions:
    """Sessions for the webhook's writes, on an engine of their own so that busy workers
    never hold the connection the next 202 waits for.  On SQLite that engine leaves the
    write-ahead log checkpoints to the workers' connections and waits at most
    ``busy_timeout`` seconds for another writer's lock; an in-memory SQLite database
    keeps ``sessions`` (another engine would be another database)."""
    engine: Engine = sessions.kw["bind"]
    url = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name != "sqlite":
        return sessionmaker(make_engine(url, pool_size=2), expire_on_commit=False)
    if engine.url.database in (None, "", ":memory:"):
        return sessions
    intake = make_engine(url, busy_timeout)

    @event.listens_for(intake, "connect")
    def _late_checkpoints(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA wal_autocheckpoint={INTAKE_CHECKPOINT_PAGES}")

    return sessionmaker(intake, expire_on_commit=False)


def _sqlite(sessions: Sessions) -> bool:
    return bool(sessions.kw["bind"].dialect.name == "sqlite")


@contextmanager
def _writing(sessions: Sessions, wait: float | None = None) -> Iterator[Connection]:
    """A write transaction on a plain connection; on SQLite, one at a time per process.

    ``wait``: seconds to wait for this process's turn (``TimeoutError`` after that);
    None waits as long as it takes.
    """
    if not _sqlite(sessions):
        with sessions.kw["bind"].begin() as conn:
            yield conn
        return
    if not _SQLITE_WRITES.acquire(timeout=-1 if wait is None else wait):
        raise TimeoutError(f"another write of this process held the store for {wait:g} s")
    try:
        with sessions.kw["bind"].begin() as conn:
            yield conn
    finally:
        _SQLITE_WRITES.release()


def _count(result: object) -> int:
    """Rows matched by an UPDATE."""
    return int(cast(CursorResult[Any], result).rowcount)


def now_utc() -> datetime:
    """The current time as naive UTC, the form stored in the table."""
    return datetime.now(UTC).replace(tzinfo=None)


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def _public(row: RowMapping) -> Delivery:
    return Delivery(
        id=row["id"],
        event=row["event"],
        action=row["action"],
        installation_id=row["installation_id"],
        body=row["body"],
        received_at=row["received_at"].replace(tzinfo=UTC),
        status=row["status"],
        attempts=row["attempts"],
        last_error=row["last_error"],
        outcome=row["outcome"],
        next_attempt_at=_aware(row["next_attempt_at"]),
        finished_at=_aware(row["finished_at"]),
    )


def _row(new: NewDelivery, now: datetime) -> dict[str, Any]:
    return {
        "id": new.id,
        "event": new.event,
        "action": new.action,
        "installation_id": new.installation_id,
        "body": new.body,
        "received_at": now,
        "status": new.status,
        "attempts": 0,
        "outcome": new.outcome,
        "updated_at": now,
        "finished_at": now if new.status == "ignored" else None,
    }


def add(sessions: Sessions, new: NewDelivery, wait: float | None = None) -> Recorded:
    """Store a delivery once; a repeated id is a duplicate unless it had failed (re-opened).

    ``wait``: as for ``_writing``, for each of the (at most two) transactions.
    """
    now = now_utc()
    try:
        with _writing(sessions, wait) as conn:
            conn.execute(_INSERT, _row(new, now))
        return Recorded(accepted=True, status=new.status, duplicate=False)
    except IntegrityError:
        pass
    with _writing(sessions, wait) as conn:
        params = {"b_id": new.id, "b_now": now, "b_body": new.body}
        reopened = _count(conn.execute(_REOPEN, params))
        status = conn.execute(_STATUS, {"b_id": new.id}).scalar()
    if reopened:
        return Recorded(accepted=True, status="queued", duplicate=True)
    return Recorded(accepted=False, status=status or "queued", duplicate=True)


def add_many(
    sessions: Sessions, news: Sequence[NewDelivery], wait: float | None = None
) -> list[Recorded]:
    """``add`` each delivery, new ones in one transaction (one commit for the lot).

    The results are those of ``add`` called in order: a batch holding an id that
    is already stored (or twice) falls back to recording one by one.
    """
    if len(news) > 1 and len({new.id for new in news}) == len(news):
        now = now_utc()
        try:
            with _writing(sessions, wait) as conn:
                conn.execute(_INSERT, [_row(new, now) for new in news])
            return [Recorded(accepted=True, status=new.status, duplicate=False) for new in news]
        except IntegrityError:
            pass
    return [add(sessions, new, wait) for new in news]


def get(sessions: Sessions, delivery_id: str) -> Delivery | None:
    """The stored delivery, or None."""
    with sessions.kw["bind"].connect() as conn:
        row = conn.execute(_GET, {"b_id": delivery_id}).mappings().first()
    return None if row is None else _public(row)


def claim(sessions: Sessions, delivery_id: str, owner: str, lease: float) -> Delivery | None:
    """Atomically take a delivery to run it; None when it is finished or held by a live worker.

    A ``retry`` delivery is taken only once its ``next_attempt_at`` has come.
    """
    now = now_utc()
    params = {
        "b_id": delivery_id,
        "b_now": now,
        "b_due": now + timedelta(seconds=1),
        "b_owner": owner,
        "b_lease": now + timedelta(seconds=lease),
    }
    with _writing(sessions) as conn:
        if not _count(conn.execute(_CLAIM, params)):
            return None
        row = conn.execute(_GET, {"b_id": delivery_id}).mappings().first()
    return None if row is None else _public(row)


def finish(sessions: Sessions, delivery_id: str, outcome: str | None = None) -> None:
    """Mark a delivery done."""
    _close(sessions, delivery_id, "done", outcome=outcome)


def fail(sessions: Sessions, delivery_id: str, error: str) -> None:
    """Mark a delivery failed for good, keeping the error."""
    _close(sessions, delivery_id, "failed", error=error)


def _close(
    sessions: Sessions,
    delivery_id: str,
    status: Status,
    outcome: str | None = None,
    error: str | None = None,
) -> None:
    now = now_utc()
    params = {
        "b_id": delivery_id,
        "b_status": status,
        "b_now": now,
        "b_outcome": outcome,  # cut to the column by its type
        "b_error": None if error is None else error[:MAX_ERROR_CHARS],
    }
    with _writing(sessions) as conn:
        conn.execute(_CLOSE, params)


def schedule_retry(sessions: Sessions, delivery_id: str, error: str, at: datetime) -> None:
    """Record a transient failure; the delivery runs again at ``at`` (naive or aware UTC)."""
    when = at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at
    params = {
        "b_id": delivery_id,
        "b_error": error[:MAX_ERROR_CHARS],
        "b_at": when,
        "b_now": now_utc(),
    }
    with _writing(sessions) as conn:
        conn.execute(_RETRY, params)


def renew_leases(sessions: Sessions, owner: str, lease: float, ids: Collection[str]) -> int:
    """Extend the leases of the deliveries ``ids`` that ``owner`` holds; return how many.

    Only those its threads are running: a delivery whose last write failed (the store went
    away) stays held until ``release_orphans`` puts it back, never renewed for ever.
    """
    if not ids:
        return 0
    params = {"b_owner": owner, "b_lease": now_utc() + timedelta(seconds=lease), "b_ids": ids}
    with _writing(sessions) as conn:
        return _count(conn.execute(_RENEW, params))


def release_orphans(
    sessions: Sessions, owner: str, in_hand: Callable[[], Collection[str]]
) -> list[str]:
    """Put back to ``queued`` the deliveries held by ``owner`` (this process) that none of
    its threads runs any more; their ids, to enqueue again.

    A thread whose claim committed as its connection dropped (so it never learnt it had the
    delivery), or whose closing write failed, leaves its delivery ``running`` under a live
    holder: no lease runs out while the process renews it, and no sweep takes it over.
    ``in_hand()`` is read after the held rows: a thread puts an id in hand before it claims
    and takes it out after its closing write, so a row held then and not in hand is an
    orphan; one claimed again since (its ``attempts`` moved on) is left alone.
    """
    now = now_utc()
    held = select(_C.id, _C.attempts).where(_C.status == "running", _C.claimed_by == owner)
    with _writing(sessions) as conn:
        rows = conn.execute(held).all()
        running = set(in_hand())
        orphans = [(i, attempts) for i, attempts in rows if i not in running]
        if not orphans:
            return []
        same = or_(*((_C.id == i) & (_C.attempts == attempts) for i, attempts in orphans))
        released = conn.execute(
            update(T)
            .where(same, _C.status == "running", _C.claimed_by == owner)
            .values(status="queued", claimed_by=None, lease_until=None, updated_at=now)
            .returning(_C.id)
        )
        return [str(i) for i in released.scalars()]


def holders(sessions: Sessions) -> set[str]:
    """The workers holding a ``running`` delivery (``claimed_by``)."""
    query = select(_C.claimed_by).where(_C.status == "running").distinct()
    with sessions.kw["bind"].connect() as conn:
        return {h for h in conn.execute(query).scalars() if h}


def recoverable(
    sessions: Sessions,
    stuck_after: float | None = None,
    gone: Sequence[str] = (),
    before: datetime | None = None,
) -> list[Delivery]:
    """Open deliveries that no live worker holds, oldest first (as found), to re-enqueue.

    A ``running`` delivery whose lease ran out, or whose holder is in ``gone`` (workers
    known to be dead), goes back to ``queued``.  With ``stuck_after`` (seconds) only
    deliveries queued or due that long ago are included, so a periodic sweep leaves a
    healthy backlog alone; with ``before`` (aware UTC: when the queue or the store came
    back from an outage that may have lost their jobs), the ``queued`` and ``retry`` ones
    last enqueued before then; with neither (at start-up), every ``queued`` and ``retry``
    delivery.
    """
    now = now_utc()
    waiting: ColumnElement[bool] = _C.status.in_(("queued", "retry"))
    if before is not None:
        waiting = waiting & (_C.updated_at < before.astimezone(UTC).replace(tzinfo=None))
    elif stuck_after is not None:
        old = now - timedelta(seconds=stuck_after)
        waiting = ((_C.status == "queued") & (_C.updated_at < old)) | (
            (_C.status == "retry") & (_C.next_attempt_at < old)
        )
    expired = (_C.status == "running") & ((_C.lease_until < now) | _C.claimed_by.in_(list(gone)))
    with _writing(sessions) as conn:
        rows = conn.execute(select(T).where(waiting | expired).order_by(_C.received_at)).mappings()
        found = [_public(r) for r in rows]
        ids = [d.id for d in found]
        if ids:
            conn.execute(
                update(T)
                .where(_C.id.in_(ids), expired)
                .values(status="queued", claimed_by=None, lease_until=None, updated_at=now)
            )
            conn.execute(
                update(T).where(_C.id.in_(ids), _C.status == "queued").values(updated_at=now)
            )
    return found


def count_by_status(sessions: Sessions) -> dict[str, int]:
    """How many deliveries are in each status."""
    with sessions.kw["bind"].connect() as conn:
        rows = conn.execute(select(_C.status, func.count()).group_by(_C.status)).all()
    return {status: int(n) for status, n in rows}


def purge(sessions: Sessions, retention_days: float) -> tuple[int, int]:
    """Delete the deliveries finished more than ``retention_days`` ago; (deleted, emptied).

    A delivery is deleted once both ``retention_days`` and ``DEDUPE_DAYS`` have passed
    since it finished; in between (a retention shorter than ``DEDUPE_DAYS``) only its
    body is dropped, so a redelivery of it is still known: a duplicate, or a failed
    delivery re-opened with the redelivered body.  Open deliveries are never touched.
    Deletes ``PURGE_BATCH`` rows per transaction, so intake writes get their turns.
    """
    now = now_utc()
    drop_body = now - timedelta(days=retention_days)
    drop_row = now - timedelta(days=max(retention_days, DEDUPE_DAYS))
    finished = _C.status.in_(FINISHED)
    batch = select(_C.id).where(finished, _C.finished_at < drop_row).limit(PURGE_BATCH)
    deleted, n = 0, PURGE_BATCH
    while n == PURGE_BATCH:
        with _writing(sessions) as conn:
            n = _count(conn.execute(delete(T).where(_C.id.in_(batch.scalar_subquery()))))
        deleted += n
    if drop_body <= drop_row:
        return deleted, 0
    old = finished & (_C.finished_at < drop_body) & (_C.body != "")
    with _writing(sessions) as conn:
        return deleted, _count(conn.execute(update(T).where(old).values(body="")))


def purge_job(sessions: Sessions, retention_days: float) -> Callable[[], None]:
    """The periodic job that runs ``purge`` and logs what it removed."""

    def run() -> None:
        deleted, emptied = purge(sessions, retention_days)
        if deleted or emptied:
            log.info(
                "deliveries past their retention: %d deleted, %d bodies dropped",
                deleted,
                emptied,
                extra={"retention_days": retention_days},
            )

    return run
