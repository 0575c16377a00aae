"""The webhook server: ``POST /webhook``, ``GET /healthz``, ``GET /metrics``, ``GET /reports``.

``POST /webhook`` only checks and stores, so it answers in milliseconds (GitHub
gives up after 10 s and never redelivers on its own); the jobs are enqueued right
after the answers, and a job lost there is recovered from the store:

- 400 when ``X-GitHub-Event``, ``X-GitHub-Delivery`` or ``X-Hub-Signature-256`` is
  missing or malformed (a request carrying only the SHA-1 ``X-Hub-Signature`` gets 401);
- 413 when ``Content-Length`` or the body actually sent exceeds ``MAX_BODY_BYTES``
  (or the most the unverified budget can hold of one body, if smaller);
- 415 when the content type is not JSON;
- 503 (``Retry-After``) when the bytes of the bodies being received before their
  signature is checked would go over ``MAX_UNVERIFIED_BYTES`` (over the part of it
  large bodies may use, for a large one), 429 (``Retry-After``) over what one client
  may hold; 408 when the body arrives slower than ``BODY_MIN_BYTES_PER_SECOND`` after
  ``BODY_GRACE_SECONDS``, or takes more than ``BODY_SECONDS`` (``bot.app.intake``);
- 401 when the signature is not a valid HMAC-SHA256 under any configured secret;
- 400 when the signed body is not a JSON object;
- 202 ``{"status": "queued"}`` once the delivery is committed to the store —
  ``ping`` included; 202 ``{"status": "ignored"}`` when no handler wants
  it or the App itself sent it (stored without its body, not run);
- 200 ``{"status": "duplicate"}`` for a delivery id already stored: not run again.
  A redelivery of a delivery that *failed* is accepted and run again (GitHub's
  "Redeliver" button keeps the id);
- 503 (``Retry-After``) when the store did not commit the delivery within
  ``STORE_TIMEOUT_SECONDS``, failed, or its SQLite file was deleted or replaced: a
  202 is never sent for a delivery not durably stored.  A delivery answered 503
  whose write was already under way may still be stored; its redelivery is then a
  duplicate (200), and it runs once either way.

``GET /reports/{token}`` serves a reviewed PR's interactive report while ``REPORT_BASE_URL``
is set (``bot.app.reports``).

``GET /healthz`` answers 200 only if a write is durable now and the queue takes jobs
(``bot.app.health``: a heartbeat row written within ``STORE_TIMEOUT_SECONDS``, for
SQLite the database file still on disk and room on its disk; Redis answering PING, or
the embedded queue's file still there), else 503 with the reason; either way the
store's engine and the queue's kind, ``{"status": "ok", "store": {"engine":
"postgresql", "ok": true}, "queue": {"kind": "redis", "ok": true}, "workers": false}``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import replace

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.adapters.github.app import app_login, repository_reader
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.adapters.store.deliveries import NewDelivery, Recorded
from bot.adapters.store.group_commit import GroupCommit
from bot.adapters.store.health import StoreFile, StoreUnavailable
from bot.app.health import Health
from bot.app.intake import (
    Budget,
    Intake,
    Limits,
    Pace,
    Rejected,
    check_headers,
    parse_delivery,
    peer_of,
    read_body,
)
from bot.app.metrics import CONTENT_TYPE
from bot.app.reports import Visibility, reports_router
from bot.app.runtime import Runtime, build
from bot.core.routing import skip_reason
from bot.core.signature import verify

log = logging.getLogger(__name__)


class _App(FastAPI):
    """FastAPI, but ``POST /webhook`` goes straight to its endpoint, skipping the middleware."""

    webhook: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.webhook is not None
            and scope["type"] == "http"
            and scope["path"] == "/webhook"
            and scope["method"] == "POST"
        ):
            await self.webhook(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(
    settings: Settings, runtime: Runtime | None = None, *, start_workers: bool = True
) -> FastAPI:
    """The app; its lifespan starts (and stops) the in-process workers.

    ``POST /webhook`` is a plain Starlette endpoint called straight from the app (no
    FastAPI middleware, dependency or validation machinery on the hot path).
    Concurrent deliveries are stored together by one group commit
    (``bot.adapters.store.group_commit``) and each is answered once its batch is committed;
    the jobs are enqueued after that, off the answer path.  While webhooks whose body has
    arrived are being answered, the workers of this process start no new job (``rt.gate``).
    """
    rt = runtime if runtime is not None else build(settings)
    owned = runtime is None
    secrets = settings.webhook_secrets
    limits = Limits.of(settings)
    cap = min(settings.max_body_bytes, limits.largest)
    budget = Budget(limits, rt.metrics.unverified_bytes.set)
    pace = Pace.of(settings)
    timeout = settings.store_timeout_seconds
    retry_after = {"Retry-After": str(max(1, math.ceil(timeout)))}

    def enqueue(stored: list[tuple[NewDelivery, Recorded]]) -> None:
        ids = [new.id for new, got in stored if got.accepted and got.status == "queued"]
        try:
            rt.queue.enqueue_many(ids)
        except Exception:  # stored: the supervisor's sweep will enqueue them later
            log.exception("enqueue failed; the deliveries stay stored", extra={"ids": ids[:50]})

    intake_db = deliveries.intake_sessions(rt.sessions, busy_timeout=timeout)
    store_file = StoreFile.of(rt.engine)

    def store(batch: list[NewDelivery]) -> list[Recorded]:
        """Store a batch; raise unless the rows went into the database file still on disk."""
        if store_file is not None:
            store_file.check()
        recorded = deliveries.add_many(intake_db, batch, wait=timeout)
        if store_file is not None:
            store_file.check()
        return recorded

    writer = ThreadPoolExecutor(1, "intake-store")  # the database writes overlap the parsing
    committer: GroupCommit[NewDelivery, Recorded] = GroupCommit(
        store, after=enqueue, executor=writer
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if start_workers:
            await run_in_threadpool(rt.start_workers)
        yield
        committer.flush_after()
        writer.shutdown(wait=True)
        await run_in_threadpool(rt.close if owned else rt.stop_workers)
        if intake_db is not rt.sessions:
            intake_db.kw["bind"].dispose()

    app = _App(
        title="threshold-bot", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.runtime = rt

    def triage(intake: Intake) -> NewDelivery:
        reason = skip_reason(
            rt.router,
            intake.delivery.event,
            intake.payload,
            app_login(settings).known(),  # never waits for GitHub
            settings.app_id,
        )
        if reason is None:
            return intake.delivery
        return replace(intake.delivery, status="ignored", outcome=reason, body="")  # never read

    def answer(new: NewDelivery, recorded: Recorded) -> tuple[int, dict[str, str]]:
        if recorded.duplicate and not recorded.accepted:
            rt.metrics.duplicates.inc()
            return 200, {"delivery": new.id, "status": "duplicate"}
        rt.metrics.received.labels(new.event).inc()
        if new.status == "ignored":
            rt.metrics.processed.labels(new.event, "ignored").inc()
            return 202, {"delivery": new.id, "status": "ignored", "reason": new.outcome or ""}
        return 202, {"delivery": new.id, "status": "queued"}

    def refused(exc: Rejected) -> Response:
        rt.metrics.rejected.labels(str(exc.status)).inc()
        log.warning("webhook refused: %s", exc.reason, extra={"status": exc.status})
        wait = {} if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
        return JSONResponse({"error": exc.reason}, status_code=exc.status, headers=wait)

    async def accept(event: str, delivery_id: str, body: bytes, started: float) -> Response:
        """Parse, triage and store a verified body; the answer."""
        try:
            new = triage(parse_delivery(event, delivery_id, body))
        except Rejected as exc:
            return refused(exc)
        try:
            async with asyncio.timeout(timeout):  # no task of its own, as wait_for makes
                recorded = await committer.submit(new)
        except Exception as exc:
            known = isinstance(exc, TimeoutError | StoreUnavailable)
            why = f"not stored within {timeout:g} s" if isinstance(exc, TimeoutError) else str(exc)
            log.error(
                "could not store the delivery: %s",
                why.splitlines()[0] if why else type(exc).__name__,
                extra={"delivery": delivery_id},
                exc_info=not known,
            )
            rt.metrics.rejected.labels("503").inc()
            return JSONResponse(
                {"error": "could not store the delivery"}, status_code=503, headers=retry_after
            )
        status, content = answer(new, recorded)
        rt.metrics.ack_seconds.observe(time.perf_counter() - started)
        return JSONResponse(content, status_code=status)

    async def webhook(request: Request) -> Response:
        started = time.perf_counter()
        try:
            event, delivery_id, signature, length = check_headers(request.headers, cap)
            peer = peer_of(request.client.host if request.client is not None else None)
            with budget.hold(peer, length) as held:  # released once the signature is checked
                body = await read_body(request, cap, held, pace)
                if not verify(body, signature, secrets):
                    raise Rejected(401, "signature does not match")
        except Rejected as exc:
            return refused(exc)
        # Workers give way from here, once the body is here: a body still on its way costs
        # no CPU, and a slow sender must not hold the jobs back (bot.app.intake_gate).
        with rt.gate.request():
            return await accept(event, delivery_id, body, started)

    app.webhook = request_response(webhook)

    # room for the largest delivery on a SQLite file's disk
    checks = Health.of(
        rt.engine, intake_db, rt.queue, min_free=settings.max_body_bytes, timeout=timeout
    )

    @app.get("/healthz")
    async def healthz() -> Response:
        ok, body = await checks.report()
        body["workers"] = rt.running
        if ok:
            return JSONResponse(body)
        log.error("health check failed: %s", body["reason"])
        return JSONResponse(body, status_code=503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(rt.metrics.render(), media_type=CONTENT_TYPE)

    if settings.report_base_url:
        visibility = Visibility(
            lambda: repository_reader(settings),
            private_ok=settings.report_private_repos,
            max_age=settings.report_recheck_seconds,
        )
        app.include_router(reports_router(rt.sessions, visibility))
    return app
