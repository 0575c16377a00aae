"""``GitHubClient`` reading files and PR diffs: sizes, GitHub's 1 MB contents limit, patches.

The real PyGithub client against the fake GitHub, which answers like GitHub: files over 1 MB are
refused by the contents API in JSON (403 ``too_large``) and served by the blob API.
"""

from __future__ import annotations

import pytest

from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import GitHubFileTooLarge
from bot.adapters.settings import DEFAULT_MAX_FILE_BYTES
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo, blob_sha

pytestmark = pytest.mark.servers

REPO = "octo/ml"
INSTALLATION = 7
MB = 1024 * 1024
SCRIPT = "tests/ci/nightly.sh"
HISTORY = "ci/history.jsonl"
LINE = '{"id": "r", "summary": {"eval/all/avg_score": 0.5}}\n'
BIG = LINE * (3 * MB // (2 * len(LINE)))  # about 1.5 MB


@pytest.fixture
def repo(fake_github: FakeGitHub) -> Repo:
    return fake_github.add_repo(
        REPO,
        installation_id=INSTALLATION,
        files={SCRIPT: "EVAL_ACC_MIN_VALUE=0.56\n", HISTORY: BIG, "ci/empty.txt": ""},
    )


def client_for(fake_github: FakeGitHub, **limits: int) -> GitHubClient:
    return fake_github.github_app(**limits).installation(INSTALLATION)


def blob_requests(fake_github: FakeGitHub) -> list[str]:
    return [c.path for c in fake_github.requests("GET") if "/git/blobs/" in c.path]


def test_a_file_over_1_mb_is_read_through_the_blob_api(fake_github: FakeGitHub, repo: Repo) -> None:
    client = client_for(fake_github)
    assert MB < len(BIG.encode()) < DEFAULT_MAX_FILE_BYTES

    text = client.file_text(REPO, HISTORY, "main")

    assert text == BIG
    assert blob_requests(fake_github) == [f"/repos/{REPO}/git/blobs/{blob_sha(BIG)}"]


def test_a_small_file_takes_one_request(fake_github: FakeGitHub, repo: Repo) -> None:
    client = client_for(fake_github)

    assert client.file_text(REPO, SCRIPT, "main") == "EVAL_ACC_MIN_VALUE=0.56\n"
    assert client.file_text(REPO, "ci/empty.txt", "main") == ""
    assert client.file_text(REPO, "ci", "main") is None  # a directory is no file

    assert blob_requests(fake_github) == []
    assert len(fake_github.requests("GET", f"/repos/{REPO}/contents/{SCRIPT}")) == 1


def test_a_file_over_the_limit_is_refused_before_its_content_is_read(
    fake_github: FakeGitHub, repo: Repo
) -> None:
    limit = MB + 100
    client = client_for(fake_github, max_file_bytes=limit)

    with pytest.raises(GitHubFileTooLarge) as caught:
        client.file_text(REPO, HISTORY, "main")

    size = len(BIG.encode())
    assert (caught.value.path, caught.value.size, caught.value.limit) == (HISTORY, size, limit)
    assert HISTORY in str(caught.value) and "MAX_FILE_BYTES" in str(caught.value)
    assert f"{size / MB:.1f} MB" in str(caught.value)
    assert blob_requests(fake_github) == []
    assert client.file_text(REPO, SCRIPT, "main") == "EVAL_ACC_MIN_VALUE=0.56\n"


def test_the_limit_applies_to_files_under_1_mb_too(fake_github: FakeGitHub, repo: Repo) -> None:
    client = client_for(fake_github, max_file_bytes=10)

    with pytest.raises(GitHubFileTooLarge) as caught:
        client.file_text(REPO, SCRIPT, "main")

    assert "24 bytes" in str(caught.value) and "10 bytes" in str(caught.value)


def test_pull_files_carry_their_patches_and_a_limit_reads_one_page(
    fake_github: FakeGitHub, repo: Repo
) -> None:
    client = client_for(fake_github)
    files: dict[str, str | None] = {f"ci/gate_{i:02d}.sh": f"X={i}\n" for i in range(45)}
    files[SCRIPT] = "EVAL_ACC_MIN_VALUE=0.50\n"
    repo.open_pr(6, head="many", head_files=files)
    path = f"/repos/{REPO}/pulls/6/files"

    first = client.pull_files(REPO, 6, limit=40)

    assert [f.path for f in first] == sorted(files)[:40]
    patches = {f.path: f.patch for f in first}
    assert patches["ci/gate_07.sh"] == "@@ -0,0 +1 @@\n+X=7"
    assert [c.query.get("per_page") for c in fake_github.requests("GET", path)] == ["40"]
    every = client.pull_files(REPO, 6)
    assert len(every) == 46 and all(f.patch for f in every)
