"""The ``issue_comment`` and ``requested_action`` handlers, driven bedevere style: GitHub's
own payloads (patched), a real SQLite store, and a recording GitHub client whose calls
are asserted."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.errors import (
    GitHubTransientError,
)
from bot.adapters.locks import make_locks
from bot.adapters.store import approvals, audit
from bot.adapters.store.db import init_db, make_engine
from bot.app.routes import app_router
from bot.core.commands import HELP_TEXT
from bot.core.models import History, Run, SourceSpec
from bot.core.permissions import RANK
from bot.features.comments import on_comment
from bot.features.context import DeliveryInfo, HandlerContext
from bot.features.review.approve import on_requested_action
from tests.fakes.recording_github import RecordingGitHub
from tests.live import make_settings
from tests.test_review_pr import CONFIG, METRIC, SCRIPT, script
from tests.webhooks import fixture, patched

PROJECT = "gsm8k_ci"
STEADY = 0.55  # every run's score: the rule gives 0.55 - 5% = 0.5225, rounded down to 0.52


class Steady:
    def fetch(self, spec: SourceSpec) -> History:
        start = datetime(2026, 8, 1, tzinfo=UTC)
        runs = tuple(
            Run(id=f"r{i}", created_at=start + timedelta(hours=i), summary={METRIC: STEADY})
            for i in range(25)
        )
        return History(runs=runs, source=spec.describe())


@pytest.fixture
def gh() -> RecordingGitHub:
    fake = RecordingGitHub()
    fake.commit({SCRIPT: script("0.56", project=PROJECT)})
    fake.open_pull(7, {SCRIPT: script("0.58", project=PROJECT)})  # too tight: runs sit at 0.55
    fake.levels.update(maya="maintain", wes="write", rita="read")
    return fake


def context(
    tmp_path: Path, gh: RecordingGitHub, event: str, delivery: str = "d1"
) -> HandlerContext:
    settings = make_settings(tmp_path)
    engine = make_engine(settings.database_url)
    return HandlerContext(
        settings=settings,
        sessions=init_db(engine),
        delivery=DeliveryInfo(id=delivery, event=event, action=None, installation_id=3),
        github=lambda installation: gh,
        history=lambda spec: Steady(),
        locks=make_locks(settings, engine, "tests"),
        log=logging.LoggerAdapter(logging.getLogger("test")),
    )


def comment_payload(
    body: str, sender: str = "maya", changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    return patched(
        fixture("issue_comment.created"),
        {
            "issue.number": 7,
            "comment.id": 99,
            "comment.body": body,
            "comment.user.login": sender,
            "sender.login": sender,
            "repository.full_name": "owner/repo",
            **(changes or {}),
        },
    )


def audit_rows(ctx: HandlerContext) -> list[tuple[str, str, str]]:
    with ctx.sessions() as session:
        return [(e.actor, e.action, e.outcome) for e in audit.entries(session, "owner/repo")]


def test_handlers_are_registered() -> None:
    router = app_router()
    assert on_comment in router.handlers("issue_comment", "created")
    assert on_comment not in router.handlers("issue_comment", "edited")
    assert on_requested_action in router.handlers("check_run", "requested_action")


@pytest.mark.parametrize(
    "payload",
    [
        comment_payload("/rebaseline", changes={"issue.pull_request": None}),  # a plain issue
        comment_payload("/rebaseline", changes={"sender.type": "Bot", "sender.login": "ci[bot]"}),
        comment_payload("Looks good to me"),
        comment_payload("```\n/rebaseline\n```"),
        comment_payload("> /rebaseline\n\nquoting the above"),
        comment_payload("／rebaseline"),  # a full-width look-alike of the slash
    ],
    ids=["issue", "bot", "no-command", "code-fence", "quote", "look-alike"],
)
def test_comments_without_a_command_for_us_are_left_alone(
    tmp_path: Path, gh: RecordingGitHub, payload: dict[str, Any]
) -> None:
    ctx = context(tmp_path, gh, "issue_comment")
    calls = len(gh.calls)

    on_comment(ctx, payload)

    assert gh.calls[calls:] == [] and audit_rows(ctx) == []


def test_help_is_acknowledged_and_answered(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/threshold-bot help", sender="rita"))

    assert gh.calls[0] == ("add_reaction", ("owner/repo", 99, "eyes"))
    ((_, number, body),) = gh.called("reply")
    assert number == 7 and body.endswith(HELP_TEXT)
    assert audit_rows(ctx) == [("rita", "help", "done")]


def test_unknown_option_gets_a_helpful_reply(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline --force"))

    ((_, _, body),) = gh.called("reply")
    assert "unknown option" in body and "--force" in body and "/threshold-bot help" in body
    assert gh.called("commit_file") == [] and gh.called("permission") == []
    assert audit_rows(ctx) == [("maya", "command", "invalid")]


@pytest.mark.parametrize("user", ["rita", "nobody"])
def test_rebaseline_checks_the_sender_every_time(
    tmp_path: Path, gh: RecordingGitHub, user: str
) -> None:
    ctx = context(tmp_path, gh, "issue_comment")
    # the comment's author is a maintainer, but the event's sender is who counts
    payload = comment_payload("/rebaseline", user, {"comment.user.login": "maya"})

    on_comment(ctx, payload)
    on_comment(ctx, payload)

    assert gh.called("permission") == [("owner/repo", user), ("owner/repo", user)]
    assert gh.called("commit_file") == [] and gh.called("create_review") == []
    (body,) = gh.replies.values()  # the retried delivery edited its reply
    assert f"Sorry @{user}" in body and "needs **write** permission" in body
    assert audit_rows(ctx) == [(user, "rebaseline", "refused")]  # once per delivery


def test_repository_config_can_require_more(tmp_path: Path, gh: RecordingGitHub) -> None:
    config = "permissions:\n  rebaseline: admin\n"
    gh.commit({CONFIG: config})
    gh.pulls[7] = replace(gh.pulls[7], base_sha=gh.commits[-1])
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline", sender="maya"))

    (body,) = gh.replies.values()
    assert "needs **admin** permission" in body and "yours is **maintain**" in body
    assert RANK["maintain"] < RANK["admin"] and gh.called("commit_file") == []


def test_rebaseline_commits_to_the_head_branch_and_reviews_the_new_head(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    ctx = context(tmp_path, gh, "issue_comment")
    old_head = gh.pulls[7].head_sha

    on_comment(ctx, comment_payload("/rebaseline", sender="wes"))

    ((repo, branch, path, text, message),) = gh.called("commit_file")
    assert (repo, branch, path) == ("owner/repo", "branch-7", SCRIPT)
    assert "EVAL_ACC_MIN_VALUE=0.52\n" in text and "by wes with /rebaseline" in text
    assert "EVAL_ACC_MIN_VALUE: 0.58 → 0.52" in message
    new_head = gh.branches["branch-7"]
    assert new_head != old_head and gh.check_for(new_head).conclusion == "success"
    (body,) = gh.replies.values()
    assert "0.58 → **0.52**" in body and "committed" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "committed")]


def test_a_branch_that_moved_meanwhile_is_not_overwritten(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    head = gh.pulls[7].head_sha
    gh.branches["branch-7"] = gh.commit({SCRIPT: script("0.57", project=PROJECT)}, parent=head)
    gh.stale = True
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline", sender="wes"))

    assert gh.called("commit_file") == []
    (body,) = gh.replies.values()
    assert "did not run" in body and "changed while the new values were computed" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "failed")]


def test_a_commit_github_refuses_is_answered_not_dropped(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    gh.conflict = True  # e.g. someone pushed between the check and the commit
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline", sender="wes"))

    assert len(gh.called("commit_file")) == 1
    (body,) = gh.replies.values()
    assert "did not run" in body and "GitHub refused the commit to <code>" in body
    assert "GitHub 409" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "failed")]


def test_other_refusals_from_github_are_answered_too(tmp_path: Path, gh: RecordingGitHub) -> None:
    gh.push_forbidden = gh.review_forbidden = True  # no push, and no reviews either
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline", sender="wes"))

    (body,) = gh.replies.values()
    assert "did not run: GitHub refused: GitHub 403" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "failed")]


def test_a_retry_after_the_commit_does_not_rebaseline_again(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    ctx = context(tmp_path, gh, "issue_comment")
    payload = comment_payload("/rebaseline", sender="wes")
    publish = gh.upsert_check_run
    failures = [GitHubTransientError("GitHub 502: Bad Gateway", 502)]

    def flaky(*args: Any, **kwargs: Any) -> Any:  # the re-review of the new head fails once
        if failures:
            raise failures.pop()
        return publish(*args, **kwargs)

    gh.upsert_check_run = flaky  # type: ignore[method-assign]
    with pytest.raises(GitHubTransientError):
        on_comment(ctx, payload)
    on_comment(ctx, payload)  # the worker's retry of the same delivery

    assert len(gh.called("commit_file")) == 1
    (body,) = gh.replies.values()
    assert "committed" in body and "0.58 → **0.52**" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "committed")]
    assert gh.check_for(gh.branches["branch-7"]).conclusion == "success"


def test_push_refused_falls_back_to_suggestions(tmp_path: Path, gh: RecordingGitHub) -> None:
    gh.push_forbidden = True  # the fork's owner turned "allow edits" off meanwhile
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline EVAL_ACC_MIN_VALUE", sender="wes"))

    ((body, comments),) = gh.reviews
    (suggestion,) = comments
    assert suggestion.path == SCRIPT and suggestion.line == 3 and suggestion.start_line is None
    assert suggestion.body.splitlines()[-2] == "EVAL_ACC_MIN_VALUE=0.52"
    assert "@wes" in body
    assert audit_rows(ctx) == [("wes", "rebaseline", "suggested")]


def long_script(value: str, note: str) -> str:
    """The gate near the top, a change far below it: the gate's line is outside the diff."""
    head, tail = script(value, project=PROJECT).split("python", 1)
    filler = "".join(f"echo step {i}\n" for i in range(20))
    return f"{head}{filler}# {note}\npython{tail}"


