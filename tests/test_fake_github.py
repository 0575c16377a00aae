"""The fake GitHub driven by the real PyGithub client: auth, state, pagination, writes, limits,
fault injection and the OpenAPI schema check."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jwt
import pytest
from github import (
    Auth,
    Github,
    GithubException,
    GithubIntegration,
    GithubRetry,
    InputGitTreeElement,
)
from github.Repository import Repository

from tests.fakes.github_api import FakeGitHub, make_app_key
from tests.fakes.github_shapes import Shapes
from tests.fakes.github_state import Repo, blob_sha

pytestmark = pytest.mark.servers

INSTALLATION = 7
SCRIPT = (
    "EVAL_ACC_MIN_VALUE=0.56\n"
    'python eval.py --asserts "eval/all/avg_score >= $EVAL_ACC_MIN_VALUE"\n'
)


@pytest.fixture
def octo(fake_github: FakeGitHub) -> Repo:
    """octo/ml with a threshold script on main and PR #1 lowering the threshold."""
    repo = fake_github.add_repo(
        "octo/ml", installation_id=INSTALLATION, files={"ci/nightly.sh": SCRIPT}
    )
    repo.open_pr(1, head="feature", head_files={"ci/nightly.sh": SCRIPT.replace("0.56", "0.50")})
    return repo


@pytest.fixture
def gh_repo(fake_github: FakeGitHub, octo: Repo) -> Repository:
    return fake_github.client(INSTALLATION).get_repo("octo/ml")


def statuses(fake: FakeGitHub, method: str, path: str) -> list[int]:
    return [call.status for call in fake.requests(method, path)]


# ----- App authentication ------------------------------------------------------------------
def test_app_jwt_gets_installation_token(fake_github: FakeGitHub, octo: Repo) -> None:
    integration = fake_github.integration()
    assert integration.get_app().id == fake_github.app_id
    assert integration.get_repo_installation("octo", "ml").id == INSTALLATION
    token = integration.get_access_token(INSTALLATION).token
    assert token.startswith("ghs_")
    assert fake_github.state.tokens[token][0] == INSTALLATION
    # The token works on its own, as PyGithub's installation auth uses it.
    plain = Github(auth=Auth.Token(token), **fake_github.client_options(retry=0))
    assert plain.get_repo("octo/ml").default_branch == "main"


def test_jwt_signed_with_another_key_is_rejected(fake_github: FakeGitHub, octo: Repo) -> None:
    other_pem, _ = make_app_key()
    auth = Auth.AppAuth(fake_github.app_id, other_pem)
    integration = GithubIntegration(auth=auth, **fake_github.client_options(retry=0))
    with pytest.raises(GithubException) as caught:
        integration.get_access_token(INSTALLATION)
    assert caught.value.status == 401
    assert fake_github.state.tokens == {}


def test_jwt_for_another_app_id_is_rejected(fake_github: FakeGitHub) -> None:
    assert fake_github.private_key is not None
    auth = Auth.AppAuth(fake_github.app_id + 1, fake_github.private_key)
    integration = GithubIntegration(auth=auth, **fake_github.client_options(retry=0))
    with pytest.raises(GithubException) as caught:
        integration.get_app()
    assert caught.value.status == 401


@pytest.mark.parametrize(
    ("claims", "needle"),
    [
        ({"exp": -30}, "expired"),  # relative to now
        ({"exp": 900}, "too far in the future"),
    ],
)
def test_jwt_time_claims_are_checked(
    fake_github: FakeGitHub, claims: dict[str, int], needle: str
) -> None:
    assert fake_github.private_key is not None
    key = fake_github.private_key

    def sign(payload: dict[str, Any]) -> str:
        now = int(time.time())
        return jwt.encode({**payload, "exp": now + claims["exp"]}, key, algorithm="RS256")

    auth = Auth.AppAuth(fake_github.app_id, sign_func=sign)
    integration = GithubIntegration(auth=auth, **fake_github.client_options(retry=0))
    with pytest.raises(GithubException) as caught:
        integration.get_app()
    assert caught.value.status == 401 and needle in caught.value.data["message"].lower()


