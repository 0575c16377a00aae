"""Which failed webhook deliveries are asked for again (``bot.core.redelivery.choose``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.redelivery import MAX_ASKS, Asked, HookAttempt, choose

T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


def attempt(n: int, guid: str, code: int, *, redelivery: bool = False) -> HookAttempt:
    status = "OK" if 200 <= code < 300 else f"Invalid HTTP Response: {code}"
    return HookAttempt(
        id=n,
        guid=guid,
        delivered_at=T0 + timedelta(seconds=n),
        status_code=code,
        status=status if code else "failed to connect to host",
        redelivery=redelivery,
        event="pull_request",
    )


@pytest.mark.parametrize("code", [0, 500, 502, 503, 504, 408, 429])
def test_a_delivery_that_got_no_answer_or_a_5xx_is_asked_for(code: int) -> None:
    failed = attempt(1, "a", code)
    assert choose([failed], received=set(), asked={}).ask == (failed,)


@pytest.mark.parametrize("code", [200, 202, 400, 401, 413, 415])
def test_a_delivery_answered_2xx_or_refused_for_good_is_not(code: int) -> None:
    found = choose([attempt(1, "a", code)], received=set(), asked={})
    assert (found.ask, found.skipped) == ((), ())


def test_a_delivery_the_store_has_or_already_asked_for_is_skipped() -> None:
    attempts = [attempt(1, "stored", 503), attempt(2, "asked", 0), attempt(3, "new", 503)]
    found = choose(attempts, received={"stored"}, asked={"asked": Asked(1, 2)})
    assert [a.guid for a in found.ask] == ["new"]
    assert (found.skipped, found.given_up) == (("asked", "stored"), ())


def test_a_redelivery_that_failed_too_is_asked_for_again_up_to_max_asks() -> None:
    attempts = [attempt(1, "a", 503), attempt(4, "a", 0, redelivery=True)]
    again = choose(attempts, received=set(), asked={"a": Asked(1, 1)})
    assert [(a.guid, a.id) for a in again.ask] == [("a", 4)]
    done = choose(attempts, received=set(), asked={"a": Asked(MAX_ASKS, 1)})
    assert (done.ask, done.skipped, done.given_up) == ((), ("a",), ("a",))
    # the attempt the last request named is the newest: GitHub has not tried since
    waiting = choose(attempts, received=set(), asked={"a": Asked(2, 4)})
    assert (waiting.ask, waiting.skipped, waiting.given_up) == ((), ("a",), ())


def test_a_delivery_redelivered_successfully_since_is_skipped() -> None:
    attempts = [attempt(3, "a", 202, redelivery=True), attempt(1, "a", 503)]
    found = choose(attempts, received=set(), asked={})
    assert (found.ask, found.skipped) == ((), ("a",))


def test_one_request_per_delivery_naming_its_newest_failed_attempt_oldest_first() -> None:
    attempts = [
        attempt(9, "late", 0),
        attempt(5, "early", 0, redelivery=True),
        attempt(4, "late", 401),  # refused for good: not the one to name
        attempt(2, "early", 503),
    ]
    found = choose(attempts, received=set(), asked={})
    assert [(a.guid, a.id) for a in found.ask] == [("early", 5), ("late", 9)]
