"""The fake GitHub's contents and blob endpoints as GitHub documents them for large files.

GitHub's contents API serves files of 1–100 MB only in the ``raw`` and ``object`` media types:
in JSON it answers 403 ``too_large``; in ``object`` the file comes without content (``content``
empty, ``encoding`` ``none``); the git blob API serves it in base64.  Requests go through the
real PyGithub client (its requester, for the custom media types); every JSON answer is checked
against the description's schema for its media type (``fake_github`` fails the test otherwise).
"""

from __future__ import annotations

import base64
import json

import pytest
from github import GithubException
from github.Repository import Repository

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo, blob_sha

pytestmark = pytest.mark.servers

INSTALLATION = 7
MB = 1024 * 1024
LARGE = "x" * 80 + "\n"  # a line of the large file
LARGE_TEXT = LARGE * (MB // len(LARGE) + 10)  # just over 1 MB
SMALL_TEXT = "A_MIN=1\n"
OBJECT = "application/vnd.github.object+json"
RAW = "application/vnd.github.raw+json"


@pytest.fixture
def octo(fake_github: FakeGitHub) -> Repo:
    return fake_github.add_repo(
        "octo/ml",
        installation_id=INSTALLATION,
        files={"ci/history.jsonl": LARGE_TEXT, "ci/nightly.sh": SMALL_TEXT},
    )


@pytest.fixture
def gh_repo(fake_github: FakeGitHub, octo: Repo) -> Repository:
    return fake_github.client(INSTALLATION).get_repo("octo/ml")


def get(gh_repo: Repository, path: str, accept: str) -> tuple[int, dict[str, str], str]:
    """GET the contents of ``path`` on main with ``Accept: accept`` (status, headers, body)."""
    return gh_repo.requester.requestJson(
        "GET", f"{gh_repo.url}/contents/{path}", {"ref": "main"}, {"Accept": accept}
    )


def test_json_media_type_refuses_a_file_over_1_mb(gh_repo: Repository) -> None:
    assert len(LARGE_TEXT.encode()) > MB

    with pytest.raises(GithubException) as caught:
        gh_repo.get_contents("ci/history.jsonl", ref="main")

    assert caught.value.status == 403
    assert caught.value.data["message"].startswith("This API returns blobs up to 1 MB in size.")
    assert caught.value.data["errors"] == [
        {"resource": "Blob", "field": "data", "code": "too_large"}
    ]
    small = gh_repo.get_contents("ci/nightly.sh", ref="main")
    assert not isinstance(small, list) and small.decoded_content.decode() == SMALL_TEXT


def test_object_media_type_gives_a_large_file_without_content(gh_repo: Repository) -> None:
    status, headers, body = get(gh_repo, "ci/history.jsonl", OBJECT)
    _, _, small = get(gh_repo, "ci/nightly.sh", OBJECT)

    data = json.loads(body)
    assert status == 200 and "param=object" in headers["x-github-media-type"]
    assert (data["type"], data["size"], data["content"], data["encoding"]) == (
        "file",
        len(LARGE_TEXT.encode()),
        "",
        "none",
    )
    assert data["sha"] == blob_sha(LARGE_TEXT)
    assert base64.b64decode(json.loads(small)["content"]).decode() == SMALL_TEXT


def test_object_media_type_gives_a_directory_as_one_object(gh_repo: Repository) -> None:
    status, _, body = get(gh_repo, "ci", OBJECT)

    data = json.loads(body)
    assert (status, data["type"]) == (200, "dir")
    assert [(e["name"], e["size"]) for e in data["entries"]] == [
        ("history.jsonl", len(LARGE_TEXT.encode())),
        ("nightly.sh", len(SMALL_TEXT)),
    ]


def test_raw_media_type_sends_the_file_as_it_is(gh_repo: Repository) -> None:
    status, headers, body = get(gh_repo, "ci/history.jsonl", RAW)

    assert (status, body) == (200, LARGE_TEXT)
    assert headers["x-github-media-type"] == "github.v3; param=raw"


def test_blob_api_serves_a_large_file_in_base64(
    fake_github: FakeGitHub, gh_repo: Repository
) -> None:
    blob = gh_repo.get_git_blob(blob_sha(LARGE_TEXT))

    assert (blob.encoding, blob.size) == ("base64", len(LARGE_TEXT.encode()))
    assert base64.b64decode(blob.content).decode() == LARGE_TEXT
    with pytest.raises(GithubException) as caught:
        gh_repo.get_git_blob("0" * 40)
    assert caught.value.status == 404
    assert fake_github.requests("GET", f"/repos/octo/ml/git/blobs/{blob_sha(LARGE_TEXT)}")
