"""A PR retargeted to another base branch is reviewed again; an edit of its title is not.

The running App (uvicorn, workers, the real PyGithub client) and the fake GitHub: PR #7 is
opened against ``dev``, which has no repository config, so its gate has no history there
and cannot be verified.  Changing its base to ``main`` (where the config names the
history file) sends ``pull_request`` ``edited`` with ``changes.base``, in GitHub's shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.app.runtime import build
from bot.app.web import create_app
from bot.core.render.review import MARKER
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo
from tests.live import live_server, make_settings
from tests.test_e2e_app import (
    CONFIG,
    FILE_SOURCE,
    HISTORY,
    INSTALLATION,
    REPO,
    RUNS,
    SCRIPT,
    SHIFT_AT,
    App,
    NoRemoteHistory,
    history_jsonl,
    scores,
    script,
)

pytestmark = pytest.mark.servers


def arrange(fake: FakeGitHub) -> Repo:
    """Main: the script, 40 runs and (last) the config; ``dev`` branched off before it."""
    repo = fake.add_repo(REPO, installation_id=INSTALLATION, files={SCRIPT: script("0.56")})
    before = repo.head("main")
    repo.open_pr(3, head="async", head_files={"train.py": "mode = 'async'\n"})
    after = repo.merge_pr(3)
    commits = [before] * SHIFT_AT + [after] * (RUNS - SHIFT_AT)
    repo.commit("main", {HISTORY: history_jsonl(commits, scores())})
    repo.commit("dev", {"NOTES.md": "dev branch\n"}, from_branch="main")
    repo.commit("main", {CONFIG: FILE_SOURCE}, message="Configure threshold-bot")
    return repo


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with FakeGitHub() as fake:
        repo = arrange(fake)
        settings = make_settings(
            tmp_path, app_id=fake.app_id, private_key=fake.private_key, github_api_url=fake.base_url
        )
        runtime = build(
            settings, github=client_factory(settings), history=lambda spec: NoRemoteHistory()
        )
        with live_server(create_app(settings, runtime)) as url:
            yield App(url, fake, runtime, repo)
        fake.check()


def edited(app: App, changes: dict[str, Any]) -> str:
    """Deliver ``pull_request`` ``edited`` for PR #7 with ``changes``; its final status."""
    pr = app.repo.pr(7)
    delivery = app.deliver(
        "pull_request.edited",
        {
            "number": 7,
            "changes": changes,
            "pull_request.number": 7,
            "pull_request.state": "open",
            "pull_request.head.sha": pr.head_sha,
            "pull_request.head.ref": pr.head_ref,
            "pull_request.base.ref": pr.base_ref,
            "pull_request.base.sha": pr.base_sha,
            "repository.full_name": REPO,
            "repository.name": "ml",
            "repository.owner.login": "octo",
            "installation.id": INSTALLATION,
            "sender.login": "alice",
        },
    )
    assert delivery.last_error is None, delivery.last_error
    return delivery.status


def test_a_base_change_reviews_the_pr_again_a_title_edit_does_not(app: App) -> None:
    app.repo.open_pr(7, head="tune", base="dev", head_files={SCRIPT: script("0.55")})
    failing = sum(v < 0.55 for v in scores()[-20:])
    assert app.pull_event("opened", 7).status == "done"
    (unverified,) = app.repo.comments(7)
    assert "no history source" in unverified.body  # no config on dev
    assert f"**{failing}**/20" not in unverified.body

    calls = len(app.fake.calls)
    assert edited(app, {"title": {"from": "Update thresholds (draft)"}}) == "done"
    assert len(app.fake.calls) == calls  # nothing read, nothing written

    old_base = app.repo.pr(7).base_sha
    app.repo.pr(7).base_ref = "main"  # what GitHub does when the base is changed
    assert edited(app, {"base": {"ref": {"from": "dev"}, "sha": {"from": old_base}}}) == "done"

    (reviewed,) = app.repo.comments(7)  # the same comment, edited
    assert reviewed.id == unverified.id and reviewed.body.startswith(MARKER)
    assert "no history source" not in reviewed.body  # main's config names the history file
    assert f"**{failing}**/20" in reviewed.body  # failures of the proposed value in the window
    (run,) = [r for r in app.repo.check_runs(app.repo.pr(7).head_sha) if r.name == "threshold-bot"]
    assert run.conclusion == "action_required" and "no history source" not in run.output["summary"]
