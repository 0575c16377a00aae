"""What one job may cost, and that every failure ends visibly in the PR (issue #10, items 4
and 5): the per-job wall-clock limit through the real App (uvicorn, worker, PyGithub against
FakeGitHub), file size limits, a parser failure past its own limits, and the bounded set of
metrics a review segments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.core.analysis.review import SCANNED_METRICS, build_review
from bot.core.commands import Command, parse_command_line
from bot.core.config import RepoConfig
from bot.core.models import GateChange, History, Run
from bot.core.thresholds.discover import find_gates
from bot.features.rebaseline.apply import rebaseline
from bot.features.review import pull as pull_module
from bot.features.review.failure import HOW_TO_RETRY, TITLE
from bot.features.review.pull import review_pull
from tests.fakes.github_state import IssueComment
from tests.fakes.recording_github import RecordingGitHub
from tests.test_e2e_app import INSTALLATION, REPO, check_runs, running_app
from tests.test_review_pr import SCRIPT, script

pytestmark = pytest.mark.servers

T0 = datetime(2026, 7, 1, tzinfo=UTC)


def test_a_job_past_its_time_limit_fails_cleanly_and_the_pr_says_so(tmp_path: Path) -> None:
    # a limit no review can meet: the first check (before the first file is read) stops it
    with running_app(tmp_path, job_timeout_seconds=0.001) as app:
        pr = app.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})

        delivery = app.pull_event("opened", 7)

        assert delivery.status == "failed" and delivery.attempts == 1  # not retried
        assert delivery.last_error is not None
        assert delivery.last_error.startswith("JobTimeout: stopped after 0.001 s")
        (run,) = check_runs(app, pr.head_sha)
        assert (run.status, run.conclusion) == ("completed", "failure")
        assert run.output["title"] == TITLE
        summary = run.output["summary"]
        assert "JOB\\_TIMEOUT\\_SECONDS" in summary or "JOB_TIMEOUT_SECONDS" in summary
        assert HOW_TO_RETRY in summary and f"reading {SCRIPT}" in summary
        assert app.repo.comments(7) == []  # nothing half-done was published


def test_a_failed_comment_command_is_reported_on_the_prs_head(tmp_path: Path) -> None:
    with running_app(tmp_path, job_timeout_seconds=0.001) as app:
        pr = app.repo.open_pr(8, head="tune8", head_files={SCRIPT: script("0.55")})
        state = app.fake.state
        now = datetime.now(UTC).replace(microsecond=0)
        posted = IssueComment(state.next_id(), 8, "alice", "/threshold-bot retry", now, now)
        with state.lock:
            app.repo.issue_comments[posted.id] = posted

        delivery = app.deliver(
            "issue_comment.created",
            {
                "issue.number": 8,
                "comment.id": posted.id,
                "comment.body": posted.body,
                "comment.user.login": "alice",
                "repository.full_name": REPO,
                "repository.name": "ml",
                "repository.owner.login": "octo",
                "installation.id": INSTALLATION,
                "sender.login": "alice",
            },
        )

        assert delivery.status == "failed", delivery.last_error
        (run,) = check_runs(app, pr.head_sha)  # found through the PR: the comment has no SHA
        assert (run.conclusion, run.output["title"]) == ("failure", TITLE)
        assert (
            "issue\\_comment" in run.output["summary"] or "issue_comment" in run.output["summary"]
        )


def test_a_threshold_file_over_the_limit_is_named_and_requires_action() -> None:
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56")})
    padded = script("0.50") + "# padding\n" * 200
    pull = gh.open_pull(3, {SCRIPT: padded})
    limit = len(padded.encode()) - 1

    outcome = review_pull(gh, gh.repo, 3, max_bytes=limit)

    assert outcome.review is not None and outcome.review.conclusion == "action_required"
    (warning,) = [w for w in outcome.review.warnings if w.startswith(f"{SCRIPT}: cannot be read")]
    assert warning.endswith(f"over the limit of {limit:,} bytes (MAX_THRESHOLD_FILE_BYTES)")
    check = gh.check_for(pull.head_sha)
    assert (check.conclusion, check.actions) == ("action_required", ())  # gates unknown
    assert check.title == f"Cannot read {SCRIPT}"
    assert review_pull(gh, gh.repo, 3, max_bytes=limit + 1).review is not None


def test_a_parser_failing_past_its_limits_still_ends_in_the_review(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56")})
    pull = gh.open_pull(4, {SCRIPT: script("0.50")})

    def exhausted(path: str, text: str, config: object, related: object = None) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(pull_module, "find_gates", exhausted)
    outcome = review_pull(gh, gh.repo, 4)

    assert outcome.review is not None
    assert f"{SCRIPT}: could not be read (RecursionError)" in outcome.review.warnings
    assert gh.check_for(pull.head_sha).conclusion == "action_required"


def test_a_review_segments_the_gated_metric_and_a_bounded_number_of_others() -> None:
    logged = 200  # a W&B summary logs far more than the gates check
    runs = tuple(
        Run(
            id=f"r{i}",
            created_at=T0 + timedelta(days=i),
            summary={
                "eval/acc": 0.6 if i < 20 else 0.7,
                # fewer runs log the rarer metrics: the most logged ones are scanned first
                **{f"m{j:03d}": float(i % 3) for j in range(logged) if i % (1 + j % 4) == 0},
            },
        )
        for i in range(40)
    )
    tf = find_gates(SCRIPT, script("0.55").replace("eval/all/avg_score", "eval/acc"), RepoConfig())
    assert tf is not None
    (gate,) = tf.gates

    review = build_review([GateChange(head=gate)], History(runs=runs))

    scanned = set(review.regimes[0].medians)
    assert "eval/acc" in scanned and len(scanned) == 1 + SCANNED_METRICS
    every_run = {f"m{j:03d}" for j in range(logged) if j % 4 == 0}  # logged by all 40 runs
    assert scanned - {"eval/acc"} <= every_run  # the most logged ones, by name after that
    assert [c.index for c in review.changes] == [20]


def test_rebaseline_reads_threshold_files_with_the_same_limit_as_the_review() -> None:
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56")})
    padded = script("0.50") + "# padding\n" * 200
    gh.open_pull(5, {SCRIPT: padded})
    limit = len(padded.encode()) - 1
    command = parse_command_line("/rebaseline --dry-run")
    assert isinstance(command, Command)

    result = rebaseline(gh, gh.repo, 5, command, by="maya", max_bytes=limit)

    (error,) = result.errors
    assert error.startswith(f"{SCRIPT}: cannot be read") and "(MAX_THRESHOLD_FILE_BYTES)" in error
    assert result.plans == ()  # nothing planned from a file that was not read
