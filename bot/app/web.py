"""The webhook server: ``POST /webhook``, ``GET /healthz``, ``GET /metrics``.

``POST /webhook`` only checks and stores, so it answers in milliseconds (GitHub
gives up after 10 s and never redelivers on its own); the jobs are enqueued right
after the answers, and a job lost there is recovered from the store:

- 400 when ``X-GitHub-Event``, ``X-GitHub-Delivery`` or ``X-Hub-Signature-256`` is
  missing or malformed (a request carrying only the SHA-1 ``X-Hub-Signature`` gets 401);
- 413 when ``Content-Length`` or the body actually sent exceeds ``MAX_BODY_BYTES``;
- 415 when the content type is not JSON;
- 401 when the signature is not a valid HMAC-SHA256 under any configured secret;
- 400 when the signed body is not a JSON object;
- 202 ``{"status": "queued"}`` once the delivery is committed to the store —
  ``ping`` included; 202 ``{"status": "ignored"}`` when no handler wants
  it or the App itself sent it (stored, not run);
- 200 ``{"status": "duplicate"}`` for a delivery id already stored: not run again.
  A redelivery of a delivery that *failed* is accepted and run again (GitHub's
  "Redeliver" button keeps the id).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.adapters.store.deliveries import NewDelivery, Recorded
from bot.adapters.store.group_commit import GroupCommit
from bot.app.metrics import CONTENT_TYPE
from bot.app.runtime import Runtime, build
from bot.core.routing import skip_reason
from bot.core.signature import HEADER as SIGNATURE_HEADER
from bot.core.signature import verify

log = logging.getLogger(__name__)

_EVENT = re.compile(r"^[a-z_]{1,64}$")
_DELIVERY = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json$")


class Rejected(Exception):
    """A webhook request refused with ``status``; ``reason`` goes back in the body."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Intake:
    """A verified, parsed delivery ready to be stored."""

    delivery: NewDelivery
    payload: dict[str, Any]


def check_headers(headers: Any, max_body: int) -> tuple[str, str, str]:
    """Event, delivery id and signature from the headers, or ``Rejected``."""
    event = headers.get("x-github-event", "")
    delivery = headers.get("x-github-delivery", "")
    signature = headers.get(SIGNATURE_HEADER.lower())
    if not _EVENT.match(event):
        raise Rejected(400, "missing or invalid X-GitHub-Event header")
    if not _DELIVERY.match(delivery):
        raise Rejected(400, "missing or invalid X-GitHub-Delivery header")
    if signature is None:
        if headers.get("x-hub-signature") is not None:
            raise Rejected(401, "only X-Hub-Signature-256 (HMAC-SHA256) is accepted")
        raise Rejected(400, "missing X-Hub-Signature-256 header")
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise Rejected(400, "invalid Content-Length header")
        if int(length) > max_body:
            raise Rejected(413, f"body larger than {max_body} bytes")
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if not _JSON_TYPE.match(media):
        raise Rejected(415, "content type must be application/json")
    return event, delivery, signature


async def read_body(request: Request, max_body: int) -> bytes:
    """The raw body, refusing (413) as soon as more than ``max_body`` bytes arrive."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise Rejected(413, f"body larger than {max_body} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_delivery(event: str, delivery_id: str, body: bytes) -> Intake:
    """The stored form of a verified delivery; ``Rejected(400)`` unless a JSON object."""
    try:
        text_body = body.decode("utf-8")
        payload = json.loads(text_body)
    except (UnicodeDecodeError, ValueError):
        raise Rejected(400, "body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise Rejected(400, "body is not a JSON object")
    action = payload.get("action")
    installation = payload.get("installation")
    inst_id = installation.get("id") if isinstance(installation, dict) else None
    new = NewDelivery(
        id=delivery_id,
        event=event,
        action=action[:64] if isinstance(action, str) else None,
        installation_id=inst_id if isinstance(inst_id, int) else None,
        body=text_body,
    )
    return Intake(new, payload)


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
    the jobs are enqueued after that, off the answer path.  While webhooks are being
    answered, the workers of this process start no new job (``rt.gate``).
    """
    rt = runtime if runtime is not None else build(settings)
    owned = runtime is None
    secrets = settings.webhook_secrets
    cap = settings.max_body_bytes

    def enqueue(stored: list[tuple[NewDelivery, Recorded]]) -> None:
        ids = [new.id for new, got in stored if got.accepted and got.status == "queued"]
        try:
            rt.queue.enqueue_many(ids)
        except Exception:  # stored: the supervisor's sweep will enqueue them later
            log.exception("enqueue failed; the deliveries stay stored", extra={"ids": ids[:50]})

    intake_db = deliveries.intake_sessions(rt.sessions)
    writer = ThreadPoolExecutor(1, "intake-store")  # the database writes overlap the parsing
    committer: GroupCommit[NewDelivery, Recorded] = GroupCommit(
        lambda batch: deliveries.add_many(intake_db, batch),
        after=enqueue,
        executor=writer,
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
            rt.router, intake.delivery.event, intake.payload, settings.bot_login, settings.app_id
        )
        if reason is None:
            return intake.delivery
        return replace(intake.delivery, status="ignored", outcome=reason)

    def answer(new: NewDelivery, recorded: Recorded) -> tuple[int, dict[str, str]]:
        if recorded.duplicate and not recorded.accepted:
            rt.metrics.duplicates.inc()
            return 200, {"delivery": new.id, "status": "duplicate"}
        rt.metrics.received.labels(new.event).inc()
        if new.status == "ignored":
            rt.metrics.processed.labels(new.event, "ignored").inc()
            return 202, {"delivery": new.id, "status": "ignored", "reason": new.outcome or ""}
        return 202, {"delivery": new.id, "status": "queued"}

    async def receive(request: Request) -> Response:
        started = time.perf_counter()
        try:
            event, delivery_id, signature = check_headers(request.headers, cap)
            body = await read_body(request, cap)
            if not verify(body, signature, secrets):
                raise Rejected(401, "signature does not match")
            new = triage(parse_delivery(event, delivery_id, body))
        except Rejected as exc:
            rt.metrics.rejected.labels(str(exc.status)).inc()
            log.warning("webhook refused: %s", exc.reason, extra={"status": exc.status})
            return JSONResponse({"error": exc.reason}, status_code=exc.status)
        try:
            recorded = await committer.submit(new)
        except Exception:
            log.exception("could not store the delivery", extra={"delivery": delivery_id})
            rt.metrics.rejected.labels("503").inc()
            return JSONResponse({"error": "could not store the delivery"}, status_code=503)
        status, content = answer(new, recorded)
        rt.metrics.ack_seconds.observe(time.perf_counter() - started)
        return JSONResponse(content, status_code=status)

    async def webhook(request: Request) -> Response:
        with rt.gate.request():
            return await receive(request)

    app.webhook = request_response(webhook)

    @app.get("/healthz")
    def healthz() -> Response:
        try:
            with rt.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            return JSONResponse({"status": "error", "database": str(exc)[:200]}, status_code=503)
        return JSONResponse({"status": "ok", "workers": rt.running})

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(rt.metrics.render(), media_type=CONTENT_TYPE)

    return app
