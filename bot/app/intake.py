"""Webhook intake: the checks of ``POST /webhook`` before a delivery is stored.

Headers first (event, delivery id, signature header, size, content type), then the body
is read with a size cap, verified by the caller (``bot.core.signature``) and parsed into
the delivery the store keeps.  Each refusal is a ``Rejected`` with its HTTP status;
``bot.app.web`` lists them all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from bot.adapters.store.deliveries import NewDelivery
from bot.core.signature import HEADER as SIGNATURE_HEADER

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
