"""The drift watch's GitHub operations of ``GitHubClient`` (issues, PRs the App opens,
branches, trees, the installation's repositories, the rate limit) against the local fake
GitHub, and the recording fake against the same scenarios.

Every test ends with ``fake.check()``: no response broke GitHub's OpenAPI schema, no
endpoint the client used is missing from the fake.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.adapters.github.api import GitHubAPI, RepoInfo
from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import (
    GitHubForbidden,
    GitHubUnprocessable,
    GitHubUnsafeInput,
)
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_shapes import WEB
from tests.fakes.github_state import Repo
from tests.fakes.recording_github import RecordingGitHub

pytestmark = pytest.mark.servers

REPO = "octo/ml"
INSTALLATION = 7
MARKER = "<!-- threshold-bot:drift file=ci%2Fnightly.sh -->"
FILES = {"ci/nightly.sh": "ACC_MIN=0.5\n", "ci/gates/a.yml": "x: 1\n", "README.md": "# ml\n"}


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub) -> Repo:
    return fake.add_repo(REPO, installation_id=INSTALLATION, files=dict(FILES))


@pytest.fixture
def client(fake: FakeGitHub, repo: Repo) -> GitHubClient:
    return fake.github_app().installation(INSTALLATION)


# ----- repositories, branches, trees --------------------------------------------------------
def test_installation_repositories_reads_every_page(fake: FakeGitHub, client: GitHubClient) -> None:
    names = [f"octo/r{i:03d}" for i in range(130)]
    for name in names:
        fake.add_repo(name, installation_id=INSTALLATION, private=name.endswith("7"))
    fake.add_repo("other/elsewhere", installation_id=8)
    fake.repo("octo/r001").archived = True

    repos = client.installation_repositories()

    assert [r.full_name for r in repos] == [REPO, *names]
    assert [r.full_name for r in repos if r.private] == [n for n in names if n.endswith("7")]
    assert [r.full_name for r in repos if r.archived] == ["octo/r001"]
    assert len(fake.requests("GET", "/installation/repositories")) == 2  # 100 a page


def test_repository_and_branch_head(fake: FakeGitHub, client: GitHubClient, repo: Repo) -> None:
    fake.add_repo("octo/private", installation_id=INSTALLATION, private=True, default_branch="dev")
    feature = repo.commit("feature/x", {"ci/nightly.sh": "ACC_MIN=0.4\n"})

    assert client.repository(REPO) == RepoInfo(REPO, "main", private=False, url=f"{WEB}/{REPO}")
    private = RepoInfo("octo/private", "dev", private=True, url=f"{WEB}/octo/private")
    assert client.repository("octo/private") == private
    assert client.branch_head(REPO, "main") == repo.head("main")
    assert client.branch_head(REPO, "feature/x") == feature
    assert client.branch_head(REPO, "gone") is None


@pytest.mark.parametrize("name", ["../main", "a..b", "-x", "a b", "x.lock", "a//b", "a/", "a~1"])
def test_unsafe_branch_names_are_refused_unsent(
    fake: FakeGitHub, client: GitHubClient, name: str
) -> None:
    sent = len(fake.calls)
    with pytest.raises(GitHubUnsafeInput):
        client.branch_head(REPO, name)
    with pytest.raises(GitHubUnsafeInput):
        client.create_branch(REPO, name, "a" * 40)
    assert len(fake.calls) == sent


def test_tree_paths_lists_nested_files_of_a_commit(client: GitHubClient, repo: Repo) -> None:
    sha = repo.commit("main", {"ci/gates/deep/b.json": "{}", "README.md": None})

    paths = client.tree_paths(REPO, sha)

    expected = {**FILES, "ci/gates/deep/b.json": "{}"}
    del expected["README.md"]
    assert sorted(paths) == sorted(expected)
    with pytest.raises(GitHubUnsafeInput):
        client.tree_paths(REPO, "main")  # a branch name is not a commit


def test_create_branch_creates_keeps_and_moves_only_with_force(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    base = repo.head("main")
    other = repo.commit("side", {"ci/nightly.sh": "ACC_MIN=0.3\n"})  # not a descendant of tip
    tip = repo.commit("main", {"README.md": "# ml 2\n"})
    branch = "threshold-bot/rebaseline/ci/nightly.sh"

    client.create_branch(REPO, branch, base)
    client.create_branch(REPO, branch, base)  # already there: nothing sent
    with pytest.raises(GitHubUnprocessable):
        client.create_branch(REPO, branch, other)
    assert repo.head(branch) == base
    client.create_branch(REPO, branch, other, force=True)
    assert repo.head(branch) == other
    client.create_branch(REPO, branch, tip, force=True)  # not a fast forward from other
    assert repo.head(branch) == tip
    assert len(fake.requests("POST", f"/repos/{REPO}/git/refs")) == 1
    assert len(fake.requests("PATCH", f"/repos/{REPO}/git/refs/heads/{branch}")) == 2


def test_create_branch_post_that_landed_despite_a_502(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    fake.fail_next("POST", r"/git/refs$", status=502, landed=True)

    client.create_branch(REPO, "drift", repo.head("main"))

    assert repo.head("drift") == repo.head("main")
    assert [c.status for c in fake.requests("POST", f"/repos/{REPO}/git/refs")] == [502]


def test_rate_remaining_is_the_last_responses_header(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    assert client.rate_remaining() is None
    sent = len(fake.calls)
    assert client.rate_remaining() is None and len(fake.calls) == sent  # asks nothing

    fake.rate_remaining, fake.rate_cost = 120, 1
    client.repository(REPO)
    first = client.rate_remaining()
    client.repository(REPO)

    assert first == 120
    assert client.rate_remaining() == 119
    assert fake.rate_remaining == 118


# ----- issues -------------------------------------------------------------------------------
def test_create_issue_with_labels_and_assignees(client: GitHubClient, repo: Repo) -> None:
    repo.set_permission("bob", "write")

    ref = client.create_issue(
        REPO,
        "Nightly thresholds failing",
        f"{MARKER}\nbody",
        MARKER,
        labels=["ci"],
        assignees=["bob"],
    )

    issue = repo.issue(ref.number)
    assert (ref.title, ref.body, ref.state, ref.is_pull) == (
        "Nightly thresholds failing",
        f"{MARKER}\nbody",
        "open",
        False,
    )
    assert ref.url.endswith(f"/{REPO}/issues/{ref.number}")
    assert issue.user == client._login_name() == "threshold-bot[bot]"
    assert (issue.labels, issue.assignees) == (["ci"], ["bob"])
    assert "ci" in repo.labels  # created silently, as GitHub does


def test_create_issue_drops_assignees_github_refuses(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    ref = client.create_issue(REPO, "t", f"{MARKER}\n", MARKER, assignees=["nobody-here"])

    assert repo.issue(ref.number).assignees == []
    statuses = [c.status for c in fake.requests("POST", f"/repos/{REPO}/issues")]
    assert statuses == [422, 201]


def test_issue_numbers_follow_pull_requests(client: GitHubClient, repo: Repo) -> None:
    repo.open_pr(head="tune", head_files={"ci/nightly.sh": "ACC_MIN=0.4\n"})
    repo.add_issue("a human's issue")

    ref = client.create_issue(REPO, "t", MARKER, MARKER)

    assert ref.number == 3


@pytest.mark.parametrize("landed", [True, False])
def test_create_issue_after_a_failed_post_leaves_one_issue(
    fake: FakeGitHub, client: GitHubClient, repo: Repo, landed: bool
) -> None:
    fake.fail_next("POST", rf"/repos/{REPO}/issues$", status=502, landed=landed)

    ref = client.create_issue(REPO, "t", f"{MARKER}\nbody", MARKER)

    assert list(repo.issues) == [ref.number]
    statuses = [c.status for c in fake.requests("POST", f"/repos/{REPO}/issues")]
    assert statuses == ([502] if landed else [502, 201])


def test_create_issue_without_the_issues_permission_is_forbidden(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    fake.deny(INSTALLATION, "issues")

    with pytest.raises(GitHubForbidden):
        client.create_issue(REPO, "t", MARKER, MARKER)

    assert repo.issues == {}


def test_update_issue_edits_only_what_is_given(client: GitHubClient, repo: Repo) -> None:
    ref = client.create_issue(REPO, "t", f"{MARKER}\nold", MARKER)

    edited = client.update_issue(REPO, ref.number, body=f"{MARKER}\nnew")
    closed = client.update_issue(REPO, ref.number, state="closed")

    assert (edited.title, edited.body, edited.state) == ("t", f"{MARKER}\nnew", "open")
    assert closed.state == "closed"
    issue = repo.issue(ref.number)
    assert (issue.state, issue.state_reason, issue.body) == ("closed", "completed", edited.body)


def test_update_issue_on_a_pull_request_edits_the_pull(client: GitHubClient, repo: Repo) -> None:
    pr = repo.open_pr(head="tune", head_files={"ci/nightly.sh": "ACC_MIN=0.4\n"})

    ref = client.update_issue(REPO, pr.number, title="Rebaseline", state="closed")

    assert ref.is_pull and ref.url.endswith(f"/pull/{pr.number}")
    assert (pr.title, pr.state) == ("Rebaseline", "closed")


def test_find_items_keeps_the_apps_open_marked_items_oldest_first(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    first = client.create_issue(REPO, "first", f"{MARKER}\n1", MARKER)
    repo.add_issue("quoting the marker", f"look: {MARKER}", user="mallory")
    closed = client.create_issue(REPO, "closed", f"{MARKER}\n2", MARKER)
    client.update_issue(REPO, closed.number, state="closed")
    client.create_issue(REPO, "another file", "<!-- threshold-bot:drift file=x -->", "<!--")
    repo.commit("threshold-bot/rebaseline/ci/nightly.sh", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    pull = client.open_pull(
        REPO, head="threshold-bot/rebaseline/ci/nightly.sh", base="main", title="p", body=MARKER
    )

    found = client.find_items(REPO, MARKER)

    assert [(i.number, i.is_pull) for i in found] == [(first.number, False), (pull.number, True)]
    (listing, *_) = fake.requests("GET", f"/repos/{REPO}/issues")
    assert listing.query["creator"] == "threshold-bot[bot]"
    assert listing.query["state"] == "open"


def test_find_items_without_a_known_login_goes_by_the_app_id(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    ours = client.create_issue(REPO, "ours", MARKER, MARKER)
    repo.add_issue("theirs", MARKER, user="threshold-bot[bot]")  # same login, no App: a squatter
    gh = fake.client(INSTALLATION)
    by_id = GitHubClient(gh, app_id=fake.app_id)

    assert [i.number for i in by_id.find_items(REPO, MARKER)] == [ours.number]
    assert "creator" not in fake.requests("GET", f"/repos/{REPO}/issues")[-1].query


# ----- pull requests ------------------------------------------------------------------------
def test_open_pull_twice_opens_one_pull(fake: FakeGitHub, client: GitHubClient, repo: Repo) -> None:
    head = repo.commit("threshold-bot/rebaseline/ci/nightly.sh", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    branch = "threshold-bot/rebaseline/ci/nightly.sh"

    first = client.open_pull(REPO, head=branch, base="main", title="Rebaseline", body="one")
    second = client.open_pull(REPO, head=branch, base="main", title="Rebaseline", body="two")

    assert first == second
    assert (first.head_ref, first.head_sha, first.base_ref, first.state) == (
        branch,
        head,
        "main",
        "open",
    )
    (pr,) = repo.pulls.values()
    assert (pr.number, pr.body, pr.user) == (first.number, "one", "threshold-bot[bot]")
    assert len(fake.requests("POST", f"/repos/{REPO}/pulls")) == 1


def test_open_pull_after_a_post_that_landed(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    repo.commit("drift", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    fake.fail_next("POST", rf"/repos/{REPO}/pulls$", status=502, landed=True)

    info = client.open_pull(REPO, head="drift", base="main", title="t", body="b")

    assert list(repo.pulls) == [info.number]


def test_open_pull_after_a_closed_one_opens_a_new_one(client: GitHubClient, repo: Repo) -> None:
    repo.commit("drift", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    old = client.open_pull(REPO, head="drift", base="main", title="t", body="b")
    client.update_issue(REPO, old.number, state="closed")

    new = client.open_pull(REPO, head="drift", base="main", title="t", body="b")

    assert new.number != old.number and new.state == "open"


# ----- the recording fake behaves like the client ----------------------------------------------
def _scenario(gh: GitHubAPI, repo: str, sha: str, moved: str) -> list[object]:
    """Items, branches and PRs through ``gh``: what the drift feature relies on."""
    seen: list[object] = []
    first = gh.create_issue(repo, "t", f"{MARKER}\n1", MARKER, labels=["ci"])
    seen.append([i.number for i in gh.find_items(repo, MARKER)] == [first.number])
    seen.append(gh.update_issue(repo, first.number, state="closed").state)
    seen.append(gh.find_items(repo, MARKER))
    gh.create_branch(repo, "drift", sha)
    gh.create_branch(repo, "drift", sha)
    try:
        gh.create_branch(repo, "drift", moved)
    except GitHubUnprocessable:
        seen.append("refused")
    gh.create_branch(repo, "drift", moved, force=True)
    seen.append(gh.branch_head(repo, "drift") == moved)
    one = gh.open_pull(repo, head="drift", base="main", title="p", body=MARKER)
    two = gh.open_pull(repo, head="drift", base="main", title="p", body=MARKER)
    seen.append((one.number == two.number, one.state, one.head_sha == moved))
    seen.append([(i.number == one.number, i.is_pull) for i in gh.find_items(repo, MARKER)])
    seen.append(gh.branch_head(repo, "nothing"))
    return seen


def test_the_recording_fake_agrees_with_the_client(client: GitHubClient, repo: Repo) -> None:
    base = repo.head("main")
    moved = repo.commit("side", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    recording = RecordingGitHub()
    r_base = recording.commit(dict(FILES))
    r_moved = recording.commit({"ci/nightly.sh": "ACC_MIN=0.4\n"}, parent=r_base)

    expected = _scenario(client, REPO, base, moved)

    assert _scenario(recording, recording.repo, r_base, r_moved) == expected
    assert expected[0] is True and expected[1] == "closed" and "refused" in expected
    assert sorted(recording.tree_paths(recording.repo, r_base)) == sorted(
        client.tree_paths(REPO, base)
    )
    recording.issues_forbidden = True
    with pytest.raises(GitHubForbidden):
        recording.create_issue(recording.repo, "t", MARKER, MARKER)
    assert [name for name, _ in recording.calls].count("open_pull") == 2