def test_endpoints_require_an_installation_token(fake_github: FakeGitHub, octo: Repo) -> None:
    anonymous = Github(**fake_github.client_options(retry=0))
    with pytest.raises(GithubException) as caught:
        anonymous.get_repo("octo/ml")
    assert caught.value.status == 401
    bogus = Github(auth=Auth.Token("ghs_not-issued"), **fake_github.client_options(retry=0))
    with pytest.raises(GithubException) as caught:
        bogus.get_repo("octo/ml")
    assert caught.value.status == 401
    assert statuses(fake_github, "GET", "/repos/octo/ml") == [401, 401]


def test_private_repository_of_another_installation_is_invisible(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    fake_github.add_repo("other/secret", installation_id=INSTALLATION + 1, private=True)
    gh = fake_github.client(INSTALLATION)
    with pytest.raises(GithubException) as caught:
        gh.get_repo("other/secret")
    assert caught.value.status == 404


# ----- reading pull requests and contents ---------------------------------------------------
def test_pull_request_fields_and_urls_point_at_the_fake(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo
) -> None:
    pr = gh_repo.get_pull(1)
    state = octo.pr(1)
    assert (pr.number, pr.title, pr.user.login, pr.state) == (1, state.title, "alice", "open")
    assert pr.head.ref == "feature" and pr.head.sha == octo.head("feature")
    assert pr.base.ref == "main" and pr.base.sha == octo.head("main")
    assert pr.head.repo.full_name == "octo/ml"
    assert pr.maintainer_can_modify is False and pr.draft is False and pr.merged is False
    assert pr.url == f"{fake_github.base_url}/repos/octo/ml/pulls/1"
    assert pr.changed_files == 1 and pr.commits == 1
    assert gh_repo.get_issue(1).pull_request is not None


def test_pr_files_paginate_with_link_headers(fake_github: FakeGitHub, octo: Repo) -> None:
    count = 45
    files: dict[str, str | None] = {f"ci/gate_{i:02}.sh": f"X_MIN={i}\n" for i in range(count)}
    octo.open_pr(2, head="many", head_files=files)
    gh = fake_github.client(INSTALLATION)
    names = [f.filename for f in gh.get_repo("octo/ml").get_pull(2).get_files()]
    assert names == sorted(files)
    path = "/repos/octo/ml/pulls/2/files"
    calls = fake_github.requests("GET", path)
    assert len(calls) == math.ceil(count / 30)
    assert calls[-1].query["page"] == str(len(calls))
    # A smaller page size from the client is honoured and followed to the end.
    small = Github(
        auth=fake_github.app_auth().get_installation_auth(INSTALLATION),
        per_page=10,
        **fake_github.client_options(),
    )
    assert len(list(small.get_repo("octo/ml").get_pull(2).get_files())) == count
    assert len(fake_github.requests("GET", path)) == len(calls) + math.ceil(count / 10)


def test_pr_file_patch_and_counts(gh_repo: Repository) -> None:
    (entry,) = gh_repo.get_pull(1).get_files()
    assert entry.filename == "ci/nightly.sh" and entry.status == "modified"
    assert (entry.additions, entry.deletions) == (1, 1)
    assert "-EVAL_ACC_MIN_VALUE=0.56" in entry.patch and "+EVAL_ACC_MIN_VALUE=0.50" in entry.patch


def test_open_pulls_are_listed_newest_first_and_paginated(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    for number in range(2, 40):
        octo.open_pr(number, head=f"b{number}", head_files={f"f{number}": "x\n"})
    octo.merge_pr(5)
    gh = fake_github.client(INSTALLATION)
    numbers = [pr.number for pr in gh.get_repo("octo/ml").get_pulls(state="open")]
    expected = sorted((n for n, p in octo.pulls.items() if p.state == "open"), reverse=True)
    assert numbers == expected and 5 not in numbers
    assert len(fake_github.requests("GET", "/repos/octo/ml/pulls")) == math.ceil(len(expected) / 30)


def test_contents_at_refs(gh_repo: Repository, octo: Repo) -> None:
    head = gh_repo.get_contents("ci/nightly.sh", ref=octo.head("feature"))
    base = gh_repo.get_contents("ci/nightly.sh", ref="main")
    assert not isinstance(head, list) and not isinstance(base, list)
    assert head.decoded_content.decode() == octo.file_at("feature", "ci/nightly.sh")
    assert base.decoded_content.decode() == SCRIPT
    assert base.sha == blob_sha(SCRIPT)
    with pytest.raises(GithubException) as caught:
        gh_repo.get_contents("ci/absent.sh", ref="main")
    assert caught.value.status == 404


# ----- comments and reactions ----------------------------------------------------------------
def test_comment_create_edit_list_and_react(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo
) -> None:
    pr = gh_repo.get_pull(1)
    comment = pr.create_issue_comment("<!-- threshold-bot:review -->\nfirst")
    assert comment.user.login == "threshold-bot[bot]" and comment.user.type == "Bot"
    comment.edit("<!-- threshold-bot:review -->\nsecond")
    (stored,) = octo.comments(1)
    assert stored.body.endswith("second") and stored.updated_at > stored.created_at
    assert [c.body for c in pr.get_issue_comments()] == [stored.body]
    assert pr.get_issue_comment(comment.id).body == stored.body
    assert fake_github.requests("POST", "/repos/octo/ml/issues/1/comments")[0].body == {
        "body": "<!-- threshold-bot:review -->\nfirst"
    }
    comment.create_reaction("eyes")
    comment.create_reaction("eyes")
    assert [r.content for r in stored.reactions] == ["eyes"]
    path = f"/repos/octo/ml/issues/comments/{comment.id}/reactions"
    assert statuses(fake_github, "POST", path) == [201, 200]


def test_comments_paginate(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    pr = gh_repo.get_pull(1)
    for i in range(33):
        pr.create_issue_comment(f"comment {i}")
    assert [c.body for c in pr.get_issue_comments()] == [f"comment {i}" for i in range(33)]
    assert len(fake_github.requests("GET", "/repos/octo/ml/issues/1/comments")) == 2


# ----- check runs ----------------------------------------------------------------------------
ACTIONS = [
    {"label": "Approve", "description": "Accept the proposed thresholds", "identifier": "approve"},
    {"label": "Rebaseline", "description": "Commit the recomputed limits", "identifier": "rebase"},
]


def test_check_run_lifecycle(gh_repo: Repository, octo: Repo) -> None:
    sha = octo.head("feature")
    run = gh_repo.create_check_run("threshold-bot", sha, status="in_progress", external_id="pr:1")
    assert run.status == "in_progress" and run.conclusion is None
    assert [p.number for p in run.pull_requests] == [1]
    run.edit(
        conclusion="action_required",
        output={"title": "1 gate too tight", "summary": "see comment", "text": "details"},
        actions=ACTIONS,
    )
    (stored,) = octo.check_runs(sha)
    assert (stored.status, stored.conclusion, stored.external_id) == (
        "completed",
        "action_required",
        "pr:1",
    )
    assert stored.actions == ACTIONS and stored.completed_at is not None
    fetched = gh_repo.get_check_run(run.id)
    assert fetched.output.title == "1 gate too tight" and fetched.conclusion == "action_required"
    listed = list(gh_repo.get_commit(sha).get_check_runs())
    assert [r.id for r in listed] == [run.id]


def test_check_runs_list_latest_per_name(gh_repo: Repository, octo: Repo) -> None:
    sha = octo.head("feature")
    first = gh_repo.create_check_run("threshold-bot", sha, status="queued")
    second = gh_repo.create_check_run("threshold-bot", sha, status="queued")
    other = gh_repo.create_check_run("lint", sha, status="queued")
    commit = gh_repo.get_commit(sha)
    assert {r.id for r in commit.get_check_runs()} == {second.id, other.id}
    assert {r.id for r in commit.get_check_runs(filter="all")} == {first.id, second.id, other.id}
    assert [r.id for r in commit.get_check_runs(check_name="lint")] == [other.id]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"actions": [{**ACTIONS[0], "label": "L" * 21}]}, "actions/0/label is too long"),
        ({"actions": [{**ACTIONS[0], "identifier": "i" * 21}]}, "identifier is too long"),
        ({"actions": [{**ACTIONS[0], "description": "d" * 41}]}, "description is too long"),
        ({"actions": [{"label": "a", "description": "b"}]}, "identifier wasn't supplied"),
        ({"actions": [ACTIONS[0]] * 4}, "actions has too many items (maximum is 3)"),
        ({"output": {"title": "t", "summary": "s" * 65536}}, "summary is too long"),
        ({"output": {"title": "t", "summary": "s", "text": "t" * 65536}}, "text is too long"),
        ({"output": {"title": "t"}}, "summary wasn't supplied"),
        ({"status": "completed"}, "conclusion wasn't supplied"),
    ],
)
def test_check_run_limits_answer_422(
    fake_github: FakeGitHub,
    gh_repo: Repository,
    octo: Repo,
    change: dict[str, Any],
    needle: str,
) -> None:
    sha = octo.head("feature")
    run = gh_repo.create_check_run("threshold-bot", sha, status="in_progress")
    with pytest.raises(GithubException) as caught:
        run.edit(**change)
    assert caught.value.status == 422 and needle in caught.value.data["message"]
    (stored,) = octo.check_runs(sha)
    assert stored.status == "in_progress" and stored.actions == []  # nothing half-applied
    # The limits are inclusive: exactly at the limit is accepted.
    run.edit(
        conclusion="success",
        actions=[{"label": "L" * 20, "identifier": "i" * 20, "description": "d" * 40}] * 3,
        output={"title": "t", "summary": "s" * 65535},
    )
    assert octo.check_runs(sha)[0].conclusion == "success"


