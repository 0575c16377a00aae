"""The interactive reports the App serves, one current report per pull request.

A report is reached at ``/reports/TOKEN``.  The token is ``HMAC-SHA256(key, nonce)``
(43 URL-safe characters, 256 bits): ``key`` is the operator's (``Settings.report_key``, from
the App's private key), ``nonce`` 32 random bytes drawn once per PR.  The table keeps the
nonce and the SHA-256 of the token, never the token: a copy of the database without the
key holds no link, and a request is looked up by the hash of what it sent (no comparison
of secrets).  Since the App can recompute a PR's token, a new review replaces the HTML
under the same token: the link in the edited comment stays the same.

A report expires ``ttl_days`` after the review that stored it (each review renews it);
closing the PR deletes it (``delete_pull``), its repository going private, away or being
deleted deletes every report of it (``delete_repo``), and the hourly ``purge`` deletes the
expired ones.  An expired report is never served, purged or not.  Timestamps are naive UTC.

A repository's threshold dashboard has one page here too (``keep_page``): the row of number
``PAGE_NUMBER`` (0: no PR has it), so it shares the token scheme, the expiry, the purge and
the deletions of its repository.  Its token is kept while the row lives; a rewrite of the
dashboard replaces the HTML under it, and an unchanged page is not written at all unless
less than half of ``ttl_days`` is left (then its expiry is renewed).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    CursorResult,
    DateTime,
    Integer,
    UniqueConstraint,
    delete,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from bot.adapters.store.db import Base
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.portable import CLEAN_TEXT, Key, Number

log = logging.getLogger(__name__)

MAX_HTML_BYTES = 5 * 1024 * 1024  # a larger report is not stored
TOKEN_CHARS = 43  # 32 bytes, URL-safe base64 without padding
PAGE_NUMBER = 0  # the row of a repository's dashboard page (PR numbers start at 1)

Sessions = sessionmaker[Session]


class ReportTooLarge(ValueError):
    """The report's HTML is over ``MAX_HTML_BYTES``."""


