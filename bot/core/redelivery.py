"""Which of the App's failed webhook deliveries to ask GitHub to send again.

GitHub lists every attempt at delivering a webhook to the App (``GET /app/hook/deliveries``)
and sends one again on request, as a new attempt with the same ``guid`` (the
``X-GitHub-Delivery`` the App stores).  A delivery is worth asking for when one of its
attempts failed in a way the App may since have got over — no answer (``status_code`` 0:
refused, cut, or too slow), a 5xx (the store was down), 408 or 429 — and nothing shows that
it arrived: no attempt of it succeeded, the store does not hold its GUID, and it was not
asked for before.  A 4xx other than those (a bad signature, a refused size) would be
refused again and is left alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

AGAIN = frozenset({408, 429})  # 4xx answers that may go the other way next time


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
class Choice:
    """What to do about the failed deliveries of one look."""

    ask: tuple[HookAttempt, ...]  # per delivery, its newest failed attempt; oldest first
    skipped: tuple[str, ...]  # failed deliveries not asked for: arrived, or asked before


def choose(
    attempts: Iterable[HookAttempt], received: Collection[str], asked: Collection[str]
) -> Choice:
    """The deliveries among ``attempts`` to ask for again: some attempt failed (see
    ``HookAttempt.worth_again``), none succeeded, their GUID is not in ``received`` (the
    store has it) nor in ``asked`` (asked for before)."""
    by_guid: dict[str, list[HookAttempt]] = {}
    for attempt in attempts:
        by_guid.setdefault(attempt.guid, []).append(attempt)
    ask: list[HookAttempt] = []
    skipped: list[str] = []
    for guid, tries in by_guid.items():
        failed = [a for a in tries if a.worth_again]
        if not failed:
            continue
        if any(a.succeeded for a in tries) or guid in received or guid in asked:
            skipped.append(guid)
            continue
        ask.append(max(failed, key=lambda a: a.id))
    ask.sort(key=lambda a: (a.delivered_at, a.id))
    return Choice(tuple(ask), tuple(sorted(skipped)))