def test_request_bodies_are_checked_against_the_schema(gh_repo: Repository, octo: Repo) -> None:
    with pytest.raises(GithubException) as caught:
        gh_repo.create_check_run("threshold-bot", octo.head("feature"), status="bogus")
    assert caught.value.status == 422 and "status" in caught.value.data["message"]
    assert octo.check_runs(octo.head("feature")) == []


def test_check_run_on_unknown_sha_is_422(gh_repo: Repository) -> None:
    with pytest.raises(GithubException) as caught:
        gh_repo.create_check_run("threshold-bot", "f" * 40, status="queued")
    assert caught.value.status == 422


# ----- permissions --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "legacy"),
    [
        ("admin", "admin"),
        ("maintain", "write"),
        ("write", "write"),
        ("triage", "read"),
        ("read", "read"),
        ("none", "none"),
    ],
)
def test_collaborator_permission(gh_repo: Repository, octo: Repo, role: str, legacy: str) -> None:
    octo.set_permission("bob", role)
    assert gh_repo.get_collaborator_permission("bob") == legacy
    assert gh_repo.get_collaborator_role_name("bob") == role


def test_non_collaborator_reads_public_repository(gh_repo: Repository) -> None:
    assert gh_repo.get_collaborator_permission("stranger") == "read"


