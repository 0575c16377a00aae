"""The dashboard's page in the reports store (``reports.keep_page``) on SQLite and PostgreSQL:
one token per repository while its row lives, the HTML replaced under it, nothing written for
the same page until half its time to live went by, and the reports' expiry, purge and
deletions applying to it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from bot.adapters.store import reports
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.reports import MAX_HTML_BYTES, PAGE_NUMBER, ReportTooLarge, Sessions
from tests.test_drift_watch import store_writes

pytestmark = pytest.mark.servers

REPO = "octo/ml"
KEY = b"k" * 32
SHA = "a" * 40
T0 = datetime(2026, 7, 1, 12, 0)
TTL = 30.0


@pytest.fixture
def sessions(database_url: str) -> Iterator[Sessions]:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def keep(sessions: Sessions, html: str, at: datetime = T0, **other: object) -> reports.Page:
    fields: dict[str, object] = {"key": KEY, "repo": REPO, "head_sha": SHA, "ttl_days": TTL}
    fields.update(other)
    return reports.keep_page(sessions, html=html, at=at, **fields)  # type: ignore[arg-type]


def test_a_page_round_trips_under_one_token_replaced_in_place(sessions: Sessions) -> None:
    first = keep(sessions, "<p>one</p>")
    found = reports.find(sessions, first.token, at=T0)
    assert found is not None and (found.repo, found.html) == (REPO, "<p>one</p>")
    assert first.expires_at == T0 + timedelta(days=TTL)

    later = T0 + timedelta(hours=1)
    second = keep(sessions, "<p>two</p>", at=later)

    assert second.token == first.token  # the same address
    found = reports.find(sessions, first.token, at=later)
    assert found is not None and found.html == "<p>two</p>"
    other = keep(sessions, "<p>x</p>", repo="octo/other")
    assert other.token != first.token  # one page per repository


def test_the_same_page_is_not_written_again_until_half_its_ttl(sessions: Sessions) -> None:
    kept = keep(sessions, "<p>one</p>")

    with store_writes(sessions) as written:
        again = keep(sessions, "<p>one</p>", at=T0 + timedelta(days=TTL / 2 - 0.01))
    assert written == [] and again == kept

    with store_writes(sessions) as written:
        renewed = keep(sessions, "<p>one</p>", at=T0 + timedelta(days=TTL / 2 + 0.01))
    assert written != [] and renewed.token == kept.token
    assert renewed.expires_at == T0 + timedelta(days=TTL / 2 + 0.01 + TTL)
    with store_writes(sessions) as written:  # another head: written
        keep(sessions, "<p>one</p>", at=T0 + timedelta(days=TTL / 2 + 0.02), head_sha="b" * 40)
    assert written != []


def test_a_new_key_gives_a_new_token(sessions: Sessions) -> None:
    old = keep(sessions, "<p>one</p>")
    new = keep(sessions, "<p>one</p>", key=b"n" * 32)
    assert new.token != old.token
    assert reports.find(sessions, old.token, at=T0) is None
    assert reports.find(sessions, new.token, at=T0) is not None


def test_the_reports_expiry_purge_and_deletions_apply(sessions: Sessions) -> None:
    kept = keep(sessions, "<p>one</p>")
    pr = reports.save(
        sessions, key=KEY, repo=REPO, number=7, head_sha=SHA, html="pr", ttl_days=TTL, at=T0
    )
    with sessions.begin() as session:
        assert reports.delete_pull(session, REPO, 7) == 1  # a PR's closing leaves the page
    assert reports.find(sessions, pr, at=T0) is None
    assert reports.find(sessions, kept.token, at=T0) is not None

    expired = T0 + timedelta(days=TTL, seconds=1)
    assert reports.find(sessions, kept.token, at=expired) is None
    assert reports.purge(sessions, at=expired) == 1
    again = keep(sessions, "<p>one</p>", at=expired)
    assert again.token != kept.token  # a new row, a new nonce
    with sessions.begin() as session:
        assert reports.delete_repo(session, REPO) == 1  # the repository gone
    assert reports.find(sessions, again.token, at=expired) is None


def test_drop_page_writes_only_when_there_is_one(sessions: Sessions) -> None:
    with store_writes(sessions) as written:
        assert reports.drop_page(sessions, REPO) is False
    assert written == []
    kept = keep(sessions, "<p>one</p>")
    assert reports.drop_page(sessions, REPO) is True
    assert reports.find(sessions, kept.token, at=T0) is None
    assert PAGE_NUMBER == 0


def test_a_page_over_the_bound_is_refused(sessions: Sessions) -> None:
    with pytest.raises(ReportTooLarge):
        keep(sessions, "x" * (MAX_HTML_BYTES + 1))
