"""Webhook intake: the checks of ``POST /webhook`` before a delivery is stored.

Headers first (event, delivery id, signature header, size, content type), then the body
is read with a size cap, verified by the caller (``bot.core.signature``) and parsed into
the delivery the store keeps.  Each refusal is a ``Rejected`` with its HTTP status;
``bot.app.web`` lists them all.

Bodies are held in memory until their signature is checked, so anyone can make the
server hold them: a ``Budget`` caps the bytes all requests hold before that, and a
request that would go over it is refused (503) before its body is read; a body must
also arrive within ``BODY_SECONDS``, so slow senders cannot pin the budget.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request

from bot.adapters.store.deliveries import NewDelivery
from bot.core.signature import HEADER as SIGNATURE_HEADER

_EVENT = re.compile(r"^[a-z_]{1,64}$")
_DELIVERY = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json$")
BODY_SECONDS = 10.0  # a body must arrive within this (GitHub itself gives up after 10 s)


class Rejected(Exception):
    """A webhook request refused with ``status``; ``reason`` goes back in the body, and
    ``retry_after`` (seconds), if any, in a ``Retry-After`` header."""

    def __init__(self, status: int, reason: str, retry_after: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


class Budget:
    """The bytes of unverified bodies all requests may hold at once: ``limit``.

    A request reserves its declared ``Content-Length`` up front (a chunked body, what
    has arrived so far) and gives it back when its ``hold`` ends; a reservation that
    would take the total over ``limit`` is ``Rejected(503)``.  ``observe`` gets the
    total after each change.  Used from the event loop's thread only.
    """

    def __init__(self, limit: int, observe: Callable[[int], object] = lambda _: None) -> None:
        self.limit = limit
        self.held = 0
        self._observe = observe

    @contextmanager
    def hold(self, size: int) -> Iterator[Reservation]:
        """Reserve ``size`` bytes (``Rejected(503)`` if they do not fit) until the block ends."""
        reservation = Reservation(self)
        try:
            reservation.grow(size)
            yield reservation
        finally:
            self.adjust(-reservation.size)

    def adjust(self, delta: int) -> None:
        """Add ``delta`` (negative: give back) to the bytes held; no check."""
        if delta:
            self.held += delta
            self._observe(self.held)


class Reservation:
    """The bytes one request holds in a ``Budget``."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.size = 0

    def grow(self, size: int) -> None:
        """Hold at least ``size`` bytes in all; ``Rejected(503)`` if the budget is spent."""
        extra = size - self.size
        if extra <= 0:
            return
        if self.budget.held + extra > self.budget.limit:
            raise Rejected(
                503, "too many webhook bodies in flight; retry later", round(BODY_SECONDS)
            )
        self.size = size
        self.budget.adjust(extra)


@dataclass(frozen=True)
class Intake:
    """A verified, parsed delivery ready to be stored."""

    delivery: NewDelivery
    payload: dict[str, Any]


def check_headers(headers: Any, max_body: int) -> tuple[str, str, str, int]:
    """Event, delivery id, signature and declared body size (0: unknown) from the
    headers, or ``Rejected``."""
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
    return event, delivery, signature, int(length or 0)


async def read_body(request: Request, max_body: int, held: Reservation) -> bytes:
    """The raw body, refusing as soon as more than ``max_body`` bytes arrive (413), more
    than ``held`` can cover and the budget can add (503), or after ``BODY_SECONDS`` (408).

    The chunks are joined once all have arrived; only then is the body in memory twice,
    and only one body at a time (the event loop runs nothing else until it returns).
    """
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body:
                    raise Rejected(413, f"body larger than {max_body} bytes")
                held.grow(size)
                chunks.append(chunk)
    except TimeoutError:
        raise Rejected(408, f"body not received within {BODY_SECONDS:g} s") from None
    except ClientDisconnect:
        raise Rejected(400, "the client went away before sending the whole body") from None
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
