"""``/threshold-bot retry`` is rate-limited per PR: at most one review per
``RETRY_COOLDOWN_SECONDS``; a retry sooner is answered with when it may run again and
reviews nothing.  Through the comment handler, a recording GitHub and a real SQLite store."""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.errors import GitHubTransientError
from bot.adapters.store import audit
from bot.adapters.store.db import init_db, make_engine
from bot.core.formatting import iso_date_time
from bot.features.comments import on_comment
from bot.features.context import HandlerContext
from bot.features.retry import STARTED, THROTTLED
from tests.fakes.recording_github import RecordingGitHub
from tests.live import make_settings
from tests.test_comments_handler import PROJECT, comment_payload, context
from tests.test_review_pr import SCRIPT, script

RETRY = "/threshold-bot retry"
COOLDOWN = 60.0  # the default of RETRY_COOLDOWN_SECONDS


@pytest.fixture
def gh() -> RecordingGitHub:
    fake = RecordingGitHub()
    fake.commit({SCRIPT: script("0.56", project=PROJECT)})
    fake.open_pull(7, {SCRIPT: script("0.58", project=PROJECT)})
    fake.open_pull(8, {SCRIPT: script("0.57", project=PROJECT)})
    return fake


def as_delivery(ctx: HandlerContext, delivery: str, **settings: Any) -> HandlerContext:
    """``ctx`` for another delivery (same store), with settings overridden."""
    changed = ctx.settings.model_copy(update=settings) if settings else ctx.settings
    return replace(ctx, delivery=replace(ctx.delivery, id=delivery), settings=changed)


def retry_rows(ctx: HandlerContext) -> list[tuple[int | None, str, str]]:
    with ctx.sessions() as session:
        entries = audit.entries(session, "owner/repo")
        return [(e.pr_number, e.delivery_id or "", e.outcome) for e in entries]


def reviews_of(gh: RecordingGitHub, number: int) -> int:
    return sum(1 for args in gh.called("upsert_comment") if args[1] == number)


def test_a_second_retry_within_the_cooldown_is_answered_and_reviews_nothing(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    first = context(tmp_path, gh, "issue_comment", delivery="d1")
    assert first.settings.retry_cooldown_seconds == COOLDOWN

    on_comment(first, comment_payload(RETRY, sender="rita"))
    on_comment(as_delivery(first, "d2"), comment_payload(RETRY, sender="wes"))

    assert reviews_of(gh, 7) == 1 and len(gh.called("upsert_check_run")) == 1
    with first.sessions() as session:
        (claimed,) = [e for e in audit.entries(session, "owner/repo") if e.delivery_id == "d1"]
    rounded_up = math.ceil(claimed.at.microsecond / 1e6)  # the reply names whole seconds
    until = claimed.at.replace(microsecond=0) + timedelta(seconds=COOLDOWN + rounded_up)
    ((_, number, body),) = gh.called("reply")
    assert number == 7 and "d2:line-1" in body
    assert f"Retry at {iso_date_time(until)} UTC or later" in body
    assert "once every 60 seconds" in body and "nothing was reviewed" in body
    assert retry_rows(first) == [(7, "d2", THROTTLED), (7, "d1", "reviewed")]


def test_the_cooldown_is_per_pr(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment", delivery="d1")

    on_comment(ctx, comment_payload(RETRY))
    on_comment(as_delivery(ctx, "d2"), comment_payload(RETRY, changes={"issue.number": 8}))

    assert reviews_of(gh, 7) == reviews_of(gh, 8) == 1 and gh.replies == {}
    assert sorted(retry_rows(ctx)) == [(7, "d1", "reviewed"), (8, "d2", "reviewed")]


def test_a_zero_cooldown_never_throttles(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = as_delivery(context(tmp_path, gh, "issue_comment"), "d1", retry_cooldown_seconds=0)

    for delivery in ("d1", "d2", "d3"):
        on_comment(as_delivery(ctx, delivery), comment_payload(RETRY))

    assert reviews_of(gh, 7) == 3 and gh.replies == {}


@pytest.mark.parametrize(
    ("age", "outcome", "reviews"),
    [
        (COOLDOWN + 1, "reviewed", True),  # older than the cooldown
        (COOLDOWN - 5, "reviewed", False),  # within it
        (1.0, THROTTLED, True),  # a throttled retry does not count
        (1.0, STARTED, False),  # a retry still running does
    ],
)
def test_an_earlier_retry_counts_while_it_is_within_the_cooldown(
    tmp_path: Path, gh: RecordingGitHub, age: float, outcome: str, reviews: bool
) -> None:
    ctx = context(tmp_path, gh, "issue_comment", delivery="d2")
    with ctx.sessions.begin() as session:
        audit.add(
            session,
            repo="owner/repo",
            pr_number=7,
            actor="maya",
            action="retry",
            outcome=outcome,
            delivery_id="d1",
            message=RETRY,
            at=datetime.now(UTC) - timedelta(seconds=age),
        )

    on_comment(ctx, comment_payload(RETRY))

    assert reviews_of(gh, 7) == (1 if reviews else 0)
    assert (gh.replies == {}) == reviews


def test_a_redelivered_retry_is_not_throttled_by_itself(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    ctx = context(tmp_path, gh, "issue_comment", delivery="d1")
    publish = gh.upsert_check_run
    failures = [GitHubTransientError("GitHub 502: Bad Gateway", 502)]

    def flaky(*args: Any, **kwargs: Any) -> Any:  # the first review fails half-way
        if failures:
            raise failures.pop()
        return publish(*args, **kwargs)

    gh.upsert_check_run = flaky  # type: ignore[method-assign]
    with pytest.raises(GitHubTransientError):
        on_comment(ctx, comment_payload(RETRY))
    assert retry_rows(ctx) == [(7, "d1", STARTED)]
    on_comment(ctx, comment_payload(RETRY))  # the worker runs the delivery again
    on_comment(ctx, comment_payload(RETRY))  # ... and once more after it finished

    assert reviews_of(gh, 7) == 2 and len(gh.called("upsert_check_run")) == 1
    assert gh.replies == {} and retry_rows(ctx) == [(7, "d1", "reviewed")]


def test_concurrent_claims_on_one_pr_let_exactly_one_through(tmp_path: Path) -> None:
    sessions = init_db(make_engine(make_settings(tmp_path).database_url))
    results: list[datetime | None] = []

    def claim(delivery: str) -> None:
        with sessions.begin() as session:
            until = audit.claim(
                session,
                repo="owner/repo",
                pr_number=7,
                actor="maya",
                action="retry",
                outcome=STARTED,
                delivery_id=delivery,
                message=RETRY,
                cooldown=timedelta(seconds=COOLDOWN),
                ignore=THROTTLED,
            )
        results.append(until)

    threads = [threading.Thread(target=claim, args=(f"d{i}",)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(r is None for r in results) == [False] * 11 + [True]
    with sessions() as session:
        (entry,) = audit.entries(session, "owner/repo")
    assert {r for r in results if r is not None} == {
        entry.at.replace(tzinfo=UTC) + timedelta(seconds=COOLDOWN)
    }
