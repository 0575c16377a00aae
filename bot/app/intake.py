"""Webhook intake: the checks of ``POST /webhook`` before a delivery is stored.

Headers first (event, delivery id, signature header, size, content type), then the body
is read with a size cap, verified by the caller (``bot.core.signature``) and parsed into
the delivery the store keeps.  Each refusal is a ``Rejected`` with its HTTP status;
``bot.app.web`` lists them all.

Bodies are held in memory until their signature is checked, so anyone can make the
server hold them.  A ``Budget`` counts the bytes that have arrived (never what a request
declares: declaring 25 MiB and sending one byte holds one byte) and refuses a body whose
next bytes would take it over a limit: all bodies together, a share kept for small
bodies (GitHub's deliveries are almost all under 1 MiB), and what one client may hold.
A body must also keep arriving: at ``Pace.min_rate`` bytes/s on average once
``Pace.grace`` seconds have passed, and whole within ``BODY_SECONDS``, so slow senders
cannot pin the budget or the connections.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.requests import ClientDisconnect, Request

from bot.adapters.settings import Settings
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


@dataclass(frozen=True)
class Limits:
    """The bytes unverified bodies may hold: ``total`` for all of them; bodies larger than
    ``small_body`` (declared or arrived) only ``total - small_reserve``; one client
    ``per_peer``."""

    total: int
    small_reserve: int
    small_body: int
    per_peer: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits the settings set (``MAX_UNVERIFIED_BYTES`` and its shares)."""
        return cls(
            total=settings.max_unverified_bytes,
            small_reserve=settings.unverified_small_reserve_bytes,
            small_body=settings.unverified_small_body_bytes,
            per_peer=settings.unverified_peer_bytes,
        )

    @property
    def largest(self) -> int:
        """The largest body that can ever be held (a larger one is refused with 413)."""
        large = self.total - self.small_reserve
        return min(self.per_peer, max(large, min(self.small_body, self.total)))


def peer_of(host: str | None) -> str:
    """The client a request counts against: its IPv4 address, or the /64 network of an IPv6
    one (what one subscriber is given: any address in it is theirs to use)."""
    if not host or ":" not in host:
        return host or ""
    try:
        address = ipaddress.IPv6Address(host)
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))


@dataclass(frozen=True)
class Pace:
    """How fast a body must arrive: ``min_rate`` bytes/s on average (0: any rate) once
    ``grace`` seconds have passed, and whole within ``BODY_SECONDS``."""

    min_rate: float
    grace: float

    @classmethod
    def of(cls, settings: Settings) -> Pace:
        """``BODY_MIN_BYTES_PER_SECOND`` and ``BODY_GRACE_SECONDS``."""
        return cls(settings.body_min_bytes_per_second, settings.body_grace_seconds)

    def allowed(self, arrived: int) -> float:
        """Seconds from the start a body with ``arrived`` bytes so far may take."""
        if not self.min_rate:
            return BODY_SECONDS
        return min(BODY_SECONDS, max(self.grace, arrived / self.min_rate))


class Budget:
    """The bytes of unverified bodies held at once, in all and per client, within ``limits``.

    A request's ``Reservation`` grows as its body arrives and is given back when its
    ``hold`` ends; growth over a limit is ``Rejected``: 503 over the total (or the part
    of it large bodies may use), 429 over the client's share.  ``observe`` gets the total
    after each change.  Used from the event loop's thread only.
    """

    def __init__(self, limits: Limits, observe: Callable[[int], object] = lambda _: None) -> None:
        self.limits = limits
        self.held = 0
        self.peers: dict[str, int] = {}  # bytes held per client address
        self._observe = observe

    @contextmanager
    def hold(self, peer: str, declared: int) -> Iterator[Reservation]:
        """A reservation of no bytes yet for a body from ``peer`` that declared ``declared``
        bytes (0: unknown), given back when the block ends."""
        reservation = Reservation(self, peer, declared)
        try:
            yield reservation
        finally:
            self._add(peer, -reservation.size)

    def _add(self, peer: str, delta: int) -> None:
        if not delta:
            return
        self.held += delta
        left = self.peers.get(peer, 0) + delta
        if left:
            self.peers[peer] = left
        else:
            self.peers.pop(peer, None)
        self._observe(self.held)


