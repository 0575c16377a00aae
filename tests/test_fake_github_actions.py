"""The fake GitHub's Actions endpoints driven by the real PyGithub client: workflows by id or
file name, runs filtered and paged, artifacts listed by name across runs, and the download's
302 to the artifact storage (410 once expired)."""

from __future__ import annotations

import io
import urllib.error
import urllib.request
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from github import GithubException
from github.Repository import Repository

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo, Workflow, WorkflowRun

pytestmark = pytest.mark.servers

INSTALLATION = 7
DAY0 = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)


def archive(**files: str) -> bytes:
    """A zip archive of ``files`` (member name -> text), as upload-artifact makes one."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, text in files.items():
            zipped.writestr(name, text)
    return out.getvalue()


@pytest.fixture
def octo(fake_github: FakeGitHub) -> Repo:
    return fake_github.add_repo("octo/ml", installation_id=INSTALLATION)


@pytest.fixture
def gh_repo(fake_github: FakeGitHub, octo: Repo) -> Repository:
    return fake_github.client(INSTALLATION).get_repo("octo/ml")


@pytest.fixture
def nightly(octo: Repo) -> Workflow:
    return octo.add_workflow("nightly.yml", name="Nightly", workflow_id=5150)


def mixed_runs(octo: Repo, nightly: Workflow) -> dict[str, WorkflowRun]:
    """The nightly's own runs and the runs that must not pass for them."""
    octo.commit("feature", {"train.py": "x = 1\n"})
    fork = octo.fork("mallory")
    fork.commit("main", {"results.json": "{}"}, author="mallory")
    other = octo.add_workflow("lint.yml")
    day = timedelta(days=1)
    return {
        "scheduled": octo.add_workflow_run(nightly, created_at=DAY0),
        "failed": octo.add_workflow_run(nightly, conclusion="failure", created_at=DAY0 + day),
        "pushed": octo.add_workflow_run(nightly, event="push", created_at=DAY0 + 2 * day),
        "pr": octo.add_workflow_run(
            nightly, event="pull_request", branch="feature", created_at=DAY0 + 3 * day
        ),
        "fork": octo.add_workflow_run(
            nightly, event="pull_request", head_repo=fork, created_at=DAY0 + 4 * day
        ),
        "running": octo.add_workflow_run(nightly, status="in_progress", created_at=DAY0 + 5 * day),
        "lint": octo.add_workflow_run(other, created_at=DAY0 + 6 * day),
    }


def test_workflow_by_file_name_or_id(gh_repo: Repository, nightly: Workflow) -> None:
    by_name = gh_repo.get_workflow("nightly.yml")
    assert (by_name.id, by_name.name, by_name.path) == (5150, "Nightly", nightly.path)
    assert gh_repo.get_workflow(5150).path == ".github/workflows/nightly.yml"
    with pytest.raises(GithubException) as missing:
        gh_repo.get_workflow("release.yml").id  # noqa: B018 (a lazy object: fetch it)
    assert missing.value.status == 404


