"""Outside strings never leave ``/repos/{owner}/{repo}/…``: commits are hex SHAs, paths safe.

A W&B run's ``commit`` of ``../../orgs/acme/members`` once made the App request
``GET /orgs/acme/members`` with its installation token.  Here the real PyGithub client talks
to the fake GitHub, and its request log shows every path the client asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import GitHubUnsafeInput
from bot.core.analysis.regimes import detect_regimes
from bot.core.api_paths import is_sha
from bot.core.models import Review, Run
from bot.features.review.attribution import NOT_SHAS, attribute
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo
from tests.test_review_pr import METRIC, RUNS, SHIFT_AT, scores

pytestmark = pytest.mark.servers

REPO = "acme/ml"
INSTALLATION = 7
HOSTILE = ("../../orgs/acme/members", "abc/../../x", "main", "..", "deadbeef/../../x")
AT = datetime(2026, 8, 1, tzinfo=UTC)


@pytest.fixture
def repo(fake_github: FakeGitHub) -> Repo:
    """Main, then merged PR #3 (the step in the metric's history)."""
    repo = fake_github.add_repo(REPO, installation_id=INSTALLATION, files={"README.md": "# ml\n"})
    repo.open_pr(3, head="async", head_files={"train.py": "mode = 'async'\n"}, title="Async")
    repo.merge_pr(3)
    return repo


@pytest.fixture
def client(fake_github: FakeGitHub, repo: Repo) -> GitHubClient:
    return fake_github.github_app().installation(INSTALLATION)


def review_of_runs(commit_of: Callable[[int], str]) -> Review:
    """A review with the regime change of the test scores, run ``i`` on ``commit_of(i)``."""
    runs = [
        Run(id=f"r{i}", created_at=AT + timedelta(days=i), commit=commit_of(i), summary={METRIC: v})
        for i, v in enumerate(scores())
    ]
    _, changes = detect_regimes(runs)
    assert changes
    return Review(conclusion="success", changes=tuple(changes))


def outside_the_repo(fake: FakeGitHub) -> list[str]:
    """Requested paths outside ``/repos/acme/ml/`` (the App's own token request aside)."""
    return [
        c.path
        for c in fake.calls
        if not c.path.startswith(f"/repos/{REPO}/") and not c.path.startswith("/app/installations/")
    ]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_run_commits_are_never_requested(
    fake_github: FakeGitHub, repo: Repo, client: GitHubClient, hostile: str
) -> None:
    main = repo.head("main")
    # before the step: the hostile commit; after it: a real commit (both sides, every widening)
    review = review_of_runs(lambda i: hostile if i < SHIFT_AT or i == RUNS - 1 else main)

    result = attribute(client, REPO, review)

    assert outside_the_repo(fake_github) == []
    assert not any(hostile in c.path for c in fake_github.calls)
    assert all(change.pulls == () for change in result.changes)
    assert NOT_SHAS in result.warnings


def test_hex_commits_still_attribute_the_pull_and_others_are_ignored(
    fake_github: FakeGitHub, repo: Repo, client: GitHubClient
) -> None:
    merged = repo.pr(3)
    before, after = repo.objects[merged.merge_commit_sha or ""].parents[0], repo.head("main")
    # the run just before the step names a branch, the one before it a path: not used
    commits = {SHIFT_AT - 2: "../../orgs/acme/members", RUNS - 1: "main"}

    def commit_of(i: int) -> str:
        return commits.get(i, before if i < SHIFT_AT else after)

    result = attribute(client, REPO, review_of_runs(commit_of))

    (change,) = result.changes
    assert change.pulls == (3,)
    assert result.pulls[3].title == "Async"
    assert NOT_SHAS in result.warnings
    assert outside_the_repo(fake_github) == []
    compares = [c.path for c in fake_github.requests("GET") if "/compare/" in c.path]
    assert compares and all(c == f"/repos/{REPO}/compare/{before}...{after}" for c in compares)


def test_uppercase_and_short_shas_are_commits(
    fake_github: FakeGitHub, repo: Repo, client: GitHubClient
) -> None:
    sha = repo.head("main")

    assert [p.number for p in client.pulls_for_commit(REPO, sha.upper())] == [3]
    assert [p.number for p in client.pulls_for_commit(REPO, sha[:7])] == [3]


UNSAFE_CALLS: dict[str, Callable[[GitHubClient], Any]] = {
    "compare base": lambda c: c.compare_commits(REPO, "../../orgs/acme/members", "a" * 40),
    "compare head": lambda c: c.compare_commits(REPO, "a" * 40, "abc/../../x"),
    "merge base": lambda c: c.merge_base(REPO, "main", "a" * 40),
    "pulls of a commit": lambda c: c.pulls_for_commit(REPO, ".."),
    "check run": lambda c: c.find_check_run(REPO, "../../../orgs/acme"),
    "dot-dot path": lambda c: c.file_text(REPO, "ci/../../../orgs/acme/members", "main"),
    "absolute path": lambda c: c.file_text(REPO, "/orgs/acme/members", "main"),
    "backslash path": lambda c: c.file_text(REPO, "ci\\..\\x", "main"),
    "control character": lambda c: c.file_text(REPO, "ci/history\n.jsonl", "main"),
    "nul": lambda c: c.file_text(REPO, "ci/history\x00.jsonl", "main"),
    "commit a dot-dot path": lambda c: c.commit_file(REPO, "async", "../x", "text", "m"),
    "dot-dot login": lambda c: c.permission(REPO, ".."),
    "dot-dot repository": lambda c: c.file_text("acme/..", "README.md", "main"),
    "repository path": lambda c: c.pull("acme/ml/../../orgs", 3),
}


@pytest.mark.parametrize("call", UNSAFE_CALLS.values(), ids=list(UNSAFE_CALLS))
def test_the_client_refuses_unsafe_strings_before_any_request(
    fake_github: FakeGitHub, client: GitHubClient, call: Callable[[GitHubClient], Any]
) -> None:
    with pytest.raises(GitHubUnsafeInput, match="refusing"):
        call(client)

    assert fake_github.calls == []


def test_odd_but_safe_paths_are_quoted_segment_by_segment(
    fake_github: FakeGitHub, repo: Repo, client: GitHubClient
) -> None:
    odd = "ci/a b?c#d%2e%2e.txt"
    repo.commit("main", {odd: "odd\n"})

    assert client.file_text(REPO, odd, "main") == "odd\n"
    (read,) = [c for c in fake_github.requests("GET") if "/contents/" in c.path]
    assert read.path == f"/repos/{REPO}/contents/ci/a%20b%3Fc%23d%252e%252e.txt"


def test_only_7_to_40_hex_digits_are_commits() -> None:
    sha = "0123456789abcdefABCDEF0123456789abcdef01"
    assert is_sha(sha) and is_sha(sha[:7])
    rejected = [sha + "0", sha[:6], "", None, "main", "HEAD~1", f"{sha[:7]}\n", "g" * 7]
    assert [value for value in rejected if is_sha(value)] == []