# ----- attribution: compare and commit -> pulls ----------------------------------------------
def test_compare_and_commit_pulls(fake_github: FakeGitHub, octo: Repo) -> None:
    before = octo.head("main")
    octo.open_pr(2, head="speedup", head_files={"model.py": "fast = True\n"}, message="Speed up")
    octo.merge_pr(2)
    octo.open_pr(3, head="refactor", head_files={"util.py": "x = 1\n"}, message="Refactor")
    octo.merge_pr(3)
    after = octo.head("main")
    gh = fake_github.client(INSTALLATION).get_repo("octo/ml")
    comparison = gh.compare(before, after)
    expected = [c.sha for c in octo.commits_between(before, after)]
    assert [c.sha for c in comparison.commits] == expected
    assert comparison.ahead_by == len(expected) == 4 and comparison.behind_by == 0
    assert comparison.status == "ahead"
    assert sorted(f.filename for f in comparison.files) == ["model.py", "util.py"]
    paged = gh.compare(before, after, comparison_commits_per_page=3)
    assert [c.sha for c in paged.commits] == expected  # followed the Link header to page 2
    assert [c.query.get("per_page") for c in fake_github.calls if "/compare/" in c.path][-2:] == [
        "3",
        "3",
    ]
    brought = {
        c.sha: [p.number for p in gh.get_commit(c.sha).get_pulls()] for c in comparison.commits
    }
    speedup = {
        octo.pr(2).merge_commit_sha,
        *(c.sha for c in comparison.commits if c.commit.message == "Speed up"),
    }
    assert brought == {sha: [2] if sha in speedup else [3] for sha in expected}
    # An open PR's commit maps back to it too (fork check runs need this).
    assert [p.number for p in gh.get_commit(octo.head("feature")).get_pulls()] == [1]


def test_get_commit_lists_its_files(gh_repo: Repository, octo: Repo) -> None:
    commit = gh_repo.get_commit(octo.head("feature"))
    assert [f.filename for f in commit.files] == ["ci/nightly.sh"]
    assert commit.commit.message == "Change thresholds"
    assert [p.sha for p in commit.parents] == octo.objects[octo.head("feature")].parents


