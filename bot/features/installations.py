"""Bookkeeping handlers: ``ping``, ``installation*`` and ``installation_repositories*``.

They keep the installations table current and log what happened; none of them
calls GitHub.  Payloads are read through small models that ignore unknown fields
and require only what is used, since real deliveries carry more or fewer fields
than GitHub's schemas.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.store import installations
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import InstallationEvent, InstallationRepositoriesEvent, PingEvent

_STATUS = {"deleted": "deleted", "suspend": "suspended"}


router = Router[HandlerContext]()


@router.register("ping")
def on_ping(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Log the ping (GitHub sends it when the webhook is created)."""
    ping = PingEvent.model_validate(payload)
    if ping.hook.app_id is not None and ping.hook.app_id != ctx.settings.app_id:
        ctx.log.warning("ping for app %s, but APP_ID is %s", ping.hook.app_id, ctx.settings.app_id)
    ctx.log.info("ping from hook %s (events: %s)", ping.hook_id, ", ".join(ping.hook.events))


@router.register("installation")
def on_installation(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Record an installation being created, changed, suspended or deleted."""
    event = InstallationEvent.model_validate(payload)
    repos = None if event.repositories is None else [r.full_name for r in event.repositories]
    installations.upsert(
        ctx.sessions,
        event.installation.id,
        event.installation.account.login,
        _STATUS.get(event.action, "active"),
        repos,
    )
    ctx.log.info(
        "installation %s %s by %s",
        event.installation.id,
        event.action,
        event.installation.account.login,
    )


@router.register("installation_repositories")
def on_installation_repositories(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Record repositories added to or removed from an installation."""
    event = InstallationRepositoriesEvent.model_validate(payload)
    added = [r.full_name for r in event.repositories_added]
    removed = [r.full_name for r in event.repositories_removed]
    installations.change_repositories(ctx.sessions, event.installation.id, added, removed)
    ctx.log.info(
        "installation %s: repositories added %s, removed %s",
        event.installation.id,
        added,
        removed,
    )
