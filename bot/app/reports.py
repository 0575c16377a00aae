"""``GET /reports/{token}``: a reviewed PR's interactive report (``bot.adapters.store.reports``).

Mounted only while ``REPORT_BASE_URL`` is set (unsetting it stops serving at once).

- 200 with the report's HTML, under a Content-Security-Policy that lets the page run only
  its own inline script and style and reach nothing (no requests, no forms, no framing;
  Chart.js draws on a canvas), sandboxed so the page has no origin of the App's; not
  indexed, no referrer sent when a link in it is followed, cached privately for a minute;
- 404 with one and the same body for an unknown, malformed, expired or deleted token: the
  answer does not tell which.

The token is looked up by its SHA-256, never compared as a secret.
"""

from __future__ import annotations

import re

from fastapi import APIRouter
from sqlalchemy.orm import Session, sessionmaker
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from bot.adapters.store import reports
from bot.adapters.store.reports import TOKEN_CHARS

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
_TOKEN = re.compile(rf"[A-Za-z0-9_-]{{{TOKEN_CHARS}}}")


def reports_router(sessions: sessionmaker[Session]) -> APIRouter:
    """The router serving the stored reports of ``sessions``' store."""
    router = APIRouter()

    @router.get("/reports/{token}")
    def report(token: str) -> Response:  # a plain def: FastAPI runs it in a thread
        html = reports.find(sessions, token) if _TOKEN.fullmatch(token) else None
        if html is None:
            return PlainTextResponse(NOT_FOUND, status_code=404, headers=MISSING)
        return HTMLResponse(html, headers=FOUND)

    return router
