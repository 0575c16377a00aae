"""Locks as rows of the store (table ``locks``, ``bot.adapters.store.locks``), for SQLite.

Each lease has its own token as holder (``HOLDER:RANDOM``) and an end time ``ttl`` seconds
ahead, moved forward every third of the TTL by a background thread while it is held; a
holder killed without releasing loses the lock once its time has passed, or at once when
``gone`` tells that its process is dead (a crashed process on this host).  A renewal that
finds the row gone or held by another token marks the lease lost.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from bot.adapters.locks.lease import Gone, Lease, Renewer, holder_part, poll
from bot.adapters.store import locks as rows


class RowLocks:
    """``Locks`` as rows in the database of ``engine``; leases last ``ttl`` seconds unrenewed."""

    def __init__(self, engine: Engine, holder: str, ttl: float, gone: Gone | None = None) -> None:
        self._sessions = sessionmaker(engine)
        self._holder = holder
        self._gone = gone
        self._ttl = ttl
        self._renewer = Renewer(self._renew, ttl / 3, "row-locks")

    def acquire(self, name: str, *, wait: float = 0.0) -> Lease | None:
        """Take lock ``name`` (waiting up to ``wait`` seconds); None if another holds it."""
        return poll(lambda: self._try(name), wait)

    def _try(self, name: str) -> Lease | None:
        token = f"{self._holder}:{uuid.uuid4().hex}"
        if not rows.try_acquire(self._sessions, name, token, self._ttl) and not self._take_over(
            name, token
        ):
            return None
        lease = Lease(name, lambda: self._release(name, token), token)
        self._renewer.add(lease)
        return lease

    def _take_over(self, name: str, token: str) -> bool:
        old = rows.holder_of(self._sessions, name) if self._gone is not None else None
        if old is None or self._gone is None or not self._gone(holder_part(old)):
            return False
        return rows.take_over(self._sessions, name, old, token, self._ttl)

    def _renew(self, lease: Lease) -> bool:
        return rows.renew(self._sessions, lease.name, lease.token, self._ttl)

    def _release(self, name: str, token: str) -> None:
        rows.release(self._sessions, name, token)

    def close(self) -> None:
        """Stop renewing."""
        self._renewer.close()
