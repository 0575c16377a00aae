"""The App's webhook deliveries: GitHub sending them, listing them, and redelivering one.

``send`` is GitHub's side of a delivery: it POSTs a body to the App's webhook URL
(``GitHubState.webhook_url``) and records the attempt with the status the App answered (0:
no answer — refused, reset, or nothing within GitHub's 10 s).  ``GET /app/hook/deliveries``
lists the attempts newest first, paged by ``cursor`` as GitHub does (the ``Link`` header's
``next``); ``POST /app/hook/deliveries/{delivery_id}/attempts`` answers 202 and sends the
delivery again in the background, with the same ``X-GitHub-Delivery`` GUID, as a new attempt
(``redelivery: true``).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.fakes.github_routes import Api, ApiError, Reply, Request, route
from tests.fakes.github_state import GitHubState, HookDelivery

DELIVERY_TIMEOUT = 10.0  # seconds GitHub waits for the App's answer
_CURSOR = re.compile(r"^v1_(\d+)$")


def send(
    state: GitHubState, body: bytes, headers: dict[str, str], *, redelivery: bool = False
) -> HookDelivery:
    """Deliver ``body`` with ``headers`` to the App's webhook URL; the recorded attempt."""
    url = state.webhook_url
    if url is None:
        raise RuntimeError("the fake GitHub has no webhook URL for the App (webhook_url)")
    delivered_at = datetime.now(UTC).replace(microsecond=0)
    started = time.monotonic()
    try:
        status = httpx.post(
            url, content=body, headers=headers, timeout=DELIVERY_TIMEOUT
        ).status_code
    except httpx.HTTPError:
        status = 0
    payload: Any = json.loads(body)
    installation, repository = payload.get("installation"), payload.get("repository")
    action = payload.get("action")
    with state.lock:
        attempt = HookDelivery(
            id=state.next_id(),
            guid=headers["X-GitHub-Delivery"],
            event=headers["X-GitHub-Event"],
            action=action if isinstance(action, str) else None,
            installation_id=installation.get("id") if isinstance(installation, dict) else None,
            repository_id=repository.get("id") if isinstance(repository, dict) else None,
            delivered_at=delivered_at,
            redelivery=redelivery,
            status_code=status,
            duration=round(time.monotonic() - started, 3),
            body=body,
            headers=dict(headers),
        )
        state.hook_deliveries.append(attempt)
    return attempt


def _item(delivery: HookDelivery) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "guid": delivery.guid,
        "delivered_at": delivery.delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "redelivery": delivery.redelivery,
        "duration": delivery.duration,
        "status": delivery.status,
        "status_code": delivery.status_code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": delivery.installation_id,
        "repository_id": delivery.repository_id,
        "throttled_at": None,
    }


@route("GET", "/app/hook/deliveries", auth="jwt")
def list_deliveries(api: Api, req: Request) -> Reply:
    items = sorted(api.state.hook_deliveries, key=lambda d: d.id, reverse=True)
    wanted = req.query.get("status")
    if wanted is not None:
        low = 200 if wanted == "success" else 400
        items = [d for d in items if low <= d.status_code < low + 200]
    cursor = req.query.get("cursor")
    if cursor:
        found = _CURSOR.match(cursor)
        if found is None:
            raise ApiError(422, "Invalid request.\n\ncursor is not valid.")
        items = [d for d in items if d.id <= int(found.group(1))]
    try:
        per_page = max(1, min(100, int(req.query.get("per_page", 30))))
    except ValueError:
        raise ApiError(400, "Invalid per_page") from None
    page, rest = items[:per_page], items[per_page:]
    headers = {}
    if rest:
        query = urllib.parse.urlencode({**req.query, "cursor": f"v1_{rest[0].id}"})
        headers["Link"] = f'<{api.base}{req.path}?{query}>; rel="next"'
    return Reply(200, [_item(d) for d in page], headers)


@route("POST", "/app/hook/deliveries/{delivery_id}/attempts", auth="jwt")
def redeliver(api: Api, req: Request) -> Reply:
    number = int(req.params["delivery_id"]) if req.params["delivery_id"].isdigit() else -1
    found = next((d for d in api.state.hook_deliveries if d.id == number), None)
    if found is None:
        raise ApiError(404, "Not Found")
    thread = threading.Thread(
        target=send,
        args=(api.state, found.body, found.headers),
        kwargs={"redelivery": True},
        name=f"redeliver-{found.id}",
        daemon=True,
    )
    thread.start()
    return Reply(202, {})
