"""The fake GitHub's issues, pull-request writes, installation repositories, trees, denied
permissions, rate limit and held responses, driven by the real PyGithub client (every
response is checked against GitHub's OpenAPI schema by ``fake_github``'s teardown)."""

from __future__ import annotations

import threading
import time

import pytest
from github import Github, GithubException
from github.Repository import Repository

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo

pytestmark = pytest.mark.servers

INSTALLATION = 7
FILES = {"ci/nightly.sh": "ACC_MIN=0.5\n", "ci/gates/deep/a.yml": "x: 1\n", "README.md": "# ml\n"}


@pytest.fixture
def octo(fake_github: FakeGitHub) -> Repo:
    return fake_github.add_repo("octo/ml", installation_id=INSTALLATION, files=dict(FILES))


@pytest.fixture
def gh(fake_github: FakeGitHub, octo: Repo) -> Github:
    return fake_github.client(INSTALLATION, retry=0)


@pytest.fixture
def gh_repo(gh: Github) -> Repository:
    return gh.get_repo("octo/ml")


def _raw(gh: Github, verb: str, url: str, **options: object) -> tuple[dict[str, object], object]:
    headers, data = gh.requester.requestJsonAndCheck(verb, url, **options)  # type: ignore[arg-type]
    return headers, data


# ----- issues ------------------------------------------------------------------------------
def test_issues_share_numbers_with_pulls_and_list_them(
    fake_github: FakeGitHub, octo: Repo, gh: Github, gh_repo: Repository
) -> None:
    pr = octo.open_pr(head="tune", head_files={"ci/nightly.sh": "ACC_MIN=0.4\n"})
    human = octo.add_issue("flaky nightly", "seen twice", labels=("CI",))
    ours = gh_repo.create_issue("Nightly thresholds failing", "marker", labels=["ci", "drift"])
    closed = octo.add_issue("old", state="closed")

    assert (pr.number, human.number, ours.number, closed.number) == (1, 2, 3, 4)
    listed = {i.number: i for i in gh_repo.get_issues()}  # open, newest first
    assert list(listed) == [3, 2, 1]
    assert listed[1].pull_request is not None and listed[3].pull_request is None
    assert listed[3].user.login == "threshold-bot[bot]" and listed[3].user.type == "Bot"
    assert [i.number for i in gh_repo.get_issues(state="all", direction="asc")] == [1, 2, 3, 4]
    by_app = gh_repo.get_issues(creator="threshold-bot[bot]")  # type: ignore[arg-type]
    assert [i.number for i in by_app] == [3]
    assert [i.number for i in gh_repo.get_issues(labels=["ci"])] == [3, 2]  # any case
    assert [lbl.name for lbl in gh_repo.get_issue(3).labels] == ["CI", "drift"]  # known: kept
    assert octo.issue(3).app_id == fake_github.app_id


def test_issue_listing_pages_with_link_headers(
    fake_github: FakeGitHub, octo: Repo, gh: Github
) -> None:
    for i in range(5):
        octo.add_issue(f"issue {i}")

    headers, page = _raw(gh, "GET", "/repos/octo/ml/issues", parameters={"per_page": 2, "page": 2})

    assert [item["number"] for item in page] == [3, 2]  # type: ignore[attr-defined]
    assert 'rel="next"' in str(headers["link"]) and 'rel="prev"' in str(headers["link"])


def test_issue_writes_follow_githubs_rules(octo: Repo, gh_repo: Repository) -> None:
    octo.set_permission("bob", "triage")
    issue = gh_repo.create_issue("t", "b", assignees=["bob"])

    with pytest.raises(GithubException) as unknown:
        gh_repo.create_issue("t", "b", assignees=["stranger"])
    with pytest.raises(GithubException) as long_title:
        gh_repo.create_issue("x" * 257)
    issue.edit(state="closed", labels=["wontfix"])
    closed = (octo.issue(issue.number).state, octo.issue(issue.number).state_reason)
    issue.edit(state="open", state_reason="reopened")

    assert unknown.value.status == 422 and long_title.value.status == 422
    assert closed == ("closed", "completed")
    stored = octo.issue(issue.number)
    assert (stored.state, stored.state_reason, stored.closed_at) == ("open", "reopened", None)
    assert (stored.labels, stored.assignees) == (["wontfix"], ["bob"])
    assert len(octo.issues) == 1


