"""The App's webhook deliveries on GitHub: list the attempts, ask for one again.

PyGithub has no call for an App's own hook deliveries, so these go through the requester of
a ``GithubIntegration`` authenticated as the App (its JWT), paged by PyGithub's
``PaginatedList``, which follows the cursors of the ``Link`` header.  What GitHub lists is
outside data: an attempt without an id, a date, or a GUID the webhook would accept as a
delivery id is dropped.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from github import GithubIntegration
from github.HookDelivery import HookDeliverySummary
from github.PaginatedList import PaginatedList

from bot.adapters.github.app import GitHubApp, loopback
from bot.adapters.github.errors import translated
from bot.adapters.settings import Settings
from bot.core.redelivery import HookAttempt

PER_PAGE = 100  # GitHub's largest page
_GUID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")  # what /webhook accepts as X-GitHub-Delivery


class AppHooks:
    """The App's webhook deliveries, through ``integration`` (App JWT)."""

    def __init__(self, integration: GithubIntegration) -> None:
        self._integration = integration

    @classmethod
    def of(cls, settings: Settings) -> AppHooks | None:
        """The App's deliveries for ``settings``; None without ``APP_ID`` and a private key.
        Requests for redelivery are spaced 1 s apart, as GitHub asks of writes (not against
        an API on the loopback interface: a local fake)."""
        key = settings.private_key_pem()
        if settings.app_id is None or not key:
            return None
        url = settings.github_api_url
        app = GitHubApp(settings.app_id, key, base_url=url, throttle=not loopback(url))
        return cls(app.integration())

    @translated
    def attempts(self, since: datetime, max_pages: int) -> tuple[list[HookAttempt], bool]:
        """The attempts delivered at or after ``since`` (aware), newest first, from at most
        ``max_pages`` pages; and whether they are all of them (the listing reached
        ``since`` or its end)."""
        listing = PaginatedList(
            HookDeliverySummary,
            self._integration.requester,
            "/app/hook/deliveries",
            {"per_page": PER_PAGE},
        )
        found: list[HookAttempt] = []
        for read, item in enumerate(listing, start=1):
            attempt = _attempt(item)
            if attempt is not None:
                if attempt.delivered_at < since:
                    return found, True
                found.append(attempt)
            if read >= max_pages * PER_PAGE:
                return found, False
        return found, True

    @translated
    def redeliver(self, attempt_id: int) -> None:
        """Ask GitHub to send the delivery of attempt ``attempt_id`` again (202: it will)."""
        self._integration.requester.requestJsonAndCheck(
            "POST", f"/app/hook/deliveries/{int(attempt_id)}/attempts"
        )


def _attempt(item: HookDeliverySummary) -> HookAttempt | None:
    """An attempt as the core sees it; None when GitHub's item lacks what it needs."""
    ident, guid, when = item.id, item.guid, item.delivered_at
    if not isinstance(ident, int) or not isinstance(guid, str) or not _GUID.match(guid):
        return None
    if not isinstance(when, datetime):
        return None
    code = item.status_code
    return HookAttempt(
        id=ident,
        guid=guid,
        delivered_at=when if when.tzinfo else when.replace(tzinfo=UTC),
        status_code=code if isinstance(code, int) else 0,
        status=str(item.status or "")[:200],
        redelivery=bool(item.redelivery),
        event=str(item.event or "")[:64],
    )
