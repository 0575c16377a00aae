"""Who the App is on GitHub: its id, and its bot user's login ``{slug}[bot]``.

``AppLogin`` holds the login: ``BOT_LOGIN`` when the operator set it, else what
``GET /app`` answers, read once on first use and kept.  While GitHub does not answer, the
login is None (callers fall back on the App id) and is asked again after
``retry_seconds``.  ``known()`` never waits: the webhook answers without GitHub.

``is_own_comment`` decides which comments are the App's: those GitHub says it wrote
(``performed_via_github_app.id``), or written by its bot user.  Any other account's
comment, a bot's included, is never taken for the App's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
RETRY_SECONDS = 60.0


class AppLogin:
    """The App's login: ``override``, else ``fetch()`` once (None without either)."""

    def __init__(
        self,
        fetch: Callable[[], str] | None,
        override: str | None = None,
        *,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._login = override or None
        self._fetch = fetch
        self._retry_seconds = retry_seconds
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def get(self) -> str | None:
        """The login, read from GitHub on first use; None while GitHub fails (retried after
        ``retry_seconds``; the failure is logged, never raised)."""
        if self._login is not None or self._fetch is None:
            return self._login
        with self._lock:
            if self._login is None and self._due():
                try:
                    self._login = self._fetch()
                except Exception as exc:  # an outage must not fail the delivery asking
                    self._failed_at = time.monotonic()
                    log.warning("could not read the App's login from GET /app: %s", exc)
        return self._login

    def known(self) -> str | None:
        """The login if already read, without waiting; else None, and it is read in the
        background."""
        unread = self._login is None and self._fetch is not None
        if unread and self._due() and not self._lock.locked():
            threading.Thread(target=self.get, name="app-login", daemon=True).start()
        return self._login

    def _due(self) -> bool:
        failed = self._failed_at
        return failed is None or time.monotonic() - failed >= self._retry_seconds


def is_own_comment(comment: dict[str, Any], app_id: int | None, login: str | None) -> bool:
    """Whether the comment (GitHub's JSON) was written by the App ``app_id`` or its bot
    user ``login`` (compared case-insensitively)."""
    via = comment.get("performed_via_github_app")
    if app_id is not None and isinstance(via, dict) and via.get("id") == app_id:
        return True
    user = comment.get("user")
    author = user.get("login") if isinstance(user, dict) else None
    return bool(login) and isinstance(author, str) and author.lower() == (login or "").lower()
