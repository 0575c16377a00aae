"""End to end: ``/rebaseline`` and the approve button through the real server and worker.

One uvicorn server, worker threads, SQLite store and FakeGitHub serve the whole module;
each test opens its own PR.  Deliveries are GitHub's own payloads (``issue_comment
.created`` on a PR, ``check_run.requested_action``) patched to the fake repository and
re-signed.  Every assertion reads real state: commits and their diffs in the fake, the
reviews with their suggestion blocks, comments, check runs, and the audit log as the
``audit`` command prints it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from bot.adapters.github.app import client_factory
from bot.adapters.store import deliveries
from bot.app.runtime import build
from bot.app.web import create_app
from bot.cli.audit import audit_command
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import CheckRun, IssueComment
from tests.live import SECRET, live_server, make_settings
from tests.test_e2e_app import INSTALLATION, REPO, App, NoRemoteHistory, arrange
from tests.test_review_pr import SCRIPT, rule_limit, scores, script
from tests.webhooks import signed_fixture

pytestmark = pytest.mark.servers

BOT = "threshold-bot[bot]"
MAINTAINER, READER, CONTRIBUTOR = "maya", "rita", "carl"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]) -> Iterator[App]:
    """The App, on SQLite and on PostgreSQL + Redis."""
    tmp_path = tmp_path_factory.mktemp("e2e-rebaseline")
    with FakeGitHub() as fake:
        repo = arrange(fake)
        repo.set_permission(MAINTAINER, "maintain")
        repo.set_permission(READER, "read")
        settings = make_settings(
            tmp_path,
            app_id=fake.app_id,
            private_key=fake.private_key,
            github_api_url=fake.base_url,
            bot_login=BOT,
            **module_backends,
        )
        runtime = build(
            settings, github=client_factory(settings), history=lambda spec: NoRemoteHistory()
        )
        with live_server(create_app(settings, runtime)) as url:
            yield App(url, fake, runtime, repo)
        fake.check()


# --------------------------------------------------------------------------- helpers


def open_pr(app: App, number: int, value: str, **kwargs: Any) -> str:
    """Open PR ``number`` setting the gate to ``value``; deliver ``opened``; return its head."""
    pr = app.repo.open_pr(
        number, head=f"tune-{number}", head_files={SCRIPT: script(value)}, **kwargs
    )
    delivery = app.pull_event("opened", number)
    assert delivery.status == "done", delivery.last_error
    return pr.head_sha


def comment(app: App, number: int, user: str, body: str) -> tuple[IssueComment, Any]:
    """``user`` comments ``body`` on PR ``number``: the comment exists in the fake, and
    GitHub's ``issue_comment.created`` delivery for it is processed."""
    state = app.fake.state
    now = datetime.now(UTC).replace(microsecond=0)
    posted = IssueComment(state.next_id(), number, user, body, now, now)
    with state.lock:
        app.repo.issue_comments[posted.id] = posted
    delivery = app.deliver(
        "issue_comment.created",
        {
            "issue.number": number,
            "comment.id": posted.id,
            "comment.body": body,
            "comment.user.login": user,
            "comment.user.type": "User",
            "repository.full_name": REPO,
            "repository.name": "ml",
            "repository.owner.login": "octo",
            "installation.id": INSTALLATION,
            "sender.login": user,
            "sender.type": "User",
        },
    )
    assert delivery.status == "done", delivery.last_error
    return posted, delivery


def bot_replies(app: App, number: int) -> list[str]:
    """Bodies of the App's comments on PR ``number`` other than the review comment."""
    return [
        c.body
        for c in app.repo.comments(number)
        if c.user == BOT and "threshold-bot:review" not in c.body
    ]


def our_check(app: App, sha: str) -> CheckRun:
    (run,) = [r for r in app.repo.check_runs(sha) if r.name == "threshold-bot"]
    return run


def click_approve(app: App, number: int, user: str) -> None:
    """``user`` presses "Approve thresholds" on the check run of the PR's head."""
    head = app.repo.pr(number).head_sha
    run = our_check(app, head)
    delivery = app.deliver(
        "check_run.requested_action",
        {
            "check_run.id": run.id,
            "check_run.name": "threshold-bot",
            "check_run.head_sha": head,
            "check_run.external_id": str(number),
            "check_run.pull_requests": [],
            "check_run.app.id": app.fake.app_id,
            "requested_action.identifier": "approve",
            "repository.full_name": REPO,
            "installation.id": INSTALLATION,
            "sender.login": user,
        },
    )
    assert delivery.status == "done", delivery.last_error


