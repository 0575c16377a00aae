"""``file_text(..., max_bytes=)``: a per-call limit below the client's ``max_file_bytes``.

The real PyGithub client against the fake GitHub (``fake_github`` checks every response
against GitHub's OpenAPI description), and the recording fake of the protocol.
"""

from __future__ import annotations

import pytest

from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import GitHubFileTooLarge
from tests.fakes.github_api import FakeGitHub
from tests.fakes.recording_github import RecordingGitHub

pytestmark = pytest.mark.servers

REPO = "octo/ml"
INSTALLATION = 7
CONFIG = ".github/threshold-bot.yml"
TEXT = "sources:\n  ci:\n    kind: file\n    path: ci/history.jsonl\n"
BIG = "x" * (3 * 1024 * 1024 // 2)  # over GitHub's 1 MB contents limit: blob API


def client_for(fake: FakeGitHub, max_file_bytes: int = 50 * 1024 * 1024) -> GitHubClient:
    return fake.github_app(max_file_bytes=max_file_bytes).installation(INSTALLATION)


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(
        REPO, installation_id=INSTALLATION, files={CONFIG: TEXT, "ci/big.txt": BIG}
    )
    return fake_github


def test_a_file_over_the_calls_limit_is_refused_naming_size_and_limit(fake: FakeGitHub) -> None:
    size = len(TEXT.encode())
    client = client_for(fake)

    with pytest.raises(GitHubFileTooLarge) as caught:
        client.file_text(REPO, CONFIG, "main", max_bytes=size - 1)

    assert str(caught.value) == f"{CONFIG} is {size:,} bytes, over the limit of {size - 1:,} bytes"
    assert (caught.value.path, caught.value.size, caught.value.limit) == (CONFIG, size, size - 1)
    assert client.file_text(REPO, CONFIG, "main", max_bytes=size) == TEXT


def test_a_large_file_over_the_calls_limit_is_not_downloaded(fake: FakeGitHub) -> None:
    client = client_for(fake)

    with pytest.raises(GitHubFileTooLarge):
        client.file_text(REPO, "ci/big.txt", "main", max_bytes=1024 * 1024)

    assert [c.path for c in fake.calls if "/git/blobs/" in c.path] == []
    assert client.file_text(REPO, "ci/big.txt", "main") == BIG  # no per-call limit: read


def test_the_client_wide_limit_still_applies_under_a_higher_call_limit(fake: FakeGitHub) -> None:
    size = len(TEXT.encode())
    client = client_for(fake, max_file_bytes=size - 1)

    with pytest.raises(GitHubFileTooLarge, match=r"\(MAX_FILE_BYTES\)$") as caught:
        client.file_text(REPO, CONFIG, "main", max_bytes=10 * size)

    assert caught.value.limit == size - 1


def test_the_recording_fake_applies_the_calls_limit_alike() -> None:
    gh = RecordingGitHub()
    gh.commit({CONFIG: TEXT})
    size = len(TEXT.encode())

    with pytest.raises(GitHubFileTooLarge) as caught:
        gh.file_text(gh.repo, CONFIG, "main", max_bytes=size - 1)

    assert str(caught.value) == f"{CONFIG} is {size:,} bytes, over the limit of {size - 1:,} bytes"
    assert gh.file_text(gh.repo, CONFIG, "main", max_bytes=size) == TEXT
