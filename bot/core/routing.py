"""Event routing, I/O-free: ``(event, action)`` -> the handlers registered for it.

In the style of gidgethub's router: each feature module has its own ``Router`` and
registers its handlers on it with a decorator; the App composes the feature routers
explicitly (``Router(review.router, approval.router, ...)``, see ``bot.app.routes``)::

    router = Router[HandlerContext]()

    @router.register("pull_request", "opened", "synchronize")
    def review(ctx: HandlerContext, payload: dict[str, Any]) -> None: ...

No actions means every action of the event.  Events sent by the App's own bot user are
ignored (our own pushes and comments would otherwise trigger us again); events with no
handler are acknowledged and dropped.
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
    """Whether the App caused this event (its bot user is the sender, or its comment)."""
    sender = payload.get("sender")
    login = sender.get("login") if isinstance(sender, dict) else None
    if bot_login and isinstance(login, str) and login.lower() == bot_login.lower():
        return True
    comment = payload.get("comment")
    via = comment.get("performed_via_github_app") if isinstance(comment, dict) else None
    return app_id is not None and isinstance(via, dict) and via.get("id") == app_id