def synchronize(app: App, number: int, sender: str) -> dict[str, Any]:
    """POST the ``synchronize`` GitHub sends after a push by ``sender``; return the answer."""
    pr = app.repo.pr(number)
    body, headers = signed_fixture(
        "pull_request.synchronize",
        SECRET,
        {
            "number": number,
            "pull_request.number": number,
            "pull_request.head.sha": pr.head_sha,
            "repository.full_name": REPO,
            "installation.id": INSTALLATION,
            "sender.login": sender,
        },
    )
    answer = httpx.post(f"{app.url}/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    result: dict[str, Any] = answer.json()
    return result


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]


def expected_limit() -> str:
    return f"{rule_limit(scores()[-20:], '0.56'):.2f}"


# --------------------------------------------------------------------------- /rebaseline


def test_permitted_rebaseline_commits_only_literal_and_provenance(app: App) -> None:
    old_head = open_pr(app, 11, "0.55")
    assert our_check(app, old_head).conclusion == "action_required"
    want = expected_limit()

    posted, _ = comment(app, 11, MAINTAINER, "Rule values please.\n\n/rebaseline\n")

    pr = app.repo.pr(11)
    new_head = pr.head_sha
    assert new_head != old_head
    new_commit = app.repo.objects[new_head]
    assert new_commit.parents == [old_head] and new_commit.author == BOT
    assert "EVAL_ACC_MIN_VALUE: 0.55 → " + want in new_commit.message
    before = app.repo.file_at(old_head, SCRIPT)
    after = app.repo.file_at(new_head, SCRIPT)
    assert before is not None and after is not None
    for line in changed_lines(before, after):
        assert line[1:].startswith(("EVAL_ACC_MIN_VALUE=", "# ")), line
    # byte for byte elsewhere: drop the provenance block and the literal is the only change
    kept = "".join(line for line in after.splitlines(keepends=True) if not line.startswith("# "))
    assert kept == before.replace("EVAL_ACC_MIN_VALUE=0.55", f"EVAL_ACC_MIN_VALUE={want}")
    provenance = [line for line in after.splitlines() if line.startswith("# ")]
    today = datetime.now(UTC).date().isoformat()
    assert provenance[0] == f"# threshold-bot: rebaselined {today} by {MAINTAINER} with /rebaseline"
    assert "5% allowance from the min/max of the last 20 finished runs, 20 runs" in provenance[1]
    assert any("(#3)" in line for line in provenance)  # the regime change and its PR
    # acknowledged, answered with old -> new, and the review follows the new head
    assert [r.content for r in posted.reactions] == ["eyes"]
    (reply,) = bot_replies(app, 11)
    assert "committed" in reply and f"0.55 → **{want}**" in reply
    assert our_check(app, new_head).conclusion == "success"
    (review_comment,) = [c for c in app.repo.comments(11) if "threshold-bot:review" in c.body]
    assert "No action needed" in review_comment.body


def test_own_push_does_not_trigger_another_review(app: App) -> None:
    open_pr(app, 12, "0.55")
    comment(app, 12, MAINTAINER, "/rebaseline")
    head = app.repo.pr(12).head_sha
    calls = len(app.fake.calls)

    answer = synchronize(app, 12, BOT)  # what GitHub sends for our own push

    assert answer["status"] == "ignored"
    found = deliveries.get(app.runtime.sessions, answer["delivery"])
    assert found is not None and found.status == "ignored"
    assert len(app.fake.calls) == calls and app.repo.pr(12).head_sha == head


def test_own_comments_are_ignored_even_when_they_quote_a_command(app: App) -> None:
    open_pr(app, 18, "0.55")
    calls = len(app.fake.calls)
    body, headers = signed_fixture(
        "issue_comment.created",
        SECRET,
        {
            "issue.number": 18,
            "comment.body": "/rebaseline",
            "comment.user.login": BOT,
            "comment.performed_via_github_app": {"id": app.fake.app_id},
            "repository.full_name": REPO,
            "installation.id": INSTALLATION,
            "sender.login": BOT,
        },
    )

    answer = httpx.post(f"{app.url}/webhook", content=body, headers=headers, timeout=30)

    assert answer.status_code == 202 and answer.json()["status"] == "ignored"
    assert len(app.fake.calls) == calls and bot_replies(app, 18) == []