def test_patching_a_pull_requests_issue_edits_the_pull(octo: Repo, gh_repo: Repository) -> None:
    pr = octo.open_pr(head="tune", head_files={"ci/nightly.sh": "ACC_MIN=0.4\n"})

    gh_repo.get_issue(pr.number).edit(title="Renamed", body="new body", state="closed")

    assert (pr.title, pr.body, pr.state) == ("Renamed", "new body", "closed")
    assert gh_repo.get_pull(pr.number).state == "closed"


def test_comments_on_a_plain_issue(octo: Repo, gh_repo: Repository) -> None:
    issue = octo.add_issue("drift")
    human = octo.add_comment(issue.number, "/rebaseline")

    ours = gh_repo.get_issue(issue.number).create_comment("on it")
    listed = list(gh_repo.get_issue(issue.number).get_comments())

    assert [c.body for c in listed] == ["/rebaseline", "on it"]
    assert [c.id for c in octo.comments(issue.number)] == [human.id, ours.id]
    assert f"/issues/{issue.number}#issuecomment-" in ours.html_url
    assert gh_repo.get_issue(issue.number).comments == 2


# ----- pull requests -----------------------------------------------------------------------
def test_pull_requests_are_opened_once_per_head_and_edited(octo: Repo, gh_repo: Repository) -> None:
    head = octo.commit("drift", {"ci/nightly.sh": "ACC_MIN=0.4\n"})
    octo.branches["empty"] = octo.head("main")  # no commits besides main's: nothing to pull

    pr = gh_repo.create_pull(base="main", head="drift", title="Rebaseline", body="why")
    with pytest.raises(GithubException) as twice:
        gh_repo.create_pull(base="main", head="octo:drift", title="again", body="")
    with pytest.raises(GithubException) as empty:
        gh_repo.create_pull(base="main", head="empty", title="nothing", body="")
    with pytest.raises(GithubException) as missing:
        gh_repo.create_pull(base="main", head="gone", title="nothing", body="")
    pr.edit(title="Rebaseline ci/nightly.sh", state="closed")

    assert (pr.number, pr.head.sha, pr.user.login) == (1, head, "threshold-bot[bot]")
    assert twice.value.status == 422
    assert twice.value.data["errors"][0]["message"] == (  # type: ignore[index]
        "A pull request already exists for octo:drift."
    )
    assert empty.value.status == missing.value.status == 422
    stored = octo.pr(1)
    assert (stored.title, stored.state, len(octo.pulls)) == (
        "Rebaseline ci/nightly.sh",
        "closed",
        1,
    )
    open_from_drift = gh_repo.get_pulls(state="open", head="octo:drift")
    assert list(open_from_drift) == []
    assert [p.number for p in gh_repo.get_pulls(state="closed", head="octo:drift")] == [1]


# ----- permissions, rate limit, held responses ----------------------------------------------
def test_denied_issues_permission_answers_403_on_issue_writes(
    fake_github: FakeGitHub, octo: Repo, gh_repo: Repository
) -> None:
    issue = octo.add_issue("human")
    pr = octo.open_pr(head="tune", head_files={"ci/nightly.sh": "ACC_MIN=0.4\n"})
    fake_github.deny(INSTALLATION, "issues")

    for write in (
        lambda: gh_repo.create_issue("t"),
        lambda: gh_repo.get_issue(issue.number).edit(title="x"),
        lambda: gh_repo.get_issue(issue.number).create_comment("x"),
    ):
        with pytest.raises(GithubException) as denied:
            write()
        assert denied.value.status == 403
        assert denied.value.data["message"] == "Resource not accessible by integration"  # type: ignore[index]
    gh_repo.get_issue(pr.number).create_comment("a PR's comment needs pull_requests")

    assert (len(octo.issues), octo.issue(issue.number).title) == (1, "human")
    assert len(octo.comments(pr.number)) == 1