@pytest.mark.parametrize("reject_lines", [False, True], ids=["outside-diff", "github-422"])
def test_changes_no_suggestion_can_carry_go_in_the_review_body(
    tmp_path: Path, gh: RecordingGitHub, reject_lines: bool
) -> None:
    gh.commit({SCRIPT: long_script("0.56", "nightly")})
    # outside-diff: only the note changes; github-422: the gate line changes too, but
    # GitHub refuses the line comments anyway
    value = "0.57" if reject_lines else "0.56"
    gh.open_pull(8, {SCRIPT: long_script(value, "nightly, on 8 GPUs")})
    gh.push_forbidden, gh.reject_lines = True, reject_lines
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline", sender="wes", changes={"issue.number": 8}))

    assert len(gh.called("create_review")) == (2 if reject_lines else 1)
    ((body, comments),) = gh.reviews
    assert comments == ()
    assert "```diff\n" in body and "+EVAL_ACC_MIN_VALUE=0.52" in body
    assert "-EVAL_ACC_MIN_VALUE=0.5" in body and "apply by hand" in body


def test_dry_run_and_unknown_gate(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline NOPE EVAL_ACC_MIN_VALUE --dry-run"))

    assert gh.called("commit_file") == [] and gh.reviews == []
    (body,) = gh.replies.values()
    assert "nothing was committed" in body and "0.58 → **0.52**" in body
    assert "Not found in this PR's threshold files: <code>NOPE</code>" in body
    assert audit_rows(ctx) == [("maya", "rebaseline", "dry_run")]


def test_retry_reviews_again(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/threshold-bot retry", sender="rita"))

    assert gh.writes() == ["upsert_comment", "upsert_check_run"]
    assert audit_rows(ctx) == [("rita", "retry", "reviewed")]


# --------------------------------------------------------------------------- approval


def approve_payload(gh: RecordingGitHub, sender: str, **changes: Any) -> dict[str, Any]:
    pull = gh.pull("owner/repo", 7)
    return patched(
        fixture("check_run.requested_action"),
        {
            "check_run.name": "threshold-bot",
            "check_run.head_sha": pull.head_sha,
            "check_run.external_id": "7",
            "check_run.app.id": 4242,
            "requested_action.identifier": "approve",
            "repository.full_name": "owner/repo",
            "sender.login": sender,
            **changes,
        },
    )


def test_approve_by_a_maintainer_stores_the_values_and_greens_the_check(
    tmp_path: Path, gh: RecordingGitHub
) -> None:
    ctx = context(tmp_path, gh, "check_run")
    head = gh.pull("owner/repo", 7).head_sha

    on_requested_action(ctx, approve_payload(gh, "maya"))

    check = gh.check_for(head)
    assert check.conclusion == "success" and check.actions == ()
    assert check.title.startswith("Approved by @maya on ")
    with ctx.sessions() as session:
        stored = approvals.latest(session, "owner/repo", 7)
    assert stored is not None and (stored.approver, stored.head_sha) == ("maya", head)
    assert list(stored.gate_values.values()) == [0.58]
    (key,) = stored.gate_values  # file, gate, metric, operator and source
    assert key.startswith(f"{SCRIPT}:EVAL_ACC_MIN_VALUE|") and " >=|" in key
    assert gh.replies == {} and audit_rows(ctx) == [("maya", "approve", "done")]


def test_approve_by_a_reader_is_refused(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "check_run")

    on_requested_action(ctx, approve_payload(gh, "rita"))

    (body,) = gh.replies.values()
    assert "Sorry @rita, approving thresholds needs **write** permission" in body
    with ctx.sessions() as session:
        assert approvals.latest(session, "owner/repo", 7) is None
    assert gh.writes() == [] and audit_rows(ctx) == [("rita", "approve", "refused")]


@pytest.mark.parametrize(
    "changes",
    [{"requested_action.identifier": "lgtm|26764"}, {"check_run.name": "other-check"}],
    ids=["other-action", "other-check"],
)
def test_other_actions_and_checks_are_ignored(
    tmp_path: Path, gh: RecordingGitHub, changes: dict[str, Any]
) -> None:
    ctx = context(tmp_path, gh, "check_run")
    payload = approve_payload(gh, "maya", **changes)
    calls = len(gh.calls)

    on_requested_action(ctx, payload)

    assert gh.calls[calls:] == []
