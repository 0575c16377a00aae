"""Webhook intake before background work: workers wait while webhooks are being answered.

Worker threads share the interpreter (and its lock) with the event loop that
answers webhooks, so a job started in the middle of a burst of deliveries slows
every answer still to come.  ``IntakeGate`` counts the requests in flight, from
the moment their body has arrived (a body still on its way costs no CPU, and a slow
sender must not hold the jobs back); a worker about to start a job first waits until
none is in flight and the last one finished ``quiet`` seconds ago.  A burst is thus
acknowledged first and processed right after.  ``max_wait`` bounds the wait, so a
steady stream of webhooks delays the jobs but never starves them.  Nothing is held
back but the start of new jobs: every delivery is stored before its answer either way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

QUIET_SECONDS = 0.005
MAX_WAIT_SECONDS = 2.0


class IntakeGate:
    """Requests in flight hold back the start of background jobs.

    ``enter`` and ``leave`` come from the one event loop thread and take no lock
    (the interpreter keeps each update whole); ``wait_quiet`` may be called from any
    number of worker threads.
    """

    def __init__(self, quiet: float = QUIET_SECONDS, max_wait: float = MAX_WAIT_SECONDS) -> None:
        self.quiet = quiet
        self.max_wait = max_wait
        self._changed = threading.Condition(threading.Lock())
        self._active = 0
        self._last = float("-inf")  # time.monotonic() when the last request finished

    @property
    def active(self) -> int:
        """Requests in flight now."""
        return self._active

    def enter(self) -> None:
        """A request started (called on the event loop thread only)."""
        self._active += 1

    def leave(self) -> None:
        """A request finished, answered or refused (called on the event loop thread only)."""
        self._last = time.monotonic()
        self._active -= 1
        if not self._active:  # wake the waiting workers; they re-check under the lock
            with self._changed:
                self._changed.notify_all()

    @contextmanager
    def request(self) -> Iterator[None]:
        """Hold the gate closed for the duration of a request."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def wait_quiet(self) -> bool:
        """Block until intake is quiet; False if ``max_wait`` ran out first."""
        deadline = time.monotonic() + self.max_wait
        with self._changed:
            while True:
                now = time.monotonic()
                calm = 0.0 if self._active else self._last + self.quiet - now
                if not self._active and calm <= 0:
                    return True
                if now >= deadline:
                    return False
                self._changed.wait(deadline - now if self._active else min(calm, deadline - now))
