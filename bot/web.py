"""The webhook server: ``POST /webhook``, ``GET /healthz``, ``GET /metrics``.

``POST /webhook`` only checks, stores and enqueues, so it answers in milliseconds
(GitHub gives up after 10 s and never redelivers on its own):

- 400 when ``X-GitHub-Event``, ``X-GitHub-Delivery`` or ``X-Hub-Signature-256`` is
  missing or malformed (a request carrying only the SHA-1 ``X-Hub-Signature`` gets 401);
- 413 when ``Content-Length`` or the body actually sent exceeds ``MAX_BODY_BYTES``;
- 415 when the content type is not JSON;
- 401 when the signature is not a valid HMAC-SHA256 under any configured secret;
- 400 when the signed body is not a JSON object;
- 202 ``{"status": "queued"}`` once the delivery is stored (before answering) and
  enqueued — ``ping`` included; 202 ``{"status": "ignored"}`` when no handler wants
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
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from bot.metrics import CONTENT_TYPE
from bot.router import skip_reason
from bot.runtime import Runtime, build
from bot.settings import Settings
from bot.signature import HEADER as SIGNATURE_HEADER
from bot.signature import verify
from bot.store import deliveries
from bot.store.deliveries import NewDelivery

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


def create_app(
    settings: Settings, runtime: Runtime | None = None, *, start_workers: bool = True
) -> FastAPI:
    """The FastAPI app; its lifespan starts (and stops) the in-process workers."""
    rt = runtime if runtime is not None else build(settings)
    owned = runtime is None
    secrets = settings.webhook_secrets
    cap = settings.max_body_bytes
    # A local SQLite insert plus an embedded enqueue cost less than a thread hop: run
    # them on the event loop; a networked database or Redis goes to the thread pool.
    inline = rt.engine.dialect.name == "sqlite" and not settings.redis_url

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if start_workers:
            await run_in_threadpool(rt.start_workers)
        yield
        await run_in_threadpool(rt.close if owned else rt.stop_workers)

    app = FastAPI(
        title="threshold-bot", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.runtime = rt

    def accept(intake: Intake) -> tuple[int, dict[str, str]]:
        new = intake.delivery
        reason = skip_reason(
            rt.router, new.event, intake.payload, settings.bot_login, settings.app_id
        )
        if reason is not None:
            new = replace(new, status="ignored", outcome=reason)
        recorded = deliveries.record(rt.sessions, new)
        if recorded.duplicate and not recorded.accepted:
            rt.metrics.duplicates.inc()
            return 200, {"delivery": new.id, "status": "duplicate"}
        rt.metrics.received.labels(new.event).inc()
        if new.status == "ignored":
            rt.metrics.processed.labels(new.event, "ignored").inc()
            return 202, {"delivery": new.id, "status": "ignored", "reason": reason or ""}
        try:
            rt.queue.enqueue(new.id)
        except Exception:  # stored: the supervisor's sweep will enqueue it later
            log.exception("enqueue failed; the delivery stays stored", extra={"delivery": new.id})
        return 202, {"delivery": new.id, "status": "queued"}

    @app.post("/webhook")
    async def webhook(request: Request) -> Response:
        started = time.perf_counter()
        try:
            event, delivery_id, signature = check_headers(request.headers, cap)
            body = await read_body(request, cap)
            if not verify(body, signature, secrets):
                raise Rejected(401, "signature does not match")
            intake = parse_delivery(event, delivery_id, body)
        except Rejected as exc:
            rt.metrics.rejected.labels(str(exc.status)).inc()
            log.warning("webhook refused: %s", exc.reason, extra={"status": exc.status})
            return JSONResponse({"error": exc.reason}, status_code=exc.status)
        try:
            status, answer = accept(intake) if inline else await run_in_threadpool(accept, intake)
        except Exception:
            log.exception("could not store the delivery", extra={"delivery": delivery_id})
            rt.metrics.rejected.labels("503").inc()
            return JSONResponse({"error": "could not store the delivery"}, status_code=503)
        rt.metrics.ack_seconds.observe(time.perf_counter() - started)
        return JSONResponse(answer, status_code=status)

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