def test_dry_run_commits_nothing_and_says_what_would_change(app: App) -> None:
    head = open_pr(app, 13, "0.55")

    comment(app, 13, MAINTAINER, "/rebaseline --dry-run")

    assert app.repo.pr(13).head_sha == head
    puts = app.fake.requests("PUT", f"/repos/{REPO}/contents/{SCRIPT}")
    assert [c for c in puts if c.body.get("branch") == "tune-13"] == []
    (reply,) = bot_replies(app, 13)
    assert "nothing was committed" in reply and f"0.55 → **{expected_limit()}**" in reply


def test_reader_is_refused_politely(app: App) -> None:
    head = open_pr(app, 14, "0.55")

    posted, _ = comment(app, 14, READER, "/rebaseline")

    assert app.repo.pr(14).head_sha == head
    (reply,) = bot_replies(app, 14)
    assert f"Sorry @{READER}" in reply and "needs **write** permission" in reply
    assert "yours is **read**" in reply
    assert [r.content for r in posted.reactions] == ["eyes"]


def test_fork_without_maintainer_edits_gets_suggestions(app: App) -> None:
    head = open_pr(app, 15, "0.55", fork=True, user=CONTRIBUTOR)
    fork = app.fake.repo(f"{CONTRIBUTOR}/ml")
    want = expected_limit()

    comment(app, 15, MAINTAINER, "/rebaseline")

    assert fork.head("tune-15") == head  # nothing pushed
    (review,) = app.repo.reviews(15)
    assert review.user == BOT and review.state == "COMMENTED" and review.commit_id == head
    (suggested,) = review.comments
    assert suggested.path == SCRIPT and suggested.line == 3  # the gate's line
    assert suggested.body.startswith("```suggestion\n") and suggested.body.endswith("\n```")
    lines = suggested.body.splitlines()[1:-1]
    assert lines[-1] == f"EVAL_ACC_MIN_VALUE={want}"
    assert lines[0].startswith("# threshold-bot: rebaselined")
    (reply,) = bot_replies(app, 15)
    assert "suggestions" in reply and f"0.55 → **{want}**" in reply


def test_a_stale_provenance_block_is_replaced_by_a_multi_line_suggestion(app: App) -> None:
    old_block = "# threshold-bot: rebaselined 2026-01-05 by x with /rebaseline\n#   rule: old\n"
    text = script("0.55").replace("EVAL_ACC_MIN_VALUE=", old_block + "EVAL_ACC_MIN_VALUE=")
    app.repo.open_pr(19, head="tune-19", head_files={SCRIPT: text}, fork=True, user="erin")
    app.pull_event("opened", 19)

    comment(app, 19, MAINTAINER, "/rebaseline")

    (review,) = app.repo.reviews(19)
    (suggested,) = review.comments
    assert (suggested.start_line, suggested.line) == (3, 5)  # old block and the gate line
    lines = suggested.body.splitlines()[1:-1]
    assert lines[0].startswith(f"# threshold-bot: rebaselined {datetime.now(UTC).date()}")
    assert lines[-1] == f"EVAL_ACC_MIN_VALUE={expected_limit()}"
    assert "#   rule: old" not in lines


def test_fork_allowing_maintainer_edits_gets_the_commit(app: App) -> None:
    head = open_pr(app, 16, "0.55", fork=True, user="dora", maintainer_can_modify=True)
    fork = app.fake.repo("dora/ml")

    comment(app, 16, MAINTAINER, "/rebaseline EVAL_ACC_MIN_VALUE")

    new_head = fork.head("tune-16")
    assert new_head != head and app.repo.objects[new_head].author == BOT
    assert f"EVAL_ACC_MIN_VALUE={expected_limit()}" in (fork.file_at(new_head, SCRIPT) or "")
    assert app.repo.reviews(16) == []