class Reservation:
    """The bytes one request holds in a ``Budget``."""

    def __init__(self, budget: Budget, peer: str, declared: int) -> None:
        self.budget = budget
        self.peer = peer
        self.declared = declared
        self.size = 0

    def grow(self, size: int) -> None:
        """Hold ``size`` bytes in all (what has arrived); ``Rejected`` over a limit."""
        extra = size - self.size
        if extra <= 0:
            return
        budget, limits = self.budget, self.budget.limits
        small = max(self.declared, size) <= limits.small_body
        room = limits.total if small else limits.total - limits.small_reserve
        if budget.held + extra > room:
            raise Rejected(
                503, "too many webhook bodies in flight; retry later", round(BODY_SECONDS)
            )
        if budget.peers.get(self.peer, 0) + extra > limits.per_peer:
            raise Rejected(
                429, "this client is sending too many webhook bodies at once", round(BODY_SECONDS)
            )
        self.size = size
        budget._add(self.peer, extra)


@dataclass(frozen=True)
class Intake:
    """A verified, parsed delivery ready to be stored, and the fields of its payload the
    intake reads (``parse_delivery``)."""

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


async def read_body(request: Request, max_body: int, held: Reservation, pace: Pace) -> bytes:
    """The raw body, refusing as soon as more than ``max_body`` bytes arrive (413), the
    budget cannot hold what arrived (503, or 429 for the client's share), or the body
    falls behind ``pace`` (408).

    The chunks are joined once all have arrived; only then is the body in memory twice,
    and only one body at a time (the event loop runs nothing else until it returns).
    """
    chunks: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    started = loop.time()
    allowed = pace.allowed(0)
    try:
        async with asyncio.timeout_at(started + allowed) as deadline:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body:
                    raise Rejected(413, f"body larger than {max_body} bytes")
                held.grow(size)
                chunks.append(chunk)
                later = pace.allowed(size)
                if later > allowed:
                    allowed = later
                    deadline.reschedule(started + allowed)
    except TimeoutError:
        if allowed < BODY_SECONDS:
            raise Rejected(408, f"body arriving slower than {pace.min_rate:g} bytes/s") from None
        raise Rejected(408, f"body not received within {BODY_SECONDS:g} s") from None
    except ClientDisconnect:
        raise Rejected(400, "the client went away before sending the whole body") from None
    return b"".join(chunks)


class _Via(msgspec.Struct):
    """A comment, issue or PR: only whether an App wrote it."""

    performed_via_github_app: Any = None


class _Made(msgspec.Struct):
    """A check run or suite: only the App that made it."""

    app: Any = None


class _Triage(msgspec.Struct):
    """The fields of a payload the intake reads (``bot.core.routing.skip_reason`` and the
    stored columns); the rest of the body is checked as JSON but never built."""

    action: Any = None
    installation: Any = None
    sender: Any = None
    comment: _Via | None = None
    issue: _Via | None = None
    pull_request: _Via | None = None
    check_run: _Made | None = None
    check_suite: _Made | None = None


_TRIAGE = msgspec.json.Decoder(_Triage)


def _fields(body: bytes, text: str) -> Any:
    """The payload as far as the intake reads it: ``_Triage``'s fields, or the whole
    payload parsed by ``json`` when the body is not shaped so (``json`` then decides)."""
    try:
        seen = _TRIAGE.decode(body)
    except msgspec.MsgspecError:  # not JSON, not an object, or a field of another shape
        return json.loads(text)
    found: dict[str, Any] = {}
    for name in _Triage.__struct_fields__:
        value = getattr(seen, name)
        if value is not None:
            found[name] = (
                msgspec.structs.asdict(value) if isinstance(value, msgspec.Struct) else value
            )
    return found


def parse_delivery(event: str, delivery_id: str, body: bytes) -> Intake:
    """The stored form of a verified delivery; ``Rejected(400)`` unless a JSON object.

    ``Intake.payload`` holds only the fields the intake reads (``_Triage``): a 25 kB
    ``pull_request`` payload costs a sixth of building all of it (``bench/bench_webhook.py``).
    """
    try:
        text_body = body.decode("utf-8")
        payload = _fields(body, text_body)
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
