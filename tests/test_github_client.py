"""``bot.adapters.github.client``: the real PyGithub client against the local fake GitHub.

Every test ends with ``fake.check()``: no response broke GitHub's OpenAPI schema, no
endpoint the client used is missing from the fake.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from bot.adapters.github.api import CheckAction, ReviewComment
from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import GitHubForbidden, GitHubNotFound, GitHubTransientError
from bot.adapters.github.support import create_once
from bot.core.retry import is_transient
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import IssueComment, Repo

pytestmark = pytest.mark.servers

REPO = "octo/ml"
INSTALLATION = 7
MARKER = "<!-- threshold-bot:review -->"
SCRIPT = "tests/ci/nightly.sh"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub) -> Repo:
    return fake.add_repo(
        REPO,
        installation_id=INSTALLATION,
        files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.56\n", "README.md": "# ml\n"},
    )


@pytest.fixture
def client(fake: FakeGitHub, repo: Repo) -> GitHubClient:
    return fake.github_app().installation(INSTALLATION)


def test_pull_info_matches_the_pull_request(client: GitHubClient, repo: Repo) -> None:
    pr = repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"}, draft=True)

    info = client.pull(REPO, 5)

    assert (info.number, info.title, info.state, info.draft, info.merged) == (
        5,
        pr.title,
        "open",
        True,
        False,
    )
    assert (info.base_ref, info.base_sha) == ("main", repo.head("main"))
    assert (info.head_ref, info.head_sha, info.head_repo) == ("tune", repo.head("tune"), REPO)
    assert info.author == pr.user
    assert info.url.endswith(f"/{REPO}/pull/5")


def test_pull_files_reads_every_page(fake: FakeGitHub, client: GitHubClient, repo: Repo) -> None:
    files: dict[str, str | None] = {f"ci/gate_{i:02d}.sh": f"X={i}\n" for i in range(45)}
    files["README.md"] = None
    files[SCRIPT] = "EVAL_ACC_MIN_VALUE=0.50\n"
    repo.open_pr(6, head="many", head_files=files)

    changed = client.pull_files(REPO, 6)

    statuses = {f.path: f.status for f in changed}
    assert len(changed) == 47
    assert statuses["README.md"] == "removed" and statuses[SCRIPT] == "modified"
    assert statuses["ci/gate_44.sh"] == "added"
    assert len(fake.requests("GET", f"/repos/{REPO}/pulls/6/files")) >= 2


def test_file_text_at_refs_and_absent_files(client: GitHubClient, repo: Repo) -> None:
    base = repo.head("main")
    head = repo.commit("tune", {SCRIPT: "EVAL_ACC_MIN_VALUE=0.50  # ≥ 0.5\n"})

    assert client.file_text(REPO, SCRIPT, base) == "EVAL_ACC_MIN_VALUE=0.56\n"
    assert client.file_text(REPO, SCRIPT, head) == "EVAL_ACC_MIN_VALUE=0.50  # ≥ 0.5\n"
    assert client.file_text(REPO, SCRIPT, "tune") == "EVAL_ACC_MIN_VALUE=0.50  # ≥ 0.5\n"
    assert client.file_text(REPO, "ci/missing.jsonl", head) is None
    assert client.file_text(REPO, SCRIPT, "no-such-branch") is None


def test_marked_comment_is_created_once_then_edited(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})

    first = client.upsert_comment(REPO, 5, f"{MARKER}\nfirst", MARKER)
    second = client.upsert_comment(REPO, 5, f"{MARKER}\nsecond", MARKER)
    third = client.upsert_comment(REPO, 5, f"{MARKER}\nsecond", MARKER)

    assert first.created and not second.created and not third.created
    assert first.id == second.id == third.id
    (comment,) = repo.comments(5)
    assert comment.body == f"{MARKER}\nsecond"
    assert len(fake.requests("POST", f"/repos/{REPO}/issues/5/comments")) == 1
    assert len(fake.requests("PATCH", f"/repos/{REPO}/issues/comments/{first.id}")) == 1


def test_a_users_comment_quoting_the_marker_is_left_alone(client: GitHubClient, repo: Repo) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    now = datetime.now(UTC)
    quoted = IssueComment(1, 5, "mallory", f"look: {MARKER}", now, now)
    repo.issue_comments[quoted.id] = quoted

    ref = client.upsert_comment(REPO, 5, f"{MARKER}\nreview", MARKER)

    assert ref.created and ref.id != quoted.id
    assert [c.body for c in repo.comments(5)] == [f"look: {MARKER}", f"{MARKER}\nreview"]


def test_comment_post_failing_with_502_still_leaves_one_comment(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    fake.fail_next("POST", r"/issues/5/comments$", status=502)

    ref = client.upsert_comment(REPO, 5, f"{MARKER}\nreview", MARKER)

    assert [c.id for c in repo.comments(5)] == [ref.id]
    posts = fake.requests("POST", f"/repos/{REPO}/issues/5/comments")
    assert [c.status for c in posts] == [502, 201]


def test_comment_post_hitting_the_secondary_rate_limit_is_retried_once(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    fake.secondary_rate_limit("POST", r"/issues/5/comments$")

    client.upsert_comment(REPO, 5, f"{MARKER}\nreview", MARKER)

    assert len(repo.comments(5)) == 1


def test_create_once_reuses_a_resource_that_landed_despite_the_error() -> None:
    created: list[str] = []

    def create() -> str:
        created.append("x")
        raise GitHubTransientError("502 after the write landed", 502)

    assert create_once(create, lambda: "found") == "found"
    assert created == ["x"]


def test_persistent_5xx_is_a_transient_error(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.fail_next("GET", rf"/repos/{REPO}/pulls/5$", status=503, times=10)

    with pytest.raises(GitHubTransientError) as caught:
        client.pull(REPO, 5)

    assert is_transient(caught.value)
    assert len(fake.requests("GET", f"/repos/{REPO}/pulls/5")) == 4  # 1 + 3 retries


def test_get_retried_after_one_502(fake: FakeGitHub, client: GitHubClient, repo: Repo) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    fake.fail_next("GET", rf"/repos/{REPO}/pulls/5$", status=502)

    assert client.pull(REPO, 5).number == 5


def test_permanent_errors_are_typed(client: GitHubClient, repo: Repo) -> None:
    with pytest.raises(GitHubNotFound) as missing:
        client.pull(REPO, 999)
    assert missing.value.status == 404 and not is_transient(missing.value)

    now = datetime.now(UTC)
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    theirs = IssueComment(2, 5, "alice", "hello", now, now)
    repo.issue_comments[theirs.id] = theirs
    with pytest.raises(GitHubForbidden):
        client._edit_comment(REPO, theirs.id, "rewritten")
    assert theirs.body == "hello"


def test_check_run_is_created_on_the_head_then_updated(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    pr = repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    approve = CheckAction(label="Approve", identifier="approve", description="Accept as proposed")

    first = client.upsert_check_run(
        REPO,
        pr.head_sha,
        conclusion="action_required",
        title="1 gate too tight",
        summary="summary",
        text="details",
        actions=(approve,),
        external_id="5",
    )
    second = client.upsert_check_run(
        REPO, pr.head_sha, conclusion="success", title="All gates pass", summary="ok"
    )

    assert first.created and not second.created and first.id == second.id
    (run,) = repo.check_runs(pr.head_sha)
    assert (run.name, run.status, run.conclusion) == ("threshold-bot", "completed", "success")
    assert run.output["title"] == "All gates pass"
    assert run.actions == []
    assert run.external_id == "5"
    assert client.find_check_run(REPO, pr.head_sha) is not None
    assert len(fake.requests("POST", f"/repos/{REPO}/check-runs")) == 1


def test_check_run_action_is_recorded_with_its_limits(client: GitHubClient, repo: Repo) -> None:
    pr = repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    approve = CheckAction(label="Approve", identifier="approve", description="Accept as proposed")

    ref = client.upsert_check_run(
        REPO,
        pr.head_sha,
        conclusion="action_required",
        title="t",
        summary="s" * 70_000,
        actions=(approve,),
        external_id="5",
    )

    (run,) = repo.check_runs(pr.head_sha)
    assert run.actions == [
        {"label": "Approve", "identifier": "approve", "description": "Accept as proposed"}
    ]
    assert len(run.output["summary"]) == 65_535 and ref.external_id == "5"
    with pytest.raises(ValueError):
        CheckAction(label="A label that is far too long", identifier="approve", description="d")


def test_check_run_post_failing_with_502_leaves_one_run(
    fake: FakeGitHub, client: GitHubClient, repo: Repo
) -> None:
    pr = repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    fake.fail_next("POST", r"/check-runs$", status=500)

    client.upsert_check_run(REPO, pr.head_sha, conclusion="neutral", title="t", summary="s")

    assert len(repo.check_runs(pr.head_sha)) == 1


def test_compare_merge_base_and_pulls_of_commits(client: GitHubClient, repo: Repo) -> None:
    before = repo.head("main")
    merged = repo.open_pr(3, head="speedup", head_files={"train.py": "fast = True\n"})
    feature_sha = merged.head_sha
    merge_sha = repo.merge_pr(3)
    branch = repo.open_pr(4, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})

    shas = client.compare_commits(REPO, before, merge_sha)
    assert shas == [feature_sha, merge_sha]
    assert client.compare_commits(REPO, before, merge_sha, limit=1) == [feature_sha]
    assert client.merge_base(REPO, merge_sha, branch.head_sha) == merge_sha

    (pull,) = client.pulls_for_commit(REPO, merge_sha)
    assert (pull.number, pull.merged, pull.title) == (3, True, merged.title)
    (open_pull,) = client.pulls_for_commit(REPO, branch.head_sha)
    assert (open_pull.number, open_pull.merged, open_pull.state) == (4, False, "open")


def test_permission_levels(client: GitHubClient, repo: Repo) -> None:
    repo.set_permission("bob", "maintain")
    repo.set_permission("carol", "triage")

    assert client.permission(REPO, "bob") == "maintain"
    assert client.permission(REPO, "carol") == "triage"
    assert client.permission(REPO, "stranger") == "read"


def test_reaction_on_a_comment(client: GitHubClient, repo: Repo) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    now = datetime.now(UTC)
    command = IssueComment(3, 5, "alice", "/rebaseline", now, now)
    repo.issue_comments[command.id] = command

    client.add_reaction(REPO, command.id, "eyes")

    assert [r.content for r in command.reactions] == ["eyes"]


def test_commit_file_to_the_pr_branch(client: GitHubClient, repo: Repo) -> None:
    repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})

    sha = client.commit_file(REPO, "tune", SCRIPT, "EVAL_ACC_MIN_VALUE=0.52\n", "Rebaseline")

    assert repo.head("tune") == sha
    assert repo.file_at("tune", SCRIPT) == "EVAL_ACC_MIN_VALUE=0.52\n"
    assert repo.file_at("main", SCRIPT) == "EVAL_ACC_MIN_VALUE=0.56\n"


def test_review_with_a_suggestion(client: GitHubClient, repo: Repo) -> None:
    pr = repo.open_pr(5, head="tune", head_files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.50\n"})
    suggestion = "```suggestion\nEVAL_ACC_MIN_VALUE=0.52\n```"

    review_id = client.create_review(
        REPO,
        5,
        commit_sha=pr.head_sha,
        body="The rule says 0.52",
        comments=(ReviewComment(path=SCRIPT, line=1, body=suggestion),),
    )

    (review,) = repo.reviews(5)
    assert review.id == review_id and review.body == "The rule says 0.52"
    (comment,) = review.comments
    assert (comment.path, comment.line, comment.body) == (SCRIPT, 1, suggestion)
