"""The job queue: huey carrying delivery ids from the webhook to the workers.

Embedded by default (``SqliteHuey`` in a file next to the database, consumed by
worker threads inside the ``serve`` process); with ``REDIS_URL`` set, ``RedisHuey``
so workers on several hosts share the jobs.  The queue is only transport: the
deliveries table decides what still has to run (see ``bot.app.worker``), so a job
lost with a killed process, or enqueued twice, does no harm.  A job carries one
delivery id, or several (``enqueue_many``: a burst of webhooks costs one write).
Periodic jobs do not go through the queue: ``bot.app.periodic`` runs them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from huey import Huey, MemoryHuey, RedisHuey, SqliteHuey
from huey.consumer import Consumer
from huey.consumer import Worker as HueyWorker

from bot.adapters.extras import require
from bot.adapters.settings import Settings
from bot.core.retry import backoff_delay

log = logging.getLogger(__name__)

TASK_NAME = "run_delivery"
# after a failed read of the queue (Redis down), a consumer thread waits this long before
# the next, doubling from the first to the cap: huey's own wait is its polling delay (0.25 s)
READ_RETRY_SECONDS = 0.5
READ_RETRY_MAX_SECONDS = 5.0


class _Worker(HueyWorker):  # type: ignore[misc]
    """A huey consumer thread that backs off while the queue cannot be read.

    huey logs the failed read and calls ``sleep`` inside its ``except`` block; there the
    wait doubles with each failure in a row (``READ_RETRY_SECONDS`` to
    ``READ_RETRY_MAX_SECONDS``) instead of huey's polling delay.  A read that does not
    fail starts the count again.
    """

    failures = 0

    def loop(self, now: Any = None) -> None:
        failures = self.failures
        super().loop(now)
        if self.failures == failures:
            self.failures = 0

    def sleep(self) -> None:
        if sys.exc_info()[0] is None:  # the queue was empty: huey's polling delay
            super().sleep()
            return
        self.failures += 1
        delay = backoff_delay(self.failures, READ_RETRY_SECONDS, READ_RETRY_MAX_SECONDS)
        self.stop_flag.wait(delay)


class _EmbeddedConsumer(Consumer):  # type: ignore[misc]
    """A huey consumer that leaves signal handling to the host process (uvicorn) and
    backs off while its queue cannot be read (``_Worker``)."""

    worker_class = _Worker

    def _set_signal_handlers(self) -> None:
        return None


def make_huey(settings: Settings, memory: bool = False) -> Huey:
    """The huey instance the settings ask for (Redis, or the embedded SQLite file)."""
    if memory:
        return MemoryHuey("threshold-bot", results=False)
    if settings.redis_url:
        require("redis")  # huey reads Redis only if the client is there (the redis extra)
        return RedisHuey("threshold-bot", results=False, url=settings.redis_url)
    path = settings.embedded_queue_path()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # No fsync: the deliveries table is what survives a crash; the queue is rebuilt from it.
    return SqliteHuey("threshold-bot", results=False, filename=str(path), fsync=False)


class JobQueue:
    """Enqueue delivery ids and run them on in-process consumer threads.

    ``failures`` counts the enqueues that failed (the queue unreachable): the jobs they
    carried are lost, their deliveries stay stored (``bot.app.worker.Supervisor``).
    """

    def __init__(self, huey: Huey) -> None:
        self.huey = huey
        self.failures = 0
        self._runner: Callable[[str], None] | None = None
        self._consumer: _EmbeddedConsumer | None = None
        self._task = huey.task(name=TASK_NAME)(self._run)

    def _run(self, delivery_ids: str | list[str]) -> None:
        if self._runner is None:
            raise RuntimeError("no runner bound to the job queue")
        ids = [delivery_ids] if isinstance(delivery_ids, str) else delivery_ids
        if not ids:
            return
        if len(ids) > 1:  # the rest go back for the next free worker thread
            try:
                self._put(ids[1:])
            except Exception:  # stored: the supervisor enqueues them again
                log.exception("re-enqueue failed", extra={"ids": ids[1:50]})
        self._runner(ids[0])

    def bind(self, runner: Callable[[str], None]) -> None:
        """Set the function that runs one delivery id (``Worker.run``)."""
        self._runner = runner

    def _put(self, ids: str | list[str], delay: float = 0.0) -> None:
        try:
            if delay > 0:
                self._task.schedule((ids,), delay=delay)
            else:
                self._task(ids)
        except Exception:
            self.failures += 1
            raise

    def enqueue(self, delivery_id: str, delay: float = 0.0) -> None:
        """Queue a delivery id to run now, or after ``delay`` seconds."""
        self._put(delivery_id, delay)

    def enqueue_many(self, delivery_ids: list[str]) -> None:
        """Queue several delivery ids as one job (one write to the queue).

        The worker thread that takes it puts the rest back as one job and runs the
        first, so the next free thread picks up the second, and so on: the ids still
        run one at a time each, spread over every worker thread.
        """
        if len(delivery_ids) == 1:
            self._put(delivery_ids[0])
        elif delivery_ids:
            self._put(list(delivery_ids))

    def pending(self) -> int:
        """Jobs waiting in the queue (not counting scheduled retries)."""
        return int(self.huey.pending_count())

    # ----- health (``GET /healthz``, ``bot.app.health``) --------------------------------
    @property
    def kind(self) -> str:
        """What carries the jobs: ``redis``, ``embedded`` (a SQLite file) or ``memory``."""
        if isinstance(self.huey, RedisHuey):
            return "redis"
        return "embedded" if isinstance(self.huey, SqliteHuey) else "memory"

    @property
    def file(self) -> Path | None:
        """The embedded queue's SQLite file; None for Redis or memory."""
        return Path(self.huey.storage.filename) if isinstance(self.huey, SqliteHuey) else None

    def identity(self) -> str | None:
        """Which run of the Redis server holds the jobs (its ``run_id``, new at each start:
        a restart may have lost jobs); None for the embedded queue.  Raises when Redis does
        not answer."""
        if not isinstance(self.huey, RedisHuey):
            return None
        return str(self.huey.storage.conn.info("server")["run_id"])

    def ping(self) -> None:
        """Raise unless the queue's storage answers now: Redis a PING, the file a read."""
        if isinstance(self.huey, RedisHuey):
            self.huey.storage.conn.ping()
        elif isinstance(self.huey, SqliteHuey):
            self.huey.storage.queue_size()

    def start(self, workers: int) -> None:
        """Start ``workers`` consumer threads in this process (and huey's scheduler thread,
        which runs the delayed retries)."""
        if self._consumer is not None:
            return
        consumer = _EmbeddedConsumer(
            self.huey,
            workers=workers,
            worker_type="thread",
            periodic=False,  # periodic jobs: bot.app.periodic
            initial_delay=0.02,
            backoff=1.5,
            max_delay=0.25,
            check_worker_health=False,
        )
        consumer.start()
        self._consumer = consumer
        log.info("started %d worker threads", workers)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the consumer threads, letting running jobs finish for up to ``timeout``."""
        if self._consumer is None:
            return
        self._consumer.shutdown_timeout = timeout
        self._consumer.stop(graceful=True)
        self._consumer = None
