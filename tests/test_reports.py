"""The interactive report the App serves for each reviewed PR (``GET /reports/{token}``).

End to end: real uvicorn and worker threads, the real PyGithub client against FakeGitHub,
signed webhook deliveries (``tests/test_e2e_app.py``); the report is fetched with httpx from
the running App.  The comment links ``REPORT_BASE_URL/reports/TOKEN``; the tests fetch
``/reports/TOKEN`` from the App itself (the base URL being the operator's proxy).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bot.adapters.settings import SettingsError, load_settings
from bot.adapters.store import cursors, dashboards, drift, reports, tracked
from bot.adapters.store.dashboards import DashboardRow
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.drift import DriftItemRow
from bot.adapters.store.reports import MAX_HTML_BYTES, ReportRow, ReportTooLarge
from bot.app.reports import CSP, NOT_FOUND, UNCHECKED
from bot.core.models import SourceSpec
from tests.live import SECRET, post_and_wait, wait_until
from tests.test_e2e_app import INSTALLATION, REPO, App, running_app
from tests.test_review_pr import CONFIG, FILE_SOURCE, SCRIPT, script
from tests.webhooks import repository_event as repository_event_payload
from tests.webhooks import signed

pytestmark = pytest.mark.servers

BASE = "https://bot.example.test/threshold"
LINK = re.compile(rf"\[Open the interactive report\]\({re.escape(BASE)}/reports/([\w-]+)\)")
GATE = "EVAL_ACC_MIN_VALUE"  # the gate of ``script``


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with running_app(tmp_path, report_base_url=BASE) as running:
        yield running


def review(app: App, value: str, number: int = 7) -> str | None:
    """Open PR ``number`` setting the gate to ``value`` (or push it); the comment's report
    token, if it links one."""
    if number in app.repo.pulls:
        app.repo.commit("tune", {SCRIPT: script(value)}, message=f"Set {value}")
        delivery = app.pull_event("synchronize", number)
    else:
        app.repo.open_pr(number, head="tune", head_files={SCRIPT: script(value)})
        delivery = app.pull_event("opened", number)
    assert delivery.status == "done", delivery.last_error
    (comment,) = app.repo.comments(number)
    found = LINK.search(comment.body)
    return found.group(1) if found else None


def fetch(app: App, token: str) -> httpx.Response:
    return httpx.get(f"{app.url}/reports/{token}", timeout=30)


def rows(app: App) -> list[ReportRow]:
    with app.runtime.sessions() as session:
        return list(session.scalars(select(ReportRow)))


def close(app: App, number: int) -> None:
    delivery = app.deliver(
        "pull_request.closed",
        {
            "number": number,
            "pull_request.number": number,
            "repository.full_name": REPO,
            "repository.name": REPO.split("/")[1],
            "repository.owner.login": REPO.split("/")[0],
            "installation.id": INSTALLATION,
            "sender.login": "alice",
        },
    )
    assert delivery.status == "done", delivery.last_error


def test_a_reviewed_pr_links_its_report_served_with_the_security_headers(app: App) -> None:
    token = review(app, "0.55")

    assert token is not None and re.fullmatch(r"[A-Za-z0-9_-]{43}", token)  # 256 bits
    answer = fetch(app, token)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == CSP
    assert "script-src 'unsafe-inline'" in CSP and "default-src 'none'" in CSP
    assert "sandbox allow-scripts" in CSP and "connect-src" not in CSP  # no requests at all
    assert "noindex" in answer.headers["x-robots-tag"]
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["cache-control"] == "private, max-age=60"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.text.lstrip().lower().startswith("<!doctype html>")
    assert GATE in answer.text and f"{REPO}#7" in answer.text
    (row,) = rows(app)
    assert (row.repo, row.number, row.head_sha) == (REPO, 7, app.repo.pr(7).head_sha)
    # the store keeps the token's hash, never the token
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert all(token not in str(value) for value in vars(row).values())


def test_a_second_review_keeps_the_link_and_serves_the_new_review(app: App) -> None:
    first = review(app, "0.55")
    assert first is not None
    before = fetch(app, first).text

    second = review(app, "0.50")

    assert second == first
    after = fetch(app, second)
    assert after.status_code == 200 and after.text != before
    (row,) = rows(app)
    assert row.head_sha == app.repo.pr(7).head_sha  # the new head's review


def test_an_unknown_or_malformed_token_is_404(app: App) -> None:
    token = review(app, "0.55")
    assert token is not None
    other = ("A" if token[0] != "A" else "B") + token[1:]

    for wrong in (other, token[:-1], token + "A", token[:-1] + ".", "x" * 43 + "%00"):
        answer = fetch(app, wrong)
        assert (answer.status_code, answer.text) == (404, NOT_FOUND), wrong
        assert answer.headers["cache-control"] == "no-store"


def test_closing_the_pr_deletes_its_report(app: App) -> None:
    token = review(app, "0.55")
    assert token is not None and fetch(app, token).status_code == 200

    close(app, 7)

    assert (fetch(app, token).status_code, fetch(app, token).text) == (404, NOT_FOUND)
    assert rows(app) == []


def test_an_expired_report_is_404_then_purged(tmp_path: Path) -> None:
    ttl = 1.5  # seconds
    with running_app(tmp_path, report_base_url=BASE, report_ttl_days=ttl / 86400) as app:
        token = review(app, "0.55")
        assert token is not None and fetch(app, token).status_code == 200
        (row,) = rows(app)
        time.sleep(max(0.0, (row.expires_at - row.created_at).total_seconds()) + 0.2)

        assert (fetch(app, token).status_code, fetch(app, token).text) == (404, NOT_FOUND)
        assert len(rows(app)) == 1  # still stored: never served
        app.runtime.scheduler.jobs["purge"].run()  # the hourly job of the running App
        assert rows(app) == []


def test_a_private_repository_gets_no_report_unless_the_operator_opts_in(
    tmp_path: Path,
) -> None:
    for name in ("default", "opted-in"):
        (tmp_path / name).mkdir()
    with running_app(tmp_path / "default", report_base_url=BASE) as app:
        app.repo.private = True
        assert review(app, "0.55") is None
        assert rows(app) == []
    with running_app(tmp_path / "opted-in", report_base_url=BASE, report_private_repos=True) as app:
        app.repo.private = True
        token = review(app, "0.55")
        assert token is not None and fetch(app, token).status_code == 200
        # the visibility came with the PR: no request for the repository itself
        assert not app.fake.requests("GET", f"/repos/{REPO}")


def test_report_off_in_the_config_gives_no_report_and_deletes_the_previous_one(
    app: App,
) -> None:
    token = review(app, "0.55")
    assert token is not None

    app.repo.commit("main", {CONFIG: FILE_SOURCE + "report: off\n"}, message="No reports")
    assert review(app, "0.50") is None

    assert fetch(app, token).status_code == 404 and rows(app) == []


def test_without_report_base_url_there_is_no_link_and_no_route(tmp_path: Path) -> None:
    with running_app(tmp_path) as app:
        assert review(app, "0.55") is None
        assert rows(app) == []
        assert fetch(app, "A" * 43).status_code == 404


def test_a_report_over_the_size_bound_is_not_stored_and_the_log_says_so(
    app: App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(reports, "MAX_HTML_BYTES", 1000)
    caplog.set_level(logging.WARNING, "bot.features.review.report")

    assert review(app, "0.55") is None

    assert rows(app) == []
    assert any(
        f"no report for {REPO}#7" in r.getMessage() and "over" in r.getMessage()
        for r in caplog.records
    )


# ----- the repository going private, away or read-only -------------------------------------


def repository_event(
    app: App, action: str, repo: str = REPO, changes: dict[str, Any] | None = None
) -> None:
    """A signed ``repository`` delivery about ``repo``, processed by the App."""
    payload = repository_event_payload(action, repo, INSTALLATION, changes)
    body, headers = signed("repository", payload, SECRET)
    delivery = post_and_wait(app.url, app.runtime.sessions, body, headers, what=action)
    assert (delivery.status, delivery.outcome) == ("done", "1 handler(s) ran"), delivery.last_error


def keep_more(app: App, repo: str) -> None:
    """What else is stored of ``repo``: a tracked PR, a drift item and a dashboard."""
    with app.runtime.sessions.begin() as session:
        spec = SourceSpec(kind="wandb", entity="acme", project="ci")
        tracked.track(
            session,
            installation_id=INSTALLATION,
            repo=repo,
            number=9,
            head_sha="b" * 40,
            sources=[spec],
        )
    cursors.put(app.runtime.sessions, cursors.repository_key(repo), SCRIPT)  # a cut round
    item = drift.claim(
        app.runtime.sessions,
        repo=repo,
        file=SCRIPT,
        installation_id=INSTALLATION,
        owner="t",
        seconds=1,
    )
    assert item is not None
    board = dashboards.claim(
        app.runtime.sessions, repo=repo, installation_id=INSTALLATION, owner="t", seconds=1
    )
    assert board is not None


def kept(app: App) -> dict[str, list[str]]:
    """Which repositories have tracked PRs, drift items and dashboards."""
    with app.runtime.sessions() as session:
        pulls = sorted({t.repo for t in tracked.tracked(session)})
        items = sorted(session.scalars(select(DriftItemRow.repo)).all())
        boards = sorted(session.scalars(select(DashboardRow.repo)).all())
    return {"tracked": pulls, "drift": items, "dashboards": boards}


def test_a_repository_made_private_stops_serving_its_reports_at_once(app: App) -> None:
    token = review(app, "0.55")
    assert token is not None and fetch(app, token).status_code == 200
    keep_more(app, REPO)

    app.repo.private = True
    repository_event(app, "privatized")

    assert (fetch(app, token).status_code, fetch(app, token).text) == (404, NOT_FOUND)
    assert rows(app) == []
    assert kept(app) == {"tracked": [REPO], "drift": [REPO], "dashboards": [REPO]}  # still


def test_a_repository_made_private_keeps_its_reports_when_the_operator_opts_in(
    tmp_path: Path,
) -> None:
    with running_app(tmp_path, report_base_url=BASE, report_private_repos=True) as app:
        token = review(app, "0.55")
        assert token is not None

        app.repo.private = True
        repository_event(app, "privatized")

        assert fetch(app, token).status_code == 200 and len(rows(app)) == 1


OTHER = "octo/other"  # another repository of the installation: left alone


@pytest.mark.parametrize("action", ["deleted", "transferred"])
def test_a_repository_deleted_or_transferred_is_forgotten(app: App, action: str) -> None:
    token = review(app, "0.55")
    assert token is not None and fetch(app, token).status_code == 200
    keep_more(app, REPO)
    keep_more(app, OTHER)
    if action == "deleted":
        repository_event(app, action)
    else:  # the delivery names the new owner; what is stored is under the former name
        former = {"owner": {"from": {"user": {"login": REPO.split("/")[0], "id": 1}}}}
        repository_event(app, action, "lab/ml", former)

    assert (fetch(app, token).status_code, fetch(app, token).text) == (404, NOT_FOUND)
    assert rows(app) == []
    assert kept(app) == {"tracked": [OTHER], "drift": [OTHER], "dashboards": [OTHER]}
    assert cursors.stored(app.runtime.sessions) == {cursors.repository_key(OTHER): SCRIPT}


def test_an_archived_repository_is_no_longer_rechecked_and_its_report_stays(app: App) -> None:
    token = review(app, "0.55")
    assert token is not None
    keep_more(app, REPO)

    repository_event(app, "archived")

    assert fetch(app, token).status_code == 200  # its visibility did not change
    assert kept(app) == {"tracked": [], "drift": [REPO], "dashboards": [REPO]}


RECHECK = 1.0  # seconds: REPORT_RECHECK_SECONDS of the tests below


@pytest.fixture
def rechecking(tmp_path: Path) -> Iterator[App]:
    with running_app(tmp_path, report_base_url=BASE, report_recheck_seconds=RECHECK) as running:
        yield running


def after_recheck_time(app: App) -> None:
    """Wait until the stored report is older than ``RECHECK``."""
    (row,) = rows(app)
    wait_until(lambda: now_utc() - row.created_at > timedelta(seconds=RECHECK), what="recheck")


def test_a_report_is_not_served_once_github_shows_its_repository_private_without_an_event(
    rechecking: App,
) -> None:
    app = rechecking
    token = review(app, "0.55")
    assert token is not None and fetch(app, token).status_code == 200

    def asked() -> int:
        return len(app.fake.requests("GET", f"/repos/{REPO}"))

    assert asked() == 0  # a fresh report: the review saw its repository public

    after_recheck_time(app)
    assert fetch(app, token).status_code == 200 and fetch(app, token).status_code == 200
    assert asked() == 1  # looked up once, then cached for RECHECK seconds

    app.repo.private = True  # no event arrives
    wait_until(lambda: fetch(app, token).status_code == 404, timeout=10 * RECHECK, what="404")

    assert asked() == 2
    assert fetch(app, token).text == NOT_FOUND
    assert rows(app) == []  # deleted once seen private


def test_a_report_is_not_served_once_the_app_no_longer_reaches_its_repository(
    rechecking: App,
) -> None:
    app = rechecking
    token = review(app, "0.55")
    assert token is not None

    app.repo.installation_id = None  # uninstalled from it (or it went elsewhere), no event
    after_recheck_time(app)

    assert (fetch(app, token).status_code, fetch(app, token).text) == (404, NOT_FOUND)
    assert app.fake.requests("GET", f"/repos/{REPO}/installation")
    assert rows(app) == []


def test_a_report_whose_visibility_cannot_be_checked_is_not_served(rechecking: App) -> None:
    app = rechecking
    token = review(app, "0.55")
    assert token is not None
    after_recheck_time(app)
    app.fake.fail_next("GET", rf"^/repos/{REPO}$", status=502, times=4)  # and its retry

    answer = fetch(app, token)

    assert (answer.status_code, answer.text) == (503, UNCHECKED)
    assert answer.headers["cache-control"] == "no-store"
    assert len(rows(app)) == 1  # not known to be private: kept
    wait_until(lambda: fetch(app, token).status_code == 200, timeout=30, what="served again")


# ----- the store -----------------------------------------------------------------------------


@pytest.fixture
def sessions(database_url: str) -> Any:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def save(sessions: Any, key: bytes, html: str = "<p>report</p>", **kw: Any) -> str:
    return reports.save(
        sessions,
        key=key,
        repo=kw.pop("repo", REPO),
        number=kw.pop("number", 7),
        head_sha="a" * 40,
        html=html,
        ttl_days=kw.pop("ttl_days", 30.0),
        **kw,
    )


def html_of(sessions: Any, token: str, at: datetime | None = None) -> str | None:
    found = reports.find(sessions, token, at=at)
    return None if found is None else found.html


def test_each_pr_has_its_own_token_and_a_new_key_gives_new_links(sessions: Any) -> None:
    key = b"k" * 32
    seven, eight = save(sessions, key), save(sessions, key, number=8)
    assert seven != eight
    assert save(sessions, key, "<p>again</p>") == seven
    assert html_of(sessions, seven) == "<p>again</p>"

    rotated = save(sessions, b"r" * 32, "<p>rotated</p>")

    assert rotated != seven and reports.find(sessions, seven) is None
    assert html_of(sessions, rotated) == "<p>rotated</p>"


def test_a_report_over_the_bound_is_refused(sessions: Any) -> None:
    with pytest.raises(ReportTooLarge):
        save(sessions, b"k" * 32, "x" * (MAX_HTML_BYTES + 1))
    assert save(sessions, b"k" * 32, "x" * MAX_HTML_BYTES)


def test_purge_deletes_only_the_expired_reports(sessions: Any) -> None:
    key = b"k" * 32
    old = save(sessions, key, ttl_days=1.0)
    new = save(sessions, key, number=8, ttl_days=3.0)
    later = datetime.now(UTC) + timedelta(days=2)  # between the two expiries

    assert reports.find(sessions, old, at=later) is None
    assert reports.purge(sessions, at=later) == 1
    assert html_of(sessions, new, at=later) == "<p>report</p>"


def test_report_base_url_must_be_an_http_url() -> None:
    for bad in ("bot.example.com", "ftp://bot.example.com", "https://", "https://h/?q=1"):
        with pytest.raises(SettingsError, match="REPORT_BASE_URL"):
            load_settings(_env_file=None, report_base_url=bad)
    ok = load_settings(_env_file=None, report_base_url=BASE, report_private_repos=True)
    assert (ok.report_base_url, ok.report_private_repos, ok.report_ttl_days) == (BASE, True, 30)
