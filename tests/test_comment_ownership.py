"""Only comments the App wrote are its own; its login comes from ``GET /app``.

A CI bot echoing a PR description holding the App's marker once made the App edit that
bot's comment (403) and post nothing.  Here the real PyGithub client and the running App
(uvicorn) talk to the fake GitHub, whose comments carry ``performed_via_github_app`` as
GitHub's do, and the fake's request log shows which comments were touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.adapters.github.app import GitHubApp
from bot.adapters.github.client import GitHubClient
from bot.adapters.github.identity import AppLogin
from bot.core.render.review import MARKER
from bot.core.routing import is_own_event
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import IssueComment, Repo
from tests.live import SECRET
from tests.test_e2e_app import REPO, SCRIPT, running_app, script
from tests.webhooks import fixture, patched, signed_fixture

pytestmark = pytest.mark.servers

INSTALLATION = 7
CI_BOT = (31337, "ci-reporter")  # another App: (id, slug)
ECHO = f"CI report for this PR. Description:\n\n{MARKER}\nplease review"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub) -> Repo:
    repo = fake.add_repo(REPO, installation_id=INSTALLATION, files={SCRIPT: script("0.56")})
    repo.open_pr(5, head="tune", head_files={SCRIPT: script("0.55")})
    return repo


def app_of(fake: FakeGitHub, retries: int = 3) -> GitHubApp:
    return fake.github_app(retries=retries)


def patches_of(fake: FakeGitHub, comment: IssueComment) -> int:
    return len(fake.requests("PATCH", f"/repos/{REPO}/issues/comments/{comment.id}"))


def test_another_bots_comment_holding_the_marker_is_left_alone(
    fake: FakeGitHub, repo: Repo
) -> None:
    echo = repo.add_comment(5, ECHO, app=CI_BOT)  # older than anything the App writes
    client = app_of(fake).installation(INSTALLATION)

    first = client.upsert_comment(REPO, 5, f"{MARKER}\nfirst", MARKER)
    second = client.upsert_comment(REPO, 5, f"{MARKER}\nsecond", MARKER)

    assert first.created and not second.created and first.id == second.id != echo.id
    bodies = {c.id: (c.user, c.body) for c in repo.comments(5)}
    assert bodies == {
        echo.id: (f"{CI_BOT[1]}[bot]", ECHO),
        first.id: (fake.state.bot_login, f"{MARKER}\nsecond"),
    }
    assert patches_of(fake, echo) == 0


def test_a_comment_by_the_apps_login_is_its_own_the_login_read_once(
    fake: FakeGitHub, repo: Repo
) -> None:
    # written by the App's bot user, without ``performed_via_github_app`` (as old comments)
    older = repo.add_comment(5, f"{MARKER}\nold review", user=fake.state.bot_login)
    repo.add_comment(5, f"{MARKER}\nquoted", user="threshold-bot")  # a user, not the bot
    app = app_of(fake)

    for installation_client in (app.installation(INSTALLATION), app.installation(INSTALLATION)):
        ref = installation_client.upsert_comment(REPO, 5, f"{MARKER}\nnew review", MARKER)
        assert ref.id == older.id and not ref.created

    assert app.login.get() == f"{fake.state.app_slug}[bot]"
    assert len(fake.requests("GET", "/app")) == 1
    assert [c.body for c in repo.comments(5)] == [f"{MARKER}\nnew review", f"{MARKER}\nquoted"]


def test_while_get_app_fails_the_app_id_still_finds_the_apps_comment(
    fake: FakeGitHub, repo: Repo
) -> None:
    fake.fail_next("GET", r"^/app$", status=502, times=100)
    echo = repo.add_comment(5, ECHO, app=CI_BOT)
    client = app_of(fake).installation(INSTALLATION)

    first = client.upsert_comment(REPO, 5, f"{MARKER}\nfirst", MARKER)
    second = client.upsert_comment(REPO, 5, f"{MARKER}\nsecond", MARKER)

    assert first.id == second.id and [c.id for c in repo.comments(5)] == [echo.id, first.id]
    assert patches_of(fake, echo) == 0
    assert {c.status for c in fake.requests("GET", "/app")} == {502}


def test_a_failed_read_of_the_login_is_retried_later(fake: FakeGitHub) -> None:
    app = app_of(fake, retries=0)
    login = AppLogin(app.read_login, retry_seconds=0)
    fake.fail_next("GET", r"^/app$", status=502, times=1)

    assert login.get() is None  # no login, and no exception
    assert login.get() == f"{fake.state.app_slug}[bot]"  # asked again: GitHub is back
    assert [c.status for c in fake.requests("GET", "/app")] == [502, 200]
    overridden = AppLogin(app.read_login, "override[bot]")
    assert overridden.get() == overridden.known() == "override[bot]"
    assert len(fake.requests("GET", "/app")) == 2  # the override asks GitHub nothing


def test_a_token_client_knowing_no_app_takes_no_comment_for_its_own(
    fake: FakeGitHub, repo: Repo
) -> None:
    repo.add_comment(5, f"{MARKER}\nreview", user=fake.state.bot_login)
    client = GitHubClient(fake.client(INSTALLATION))  # neither an App id nor a login

    assert client.find_comment(REPO, 5, MARKER) is None


# ----- events sent by the App, its login unknown ----------------------------------------------


def test_own_events_are_known_from_the_payload_while_the_login_is_unknown() -> None:
    bot = {"sender.login": "threshold-bot[bot]", "sender.type": "Bot"}
    ours = patched(
        fixture("check_run.created"),
        {**bot, "check_run.app.id": 4242, "check_run.app.slug": "threshold-bot"},
    )
    assert is_own_event(ours, None, 4242)
    assert not is_own_event(ours, None, 1)  # the payload's App is another one
    assert not is_own_event(patched(ours, {"sender.type": "User"}), None, 4242)
    # a push by the App names no App: only the login (from GET /app) can tell
    push = patched(fixture("pull_request.synchronize"), bot)
    assert not is_own_event(push, None, 4242)
    assert is_own_event(push, "threshold-bot[bot]", 4242)


# ----- the running App ---------------------------------------------------------------------------


def test_the_app_without_bot_login_posts_its_own_review_and_ignores_its_push(
    tmp_path: Path,
) -> None:
    with running_app(tmp_path, bot_login=None) as app:
        app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
        echo = app.repo.add_comment(7, ECHO, app=CI_BOT)

        delivery = app.pull_event("opened", 7)

        assert delivery.status == "done", delivery.last_error
        first, *others = app.repo.comments(7)
        assert (first.id, first.body) == (echo.id, ECHO)
        assert [(c.user, c.body.startswith(MARKER)) for c in others] == [
            (app.fake.state.bot_login, True)
        ]
        assert patches_of(app.fake, echo) == 0

        # the App's own push (e.g. /rebaseline): ignored at intake, the login now read
        body, headers = signed_fixture(
            "pull_request.synchronize",
            SECRET,
            {"sender.login": app.fake.state.bot_login, "sender.type": "Bot"},
        )
        answer = httpx.post(f"{app.url}/webhook", content=body, headers=headers, timeout=30)
        assert answer.status_code == 202
        assert answer.json()["status"] == "ignored"
        assert answer.json()["reason"] == "sent by the app itself"


def test_an_outage_of_get_app_neither_stops_the_webhook_nor_the_review(
    tmp_path: Path,
) -> None:
    with running_app(tmp_path, bot_login=None) as app:
        app.fake.fail_next("GET", r"^/app$", status=503, times=1000)
        app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})

        first = app.pull_event("opened", 7)
        app.repo.commit("tune", {"README.md": "# tuned\n"})
        second = app.pull_event("synchronize", 7)

        assert (first.status, second.status) == ("done", "done"), second.last_error
        (comment,) = app.repo.comments(7)  # found again by the App id: edited, not doubled
        assert comment.body.startswith(MARKER)
        assert {c.status for c in app.fake.requests("GET", "/app")} == {503}