def test_unknown_option_gets_a_helpful_reply(app: App) -> None:
    head = open_pr(app, 17, "0.55")

    comment(app, 17, MAINTAINER, "/rebaseline --windw 10")

    assert app.repo.pr(17).head_sha == head
    (reply,) = bot_replies(app, 17)
    assert "unknown option" in reply and "--windw" in reply and "/threshold-bot help" in reply


# --------------------------------------------------------------------------- approval


def test_approval_by_maintainer_survives_pushes_that_keep_the_gates(app: App) -> None:
    first = open_pr(app, 21, "0.55")
    assert our_check(app, first).conclusion == "action_required"

    click_approve(app, 21, READER)  # a reader may not approve
    assert our_check(app, first).conclusion == "action_required"
    (refusal,) = bot_replies(app, 21)
    assert f"Sorry @{READER}" in refusal and "needs **write** permission" in refusal

    click_approve(app, 21, MAINTAINER)
    approved = our_check(app, first)
    today = datetime.now(UTC).date().isoformat()
    assert approved.conclusion == "success" and approved.actions == []
    assert approved.output["title"] == f"Approved by @{MAINTAINER} on {today}"
    assert approved.output["summary"].startswith(
        f"✅ **Approved by @&#8203;{MAINTAINER} on {today}** for <code>EVAL\\_ACC\\_MIN\\_VALUE"
    )
    assert "gate needs attention" in approved.output["summary"]  # the review is kept below
    (review_comment,) = [c for c in app.repo.comments(21) if "threshold-bot:review" in c.body]
    assert f"Approved by @&#8203;{MAINTAINER} on {today}" in review_comment.body  # no mention

    # a push that leaves every gate value alone keeps the approval
    app.repo.commit("tune-21", {"train.py": "mode = 'sync'\n"}, message="Unrelated")
    assert app.pull_event("synchronize", 21).status == "done"
    kept = our_check(app, app.repo.pr(21).head_sha)
    assert kept.conclusion == "success" and kept.output["title"].startswith("Approved by")

    # a push that changes a gate value needs a new approval
    app.repo.commit("tune-21", {SCRIPT: script("0.54")}, message="Tighter still")
    assert app.pull_event("synchronize", 21).status == "done"
    reset = our_check(app, app.repo.pr(21).head_sha)
    assert reset.conclusion == "action_required"
    assert [a["identifier"] for a in reset.actions] == ["approve"]
    (review_comment,) = [c for c in app.repo.comments(21) if "threshold-bot:review" in c.body]
    assert "Approved by" not in review_comment.body


# --------------------------------------------------------------------------- audit


def test_audit_lists_commands_and_approvals(app: App) -> None:
    open_pr(app, 31, "0.55")
    comment(app, 31, READER, "/rebaseline --dry-run")
    comment(app, 31, MAINTAINER, "/rebaseline --dry-run")
    click_approve(app, 31, MAINTAINER)
    cli = typer.Typer()
    cli.command()(audit_command)

    result = CliRunner().invoke(
        cli,
        ["--repo", REPO, "--database-url", app.runtime.settings.database_url, "--limit", "500"],
        env={"COLUMNS": "300"},
    )

    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "#31" in line]
    assert len(rows) == 3
    assert MAINTAINER in rows[0] and "approve" in rows[0] and "done" in rows[0]
    assert MAINTAINER in rows[1] and "rebaseline" in rows[1] and "dry_run" in rows[1]
    assert READER in rows[2] and "rebaseline" in rows[2] and "refused" in rows[2]


def test_audit_rejects_a_malformed_repo_name(tmp_path: Path) -> None:
    cli = typer.Typer()
    cli.command()(audit_command)

    result = CliRunner().invoke(
        cli, ["--repo", "not-a-repo", "--database-url", f"sqlite:///{tmp_path / 'a.db'}"]
    )

    assert result.exit_code == 2 and "owner/name" in result.output


def test_audit_needs_an_existing_store(tmp_path: Path) -> None:
    cli = typer.Typer()
    cli.command()(audit_command)
    missing = tmp_path / "missing.db"

    result = CliRunner().invoke(cli, ["--repo", REPO, "--database-url", f"sqlite:///{missing}"])

    assert result.exit_code == 2 and "no store at" in result.output and not missing.exists()