def test_runs_filtered_by_branch_event_and_status(
    gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    runs = mixed_runs(octo, nightly)
    workflow = gh_repo.get_workflow("nightly.yml")

    def ids(**filters: str) -> list[int]:
        return [run.id for run in workflow.get_runs(**filters)]  # type: ignore[arg-type]

    # newest first; the other workflow's run is not the nightly's
    assert ids() == [runs[k].id for k in ("running", "fork", "pr", "pushed", "failed", "scheduled")]
    assert ids(event="schedule") == [runs[k].id for k in ("running", "failed", "scheduled")]
    # the fork's branch is also called main: the branch filter alone keeps it
    assert runs["fork"].id in ids(branch="main")
    assert ids(branch="main", event="schedule", status="completed") == [
        runs["failed"].id,
        runs["scheduled"].id,
    ]
    assert ids(status="failure") == [runs["failed"].id]
    assert ids(branch="feature") == [runs["pr"].id]
    assert ids(created=f">={(DAY0 + timedelta(days=4)).date()}") == [
        runs["running"].id,
        runs["fork"].id,
    ]
    assert ids(created=f"{DAY0.date()}..{(DAY0 + timedelta(days=1)).date()}") == [
        runs["failed"].id,
        runs["scheduled"].id,
    ]
    fork_run = gh_repo.get_workflow_run(runs["fork"].id)
    assert fork_run.head_repository.full_name == "mallory/ml"
    assert fork_run.repository.full_name == "octo/ml"
    assert (fork_run.event, fork_run.head_branch) == ("pull_request", "main")
    assert fork_run.head_sha == octo.fork("mallory").head("main") != octo.head("main")
    assert fork_run.raw_data["head_repository_id"] != fork_run.raw_data["repository"]["id"]


def test_run_fields_and_its_pull_requests(
    gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    pr = octo.open_pr(2, head="feature", head_files={"train.py": "x = 2\n"})
    run = octo.add_workflow_run(nightly, event="pull_request", branch="feature", created_at=DAY0)
    got = gh_repo.get_workflow_run(run.id)
    assert (got.workflow_id, got.run_number, got.status, got.conclusion) == (
        5150,
        1,
        "completed",
        "success",
    )
    assert got.created_at == DAY0
    assert got.head_sha == pr.head_sha
    assert [p.number for p in got.pull_requests] == [2]
    plain = gh_repo.get_workflow("nightly.yml").get_runs(exclude_pull_requests=True)
    assert [r.pull_requests for r in plain] == [[]]  # (raw_data would fetch the run again)


def test_runs_are_paged_with_link_headers(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    made = [octo.add_workflow_run(nightly, created_at=DAY0 + timedelta(hours=i)) for i in range(75)]
    listed = gh_repo.get_workflow("nightly.yml").get_runs(branch="main")
    assert listed.totalCount == 75
    assert [r.id for r in listed] == [r.id for r in reversed(made)]
    pages = [c for c in fake_github.requests("GET", repo="octo/ml") if c.path.endswith("/runs")]
    # totalCount asks once (one item a page), then the listing: 30 a page
    assert [c.query.get("page", "1") for c in pages][1:] == ["1", "2", "3"]


def test_artifacts_listed_by_name_across_runs_in_pages(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    runs = [octo.add_workflow_run(nightly, created_at=DAY0 + timedelta(days=i)) for i in range(120)]
    for i, run in enumerate(runs):
        octo.add_artifact(run, "results", archive(**{"results.json": f'{{"i": {i}}}'}))
        octo.add_artifact(run, "logs", archive(**{"log.txt": "..."}))
    client = fake_github.client(INSTALLATION)
    client.per_page = 100
    before = len(fake_github.calls)
    listed = list(client.get_repo("octo/ml").get_artifacts(name="results"))
    listing = [c for c in fake_github.calls[before:] if c.path.endswith("/actions/artifacts")]
    assert len(listing) == 2  # 120 artifacts, 100 a page
    assert [a.workflow_run.id for a in listed] == [r.id for r in reversed(runs)]
    newest = listed[0]
    assert newest.name == "results" and not newest.expired
    assert newest.size_in_bytes == len(octo.artifacts[newest.id].data)
    assert newest.raw_data["workflow_run"] == {
        "id": runs[-1].id,
        "repository_id": octo.id,
        "head_repository_id": octo.id,
        "head_branch": "main",
        "head_sha": runs[-1].head_sha,
    }
    assert [a.name for a in gh_repo.get_workflow_run(runs[0].id).get_artifacts()] == [
        "logs",
        "results",
    ]


def test_download_redirects_to_the_storage_without_credentials(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    data = archive(**{"lm_eval/results.json": '{"results": {}}'})
    artifact = octo.add_artifact(octo.add_workflow_run(nightly), "results", data)
    url = gh_repo.get_artifact(artifact.id).archive_download_url
    status, headers, _ = gh_repo.requester.requestJson("GET", url)  # PyGithub's own request
    assert status == 302
    location = headers["location"]
    assert location.startswith(fake_github.base_url.replace("127.0.0.1", "localhost"))
    with urllib.request.urlopen(location, timeout=10) as answer:  # no token: another host
        body = answer.read()
    assert body == data
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert names == ["lm_eval/results.json"]
    fake_github.check()
    # the storage is told nothing about GitHub credentials; sending them is reported
    again = urllib.request.Request(location, headers={"Authorization": "token ghs_x"})
    urllib.request.urlopen(again, timeout=10).close()
    with pytest.raises(AssertionError, match="credential leak"):
        fake_github.check()
    fake_github.leaks.clear()


def test_expired_artifact_is_listed_but_gone(
    fake_github: FakeGitHub, gh_repo: Repository, octo: Repo, nightly: Workflow
) -> None:
    artifact = octo.add_artifact(octo.add_workflow_run(nightly), "results", b"PK", expired=True)
    (listed,) = gh_repo.get_artifacts(name="results")
    assert listed.expired is True
    status, _, body = gh_repo.requester.requestJson("GET", listed.archive_download_url)
    assert status == 410
    assert "expired" in str(body)
    with pytest.raises(urllib.error.HTTPError) as unknown:
        urllib.request.urlopen(fake_github.api.blob_url("not-a-link", artifact), timeout=10).close()
    assert unknown.value.code == 404
