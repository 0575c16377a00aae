"""Test helpers: real GitHub webhook payloads from ``tests/fixtures/github``, re-signed.

``fixture("pull_request.opened")`` loads ``webhooks/pull_request.opened.json``;
``patched(payload, {"sender.login": "x"})`` changes fields by dotted path;
``signed(event, payload, secret)`` returns the body and headers GitHub would send.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

from bot.core.signature import sign
from tests.conftest import GITHUB_FIXTURES

WEBHOOKS = GITHUB_FIXTURES / "webhooks"


def fixture_names() -> list[str]:
    """Every fixture name (file name without ``.json``), sorted."""
    return sorted(p.stem for p in WEBHOOKS.glob("*.json"))


def fixture(name: str) -> dict[str, Any]:
    """The payload of ``webhooks/<name>.json`` (a fresh copy)."""
    data: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def event_of(name: str) -> str:
    """The ``X-GitHub-Event`` of a fixture: the part of its name before the first dot."""
    return Path(name).name.split(".")[0]


def patched(payload: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``payload`` with ``{"a.b.c": value}`` set (intermediate dicts created)."""
    result = copy.deepcopy(payload)
    for path, value in changes.items():
        node = result
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return result


def new_delivery_id() -> str:
    """A fresh GUID, as GitHub puts in ``X-GitHub-Delivery``."""
    return str(uuid.uuid4())


def signed(
    event: str,
    payload: dict[str, Any] | bytes,
    secret: str,
    delivery_id: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery of ``payload`` signed with ``secret``."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or new_delivery_id(),
        "X-Hub-Signature-256": sign(body, secret.encode()),
        "User-Agent": "GitHub-Hookshot/test",
    }
    return body, headers


def signed_fixture(
    name: str, secret: str, changes: dict[str, Any] | None = None, delivery_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A fixture payload (optionally patched) as a signed delivery."""
    payload = fixture(name)
    if changes:
        payload = patched(payload, changes)
    return signed(event_of(name), payload, secret, delivery_id)


def repository_event(
    action: str, full_name: str, installation: int, changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``repository`` delivery's payload, shaped as GitHub documents it (octokit/webhooks
    has no example of one among our fixtures): the repository, sender and installation
    objects of a real ``pull_request`` delivery, renamed to ``full_name``; ``changes`` as
    GitHub sends it for ``transferred`` (``{"owner": {"from": {"user": {...}}}}``)."""
    real = fixture("pull_request.opened")
    owner, name = full_name.split("/")
    repository = patched(
        real["repository"],
        {
            "full_name": full_name,
            "name": name,
            "owner.login": owner,
            "private": action == "privatized",
        },
    )
    if action == "archived":
        repository["archived"] = True
    payload = {
        "action": action,
        "repository": repository,
        "sender": real["sender"],
        "installation": {**real["installation"], "id": installation},
    }
    if changes is not None:
        payload["changes"] = changes
    return payload
