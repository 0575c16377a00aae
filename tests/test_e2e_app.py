"""End to end: real uvicorn + worker threads + SQLite (or PostgreSQL + Redis), the real
PyGithub client, FakeGitHub.

GitHub's own webhook payloads (``tests/fixtures/github``) are patched to point at the fake
repository, signed, and POSTed to ``/webhook``; the tests then read what the App did
from the fake's state: the one marked comment, the check run and its buttons.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.store import deliveries
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import History, SourceSpec
from bot.core.render.review import MARKER
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_shapes import Shapes
from tests.fakes.github_state import Repo, blob_sha
from tests.live import deliver_and_wait, live_server, make_settings
from tests.test_review_pr import (
    CONFIG,
    FILE_SOURCE,
    HISTORY,
    RUNS,
    SCRIPT,
    SHIFT_AT,
    history_jsonl,
    scores,
    script,
)

pytestmark = pytest.mark.servers

INSTALLATION = 7
REPO = "octo/ml"


class NoRemoteHistory:
    """The history factory of these tests: every gate reads a file in the repository."""

    def fetch(self, spec: SourceSpec) -> History:
        raise HistoryUnavailable("no remote history in this test")


@dataclass
class App:
    """The running App and the fake GitHub it talks to."""

    url: str
    fake: FakeGitHub
    runtime: Runtime
    repo: Repo

    def deliver(self, name: str, changes: dict[str, Any]) -> deliveries.Delivery:
        """POST a signed fixture delivery; wait until the worker has finished it."""
        return deliver_and_wait(self.url, self.runtime.sessions, name, changes, timeout=60)

    def pull_event(self, action: str, number: int) -> deliveries.Delivery:
        pr = self.repo.pr(number)
        return self.deliver(
            f"pull_request.{action}",
            {
                "number": number,
                "pull_request.number": number,
                "pull_request.head.sha": pr.head_sha,
                "pull_request.head.ref": pr.head_ref,
                "pull_request.base.ref": pr.base_ref,
                "repository.full_name": REPO,
                "repository.name": "ml",
                "repository.owner.login": "octo",
                "installation.id": INSTALLATION,
                "sender.login": "alice",
            },
        )


def arrange(fake: FakeGitHub) -> Repo:
    """Main: the script (0.56) and config; merged PR #3 shifted the score; 40 runs recorded."""
    repo = fake.add_repo(
        REPO, installation_id=INSTALLATION, files={SCRIPT: script("0.56"), CONFIG: FILE_SOURCE}
    )
    before = repo.head("main")
    repo.open_pr(
        3, head="async", head_files={"train.py": "mode = 'async'\n"}, title="Async rollout"
    )
    after = repo.merge_pr(3)
    commits = [before] * SHIFT_AT + [after] * (RUNS - SHIFT_AT)
    repo.commit("main", {HISTORY: history_jsonl(commits, scores())}, message="Record CI runs")
    return repo


@contextmanager
def running_app(tmp_path: Path, **overrides: Any) -> Iterator[App]:
    """The App (settings ``overrides``) serving the arranged repository of a fake GitHub."""
    with FakeGitHub() as fake:
        repo = arrange(fake)
        settings = make_settings(
            tmp_path,
            app_id=fake.app_id,
            private_key=fake.private_key,
            github_api_url=fake.base_url,
            **overrides,
        )
        runtime = build(
            settings, github=client_factory(settings), history=lambda spec: NoRemoteHistory()
        )
        with live_server(create_app(settings, runtime)) as url:
            yield App(url, fake, runtime, repo)
        fake.check()


@pytest.fixture
def app(tmp_path: Path, backends: dict[str, str]) -> Iterator[App]:
    """The App on the embedded store and queue, and on PostgreSQL + Redis."""
    with running_app(tmp_path, **backends) as running:
        yield running


def check_runs(app: App, sha: str) -> list[Any]:
    return [r for r in app.repo.check_runs(sha) if r.name == "threshold-bot"]


def test_opened_posts_the_review_comment_and_check_run(app: App) -> None:
    pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    failing = sum(v < 0.55 for v in scores()[-20:])

    delivery = app.pull_event("opened", 7)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    (comment,) = app.repo.comments(7)
    assert comment.user == "threshold-bot[bot]"
    assert comment.body.startswith(MARKER)
    assert "Action required" in comment.body
    assert f"**{failing}**/20" in comment.body  # failures of the proposed value in the window
    (run,) = check_runs(app, pr.head_sha)
    assert (run.status, run.conclusion, run.external_id) == ("completed", "action_required", "7")
    assert [a["identifier"] for a in run.actions] == ["approve"]
    assert all(len(a["label"]) <= 20 and len(a["description"]) <= 40 for a in run.actions)
    assert run.output["summary"]


def test_regime_table_links_the_pull_that_shifted_the_metric(app: App) -> None:
    app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.50")})

    app.pull_event("opened", 7)

    (comment,) = app.repo.comments(7)
    assert "Async rollout" in comment.body
    assert f"/{REPO}/pull/3" in comment.body


