"""Event routing: ``(event, action)`` -> the handlers registered for it.

Handler modules register on the module-level ``router`` with a decorator, in the
style of gidgethub / bedevere routing::

    @router.register("pull_request", "opened", "synchronize")
    def review(ctx: HandlerContext, payload: dict[str, Any]) -> None: ...

No actions means every action of the event.  Handler modules are imported by
``load_handlers``: ``HANDLER_MODULES`` below plus the ``EXTRA_HANDLERS`` setting.
Events sent by the App's own bot user are ignored (our own pushes and comments
would otherwise trigger us again); events with no handler are acknowledged and
dropped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from bot.features.context import HandlerContext

Handler = Callable[[HandlerContext, dict[str, Any]], None]

# Modules whose import registers the built-in handlers on ``router``.
HANDLER_MODULES: tuple[str, ...] = (
    "bot.features.installations",
    "bot.features.review.handlers",
    "bot.features.review.check_run",
    "bot.features.comments",
    "bot.features.approval.handlers",
)


class Router:
    """A registry of handlers by event and action."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str | None], list[Handler]] = {}

    def register(self, event: str, *actions: str) -> Callable[[Handler], Handler]:
        """Decorator: run the handler for ``event`` with any of ``actions`` (none: all)."""

        def decorator(handler: Handler) -> Handler:
            for action in actions or (None,):
                bucket = self._routes.setdefault((event, action), [])
                if handler not in bucket:
                    bucket.append(handler)
            return handler

        return decorator

    def handlers(self, event: str, action: str | None) -> list[Handler]:
        """The handlers for this event and action, in registration order."""
        found = list(self._routes.get((event, None), []))
        if action is not None:
            found += [h for h in self._routes.get((event, action), []) if h not in found]
        return found

    def dispatch(self, ctx: HandlerContext, payload: dict[str, Any]) -> int:
        """Run every handler for the context's delivery; return how many ran."""
        handlers = self.handlers(ctx.delivery.event, ctx.delivery.action)
        for handler in handlers:
            handler(ctx, payload)
        return len(handlers)


def skip_reason(
    router: Router,
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


def load_handlers(extra: Iterable[str] = ()) -> Router:
    """Import the handler modules (built-in and ``extra``) and return ``router``."""
    for module in (*HANDLER_MODULES, *extra):
        importlib.import_module(module)
    return router


router = Router()
