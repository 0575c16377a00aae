"""``GET /reports/{token}``: a reviewed PR's interactive report (``bot.adapters.store.reports``).

Mounted only while ``REPORT_BASE_URL`` is set (unsetting it stops serving at once).

- 200 with the report's HTML, under a Content-Security-Policy that lets the page run only
  its own inline script and style and reach nothing (no requests, no forms, no framing;
  Chart.js draws on a canvas), sandboxed so the page has no origin of the App's; not
  indexed, no referrer sent when a link in it is followed, cached privately for a minute;
- 404 with one and the same body for an unknown, malformed, expired or deleted token, or a
  report whose repository is no longer one the App may show it for: the answer does not
  tell which;
- 503 with a plain page when that could not be checked (GitHub did not answer).

The token is looked up by its SHA-256, never compared as a secret.  A report older than
``REPORT_RECHECK_SECONDS`` is served only once its repository was seen, within that time,
still readable by the App and public (or ``REPORT_PRIVATE_REPOS``): ``Visibility`` re-reads
``GET /repos/{owner}/{repo}`` through the App's GitHub adapter, at most once per repository
per that time and process, and deletes the repository's reports when it is not.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from cachetools import TTLCache
from fastapi import APIRouter
from sqlalchemy.orm import Session, sessionmaker
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from bot.adapters.github.api import RepoInfo
from bot.adapters.store import reports
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.reports import TOKEN_CHARS

log = logging.getLogger(__name__)

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'unsafe-inline'",
        "style-src 'unsafe-inline'",
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox",
    )
)
COMMON = {
    "Content-Security-Policy": CSP,
    "X-Robots-Tag": "noindex, nofollow",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
FOUND = {**COMMON, "Cache-Control": "private, max-age=60"}
MISSING = {**COMMON, "Cache-Control": "no-store"}
NOT_FOUND = "No such report: it may have expired, or its pull request was closed.\n"
UNCHECKED = (
    "This report cannot be shown now: whether its repository may still be shown could not "
    "be checked with GitHub. Try again in a few minutes.\n"
)
CACHED_REPOSITORIES = 4096  # repositories whose last look a process keeps
_TOKEN = re.compile(rf"[A-Za-z0-9_-]{{{TOKEN_CHARS}}}")

Reader = Callable[[str], RepoInfo | None]


class Visibility:
    """Whether a repository's reports may still be shown, looked up at most once per
    ``max_age`` seconds per repository (``CACHED_REPOSITORIES`` kept, the least recently
    used dropped first).

    ``reader()`` makes, on first use, the function that reads a repository as the App sees
    it (``bot.adapters.github.app.repository_reader``): None when the App cannot (not
    installed on it, deleted); it may raise.  A repository is shown when readable and
    public, or private with ``private_ok``.
    """

    def __init__(
        self,
        reader: Callable[[], Reader],
        *,
        private_ok: bool,
        max_age: float,
        size: int = CACHED_REPOSITORIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_reader = reader
        self._read: Reader | None = None
        self._private_ok = private_ok
        self.max_age = max_age
        self._seen: TTLCache[str, bool] = TTLCache(size, max_age, timer=clock)
        self._lock = threading.Lock()

    def shown(self, repo: str) -> bool | None:
        """Whether ``repo``'s reports may be shown; None when GitHub could not tell (not
        remembered: the next request asks again)."""
        with self._lock:
            known = self._seen.get(repo)
        if known is not None:
            return known
        try:
            if self._read is None:
                self._read = self._make_reader()
            info = self._read(repo)
        except Exception as exc:  # GitHub down, or no credentials: not shown, said plainly
            log.warning("report of %s not shown: its visibility was not read: %s", repo, exc)
            return None
        shown = info is not None and (not info.private or self._private_ok)
        with self._lock:
            self._seen[repo] = shown
        return shown


def reports_router(sessions: sessionmaker[Session], visibility: Visibility) -> APIRouter:
    """The router serving the stored reports of ``sessions``' store."""
    router = APIRouter()
    fresh = timedelta(seconds=visibility.max_age)

    @router.get("/reports/{token}")
    def report(token: str) -> Response:  # a plain def: FastAPI runs it in a thread
        found = reports.find(sessions, token) if _TOKEN.fullmatch(token) else None
        if found is not None and not _recent(found.reviewed_at, fresh):
            shown = visibility.shown(found.repo)
            if shown is None:
                return PlainTextResponse(UNCHECKED, status_code=503, headers=MISSING)
            if not shown:
                with sessions.begin() as session:
                    dropped = reports.delete_repo(session, found.repo)
                log.info("reports of %s deleted: no longer shown (%d)", found.repo, dropped)
                found = None
        if found is None:
            return PlainTextResponse(NOT_FOUND, status_code=404, headers=MISSING)
        return HTMLResponse(found.html, headers=FOUND)

    return router


def _recent(reviewed_at: datetime, fresh: timedelta) -> bool:
    """Whether the review that stored a report saw its repository within ``fresh``."""
    return now_utc() - reviewed_at <= fresh
