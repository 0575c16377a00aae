"""Which of the App's failed webhook deliveries to ask GitHub to send again.

GitHub lists every attempt at delivering a webhook to the App (``GET /app/hook/deliveries``)
and sends one again on request, as a new attempt with the same ``guid`` (the
``X-GitHub-Delivery`` the App stores).  A delivery is worth asking for when one of its
attempts failed in a way the App may since have got over — no answer (``status_code`` 0:
refused, cut, or too slow), a 5xx (the store was down), 408 or 429 — and nothing shows that
it arrived: no attempt of it succeeded, the store does not hold its GUID, and it was not
asked for before — unless GitHub did send it again since and that failed too (the store
came back before ``serve`` did), up to ``MAX_ASKS`` requests per delivery.  A 4xx other than
those (a bad signature, a refused size) would be refused again and is left alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

AGAIN = frozenset({408, 429})  # 4xx answers that may go the other way next time
MAX_ASKS = 3  # requests per delivery at most, each after the last one's attempt failed


@dataclass(frozen=True)
class HookAttempt:
    """One attempt at a delivery, as GitHub lists it."""

    id: int  # the attempt's id: what a redelivery request names
    guid: str  # the delivery's X-GitHub-Delivery, shared by its redeliveries
    delivered_at: datetime  # aware UTC
    status_code: int  # 0: no answer
    status: str  # GitHub's words: "OK" for a 2xx
    redelivery: bool
    event: str

    @property
    def succeeded(self) -> bool:
        """The App answered 2xx."""
        return 200 <= self.status_code < 300

    @property
    def worth_again(self) -> bool:
        """Failed in a way another attempt may not: no answer, 5xx, 408 or 429."""
        code = self.status_code
        return code == 0 or code >= 500 or code in AGAIN


@dataclass(frozen=True)
class Asked:
    """What was asked for a delivery before: how many times, naming which attempt last."""

    times: int
    attempt_id: int


@dataclass(frozen=True)
class Choice:
    """What to do about the failed deliveries of one look."""

    ask: tuple[HookAttempt, ...]  # per delivery, its newest failed attempt; oldest first
    skipped: tuple[str, ...]  # failed deliveries not asked for: arrived, asked, given up
    given_up: tuple[str, ...]  # among them: asked MAX_ASKS times, failed again since


def choose(
    attempts: Iterable[HookAttempt],
    received: Collection[str],
    asked: Mapping[str, Asked],
    max_asks: int = MAX_ASKS,
) -> Choice:
    """The deliveries among ``attempts`` to ask for again: some attempt failed (see
    ``HookAttempt.worth_again``), none succeeded, their GUID is not in ``received`` (the
    store has it), and they were not asked for (``asked``) — or were, fewer than
    ``max_asks`` times, and an attempt newer than the one the last request named failed."""
    by_guid: dict[str, list[HookAttempt]] = {}
    for attempt in attempts:
        by_guid.setdefault(attempt.guid, []).append(attempt)
    ask: list[HookAttempt] = []
    skipped: list[str] = []
    given_up: list[str] = []
    for guid, tries in by_guid.items():
        failed = [a for a in tries if a.worth_again]
        if not failed:
            continue
        newest = max(failed, key=lambda a: a.id)
        before = asked.get(guid)
        if any(a.succeeded for a in tries) or guid in received:
            skipped.append(guid)
        elif before is not None and newest.id <= before.attempt_id:
            skipped.append(guid)  # asked; GitHub has not (or not yet) listed another attempt
        elif before is not None and before.times >= max_asks:
            skipped.append(guid)
            given_up.append(guid)
        else:
            ask.append(newest)
    ask.sort(key=lambda a: (a.delivered_at, a.id))
    return Choice(tuple(ask), tuple(sorted(skipped)), tuple(sorted(given_up)))
