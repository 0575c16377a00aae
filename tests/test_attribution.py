"""``bot.features.review.attribution``: regime changes get the PRs merged between their commits."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.adapters.github.api import PullInfo
from bot.adapters.github.errors import GitHubTransientError
from bot.core.models import Change, Review
from bot.features.review.attribution import attribute
from tests.fakes.recording_github import RecordingGitHub

AT = datetime(2026, 8, 1, tzinfo=UTC)


def main_with_pulls(count: int) -> RecordingGitHub:
    """Main with ``count`` commits after the first, commit i brought by merged PR 100+i."""
    gh = RecordingGitHub()
    gh.commit({"a": "0"})
    for i in range(1, count + 1):
        sha = gh.commit({"a": str(i)})
        gh.merged_pull(100 + i, f"PR {i}", sha)
    return gh


def review_of(*changes: Change) -> Review:
    return Review(conclusion="success", changes=changes)


def test_each_change_gets_the_pulls_merged_in_its_range() -> None:
    gh = main_with_pulls(6)
    c = gh.commits
    review = review_of(
        Change(at=AT, before_commit=c[0], after_commit=c[2]),
        Change(at=AT, before_commit=c[4], after_commit=c[6]),
        Change(at=AT, before_commit=c[6], after_commit=c[6]),  # same commit: nothing merged
        Change(at=AT),  # runs without commits
    )

    result = attribute(gh, gh.repo, review)

    assert [ch.pulls for ch in result.changes] == [(101, 102), (105, 106), (), ()]
    assert sorted(result.pulls) == [101, 102, 105, 106]
    assert result.pulls[105].title == "PR 5" and result.pulls[105].url.endswith("/pull/105")
    assert result.warnings == ()


def test_open_pulls_containing_a_commit_are_not_credited() -> None:
    gh = main_with_pulls(1)
    sha = gh.commit({"a": "x"})
    gh.commit_pulls[sha] = [
        PullInfo(9, "open", "u", "open", False, False, "a", "main", "", "b", sha, None)
    ]

    result = attribute(
        gh, gh.repo, review_of(Change(at=AT, before_commit=gh.commits[1], after_commit=sha))
    )

    assert result.changes[0].pulls == () and result.pulls == {}


def test_a_wide_range_is_capped_with_a_warning() -> None:
    gh = main_with_pulls(5)

    result = attribute(
        gh,
        gh.repo,
        review_of(Change(at=AT, before_commit=gh.commits[0], after_commit=gh.commits[5])),
        max_commits=3,
    )

    assert result.changes[0].pulls == (101, 102, 103)
    assert "more than 3 commits" in result.warnings[0]


def test_failures_leave_the_change_unattributed_and_warn() -> None:
    gh = main_with_pulls(2)
    unknown = Change(at=AT, before_commit="f" * 40, after_commit=gh.commits[2])

    class Down(RecordingGitHub):
        def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
            raise GitHubTransientError("GitHub 502", 502)

    result = attribute(gh, gh.repo, review_of(unknown))
    down = attribute(Down(), gh.repo, review_of(unknown))

    assert result.changes[0].pulls == () and "not in owner/repo" in result.warnings[0]
    assert down.changes[0].pulls == () and "GitHub 502" in down.warnings[0]
