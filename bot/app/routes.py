"""The App's event handlers: every feature's router, composed explicitly.

A feature module exposes ``router: Router[HandlerContext]`` with its handlers; this is
the one place that decides which features the App runs.  Operators add their own
through ``EXTRA_HANDLERS``: modules that expose a ``router`` the same way.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from bot.core.routing import Router
from bot.features import comments, installations, repositories
from bot.features.context import HandlerContext
from bot.features.dashboard import handlers as dashboard
from bot.features.drift import handlers as drift
from bot.features.review import approve, check_run, workflow_run
from bot.features.review import handlers as review


def app_router(extra_modules: Iterable[str] = ()) -> Router[HandlerContext]:
    """The built-in feature routers, then the ``router`` of each module in ``extra_modules``."""
    extra = [_router_of(module) for module in extra_modules]
    return Router(
        installations.router,
        repositories.router,
        review.router,
        check_run.router,
        comments.router,
        approve.router,
        drift.router,
        dashboard.router,
        workflow_run.router,
        *extra,
    )


def _router_of(module: str) -> Router[HandlerContext]:
    found = getattr(importlib.import_module(module), "router", None)
    if not isinstance(found, Router):
        raise ValueError(f"EXTRA_HANDLERS: {module} has no `router` (a bot.core.routing.Router)")
    return found
