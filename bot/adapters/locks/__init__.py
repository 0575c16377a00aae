"""Named locks that hold across processes and hosts: the periodic jobs' leader, one review
per PR at a time.

``Locks.acquire(name, wait=0)`` returns a ``Lease`` (a context manager that releases it),
or None when another holder has the lock and ``wait`` seconds passed without it coming
free.  Three implementations, one per store an operator may run (``make_locks`` picks):

- ``postgres.AdvisoryLocks``: PostgreSQL session advisory locks, each on its own
  connection held for the lease; a killed process frees its locks as its connections drop;
- ``redis.RedisLocks``: a key per lock (``SET NX PX``) with a time to live;
- ``rows.RowLocks``: a row per lock in the store (table ``locks``), with a time to live;
  for SQLite.

Leases with a time to live are renewed by a background thread while held, so a lease
outlives its TTL as long as its process lives; a holder killed without releasing loses
the lock once the TTL runs out.  ``Lease.lost`` turns true when renewal finds the lock
held by another (or its connection gone): the work it guarded is no longer exclusive.
"""

from __future__ import annotations

from sqlalchemy import Engine

from bot.adapters.locks.lease import DEFAULT_TTL, Gone, Lease, Locks
from bot.adapters.locks.postgres import AdvisoryLocks
from bot.adapters.locks.rows import RowLocks
from bot.adapters.settings import Settings

__all__ = ["DEFAULT_TTL", "Gone", "Lease", "Locks", "make_locks"]


def make_locks(
    settings: Settings,
    engine: Engine,
    holder: str,
    ttl: float = DEFAULT_TTL,
    gone: Gone | None = None,
) -> Locks:
    """The locks of the store ``settings`` name: advisory locks on a PostgreSQL database,
    else Redis with ``REDIS_URL``, else lock rows in the store (``engine``'s database).

    ``holder``: this process's name (kept with Redis and row locks, for operators);
    ``gone(holder)``: whether that process is known dead, so its Redis and row locks are
    taken over at once instead of after ``ttl`` (advisory locks die with their connection).
    """
    if engine.dialect.name == "postgresql":
        return AdvisoryLocks(engine)
    if settings.redis_url:
        from bot.adapters.locks.redis import RedisLocks  # the redis extra: only with REDIS_URL

        return RedisLocks(settings.redis_url, holder, ttl, gone)
    return RowLocks(engine, holder, ttl, gone)
