"""Periodic jobs (the re-check, the drift watch, the purge): each runs once per period
across every process of the App.

Every process runs a ``Scheduler`` thread that looks at its jobs every second (or more
often for periods under four seconds).  Periods are aligned on the epoch in UTC
(``period_start``): the first look in a new period claims it in the store
(``bot.adapters.store.periodic.claim_period``, one winner per job and period across all
processes), and the winner runs the job under the lock ``periodic:NAME``
(``bot.adapters.locks``) so two runs of a job never overlap: when the previous run is still
going, the winner waits for it until its period ends, and the period is skipped if it is
still going then.  Each run has its own thread, so a long drift round does not hold back
the purge; its errors are logged, the scheduler goes on.  While the store cannot be reached
the looks back off (doubling up to ``FAILED_MAX_SECONDS``).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.locks import Locks
from bot.adapters.store import periodic
from bot.core.retry import backoff_delay

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # how often the scheduler looks at its jobs (at most)
FAILED_MAX_SECONDS = 15.0  # the longest wait after looks that failed in a row (store down)


@dataclass(frozen=True)
class Job:
    """A periodic job: its name (``periodic_runs.name``), period in seconds, and work."""

    name: str
    period: float
    run: Callable[[], object]


def period_start(now: datetime, period: float) -> datetime:
    """The start of the period of ``period`` seconds that ``now`` falls in (aware UTC)."""
    start = math.floor(now.timestamp() / period) * period
    return datetime.fromtimestamp(start, UTC)


class Scheduler:
    """Runs registered jobs once per period across the processes sharing ``sessions``."""

    def __init__(self, sessions: sessionmaker[Session], locks: Locks, holder: str) -> None:
        self.sessions = sessions
        self.locks = locks
        self.holder = holder
        self.jobs: dict[str, Job] = {}
        self._seen: dict[str, datetime] = {}  # per job: the last period this process claimed
        self._running: list[threading.Thread] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, name: str, period: float, run: Callable[[], object]) -> None:
        """Register ``run`` to run every ``period`` seconds under ``name``."""
        self.jobs[name] = Job(name, period, run)

    def start(self) -> None:
        """Start the scheduler thread (a first look at once)."""
        if self._thread is not None:
            return
        self._stop.clear()
        shortest = min((job.period for job in self.jobs.values()), default=TICK_SECONDS)
        interval = min(TICK_SECONDS, shortest / 4)
        self._thread = threading.Thread(
            target=self._loop, args=(interval,), name="scheduler", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop looking at the jobs; runs in progress get ``timeout`` seconds to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for thread in self._running:
            thread.join(timeout=timeout)
        self._running = [t for t in self._running if t.is_alive()]

    def tick(self, now: datetime | None = None) -> list[str]:
        """Start the jobs whose current period (at ``now``, default: now) this process wins;
        their names."""
        when = now if now is not None else datetime.now(UTC)
        started = []
        self._running = [t for t in self._running if t.is_alive()]
        for job in list(self.jobs.values()):
            start = period_start(when, job.period)
            if self._seen.get(job.name) == start:
                continue
            if not periodic.claim_period(self.sessions, job.name, start, self.holder):
                self._seen[job.name] = start
                continue
            self._seen[job.name] = start
            thread = threading.Thread(
                target=self._run, args=(job, start), name=f"periodic-{job.name}"
            )
            thread.daemon = True
            thread.start()
            self._running.append(thread)
            started.append(job.name)
        return started

    def _run(self, job: Job, start: datetime) -> None:
        extra = {"job": job.name, "period": start.isoformat()}
        ends = start + timedelta(seconds=job.period)
        try:
            wait = (ends - datetime.now(UTC)).total_seconds()
            lease = self.locks.acquire(f"periodic:{job.name}", wait=max(0.0, wait))
            if lease is None:
                log.warning("periodic job skipped: its previous run is still going", extra=extra)
                return
            log.info("periodic job ran", extra=extra)
            with lease:
                job.run()
                if lease.lost:
                    log.warning("periodic job lost its lock while running", extra=extra)
        except Exception:
            log.exception("periodic job failed", extra=extra)
        finally:
            try:
                periodic.finish(self.sessions, job.name, start, self.holder)
            except Exception:
                log.exception("could not record the end of a periodic job", extra=extra)

    def _loop(self, interval: float) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # the store is unreachable: look again, later each time
                failures += 1
                log.exception("periodic scheduler check failed")
            else:
                failures = 0
            cap = max(interval, FAILED_MAX_SECONDS)
            self._stop.wait(backoff_delay(failures, interval, cap) if failures else interval)
