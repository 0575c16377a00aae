"""What every event handler receives: ``HandlerContext``.

A handler is a plain function registered on its feature's router for an event and
actions (``bot.app.routes`` composes the feature routers)::

    router = Router[HandlerContext]()

    @router.register("pull_request", "opened", "synchronize", "reopened")
    def review_pull_request(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        gh = ctx.installation_client()
        ...

Handlers run on worker threads, at least once per delivery: a crash or a retry
runs them again, so they must be idempotent (find-or-edit the one marked comment,
create-or-update the check run).  Raise ``bot.core.retry.TransientError`` to be retried
later with backoff, ``bot.core.retry.PermanentError`` to fail at once; other exceptions
are classified by ``bot.core.retry.is_transient`` (GitHub 5xx and rate limits, history
outages and network errors are retried).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, GitHubFactory
from bot.adapters.locks import Locks
from bot.adapters.settings import Settings
from bot.core.history.sources import HistoryFactory
from bot.core.retry import PermanentError


@dataclass(frozen=True)
class DeliveryInfo:
    """The delivery being handled."""

    id: str
    event: str
    action: str | None
    installation_id: int | None
    attempt: int = 1


@dataclass(frozen=True)
class HandlerContext:
    """Everything a handler may use; handlers do no other I/O set-up of their own.

    - ``settings``: the App settings;
    - ``sessions``: SQLAlchemy session factory of the store;
    - ``delivery``: id, event, action, installation id and attempt number;
    - ``github``: installation id -> its ``GitHubAPI`` (``bot.adapters.github.app`` makes it);
    - ``history``: source spec -> history source (W&B, file, MLflow);
    - ``locks``: named locks shared by every process of the App (``bot.adapters.locks``);
    - ``log``: a logger whose records carry the delivery id;
    - ``finish``: the drift watch's step after it visited every file of a repository (a
      ``bot.features.drift.watch.Finish``: the dashboard's), injected by the App so that a
      handler that changed what a repository's dashboard shows rewrites it at once; None: none.
      Typed ``object`` because this module cannot name the drift watch's types (the drift
      handlers import it): ``bot.features.drift.watch.handler_options`` narrows it.
    """

    settings: Settings
    sessions: sessionmaker[Session]
    delivery: DeliveryInfo
    github: GitHubFactory
    history: HistoryFactory
    locks: Locks
    log: logging.LoggerAdapter[logging.Logger]
    finish: object = None

    def installation_client(self) -> GitHubAPI:
        """The GitHub client of this delivery's installation (a ``PermanentError`` if none)."""
        if self.delivery.installation_id is None:
            raise PermanentError(f"{self.delivery.event} delivery has no installation id")
        return self.github(self.delivery.installation_id)
