"""Event routing, I/O-free: ``(event, action)`` -> the handlers registered for it.

In the style of gidgethub's router: each feature module has its own ``Router`` and
registers its handlers on it with a decorator; the App composes the feature routers
explicitly (``Router(review.router, approval.router, ...)``, see ``bot.app.routes``)::

    router = Router[HandlerContext]()

    @router.register("pull_request", "opened", "synchronize")
    def review(ctx: HandlerContext, payload: dict[str, Any]) -> None: ...

No actions means every action of the event.  Events sent by the App's own bot user are
ignored (our own pushes and comments would otherwise trigger us again); events with no
handler are acknowledged and dropped.  The App's login (``{slug}[bot]``) is passed in by
the caller, read from ``GET /app``; while it is unknown, the App id still identifies the
App's comments and any payload object naming the App with its slug.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

C = TypeVar("C")
"""What every handler receives besides the payload (the App's ``HandlerContext``)."""


class Router(Generic[C]):
    """A registry of handlers by event and action; ``Router(*others)`` merges other routers."""

    def __init__(self, *others: Router[C]) -> None:
        self._routes: dict[tuple[str, str | None], list[Callable[[C, dict[str, Any]], None]]] = {}
        for other in others:
            for (event, action), handlers in other._routes.items():
                for handler in handlers:
                    self._add(event, action, handler)

    def _add(
        self, event: str, action: str | None, handler: Callable[[C, dict[str, Any]], None]
    ) -> None:
        bucket = self._routes.setdefault((event, action), [])
        if handler not in bucket:
            bucket.append(handler)

    def register(
        self, event: str, *actions: str
    ) -> Callable[[Callable[[C, dict[str, Any]], None]], Callable[[C, dict[str, Any]], None]]:
        """Decorator: run the handler for ``event`` with any of ``actions`` (none: all)."""

        def decorator(
            handler: Callable[[C, dict[str, Any]], None],
        ) -> Callable[[C, dict[str, Any]], None]:
            for action in actions or (None,):
                self._add(event, action, handler)
            return handler

        return decorator

    def handlers(self, event: str, action: str | None) -> list[Callable[[C, dict[str, Any]], None]]:
        """The handlers for this event and action, in registration order."""
        found = list(self._routes.get((event, None), []))
        if action is not None:
            found += [h for h in self._routes.get((event, action), []) if h not in found]
        return found

    def dispatch(self, event: str, action: str | None, ctx: C, payload: dict[str, Any]) -> int:
        """Run every handler for ``event`` / ``action`` with ``ctx``; return how many ran."""
        handlers = self.handlers(event, action)
        for handler in handlers:
            handler(ctx, payload)
        return len(handlers)


def skip_reason(
    router: Router[Any],
    event: str,
    payload: dict[str, Any],
    bot_login: str | None,
    app_id: int | None,
) -> str | None:
    """Why a delivery needs no work (no handler, or sent by ourselves); None to run it."""
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    if not router.handlers(event, action):
        return f"no handler for {event}" + (f".{action}" if action else "")
    if is_own_event(payload, bot_login, app_id):
        return "sent by the app itself"
    return None


def is_own_event(payload: dict[str, Any], bot_login: str | None, app_id: int | None) -> bool:
    """Whether the App caused this event: its bot user ``bot_login`` is the sender, the
    comment was written by App ``app_id``, or (login unknown) the sender is a Bot named
    ``{slug}[bot]`` after an App object in the payload whose id is ``app_id``."""
    sender = payload.get("sender")
    sender = sender if isinstance(sender, dict) else {}
    login = sender.get("login")
    login = login.lower() if isinstance(login, str) else None
    if bot_login and login == bot_login.lower():
        return True
    if app_id is None:
        return False
    comment = payload.get("comment")
    via = comment.get("performed_via_github_app") if isinstance(comment, dict) else None
    if isinstance(via, dict) and via.get("id") == app_id:
        return True
    if sender.get("type") != "Bot" or login is None:
        return False
    slugs = {app.get("slug") for app in _apps(payload) if app.get("id") == app_id}
    return any(isinstance(slug, str) and f"{slug}[bot]".lower() == login for slug in slugs)


def _apps(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The App objects (``id``, ``slug``) a payload carries: a comment's or issue's
    ``performed_via_github_app``, a check run's or suite's ``app``, the installation's
    ``app_id`` / ``app_slug``."""
    apps: list[dict[str, Any]] = []
    for key in ("comment", "issue", "pull_request"):
        item = payload.get(key)
        if isinstance(item, dict) and isinstance(item.get("performed_via_github_app"), dict):
            apps.append(item["performed_via_github_app"])
    for key in ("check_run", "check_suite"):
        item = payload.get(key)
        if isinstance(item, dict) and isinstance(item.get("app"), dict):
            apps.append(item["app"])
    installation = payload.get("installation")
    if isinstance(installation, dict) and "app_slug" in installation:
        apps.append({"id": installation.get("app_id"), "slug": installation["app_slug"]})
    return apps
