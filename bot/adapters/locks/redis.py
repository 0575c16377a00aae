"""Redis locks: a key per lock holding the lease's token, with a time to live.

Taking a lock is ``SET key token NX PX ttl``; a background thread extends the keys of held
leases every third of the TTL, and release deletes the key — both through Lua scripts that
first check the token, so no one frees or extends a lock another holds.  A holder killed
without releasing loses the lock when its key expires, or at once when ``gone`` tells that
its process is dead (a crashed process on this host); a renewal that finds another token
(or no key) marks the lease lost.
"""

from __future__ import annotations

import uuid

from redis import Redis

from bot.adapters.locks.lease import Gone, Lease, Renewer, holder_part, poll

PREFIX = "threshold-bot:lock:"

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_TAKE_OVER = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


class RedisLocks:
    """``Locks`` on the Redis server at ``url``; leases last ``ttl`` seconds unrenewed."""

    def __init__(self, url: str, holder: str, ttl: float, gone: Gone | None = None) -> None:
        self._redis = Redis.from_url(url)
        self._holder = holder
        self._gone = gone
        self._take_over_script = self._redis.register_script(_TAKE_OVER)
        self._ttl_ms = max(1, round(ttl * 1000))
        self._renew_script = self._redis.register_script(_RENEW)
        self._release_script = self._redis.register_script(_RELEASE)
        self._renewer = Renewer(self._renew, ttl / 3, "redis-locks")

    def acquire(self, name: str, *, wait: float = 0.0) -> Lease | None:
        """Take lock ``name`` (waiting up to ``wait`` seconds); None if another holds it."""
        return poll(lambda: self._try(name), wait)

    def _try(self, name: str) -> Lease | None:
        token = f"{self._holder}:{uuid.uuid4().hex}"
        if not self._redis.set(
            PREFIX + name, token, nx=True, px=self._ttl_ms
        ) and not self._take_over(name, token):
            return None
        lease = Lease(name, lambda: self._release(name, token), token)
        self._renewer.add(lease)
        return lease

    def _take_over(self, name: str, token: str) -> bool:
        if self._gone is None:
            return False
        found = self._redis.get(PREFIX + name)
        old = found.decode("utf-8", "replace") if isinstance(found, bytes) else found
        if old is None or not self._gone(holder_part(old)):
            return False
        args: list[str | int] = [old, token, self._ttl_ms]
        return bool(self._take_over_script(keys=[PREFIX + name], args=args))

    def _renew(self, lease: Lease) -> bool:
        args: list[str | int] = [lease.token, self._ttl_ms]
        return bool(self._renew_script(keys=[PREFIX + lease.name], args=args))

    def _release(self, name: str, token: str) -> None:
        self._release_script(keys=[PREFIX + name], args=[token])

    def close(self) -> None:
        """Stop renewing and close the connections."""
        self._renewer.close()
        self._redis.close()
