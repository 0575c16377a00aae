"""``GET /healthz``: whether the store keeps a write and the queue takes jobs, now.

Two probes run side by side, each in a thread, and the answer comes within
``STORE_TIMEOUT_SECONDS`` whatever they do:

- the store's: a heartbeat row written and committed (``bot.adapters.store.health``);
  for a SQLite file also the file still on disk and room on its disk;
- the queue's: Redis answers ``PING``; the embedded queue's file is still the one
  opened and can be read.

A probe still running from an earlier request (a database that hangs) is waited for
again, not started anew, so a hung service holds one thread per probe, not one per
request.  The answer names the store's engine and the queue's kind, never a URL: a
failure of PostgreSQL or Redis is reported by its exception's type only (their
messages name hosts and users), the driver's message going to the log; a local
SQLite file's message is reported as it is.

``python -m bot.app.health`` runs the same probes once and exits 0 or 1: the health
check of a ``worker`` container (deploy/compose.yaml), which serves no HTTP.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.queue import JobQueue, make_huey
from bot.adapters.settings import SettingsError, load_settings
from bot.adapters.store import health
from bot.adapters.store.db import make_engine
from bot.adapters.store.health import StoreFile, StoreUnavailable

log = logging.getLogger(__name__)

Body = dict[str, object]


@dataclass
class Probe:
    """One component's check, run in a thread, one run at a time."""

    name: str  # "store" or "queue": the key of its part of the answer
    label: dict[str, str]  # what it is, e.g. {"engine": "postgresql"}
    check: Callable[[], None]  # raises unless the component works now
    doing: str  # what the check does, for reasons: "take a write", "answer PING"
    local: bool  # a file on this host: its errors' messages may be shown as they are
    _running: asyncio.Future[None] | None = field(default=None, repr=False)

    async def run(self, timeout: float) -> Body:
        """``label`` with ``ok``, and the ``reason`` when not ok; within ``timeout`` s."""
        if self._running is None or self._running.done():
            running = asyncio.get_running_loop().run_in_executor(None, self.check)
            running.add_done_callback(_retrieve)  # a late failure is not logged as lost
            self._running = running
        try:
            await asyncio.wait_for(asyncio.shield(self._running), timeout)
        except TimeoutError:
            reason = f"did not {self.doing} within {timeout:g} s"
        except StoreUnavailable as exc:  # our own words: a path, never a URL
            reason = str(exc)
        except Exception as exc:
            message = (str(exc).strip().splitlines() or [""])[0][:300]
            log.error("%s health check failed: %s", self.name, message or type(exc).__name__)
            shown = message if self.local and message else type(exc).__name__
            reason = f"could not {self.doing}: {shown}"
        else:
            return {**self.label, "ok": True}
        return {**self.label, "ok": False, "reason": reason}


def _retrieve(done: asyncio.Future[None]) -> None:
    if not done.cancelled():
        done.exception()


@dataclass
class Health:
    """The probes of one server process and how long an answer may take."""

    probes: tuple[Probe, ...]
    timeout: float

    @classmethod
    def of(
        cls,
        engine: Engine,
        sessions: sessionmaker[Session],
        queue: JobQueue,
        *,
        min_free: int,
        timeout: float,
    ) -> Health:
        """Probes of the store behind ``engine`` (written through ``sessions``; a SQLite
        file needs ``min_free`` bytes free on its disk) and of ``queue``."""
        store_file = StoreFile.of(engine)
        sqlite = engine.dialect.name == "sqlite"
        store = Probe(
            "store",
            {"engine": engine.dialect.name},
            lambda: health.check(sessions, store_file, min_free),
            "take a write",
            local=sqlite,
        )
        path = queue.file
        queue_file = None if path is None else StoreFile.at(path, "queue file")

        def check_queue() -> None:
            if queue_file is not None:
                queue_file.check()
            queue.ping()

        doing = "answer PING" if queue.kind == "redis" else "read the queue"
        jobs = Probe("queue", {"kind": queue.kind}, check_queue, doing, local=path is not None)
        return cls((store, jobs), timeout)

    async def report(self) -> tuple[bool, Body]:
        """Whether every probe passed, and the answer: ``status`` (``ok`` / ``error``),
        ``reason`` when not ok (each failing part, ``store: …; queue: …``), and each
        probe's part (``store``, ``queue``)."""
        parts = dict(
            zip(
                (p.name for p in self.probes),
                await asyncio.gather(*(p.run(self.timeout) for p in self.probes)),
                strict=True,
            )
        )
        failed = [f"{name}: {part['reason']}" for name, part in parts.items() if not part["ok"]]
        body: Body = {"status": "ok"} if not failed else {"status": "error"}
        if failed:
            body["reason"] = "; ".join(failed)
        return not failed, {**body, **parts}


def main() -> None:
    """``python -m bot.app.health``: the probes of ``GET /healthz`` once, with this process's
    settings, for a process that serves no HTTP (a ``worker`` container's health check).
    Prints the answer as JSON; exit status 0 when it is ok, 1 otherwise."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(json.dumps({"status": "error", "reason": str(exc)}))
        raise SystemExit(1) from None
    engine = make_engine(settings.database_url)
    try:
        checks = Health.of(
            engine,
            sessionmaker(engine),
            JobQueue(make_huey(settings)),
            min_free=settings.max_body_bytes,
            timeout=settings.store_timeout_seconds,
        )
        ok, body = asyncio.run(checks.report())
    except OSError as exc:  # the SQLite file of the store or the queue is not there
        ok, body = False, {"status": "error", "reason": f"{exc.strerror}: {exc.filename}"}
    finally:
        engine.dispose()
    print(json.dumps(body))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
