"""What differs between SQLite and PostgreSQL, settled once: column types and upserts.

SQLite ignores ``VARCHAR`` lengths, stores NUL characters, 64-bit integers in ``INTEGER``,
NaN in JSON, and gives back a time-zoned column's values without their zone; PostgreSQL
refuses the first four and gives them back in the session's zone.  So that a value is
stored, or refused, the same way on both, every column says what its values are:

- ``Clipped(n)`` / ``CLEAN_TEXT``: descriptive text (errors, outcomes, notes, holders,
  names, bodies): NUL characters dropped, lone surrogates replaced by ``?``, cut to ``n``
  characters (``Clipped``) — on writes and on lookups alike, so a holder cut on the way in
  still finds its rows;
- ``Key(n)``: identifying text (repositories, paths, ids): refused with ``ValueError``
  (raised as ``sqlalchemy.exc.StatementError``) when longer than ``n`` or holding a NUL,
  written or looked up: changing a key could merge two things;
- ``GitHubId``: a GitHub id, 64-bit (``BIGINT`` on PostgreSQL, ``INTEGER`` on SQLite, which
  is 64-bit there); ``Number``: an issue or PR number (32-bit); both refused out of range;
- ``Json``: JSON refused when it holds NaN or an infinity;
- ``UtcDateTime``: a time-zoned column; naive values are UTC; read back as aware UTC.

``upsert_insert(session)`` is the dialect's ``INSERT`` with ``ON CONFLICT`` (both engines
have it): an insert-or-update that two writers can race without an ``IntegrityError``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, String, Text, TypeDecorator
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)


def clean(text: str, limit: int | None = None) -> str:
    """``text`` without NUL characters nor lone surrogates, cut to ``limit`` characters."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text if limit is None else text[:limit]


class Clipped(TypeDecorator[str]):
    """``VARCHAR(length)`` of descriptive text: cleaned and cut to fit (see ``clean``)."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else clean(value, cast(String, self.impl_instance).length)


class _CleanText(TypeDecorator[str]):
    """``TEXT`` without NUL characters nor lone surrogates (no length)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else clean(value)


CLEAN_TEXT = _CleanText()


class Key(TypeDecorator[str]):
    """``VARCHAR(length)`` of an identifying string: refused unless it fits as it is."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        limit = cast(String, self.impl_instance).length
        if limit is not None and len(value) > limit:
            raise ValueError(f"a key of {len(value)} characters (at most {limit})")
        if "\x00" in value:
            raise ValueError("a key holding a NUL character")
        return value


def _in_range(value: int | None, bounds: tuple[int, int], what: str) -> int | None:
    if value is not None and not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} out of range: {value}")
    return value


class GitHubId(TypeDecorator[int]):
    """A GitHub id: ``BIGINT`` (``INTEGER`` on SQLite, 64-bit there too)."""

    impl = BigInteger
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(Integer() if dialect.name == "sqlite" else BigInteger())

    def process_bind_param(self, value: int | None, dialect: Dialect) -> int | None:
        return _in_range(value, INT64, "a GitHub id")


class Number(TypeDecorator[int]):
    """An issue or pull request number: ``INTEGER``, 32-bit on every engine."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Dialect) -> int | None:
        return _in_range(value, INT32, "an issue or pull request number")


def _finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"JSON cannot hold {value}")
    if isinstance(value, dict):
        for item in value.values():
            _finite(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _finite(item)


class Json(TypeDecorator[Any]):
    """JSON without NaN or infinities (PostgreSQL's ``json`` has none)."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        _finite(value)
        return value


class UtcDateTime(TypeDecorator[datetime]):
    """``TIMESTAMP WITH TIME ZONE``: naive values are UTC; read back as aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def upsert_insert(session: Session) -> Any:
    """The ``insert`` of the session's dialect, with ``on_conflict_do_update/_nothing``."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert
    if name == "sqlite":
        return sqlite.insert
    raise NotImplementedError(f"no upsert for the {name} dialect")