class ReportRow(Base):
    """The current report of one PR (table ``reports``)."""

    __tablename__ = "reports"
    __table_args__ = (UniqueConstraint("repo", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(Key(64), unique=True)  # SHA-256 hex of the token
    nonce: Mapped[str] = mapped_column(Key(64))  # hex; the token is HMAC(key, nonce)
    repo: Mapped[str] = mapped_column(Key(200))
    number: Mapped[int] = mapped_column(Number)
    head_sha: Mapped[str] = mapped_column(Key(64))
    html: Mapped[str] = mapped_column(CLEAN_TEXT)
    created_at: Mapped[datetime] = mapped_column(DateTime)  # of the review that stored it
    expires_at: Mapped[datetime] = mapped_column(DateTime, index=True)


def _naive(at: datetime | None) -> datetime:
    if at is None:
        return now_utc()
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at


def token_of(key: bytes, nonce: str) -> str:
    """The token of a report: ``HMAC-SHA256(key, nonce)``, URL-safe base64 without padding."""
    digest = hmac.new(key, bytes.fromhex(nonce), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_hash(token: str) -> str:
    """What the table keeps of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def save(
    sessions: Sessions,
    *,
    key: bytes,
    repo: str,
    number: int,
    head_sha: str,
    html: str,
    ttl_days: float,
    at: datetime | None = None,
) -> str:
    """Store ``html`` as the current report of PR ``number``; return its token.

    The PR's token is kept across reviews (the nonce is drawn once); a ``key`` other than
    the one the token was made with (the App's key rotated) gives a new token.  Raises
    ``ReportTooLarge`` over ``MAX_HTML_BYTES``.
    """
    if len(html.encode()) > MAX_HTML_BYTES:
        raise ReportTooLarge(f"the report is over {MAX_HTML_BYTES // (1024 * 1024)} MB")
    now = _naive(at)
    values = {
        "head_sha": head_sha,
        "html": html,
        "created_at": now,
        "expires_at": now + timedelta(days=ttl_days),
    }
    try:
        return _save(sessions, key, repo, number, values)
    except IntegrityError:  # another process inserted the PR's row first: it is there now
        return _save(sessions, key, repo, number, values)


def _save(sessions: Sessions, key: bytes, repo: str, number: int, values: dict[str, Any]) -> str:
    with sessions.begin() as session:
        row = session.scalars(
            select(ReportRow).where(ReportRow.repo == repo, ReportRow.number == number)
        ).first()
        if row is None:
            row = ReportRow(repo=repo, number=number, nonce=secrets.token_hex(32))
            session.add(row)
        token = token_of(key, row.nonce)
        row.token_hash = token_hash(token)
        for name, value in values.items():
            setattr(row, name, value)
    return token


@dataclass(frozen=True)
class Page:
    """A dashboard page as kept: its token and when it expires (naive UTC)."""

    token: str
    expires_at: datetime


def keep_page(
    sessions: Sessions,
    *,
    key: bytes,
    repo: str,
    head_sha: str,
    html: str,
    ttl_days: float,
    at: datetime | None = None,
) -> Page:
    """Keep ``html`` as ``repo``'s dashboard page and return its token and expiry.  Nothing
    is written when the page kept has the same HTML, head and key and more than half of
    ``ttl_days`` left (the same page, re-read); otherwise it is saved as ``save`` does
    (``ReportTooLarge`` over ``MAX_HTML_BYTES``)."""
    now = _naive(at)
    query = select(ReportRow.nonce, ReportRow.token_hash, ReportRow.html, ReportRow.head_sha)
    query = query.add_columns(ReportRow.expires_at).where(
        ReportRow.repo == repo, ReportRow.number == PAGE_NUMBER
    )
    with sessions() as session:
        row = session.execute(query).first()
    if row is not None:
        token = token_of(key, row.nonce)
        left = row.expires_at - now
        same = (row.html, row.head_sha, row.token_hash) == (html, head_sha, token_hash(token))
        if same and left > timedelta(days=ttl_days / 2):
            return Page(token, row.expires_at)
    token = save(
        sessions,
        key=key,
        repo=repo,
        number=PAGE_NUMBER,
        head_sha=head_sha,
        html=html,
        ttl_days=ttl_days,
        at=now,
    )
    return Page(token, now + timedelta(days=ttl_days))


def drop_page(sessions: Sessions, repo: str) -> bool:
    """Delete ``repo``'s dashboard page, if it has one (nothing is written otherwise)."""
    where = (ReportRow.repo == repo, ReportRow.number == PAGE_NUMBER)
    with sessions() as session:
        if session.execute(select(ReportRow.id).where(*where)).first() is None:
            return False
    with sessions.begin() as session:
        return delete_pull(session, repo, PAGE_NUMBER) > 0


@dataclass(frozen=True)
class Found:
    """A stored report: its repository, the time of the review that stored it (naive UTC)
    and its HTML."""

    repo: str
    reviewed_at: datetime
    html: str


def find(sessions: Sessions, token: str, *, at: datetime | None = None) -> Found | None:
    """The report ``token`` names, unless unknown or expired."""
    query = select(ReportRow.repo, ReportRow.created_at, ReportRow.html).where(
        ReportRow.token_hash == token_hash(token), ReportRow.expires_at > _naive(at)
    )
    with sessions() as session:
        row = session.execute(query).first()
    return None if row is None else Found(row.repo, row.created_at, row.html)


def delete_pull(session: Session, repo: str, number: int) -> int:
    """Delete the reports of PR ``number`` (closed); how many (the caller commits)."""
    query = delete(ReportRow).where(ReportRow.repo == repo, ReportRow.number == number)
    return int(cast(CursorResult[Any], session.execute(query)).rowcount)


def delete_repo(session: Session, repo: str) -> int:
    """Delete every report of ``repo``; how many (the caller commits)."""
    query = delete(ReportRow).where(ReportRow.repo == repo)
    return int(cast(CursorResult[Any], session.execute(query)).rowcount)


def purge(sessions: Sessions, *, at: datetime | None = None) -> int:
    """Delete the expired reports; how many."""
    with sessions.begin() as session:
        done = session.execute(delete(ReportRow).where(ReportRow.expires_at <= _naive(at)))
        return int(cast(CursorResult[Any], done).rowcount)


def purge_job(sessions: Sessions) -> Callable[[], None]:
    """The periodic job that runs ``purge`` and logs what it removed."""

    def run() -> None:
        if deleted := purge(sessions):
            log.info("expired reports deleted: %d", deleted)

    return run
