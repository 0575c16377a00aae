"""Running deliveries: claim, route to the handlers, then mark done, retry or failed.

Delivery is at least once.  ``Worker.run`` claims the delivery in the store (one
atomic update, so duplicates in the queue are harmless), runs its handlers and
records the result.  Transient errors (``bot.core.retry.is_transient``) are retried
with exponential backoff up to ``MAX_ATTEMPTS``; anything else fails the delivery
with its error kept in ``last_error``, and said in the PR's check run
(``bot.features.review.failure``).  Each delivery runs under the wall-clock limit
``JOB_TIMEOUT_SECONDS`` (``bot.core.deadline``) and reads only the remote histories its
installation may (``bot.core.access``).

The store's writes of a delivery (claim, done, retry, failed) are tried again while the
database is unreachable (``bot.adapters.store.db.unavailable``: a restart, an outage) for
up to ``STORE_WAIT_SECONDS``; a handler that fails that way is retried like any transient
error.  Each delivery a thread works on is "in hand" from before its claim until after its
closing write, so the process knows what it really runs.

``Supervisor`` keeps the store and the queue in step: at start it re-enqueues every
open delivery (a process killed with ``kill -9`` loses the jobs it had dequeued), and
takes over at once the running ones of dead processes on this host
(``bot.app.owners``).  While running, every ``WATCH_SECONDS`` it asks the store and the
queue which run of their server answers (``identity``): after either was unreachable,
restarted, or failed one of this process's writes (jobs may be lost: an enqueue refused,
a claim cut off, a queue restarted without its data), it re-enqueues every open delivery
enqueued before it came back and puts back the deliveries this process holds but no thread
runs.  Every ``interval`` it renews the leases of the deliveries in hand and re-enqueues
those whose worker died (holder gone, or lease run out) or that sat queued too long.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.extras import install_hint
from bot.adapters.github.api import GitHubFactory
from bot.adapters.github.app import app_login
from bot.adapters.locks import Locks
from bot.adapters.queue import JobQueue
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.adapters.store.db import identity, unavailable
from bot.adapters.store.deliveries import Delivery
from bot.app import owners
from bot.app.intake_gate import IntakeGate
from bot.app.logs import delivery_logger
from bot.app.metrics import Metrics
from bot.core import deadline
from bot.core.access import guarded
from bot.core.history.sources import HistoryFactory
from bot.core.retry import PermanentError, backoff_delay, is_transient
from bot.core.routing import Router, is_own_event
from bot.features.context import DeliveryInfo, HandlerContext
from bot.features.drift.watch import Finish
from bot.features.review.failure import report_failure

log = logging.getLogger(__name__)

T = TypeVar("T")
STORE_WAIT_SECONDS = 30.0  # how long a delivery's write waits for the store to come back
WATCH_SECONDS = 1.0  # how often the supervisor looks at the store's and the queue's server


def describe(exc: BaseException) -> str:
    """A one-line description of an error for ``last_error`` (and the failed check run): an
    optional library missing on the App's host says which extra to install."""
    hint = install_hint(exc) if isinstance(exc, ImportError) else None
    if hint is not None:
        return f"the App's host {hint}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class Worker:
    """Runs one delivery at a time per thread; shared by every consumer thread."""

    settings: Settings
    sessions: sessionmaker[Session]
    router: Router[HandlerContext]
    queue: JobQueue
    metrics: Metrics
    github: GitHubFactory
    history: HistoryFactory
    locks: Locks  # shared with the other processes (the per-PR lock of the reviews)
    owner: str = ""  # the lease holder's name; default: this process (``bot.app.owners``)
    gate: IntakeGate | None = None  # the webhook intake of this process, served first
    finish: Finish | None = None  # the drift watch's step the handlers get (the dashboard's)
    store_wait: float = STORE_WAIT_SECONDS
    failures: int = 0  # writes to the store or the queue that failed (``Supervisor.watch``)
    _hand: Counter[str] = field(default_factory=Counter)  # by the threads holding each
    _hand_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.owner:
            self.owner = str(owners.current())

    def in_hand(self) -> set[str]:
        """The deliveries this process's threads are working on now."""
        with self._hand_lock:
            return set(self._hand)

    @contextmanager
    def _holding(self, delivery_id: str) -> Iterator[None]:
        """Hold ``delivery_id`` in hand for the block (two threads may: a job enqueued twice,
        the claim lets one run it)."""
        with self._hand_lock:
            self._hand[delivery_id] += 1
        try:
            yield
        finally:
            with self._hand_lock:
                self._hand[delivery_id] -= 1
                if not self._hand[delivery_id]:
                    del self._hand[delivery_id]

    def _write(self, what: str, delivery_id: str, write: Callable[[], T]) -> T:
        """``write()``, tried again while the store is unreachable, for up to
        ``store_wait`` seconds (then its error is raised)."""
        deadline_at = time.monotonic() + self.store_wait
        delay = 0.1
        while True:
            try:
                return write()
            except Exception as exc:
                if not unavailable(exc):
                    raise
                self.failures += 1
                if time.monotonic() + delay > deadline_at:
                    raise
                log.warning(
                    "store unreachable (%s), trying again: %s",
                    what,
                    describe(exc),
                    extra={"delivery": delivery_id},
                )
            time.sleep(delay)
            delay = min(2.0, delay * 2)

    def run(self, delivery_id: str) -> None:
        """Run a delivery if it still needs running.

        Handler errors never escape.  A write to the store that still fails after
        ``store_wait`` seconds is logged; the delivery stays stored, and the supervisor
        enqueues it again once the store is back.  With a ``gate``, webhooks being answered
        in this process go first (see ``bot.app.intake_gate``).
        """
        if self.gate is not None:
            self.gate.wait_quiet()
        failures = self.failures
        with self._holding(delivery_id):
            try:
                self._run(delivery_id)
            except Exception as exc:
                if not unavailable(exc):
                    raise
                self.failures += 1
                log.error(
                    "store unreachable: the delivery stays stored, to be run once it is back: %s",
                    describe(exc),
                    extra={"delivery": delivery_id},
                )
        if self.failures != failures:  # out of hand now: what a failed write left held is
            self.failures += 1  # put back at the supervisor's next look

    def _run(self, delivery_id: str) -> None:
        lease = self.settings.lease_seconds
        delivery = self._write(
            "claim",
            delivery_id,
            lambda: deliveries.claim(self.sessions, delivery_id, self.owner, lease),
        )
        if delivery is None:
            log.debug("delivery already taken or finished", extra={"delivery": delivery_id})
            return
        started = time.monotonic()
        try:
            with deadline.within(self.settings.job_timeout_seconds):
                outcome = self._handle(delivery)
        except Exception as exc:
            self._failed(delivery, exc)
        else:
            self._write(
                "done", delivery.id, lambda: deliveries.finish(self.sessions, delivery.id, outcome)
            )
            self.metrics.processed.labels(delivery.event, "done").inc()
            self.metrics.latency_seconds.labels(delivery.event).observe(_age(delivery))
            log.info(
                "delivery done: %s",
                outcome,
                extra={"delivery": delivery.id, "event": delivery.event},
            )
        finally:
            self.metrics.run_seconds.labels(delivery.event).observe(time.monotonic() - started)

    def _handle(self, delivery: Delivery) -> str:
        if delivery.attempts > self.settings.max_attempts:
            raise PermanentError(f"gave up after {delivery.attempts - 1} attempts")
        payload: Any = json.loads(delivery.body)
        if not isinstance(payload, dict):
            raise PermanentError("payload is not a JSON object")
        if is_own_event(payload, app_login(self.settings).get(), self.settings.app_id):
            return "ignored: sent by the app itself"
        ctx = self._context(delivery, payload)
        ran = self.router.dispatch(ctx.delivery.event, ctx.delivery.action, ctx, payload)
        return f"{ran} handler(s) ran" if ran else "ignored: no handler"

    def _context(self, delivery: Delivery, payload: dict[str, Any]) -> HandlerContext:
        """The handlers' context: remote history limited to what the installation may read."""
        repository = payload.get("repository")
        owner = repository.get("owner") if isinstance(repository, dict) else None
        owner = owner.get("login") if isinstance(owner, dict) else None
        history = guarded(
            self.history,
            self.settings.source_policy(),
            installation_id=delivery.installation_id,
            owner=owner if isinstance(owner, str) else None,
        )
        return HandlerContext(
            settings=self.settings,
            sessions=self.sessions,
            delivery=DeliveryInfo(
                id=delivery.id,
                event=delivery.event,
                action=delivery.action,
                installation_id=delivery.installation_id,
                attempt=delivery.attempts,
            ),
            github=self.github,
            history=history,
            locks=self.locks,
            log=delivery_logger("bot.features", delivery.id, delivery.event),
            finish=self.finish,
        )

    def _failed(self, delivery: Delivery, exc: Exception) -> None:
        error = describe(exc)
        extra = {"delivery": delivery.id, "event": delivery.event, "attempt": delivery.attempts}
        transient = is_transient(exc) or unavailable(exc)  # the store going away: transient
        if transient and delivery.attempts < self.settings.max_attempts:
            delay = backoff_delay(
                delivery.attempts, self.settings.retry_base_seconds, self.settings.retry_max_seconds
            )
            at = datetime.now(UTC) + timedelta(seconds=delay)
            self._write(
                "retry",
                delivery.id,
                lambda: deliveries.schedule_retry(self.sessions, delivery.id, error, at),
            )
            self.metrics.retried.labels(delivery.event).inc()
            log.warning("transient error, retrying in %.1fs: %s", delay, error, extra=extra)
            try:
                self.queue.enqueue(delivery.id, delay=delay)
            except Exception as lost:  # stored as due: enqueued again once the queue is back
                self.failures += 1
                log.error("could not enqueue the retry: %s", describe(lost), extra=extra)
            return
        self._report(delivery, error)  # the PR says so before the delivery counts as failed
        self._write(
            "failed", delivery.id, lambda: deliveries.fail(self.sessions, delivery.id, error)
        )
        self.metrics.failed.labels(delivery.event).inc()
        log.error(
            "delivery failed: %s", error, extra=extra, exc_info=not isinstance(exc, PermanentError)
        )

    def _report(self, delivery: Delivery, error: str) -> None:
        """Say in the PR that the delivery failed (``bot.features.review.failure``)."""
        extra = {"delivery": delivery.id, "event": delivery.event}
        try:
            payload = json.loads(delivery.body)
            if not isinstance(payload, dict) or delivery.installation_id is None:
                return
            posted = report_failure(self._context(delivery, payload), payload, error)
        except Exception as exc:  # the failure is already recorded; this is best effort
            log.warning("could not report the failure in the PR: %s", describe(exc), extra=extra)
            return
        if posted:
            log.info("failure reported in the PR's check run", extra=extra)