# ----- writes: contents API, git data API, fork permissions ---------------------------------
def test_contents_put_commits_and_moves_the_branch(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo
) -> None:
    old_head = octo.head("feature")
    current = gh_repo.get_contents("ci/nightly.sh", ref="feature")
    assert not isinstance(current, list)
    new_text = SCRIPT.replace("0.56", "0.52")
    result = gh_repo.update_file(
        "ci/nightly.sh", "Rebaseline EVAL_ACC_MIN_VALUE", new_text, current.sha, branch="feature"
    )
    new_head = octo.head("feature")
    assert new_head != old_head and result["commit"].sha == new_head
    assert octo.objects[new_head].parents == [old_head]
    assert octo.file_at("feature", "ci/nightly.sh") == new_text
    assert octo.file_at("main", "ci/nightly.sh") == SCRIPT
    assert gh_repo.get_pull(1).head.sha == new_head
    # A stale blob sha conflicts, as on GitHub.
    with pytest.raises(GithubException) as caught:
        gh_repo.update_file("ci/nightly.sh", "again", "x", current.sha, branch="feature")
    assert caught.value.status == 409
    assert octo.head("feature") == new_head


def test_contents_put_creates_a_file(gh_repo: Repository, octo: Repo) -> None:
    gh_repo.create_file("ci/new.sh", "add", "X_MIN=1\n", branch="feature")
    assert octo.file_at("feature", "ci/new.sh") == "X_MIN=1\n"
    with pytest.raises(GithubException) as caught:  # creating over an existing file needs its sha
        gh_repo.create_file("ci/new.sh", "again", "X_MIN=2\n", branch="feature")
    assert caught.value.status == 422


def test_git_data_multi_file_commit(gh_repo: Repository, octo: Repo) -> None:
    ref = gh_repo.get_git_ref("heads/feature")
    head = gh_repo.get_git_commit(ref.object.sha)
    blob = gh_repo.create_git_blob("B_MAX=3\n", "utf-8")
    tree = gh_repo.create_git_tree(
        [
            InputGitTreeElement("ci/nightly.sh", "100644", "blob", content="A=1\n"),
            InputGitTreeElement("ci/b.sh", "100644", "blob", sha=blob.sha),
        ],
        base_tree=head.tree,
    )
    commit = gh_repo.create_git_commit("Rebaseline two files", tree, [head])
    ref.edit(commit.sha)
    assert octo.head("feature") == commit.sha
    assert octo.file_at("feature", "ci/nightly.sh") == "A=1\n"
    assert octo.file_at("feature", "ci/b.sh") == "B_MAX=3\n"
    # Moving the branch back is not a fast-forward.
    with pytest.raises(GithubException) as caught:
        ref.edit(head.sha)
    assert caught.value.status == 422


