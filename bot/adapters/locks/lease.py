"""Leases, the ``Locks`` protocol, and what every implementation shares: polling for a
lock and renewing held leases in the background (see ``bot.adapters.locks``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

log = logging.getLogger(__name__)

DEFAULT_TTL = 30.0  # seconds a Redis or row lease lasts without renewal

Gone = Callable[[str], bool]  # whether the process a holder names is known dead


def holder_part(token: str) -> str:
    """The holder (process) named by a lease token ``HOLDER:RANDOM``."""
    return token.rsplit(":", 1)[0]


class Lease:
    """A held lock; release it once (``release`` or leaving the ``with`` block)."""

    def __init__(self, name: str, release: Callable[[], None], token: str = "") -> None:
        self.name = name
        self.token = token  # what the lock's record holds for this lease (Redis, rows)
        self._release = release
        self._released = False
        self._lost = threading.Event()
        self._guard = threading.Lock()

    @property
    def lost(self) -> bool:
        """Whether the lock was found taken from this lease (or its connection gone)."""
        return self._lost.is_set()

    @property
    def released(self) -> bool:
        """Whether ``release`` has run."""
        return self._released

    def mark_lost(self) -> None:
        """Record that the lock is no longer this lease's (called by the renewer)."""
        if not self._lost.is_set():
            log.warning("lock lost", extra={"lock": self.name})
        self._lost.set()

    def release(self) -> None:
        """Free the lock (idempotent; a lost lease frees nothing another holds)."""
        with self._guard:
            if self._released:
                return
            self._released = True
        self._release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class Locks(Protocol):
    """Named locks shared by every process of the App."""

    def acquire(self, name: str, *, wait: float = 0.0) -> Lease | None:
        """Take lock ``name``, waiting up to ``wait`` seconds for it; None if not had."""

    def close(self) -> None:
        """Stop background renewal and release what this object holds."""


def poll(attempt: Callable[[], Lease | None], wait: float) -> Lease | None:
    """``attempt`` once, then again with a growing pause (10 ms to 250 ms) until it gives a
    lease or ``wait`` seconds have passed."""
    ends = time.monotonic() + max(0.0, wait)
    pause = 0.01
    while True:
        lease = attempt()
        if lease is not None:
            return lease
        left = ends - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, 0.25)


class Renewer:
    """A background thread renewing held leases every ``interval`` seconds.

    ``renew(lease)`` extends one lease and returns whether it still holds the lock; a
    lease that no longer does is marked lost and dropped.  The thread starts with the
    first lease and runs until ``close``.
    """

    def __init__(self, renew: Callable[[Lease], bool], interval: float, name: str) -> None:
        self._renew = renew
        self._interval = interval
        self._name = name
        self._held: set[Lease] = set()
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        """Renew ``lease`` until it is released or lost."""
        with self._guard:
            self._held.add(lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        """Stop renewing ``lease``."""
        with self._guard:
            self._held.discard(lease)

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def renew_all(self) -> None:
        """Renew every held lease once."""
        with self._guard:
            held = list(self._held)
        for lease in held:
            if lease.released:
                self.discard(lease)
                continue
            try:
                kept = self._renew(lease)
            except Exception:  # the service is unreachable: try again next time
                log.warning("lock renewal failed", extra={"lock": lease.name}, exc_info=True)
                continue
            if not kept and not lease.released:
                lease.mark_lost()
                self.discard(lease)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.renew_all()