def test_rate_limit_header_is_settable(fake_github: FakeGitHub, octo: Repo, gh: Github) -> None:
    headers, _ = _raw(gh, "GET", "/repos/octo/ml")
    assert headers["x-ratelimit-remaining"] == "4999"
    fake_github.rate_remaining, fake_github.rate_cost = 3, 2

    seen = [_raw(gh, "GET", "/repos/octo/ml")[0]["x-ratelimit-remaining"] for _ in range(3)]

    assert seen == ["3", "1", "0"]


def test_hold_next_answers_late_after_the_change_and_serves_others_meanwhile(
    fake_github: FakeGitHub, octo: Repo, gh: Github, gh_repo: Repository
) -> None:
    hold = fake_github.hold_next("POST", r"/issues$", 1.0)
    done = threading.Event()

    def create() -> None:
        gh_repo.create_issue("held")
        done.set()

    thread = threading.Thread(target=create)
    thread.start()
    assert hold.reached.wait(5)
    started = time.monotonic()
    assert [i.title for i in octo.issues.values()] == ["held"]  # took effect already
    assert gh.get_repo("octo/ml").get_issue(1).title == "held"  # not blocked by the hold
    answered_meanwhile = time.monotonic() - started < 0.5 and not done.is_set()
    thread.join(5)

    assert answered_meanwhile and done.is_set()


# ----- installation repositories, trees, per-repository counts --------------------------------
def test_installation_repositories_are_paged_with_a_total(
    fake_github: FakeGitHub, octo: Repo, gh: Github
) -> None:
    for i in range(4):
        fake_github.add_repo(f"octo/r{i}", installation_id=INSTALLATION)
    fake_github.add_repo("else/where", installation_id=9)

    headers, body = _raw(gh, "GET", "/installation/repositories", parameters={"per_page": 2})

    assert body["total_count"] == 5  # type: ignore[index]
    assert [r["full_name"] for r in body["repositories"]] == ["octo/ml", "octo/r0"]  # type: ignore[index]
    assert 'rel="next"' in str(headers["link"])


def test_trees_of_commits_top_level_or_recursive(octo: Repo, gh_repo: Repository) -> None:
    sha = octo.head("main")

    top = gh_repo.get_git_tree(sha)
    everything = gh_repo.get_git_tree(sha, recursive=True)
    ci = next(e for e in top.tree if e.path == "ci")
    below = gh_repo.get_git_tree(ci.sha)

    assert sorted((e.path, e.type) for e in top.tree) == [("README.md", "blob"), ("ci", "tree")]
    blobs = sorted(e.path for e in everything.tree if e.type == "blob")
    assert blobs == sorted(FILES)
    assert {e.path for e in everything.tree if e.type == "tree"} == {
        "ci",
        "ci/gates",
        "ci/gates/deep",
    }
    assert sorted(e.path for e in below.tree) == ["gates", "nightly.sh"]
    assert everything.raw_data["truncated"] is False


def test_requests_can_be_counted_per_repository(
    fake_github: FakeGitHub, octo: Repo, gh: Github
) -> None:
    fake_github.add_repo("octo/ml-two", installation_id=INSTALLATION)
    _raw(gh, "GET", "/repos/octo/ml/issues")
    _raw(gh, "GET", "/repos/octo/ml-two")
    _raw(gh, "GET", "/repos/octo/ml-two/issues")

    assert [c.path for c in fake_github.requests(repo="octo/ml")] == ["/repos/octo/ml/issues"]
    assert len(fake_github.requests("GET", repo="octo/ml-two")) == 2
    assert fake_github.requests("POST", repo="octo/ml-two") == []