def test_synchronize_edits_the_comment_and_checks_the_new_head(app: App) -> None:
    first = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    first_head = first.head_sha
    app.pull_event("opened", 7)
    (before,) = app.repo.comments(7)
    body_before = before.body

    app.repo.commit("tune", {SCRIPT: script("0.50")}, message="Loosen")
    delivery = app.pull_event("synchronize", 7)

    assert delivery.status == "done", delivery.last_error
    (after,) = app.repo.comments(7)
    assert after.id == before.id and after.body != body_before
    assert "No action needed" in after.body
    (new_run,) = check_runs(app, app.repo.pr(7).head_sha)
    assert (new_run.conclusion, new_run.actions) == ("success", [])
    (old_run,) = check_runs(app, first_head)
    assert old_run.conclusion == "action_required"
    assert len(app.fake.requests("POST", f"/repos/{REPO}/issues/7/comments")) == 1


def test_history_unavailable_gives_a_check_that_says_how_to_retry(app: App) -> None:
    app.repo.commit("main", {CONFIG: FILE_SOURCE.replace(HISTORY, "ci/gone.jsonl")})
    pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.50")})

    app.pull_event("opened", 7)

    (comment,) = app.repo.comments(7)
    assert "ci/gone.jsonl" in comment.body and "/threshold-bot retry" in comment.body
    (run,) = check_runs(app, pr.head_sha)
    # the PR changes a gate that could not be checked: not green
    assert run.conclusion == "action_required"  # a maintainer may vouch for the changed gate
    assert [a["identifier"] for a in run.actions] == ["approve"]


def test_5xx_on_the_comment_is_retried_without_a_duplicate(app: App) -> None:
    app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    app.fake.fail_next("POST", r"/issues/7/comments$", status=502, times=2)

    delivery = app.pull_event("opened", 7)

    assert (delivery.status, delivery.attempts) == ("done", 2), delivery.last_error
    assert len(app.repo.comments(7)) == 1
    posts = app.fake.requests("POST", f"/repos/{REPO}/issues/7/comments")
    assert [p.status for p in posts] == [502, 502, 201]


def test_rerun_of_the_check_reviews_again(app: App) -> None:
    pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    app.pull_event("opened", 7)
    (run,) = check_runs(app, pr.head_sha)
    patches = len(app.fake.requests("PATCH", f"/repos/{REPO}/check-runs/{run.id}"))

    delivery = app.deliver(
        "check_run.rerequested",
        {
            "check_run.id": run.id,
            "check_run.name": "threshold-bot",
            "check_run.head_sha": pr.head_sha,
            "check_run.external_id": "7",
            "check_run.pull_requests": [],  # as for a branch in a fork
            "check_run.app.id": app.fake.app_id,
            "repository.full_name": REPO,
            "installation.id": INSTALLATION,
            "sender.login": "alice",
        },
    )

    assert delivery.status == "done", delivery.last_error
    assert len(check_runs(app, pr.head_sha)) == 1 and len(app.repo.comments(7)) == 1
    after = app.fake.requests("PATCH", f"/repos/{REPO}/check-runs/{run.id}")
    assert len(after) == patches + 1


# ----- history files GitHub's contents API does not serve in JSON (over 1 MB) ---------------
MB = 1024 * 1024


def pad_history(app: App, width: int = 40_000) -> int:
    """Commit the history on main with every run padded by an ignored field; its size."""
    runs = [json.loads(line) for line in (app.repo.file_at("main", HISTORY) or "").splitlines()]
    text = "".join(json.dumps({**run, "notes": "x" * width}) + "\n" for run in runs)
    app.repo.commit("main", {HISTORY: text}, message="Record CI runs with notes")
    return len(text.encode())


def test_a_history_file_over_1_mb_is_read_through_the_blob_api(app: App) -> None:
    size = pad_history(app)
    pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    failing = sum(v < 0.55 for v in scores()[-20:])

    delivery = app.pull_event("opened", 7)

    assert size > MB
    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    (comment,) = app.repo.comments(7)
    assert "Action required" in comment.body and f"**{failing}**/20" in comment.body
    (run,) = check_runs(app, pr.head_sha)
    assert run.conclusion == "action_required"
    blob = blob_sha(app.repo.file_at("main", HISTORY) or "")
    assert [c.status for c in app.fake.requests("GET", f"/repos/{REPO}/git/blobs/{blob}")] == [200]


def test_a_history_file_over_max_file_bytes_gives_a_review_saying_so(tmp_path: Path) -> None:
    with running_app(tmp_path, max_file_bytes=MB) as app:
        size = pad_history(app)
        pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})

        delivery = app.pull_event("opened", 7)

        assert delivery.status == "done", delivery.last_error
        (comment,) = app.repo.comments(7)
        reason = f"{HISTORY} is {size / MB:.1f} MB, over the limit of 1.0 MB (MAX\\_FILE\\_BYTES)"
        assert reason in comment.body
        (run,) = check_runs(app, pr.head_sha)
        assert run.conclusion in ("neutral", "action_required")  # the gate was not checked
        assert reason in run.output["summary"]
        assert not [c for c in app.fake.requests("GET") if "/git/blobs/" in c.path]


def test_github_refusing_the_history_file_gives_a_review_saying_so(app: App) -> None:
    pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    refusal = Shapes.error(403, "Resource not accessible by integration")
    app.fake.fail_next("GET", rf"/contents/{HISTORY}$", status=403, times=5, body=refusal)

    delivery = app.pull_event("opened", 7)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    (comment,) = app.repo.comments(7)
    assert "GitHub 403: Resource not accessible by integration" in comment.body
    assert HISTORY in comment.body
    (run,) = check_runs(app, pr.head_sha)
    assert run.conclusion in ("neutral", "action_required")  # the gate was not checked
    assert "GitHub 403" in run.output["summary"]
