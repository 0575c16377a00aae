"""PostgreSQL session advisory locks (``pg_try_advisory_lock``), one connection per lease.

A lock's key is a stable 64-bit hash of its name (BLAKE2b), the same in every process.
Each lease holds its own connection, opened for it (no pool, so the store's pool is never
short of connections and a lease's connection is closed when it is released): PostgreSQL
frees the lock when that connection ends, so a process killed with ``kill -9`` frees its
locks at once.  A background thread checks the held connections; one that broke marks its
lease lost (the server has freed the lock).
"""

from __future__ import annotations

import hashlib
import threading

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

from bot.adapters.locks.lease import Lease, Renewer, poll
from bot.adapters.store.db import CONNECT_TIMEOUT

CHECK_SECONDS = 5.0  # how often held connections are checked

_TRY = text("SELECT pg_try_advisory_lock(:key)")
_UNLOCK = text("SELECT pg_advisory_unlock(:key)")
_PING = text("SELECT 1")


def lock_key(name: str) -> int:
    """The advisory lock key of ``name``: a signed 64-bit integer."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _AdvisoryLease(Lease):
    def __init__(self, name: str, key: int, conn: Connection) -> None:
        super().__init__(name, self._unlock)
        self.key = key
        self.conn = conn
        self.io = threading.Lock()  # the connection is used by one thread at a time

    def _unlock(self) -> None:
        with self.io:
            try:
                if not self.lost:
                    self.conn.execute(_UNLOCK, {"key": self.key})
            finally:
                self.conn.close()  # ends the session: the lock is freed either way

    def alive(self) -> bool:
        with self.io:
            if self.released:
                return True
            self.conn.execute(_PING)
            return True


class AdvisoryLocks:
    """``Locks`` on the PostgreSQL database of ``engine``."""

    def __init__(self, engine: Engine, check_seconds: float = CHECK_SECONDS) -> None:
        self._engine = create_engine(
            engine.url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT}
        )
        self._checker = Renewer(self._check, check_seconds, "advisory-locks")

    def acquire(self, name: str, *, wait: float = 0.0) -> Lease | None:
        """Take lock ``name`` (waiting up to ``wait`` seconds); None if another holds it."""
        return poll(lambda: self._try(name), wait)

    def _try(self, name: str) -> Lease | None:
        key = lock_key(name)
        conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            got = bool(conn.execute(_TRY, {"key": key}).scalar())
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return None
        lease = _AdvisoryLease(name, key, conn)
        self._checker.add(lease)
        return lease

    @staticmethod
    def _check(lease: Lease) -> bool:
        assert isinstance(lease, _AdvisoryLease)
        try:
            return lease.alive()
        except Exception:  # the connection broke: the server has freed the lock
            return False

    def close(self) -> None:
        """Stop checking; leases still held keep their connections until released."""
        self._checker.close()
        self._engine.dispose()
