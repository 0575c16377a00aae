"""What GitHub answered to a read, kept to ask again conditionally.

GitHub answers a GET whose ``If-None-Match`` holds the ETag its answer would have with an
empty ``304 Not Modified``, which does not count against the rate limit.  ``ETags`` keeps,
per request URL, the ETag of GitHub's last 200 and what the client made of that answer, so a
304 is answered from it.

One ``ETags`` per installation, never shared between installations: what one installation's
token read must never answer another installation's request (GitHub checks the token before
it compares ETags, but nothing here relies on that).  It is shared by that installation's
clients in every thread (under a lock), so a round run in a new thread still gets 304s.

Bounded: at most ``size`` entries (``ETAG_ENTRIES`` by default), the least recently used
dropped first; a dropped entry costs one full read, never a wrong answer.  An entry is an
ETag and a small value (a commit SHA, or one page of 100 repositories' names and flags): a
full ``ETags`` (10,000 heads and 100 pages) holds about 7 MB (``bot.core.lru``).
"""

from __future__ import annotations

from typing import NamedTuple

from bot.core.lru import Lru

# A branch head for each of 10,000 repositories, and the 100 pages that list them.
ETAG_ENTRIES = 10_100


class Kept(NamedTuple):
    """GitHub's ETag of an answer, and what the client made of the answer."""

    etag: str
    value: object


class ETags:
    """One installation's kept answers by key (see the module docstring); thread-safe."""

    def __init__(self, size: int = ETAG_ENTRIES) -> None:
        self._kept: Lru[str, Kept] = Lru(size)

    def get(self, key: str) -> Kept | None:
        """What was kept under ``key`` (now the most recently used), if anything."""
        return self._kept.get(key)

    def put(self, key: str, etag: str, value: object) -> None:
        """Keep ``value`` and its ``etag`` under ``key``, dropping the least recently used
        entry beyond ``size``."""
        self._kept.put(key, Kept(etag, value))