def test_fork_pr_without_maintainer_edits_refuses_pushes(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    fork_pr = octo.open_pr(
        2, head="tweak", fork=True, user="mallory", head_files={"ci/nightly.sh": "A=0.1\n"}
    )
    gh = fake_github.client(INSTALLATION)
    pr = gh.get_repo("octo/ml").get_pull(2)
    assert pr.head.repo.full_name == "mallory/ml" and pr.head.repo.fork is True
    fork = gh.get_repo(pr.head.repo.full_name)  # public fork: readable
    current = fork.get_contents("ci/nightly.sh", ref="tweak")
    assert not isinstance(current, list)
    with pytest.raises(GithubException) as caught:
        fork.update_file("ci/nightly.sh", "rebaseline", "A=0.2\n", current.sha, branch="tweak")
    assert caught.value.status == 403
    assert fork_pr.head_repo.file_at("tweak", "ci/nightly.sh") == "A=0.1\n"
    # Check runs on a fork head list no pull requests, as on GitHub.
    run = gh.get_repo("octo/ml").create_check_run("threshold-bot", pr.head.sha, status="queued")
    assert run.pull_requests == []


def test_fork_pr_with_maintainer_edits_accepts_pushes(fake_github: FakeGitHub, octo: Repo) -> None:
    fork_pr = octo.open_pr(
        2,
        head="tweak",
        fork=True,
        user="carol",
        maintainer_can_modify=True,
        head_files={"ci/nightly.sh": "A=0.1\n"},
    )
    fork = fake_github.client(INSTALLATION).get_repo("carol/ml")
    current = fork.get_contents("ci/nightly.sh", ref="tweak")
    assert not isinstance(current, list)
    fork.update_file("ci/nightly.sh", "rebaseline", "A=0.2\n", current.sha, branch="tweak")
    assert fork_pr.head_repo.file_at("tweak", "ci/nightly.sh") == "A=0.2\n"
    # ... but only to the PR's head branch.
    with pytest.raises(GithubException) as caught:
        fork.create_file("x", "m", "y", branch="main")
    assert caught.value.status == 403


# ----- reviews with suggestions ------------------------------------------------------------------
def test_review_with_suggestion_comment(gh_repo: Repository, octo: Repo) -> None:
    suggestion = "```suggestion\nEVAL_ACC_MIN_VALUE=0.52\n```"
    pr = gh_repo.get_pull(1)
    review = pr.create_review(
        body="Rule says 0.52",
        event="COMMENT",
        comments=[{"path": "ci/nightly.sh", "line": 1, "side": "RIGHT", "body": suggestion}],
    )
    assert review.state == "COMMENTED"
    (stored,) = octo.reviews(1)
    assert stored.comments[0].body == suggestion and stored.comments[0].line == 1
    assert [c.body for c in pr.get_review_comments()] == [suggestion]
    assert [r.id for r in pr.get_reviews()] == [review.id]
    with pytest.raises(GithubException) as caught:
        pr.create_review(
            body="x", event="COMMENT", comments=[{"path": "nope.sh", "line": 1, "body": "y"}]
        )
    assert caught.value.status == 422


# ----- fault injection and retries ---------------------------------------------------------------
def test_5xx_is_retried_by_pygithub(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    fake_github.fail_next("GET", r"/pulls/1$", status=502, times=2)
    assert gh_repo.get_pull(1).number == 1
    assert statuses(fake_github, "GET", "/repos/octo/ml/pulls/1") == [502, 502, 200]


def test_5xx_surfaces_without_retries(fake_github: FakeGitHub, octo: Repo) -> None:
    gh = fake_github.client(INSTALLATION, retry=0).get_repo("octo/ml")
    fake_github.fail_next("GET", r"/pulls/1$", status=503)
    with pytest.raises(GithubException) as caught:
        gh.get_pull(1)
    assert caught.value.status == 503
    assert gh.get_pull(1).number == 1  # only the next request failed


def test_secondary_rate_limit_is_retried(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo
) -> None:
    pr = gh_repo.get_pull(1)
    fake_github.secondary_rate_limit("POST", r"/issues/1/comments$")
    pr.create_issue_comment("once")
    assert statuses(fake_github, "POST", "/repos/octo/ml/issues/1/comments") == [403, 201]
    assert [c.body for c in octo.comments(1)] == ["once"]


def test_secondary_rate_limit_message_without_retry_after(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    retry = GithubRetry(total=2, backoff_factor=0, secondary_rate_wait=0)
    gh = fake_github.client(INSTALLATION, retry=retry).get_repo("octo/ml")
    fake_github.secondary_rate_limit("GET", r"/pulls/1$", retry_after=None)
    assert gh.get_pull(1).number == 1
    assert statuses(fake_github, "GET", "/repos/octo/ml/pulls/1") == [403, 200]


# ----- routing, recording and the schema check ----------------------------------------------
def test_unimplemented_documented_endpoint_is_reported(
    fake_github: FakeGitHub, gh_repo: Repository
) -> None:
    with pytest.raises(GithubException):
        list(gh_repo.get_labels())
    assert fake_github.unimplemented == ["GET /repos/{owner}/{repo}/labels"]
    with pytest.raises(AssertionError, match="unimplemented"):
        fake_github.check()
    fake_github.unimplemented.clear()


def test_bad_response_shape_is_caught(github_app_key: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Shapes.pull_request

    def without_head(self: Shapes, pr: Any) -> dict[str, Any]:
        body = original(self, pr)
        del body["head"]
        return body

    monkeypatch.setattr(Shapes, "pull_request", without_head)
    pem, public = github_app_key
    with FakeGitHub(private_key=pem, public_key=public) as fake:
        fake.add_repo("octo/ml", installation_id=INSTALLATION).open_pr(1, head_files={"a": "b\n"})
        gh = fake.client(INSTALLATION, retry=0).get_repo("octo/ml")
        with pytest.raises(GithubException) as caught:
            gh.get_pull(1)
        assert caught.value.status == 500
        assert any("'head' is a required property" in e for e in fake.schema_errors)
        with pytest.raises(AssertionError, match="'head' is a required property"):
            fake.check()


def test_wrong_types_and_formats_are_caught(
    github_app_key: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Shapes.issue_comment

    def sloppy(self: Shapes, repo: Repo, comment: Any) -> dict[str, Any]:
        return {**original(self, repo, comment), "id": str(comment.id), "created_at": "yesterday"}

    monkeypatch.setattr(Shapes, "issue_comment", sloppy)
    pem, public = github_app_key
    with FakeGitHub(private_key=pem, public_key=public) as fake:
        fake.add_repo("octo/ml", installation_id=INSTALLATION).open_pr(1, head_files={"a": "b\n"})
        pr = fake.client(INSTALLATION, retry=0).get_repo("octo/ml").get_pull(1)
        with pytest.raises(GithubException):
            pr.create_issue_comment("hi")
        joined = "\n".join(fake.schema_errors)
        assert "is not of type 'integer'" in joined and "is not a 'date-time'" in joined


@pytest.fixture
def shared_fake(github_app_key: Any) -> Iterator[FakeGitHub]:
    pem, public = github_app_key
    with FakeGitHub(private_key=pem, public_key=public) as fake:
        yield fake


def test_every_json_answer_was_validated(shared_fake: FakeGitHub) -> None:
    repo = shared_fake.add_repo("octo/ml", installation_id=INSTALLATION)
    repo.open_pr(1, head_files={"ci/x.sh": "A_MIN=1\n"})
    gh = shared_fake.client(INSTALLATION).get_repo("octo/ml")
    gh.get_pull(1).create_issue_comment("hi")
    operations = {
        (call.method, m.operation.operation_id)
        for call in shared_fake.calls
        if (m := shared_fake.openapi.match(call.method, call.path)) is not None
    }
    assert ("POST", "apps/create-installation-access-token") in operations
    assert ("POST", "issues/create-comment") in operations
    assert len(operations) == len({(c.method, c.path) for c in shared_fake.calls})
    assert shared_fake.schema_errors == []


def test_directory_listing_and_users(gh_repo: Repository, octo: Repo) -> None:
    octo.commit("main", {"ci/sub/deep.sh": "X=1\n", "ci/b.sh": "Y=2\n"})
    listing = gh_repo.get_contents("ci", ref="main")
    assert isinstance(listing, list)
    assert [(e.name, e.type) for e in listing] == [
        ("b.sh", "file"),
        ("nightly.sh", "file"),
        ("sub", "dir"),
    ]
    assert listing[0].size == len("Y=2\n") and listing[0].sha == blob_sha("Y=2\n")
    assert listing[0].decoded_content == b"Y=2\n"  # lazily completed through the file's URL


def test_user_profile(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    user = fake_github.client(INSTALLATION).get_user("alice")
    assert user.login == "alice" and user.type == "User"


def test_merged_pr_keeps_its_commits_and_files(fake_github: FakeGitHub, octo: Repo) -> None:
    before = octo.head("main")
    merge_sha = octo.merge_pr(1)
    pr = fake_github.client(INSTALLATION).get_repo("octo/ml").get_pull(1)
    assert pr.merged and pr.state == "closed" and pr.merge_commit_sha == merge_sha
    assert pr.base.sha == before
    assert [f.filename for f in pr.get_files()] == ["ci/nightly.sh"]
    assert [c.sha for c in pr.get_commits()] == [octo.head("feature")]
    assert octo.file_at("main", "ci/nightly.sh") == octo.file_at("feature", "ci/nightly.sh")
    assert octo.objects[merge_sha].parents == [before, octo.head("feature")]


def test_concurrent_clients_are_served(fake_github: FakeGitHub, octo: Repo) -> None:
    gh = fake_github.client(INSTALLATION).get_repo("octo/ml")
    pr = gh.get_pull(1)
    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(lambda i: pr.create_issue_comment(f"c{i}").id, range(16)))
    assert len(set(ids)) == 16
    assert sorted(c.body for c in octo.comments(1)) == sorted(f"c{i}" for i in range(16))
