"""The composition root: builds the store, queue, router, metrics and worker from settings.

``bot.app.web`` (the ``serve`` process) and ``bot.cli.serve.worker_command`` both start
from ``build``.  The GitHub client and the history sources come from
``bot.adapters.github.app.client_factory(settings)`` and
``bot.adapters.history.factory.source_factory(settings, sessions)`` (the run cache shares
the store's engine); either can be
passed in instead (tests, the demo).  The locks (``bot.adapters.locks``) are those of the
store: PostgreSQL advisory locks, Redis, or lock rows in SQLite; the periodic jobs run on
``bot.app.periodic.Scheduler`` (the re-check, the drift watch, the redelivery of failed
webhook deliveries, the purge).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubFactory
from bot.adapters.locks import Locks, make_locks
from bot.adapters.queue import JobQueue, make_huey
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries, redeliveries, reports
from bot.adapters.store.db import init_db, make_engine
from bot.app import owners
from bot.app.intake_gate import IntakeGate
from bot.app.metrics import Metrics
from bot.app.periodic import Scheduler
from bot.app.routes import app_router
from bot.app.worker import Supervisor, Worker
from bot.core.history.sources import HistoryFactory
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.dashboard.write import DashboardStep
from bot.features.drift.rounds import drift_job
from bot.features.redelivery import HookDeliveries, redelivery_job
from bot.features.review.recheck import recheck_job

PURGE_SECONDS = 3600.0  # the purge of old deliveries and expired reports: hourly


@dataclass
class Runtime:
    """Every long-lived component of a server or worker process."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    queue: JobQueue
    router: Router[HandlerContext]
    metrics: Metrics
    worker: Worker
    supervisor: Supervisor
    locks: Locks
    scheduler: Scheduler  # the periodic jobs (bot.app.periodic)
    gate: IntakeGate = field(default_factory=IntakeGate)  # webhooks in flight hold workers back
    running: bool = field(default=False)

    def start_workers(self) -> None:
        """Recover unfinished deliveries, start the consumer threads and the periodic jobs."""
        if self.running:
            return
        self.queue.start(self.settings.workers)
        self.supervisor.start()
        self.scheduler.start()
        self.running = True

    def stop_workers(self, timeout: float = 30.0) -> None:
        """Stop the consumer threads and the periodic jobs (running jobs get ``timeout``
        seconds to finish)."""
        if not self.running:
            return
        self.scheduler.stop(timeout)
        self.supervisor.stop()
        self.queue.stop(timeout)
        self.running = False

    def close(self) -> None:
        """Stop everything and release the database."""
        self.stop_workers()
        self.locks.close()
        self.engine.dispose()


def build(
    settings: Settings,
    *,
    github: GitHubFactory | None = None,
    history: HistoryFactory | None = None,
    router: Router[HandlerContext] | None = None,
) -> Runtime:
    """Create every component; nothing runs until ``start_workers``."""
    engine = make_engine(settings.database_url, pool_size=settings.workers + 4)
    sessions: sessionmaker[Session] = init_db(engine)
    queue = JobQueue(make_huey(settings))
    routes = router if router is not None else app_router(settings.handler_modules)
    metrics = Metrics()
    metrics.watch_store(lambda: deliveries.count_by_status(sessions))
    gate = IntakeGate()
    holder = str(owners.current())
    # the step after the drift watch visited a repository: the rounds' and the handlers'
    finish = DashboardStep.of(settings) if settings.drift_watch else None
    locks = make_locks(settings, engine, holder, gone=owners.is_gone)  # dead: taken over
    worker = Worker(
        settings=settings,
        sessions=sessions,
        router=routes,
        queue=queue,
        metrics=metrics,
        github=github or _hook(settings, "bot.adapters.github.app", "client_factory"),
        history=history
        or _hook(settings, "bot.adapters.history.factory", "source_factory", sessions),
        locks=locks,
        owner=holder,
        gate=gate,
        finish=finish,
    )
    queue.bind(worker.run)
    scheduler = Scheduler(sessions, locks, holder)
    period = settings.recheck_seconds  # the re-check (bot.features.review.recheck)
    scheduler.add(
        "recheck", period, recheck_job(settings, sessions, worker.github, worker.history, locks)
    )
    if settings.drift_watch:  # bot.features.drift: failing gates on default branches
        watch = drift_job(settings, sessions, worker.github, worker.history, locks, finish)
        scheduler.add("drift", period, lambda: metrics.record_drift(watch()))
    if settings.redelivery_seconds > 0:  # bot.features.redelivery: failed deliveries
        redeliver = redelivery_job(settings, sessions, _app_hooks(settings))
        scheduler.add(
            "redeliver",
            settings.redelivery_seconds,
            lambda: metrics.record_redelivery(redeliver()),
        )
    scheduler.add("purge", PURGE_SECONDS, _purge_job(settings, sessions))
    return Runtime(
        settings=settings,
        engine=engine,
        sessions=sessions,
        queue=queue,
        router=routes,
        metrics=metrics,
        worker=worker,
        supervisor=Supervisor(worker),
        locks=locks,
        scheduler=scheduler,
        gate=gate,
    )


def _purge_job(settings: Settings, sessions: sessionmaker[Session]) -> Callable[[], None]:
    """The hourly purge: finished deliveries past their retention, expired reports, and
    redelivery requests GitHub can no longer act on."""
    purge_deliveries = deliveries.purge_job(sessions, settings.delivery_retention_days)
    purge_reports = reports.purge_job(sessions)

    def purge() -> None:
        purge_deliveries()
        purge_reports()
        redeliveries.purge(sessions)

    return purge


def _app_hooks(settings: Settings) -> Callable[[], HookDeliveries | None]:
    """The App's webhook deliveries on GitHub, made on first use (PyGithub is imported then)."""
    made: list[HookDeliveries | None] = []

    def hooks() -> HookDeliveries | None:
        if not made:
            from bot.adapters.github.hooks import AppHooks

            made.append(AppHooks.of(settings))
        return made[0]

    return hooks


def _hook(settings: Settings, module: str, name: str, *extra: Any) -> Callable[[Any], Any]:
    """A factory resolved on first use from ``module.name(settings, *extra)``."""
    resolved: list[Callable[[Any], Any]] = []

    def call(arg: Any) -> Any:
        if not resolved:
            try:
                make = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as exc:
                raise RuntimeError(f"{module}.{name} is not available: {exc}") from exc
            resolved.append(make(settings, *extra))
        return resolved[0](arg)

    return call