def _age(delivery: Delivery) -> float:
    return max(0.0, (datetime.now(UTC) - delivery.received_at).total_seconds())


class Supervisor:
    """Recovers unfinished deliveries at start, after an outage or a restart of the store or
    the queue, and watches leases while running."""

    def __init__(
        self, worker: Worker, interval: float | None = None, watch: float = WATCH_SECONDS
    ) -> None:
        self.worker = worker
        lease = worker.settings.lease_seconds
        self.interval = interval if interval is not None else max(0.2, lease / 3)
        self.watch_every = min(watch, self.interval)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._servers: tuple[str | None, str | None] | None = None  # (store, queue) identity
        self._failures = self._failures_now()
        self._down = False  # the store or the queue did not answer the last look

    def _failures_now(self) -> int:
        return self.worker.failures + self.worker.queue.failures

    def recover(self, stuck_after: float | None = None, before: datetime | None = None) -> int:
        """Re-enqueue open deliveries no live worker holds; return how many.

        Running deliveries whose holder is a dead process on this host are taken over
        now; those of other hosts once their lease has run out.  ``stuck_after`` and
        ``before``: as for ``deliveries.recoverable``.
        """
        sessions = self.worker.sessions
        gone = sorted(h for h in deliveries.holders(sessions) if owners.is_gone(h))
        if gone:
            log.warning("taking over the deliveries of dead workers", extra={"holders": gone})
        found = deliveries.recoverable(sessions, stuck_after, gone, before)
        now = datetime.now(UTC)
        for delivery in found:
            due = delivery.next_attempt_at
            delay = (due - now).total_seconds() if delivery.status == "retry" and due else 0.0
            self.worker.queue.enqueue(delivery.id, delay=max(0.0, delay))
        if found:
            ids = [f"{d.id}:{d.status}" for d in found[:50]]
            log.info("re-enqueued %d unfinished deliveries", len(found), extra={"ids": ids})
        return len(found)

    def release_orphans(self) -> int:
        """Put back and enqueue the deliveries this process holds but no thread of it runs
        (``deliveries.release_orphans``); return how many."""
        worker = self.worker
        orphans = deliveries.release_orphans(worker.sessions, worker.owner, worker.in_hand)
        for delivery_id in orphans:
            worker.queue.enqueue(delivery_id)
        if orphans:
            log.warning(
                "re-enqueued %d deliveries left held by a failed write",
                len(orphans),
                extra={"ids": orphans[:50]},
            )
        return len(orphans)

    def watch(self) -> int:
        """Look at the store's and the queue's server once; after an outage, a restart or a
        failed write of this process, re-enqueue what may have lost its job (every open
        delivery enqueued before now, and this process's orphans); return how many."""
        failures = self._failures_now()
        try:
            servers = (identity(self.worker.sessions.kw["bind"]), self.worker.queue.identity())
        except Exception as exc:
            if not self._down:
                log.warning("the store or the queue is unreachable: %s", describe(exc))
            self._down = True
            return 0
        restarted = self._servers is not None and servers != self._servers
        self._servers = servers
        if not (self._down or restarted or failures != self._failures):
            return 0
        count = self.recover(before=datetime.now(UTC)) + self.release_orphans()
        log.warning(
            "after an outage, a restart or a failed write: re-enqueued %d deliveries",
            count,
            extra={"restarted": restarted},
        )
        self._down = False
        self._failures = failures
        return count

    def start(self) -> None:
        """Recover now, then watch, renew leases and sweep for orphans in a background thread."""
        self.watch()  # which servers answer now: a restart from here on is seen
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        lease = self.worker.settings.lease_seconds
        sweep_at = time.monotonic() + self.interval
        while not self._stop.wait(self.watch_every):
            try:
                self.watch()
            except Exception:
                self._down = True  # recovering failed half-way: again at the next look
                log.exception("supervisor recovery failed")
            if time.monotonic() < sweep_at:
                continue
            sweep_at = time.monotonic() + self.interval
            worker = self.worker
            try:
                deliveries.renew_leases(worker.sessions, worker.owner, lease, worker.in_hand())
                self.release_orphans()
                self.recover(stuck_after=max(lease * 2, 60.0))
            except Exception:
                log.exception("supervisor sweep failed")
