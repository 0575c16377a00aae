"""A history file that cannot be read from the repository still ends in a visible review.

``review_pull`` against the recording GitHub: a history file over the size limit, or one GitHub
refuses (403), or a failing GitHub gives a check run that is not green (``neutral``, or
``action_required`` for a changed gate that could not be checked) and a comment, both saying
what happened, never a failed delivery.
"""

from __future__ import annotations

import pytest

from bot.adapters.github.errors import GitHubError, GitHubForbidden, GitHubTransientError
from bot.features.review.pull import RETRY_HINT, review_pull
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_pr import (
    CONFIG,
    FILE_SOURCE,
    HISTORY,
    RUNS,
    SCRIPT,
    history_jsonl,
    scores,
    script,
)


def arranged() -> tuple[RecordingGitHub, int]:
    """Main with the script, the config and the history; PR #5 lowers the gate."""
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56"), CONFIG: FILE_SOURCE})
    for _ in range(RUNS - 1):
        gh.commit({})
    gh.commit({HISTORY: history_jsonl(gh.commits, scores())})
    gh.open_pull(5, {SCRIPT: script("0.50")})
    return gh, len(history_jsonl(gh.commits[:RUNS], scores()).encode())


NOT_GREEN = ("neutral", "action_required")


def test_a_history_file_over_the_size_limit_gives_a_review_naming_it() -> None:
    gh, size = arranged()
    gh.max_file_bytes = size - 1  # the script and the config still fit

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.status == "reviewed" and outcome.review is not None
    assert outcome.review.conclusion in NOT_GREEN
    error = f"{HISTORY} is {size:,} bytes, over the limit of {size - 1:,} bytes (MAX_FILE_BYTES)"
    assert error in (outcome.review.error or "")
    assert RETRY_HINT not in (outcome.review.error or "")  # retrying would not mend it
    assert error.replace("_", "\\_") in gh.comments[5].body  # as Markdown escapes it
    check = gh.check_for(gh.pulls[5].head_sha)
    assert check.conclusion == outcome.review.conclusion
    assert error.replace("_", "\\_") in check.summary


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (GitHubForbidden("GitHub 403: Resource not accessible by integration", 403), "403"),
        (GitHubTransientError("GitHub 502: Server Error", 502), "502"),
    ],
)
def test_github_failing_to_serve_the_history_gives_a_review_saying_so(
    error: GitHubError, shown: str
) -> None:
    gh, _ = arranged()
    gh.unreadable[HISTORY] = error

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.review is not None and outcome.review.conclusion in NOT_GREEN
    body = gh.comments[5].body
    assert HISTORY in body and f"GitHub {shown}" in body
    assert "/threshold-bot retry" in body
    assert RETRY_HINT in (outcome.review.error or "")  # an outage: trying again may work
    check = gh.check_for(gh.pulls[5].head_sha)
    assert check.conclusion == outcome.review.conclusion and f"GitHub {shown}" in check.summary
