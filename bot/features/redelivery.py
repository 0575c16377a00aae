"""Redelivering the webhook deliveries GitHub could not hand to the App.

GitHub does not send a failed delivery again on its own: one answered 503 while the store
was down, or not answered while ``serve`` restarted, is lost unless someone asks for it.
``redeliver_failed`` is GitHub's own recipe for that, run by one process of the App at a
time (a periodic job, every ``REDELIVERY_SECONDS``, so also soon after the store is back):

- list the App's delivery attempts (``GET /app/hook/deliveries``) newest first, back to
  where the last complete look got to (the store's mark, less ``OVERLAP``), never further
  back than ``REDELIVERY_WINDOW_HOURS``, and at most ``MAX_PAGES`` pages of 100;
- choose the deliveries to ask for (``bot.core.redelivery.choose``): failed with no answer,
  a 5xx, 408 or 429, never succeeded, not in the deliveries table (deduplicated by GUID:
  what the App received, it has), and not asked for before;
- ask for each (``POST /app/hook/deliveries/{id}/attempts``), recorded once GitHub took
  the request, so a failed attempt is never asked for twice; at most ``MAX_REQUESTS`` per
  look, oldest first: the others, and a request GitHub refused, are asked at the next look
  (the mark stays before them).

The redelivery reaches ``/webhook`` like any delivery, with the same GUID: if it ends up
stored twice, the second is a duplicate and runs no handler.  A redelivery that fails too
(the store was back before ``serve`` was) is asked for again at a later look, up to
``MAX_ASKS`` requests per delivery; then the App gives up on it, with a warning in the log
(it stays in GitHub's list of the App's deliveries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.errors import GitHubError
from bot.adapters.settings import Settings
from bot.adapters.store import redeliveries
from bot.core.redelivery import MAX_ASKS, HookAttempt, choose

log = logging.getLogger(__name__)

MARK = "app_hook_deliveries"  # the scan mark of this listing
MAX_PAGES = 10  # of 100 attempts: the most one look reads
MAX_REQUESTS = 100  # redeliveries one look asks for (1 s apart on GitHub); the rest: next look
OVERLAP = timedelta(minutes=5)  # looked at again: attempts GitHub lists a little late


class HookDeliveries(Protocol):
    """The App's webhook deliveries on GitHub (``bot.adapters.github.hooks.AppHooks``)."""

    def attempts(self, since: datetime, max_pages: int) -> tuple[list[HookAttempt], bool]:
        """Attempts at or after ``since``, newest first, from at most ``max_pages`` pages,
        and whether that is all of them."""
        ...

    def redeliver(self, attempt_id: int) -> None:
        """Ask GitHub to send attempt ``attempt_id``'s delivery again."""
        ...


@dataclass(frozen=True)
class RedeliveryReport:
    """What one look did."""

    requested: int = 0  # deliveries GitHub was asked to send again
    skipped: int = 0  # failed deliveries left: received, succeeded since, asked, given up
    failed: int = 0  # requests GitHub did not take (asked again next time)
    complete: bool = True  # False: more attempts than MAX_PAGES pages since the mark


def redeliver_failed(
    hooks: HookDeliveries,
    sessions: sessionmaker[Session],
    window: timedelta,
    now: datetime | None = None,
) -> RedeliveryReport:
    """One look at the App's deliveries: ask GitHub for the failed ones (module docstring)."""
    now = now if now is not None else datetime.now(UTC)
    floor = now - window
    mark = redeliveries.mark(sessions, MARK)
    since = floor if mark is None else max(floor, mark - OVERLAP)
    attempts, complete = hooks.attempts(since, MAX_PAGES)
    guids = {a.guid for a in attempts}
    choice = choose(
        attempts, redeliveries.received(sessions, guids), redeliveries.asked(sessions, guids)
    )
    requested = failed = 0
    # attempts left for the next look (over MAX_REQUESTS, or refused): the mark stays before
    held = [attempt.delivered_at for attempt in choice.ask[MAX_REQUESTS:]]
    for attempt in choice.ask[:MAX_REQUESTS]:
        extra = {"delivery": attempt.guid, "event": attempt.event, "attempt": attempt.id}
        try:
            hooks.redeliver(attempt.id)
        except GitHubError as exc:
            failed += 1
            held.append(attempt.delivered_at)
            log.warning("could not ask GitHub to redeliver a delivery: %s", exc, extra=extra)
            continue
        redeliveries.record_asked(sessions, attempt.guid, attempt.id)
        requested += 1
        log.info("asked GitHub to redeliver a failed delivery", extra=extra)
    for guid in choice.given_up:
        log.warning(
            "gave up asking GitHub to redeliver a delivery: its redeliveries failed too",
            extra={"delivery": guid, "requests": MAX_ASKS},
        )
    if not complete:
        log.warning(
            "more webhook deliveries than one look reads; the older ones were not looked at",
            extra={"since": since.isoformat(), "read": len(attempts)},
        )
    else:
        newest = max((a.delivered_at for a in attempts), default=None)
        reached = min([newest, *held]) if newest is not None else None
        if reached is not None and (mark is None or reached > mark):
            redeliveries.set_mark(sessions, MARK, reached)
    return RedeliveryReport(requested, len(choice.skipped), failed, complete)


def redelivery_job(
    settings: Settings,
    sessions: sessionmaker[Session],
    hooks: Callable[[], HookDeliveries | None],
) -> Callable[[], RedeliveryReport]:
    """The periodic job: ``redeliver_failed`` over ``REDELIVERY_WINDOW_HOURS`` with the
    App's deliveries from ``hooks()`` (made on first use; None: no App credentials, no look).
    GitHub failing to list them is a warning in the log; the next look tries again."""
    window = timedelta(hours=settings.redelivery_window_hours)

    def run() -> RedeliveryReport:
        found = hooks()
        if found is None:
            return RedeliveryReport()
        try:
            return redeliver_failed(found, sessions, window)
        except GitHubError as exc:  # GitHub down or refusing: the next look tries again
            log.warning("could not list the App's webhook deliveries: %s", exc)
            return RedeliveryReport(complete=False)

    return run
