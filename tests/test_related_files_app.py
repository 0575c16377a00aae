"""The App's review reads a threshold file's related files through GitHub's contents API.

The real PyGithub client against the fake GitHub (``fake_github`` checks every response
against GitHub's OpenAPI description): a PR changing only a constants module gets the
gates its tests compare; a related file GitHub will not send is skipped and said.
"""

from __future__ import annotations

import pytest

from bot.adapters.github.client import GitHubClient
from bot.features.review.pull import read_thresholds
from tests.fakes.github_api import FakeGitHub

pytestmark = pytest.mark.servers

REPO = "octo/asr"
INSTALLATION = 7
CONFIG = 'python: ["evals/*.py"]\n'
LIMITS = "WER_MAX = 0.083\nCER_MAX = 0.031\n"
SPEECH = (
    "from evals.limits import WER_MAX, CER_MAX\n\n"
    "def test_clean(report):\n"
    '    assert report["wer"] <= WER_MAX\n'
    '    assert report["cer"] <= CER_MAX\n'
)
NOISY = (
    "from evals import limits\n"
    "# " + "x" * 4096 + "\n"
    "def test_noisy(report):\n"
    '    assert report["wer"] <= limits.WER_MAX\n'
)


def client_for(fake: FakeGitHub) -> GitHubClient:
    return fake.github_app().installation(INSTALLATION)


def test_a_pull_changing_only_a_constants_module_is_reviewed(fake_github: FakeGitHub) -> None:
    files = {
        ".github/threshold-bot.yml": CONFIG,
        "evals/limits.py": LIMITS,
        "evals/test_speech.py": SPEECH,
        "evals/test_noisy.py": NOISY,
        "README.md": "# asr\n",
    }
    repo = fake_github.add_repo(REPO, installation_id=INSTALLATION, files=files)
    repo.open_pr(5, head_files={"evals/limits.py": LIMITS.replace("0.083", "0.09")})
    client = client_for(fake_github)

    found = read_thresholds(client, REPO, client.pull(REPO, 5), max_bytes=2048)

    changes = {(c.head.name, c.head.metric, c.head.literal, c.changed) for c in found.changes}
    assert changes == {("WER_MAX", "wer", "0.09", True), ("CER_MAX", "cer", "0.031", False)}
    (wer,) = [c for c in found.changes if c.head.name == "WER_MAX"]
    assert wer.base is not None and wer.base.literal == "0.083"  # read at the base too
    assert wer.head.context == "evals/test_speech.py::test_clean"
    # the noisy test is over the App's size bound: skipped, said, never a crash
    assert any(
        w.startswith("evals/limits.py: 1 related file not read (evals/test_noisy.py: ")
        for w in found.warnings
    ), found.warnings
    contents = [c.path for c in fake_github.calls if "/contents/" in c.path]
    assert any(p.endswith("/contents/evals/test_speech.py") for p in contents)
    assert not any(p.endswith("/contents/README.md") for p in contents)  # not a reader


def test_related_files_of_a_pull_are_listed_and_read_once_per_ref(
    fake_github: FakeGitHub,
) -> None:
    helper = "def expect_at_most(report, key, ceiling):\n    assert report[key] <= ceiling\n"
    tests = {
        f"evals/test_{name}.py": (
            "from evals.checks import expect_at_most\n\n"
            f"def test_{name}(report):\n"
            f'    expect_at_most(report, "{name}_wer", {limit})\n'
        )
        for name, limit in (("clean", "0.083"), ("noisy", "0.17"), ("accented", "0.12"))
    }
    files = {".github/threshold-bot.yml": CONFIG, "evals/checks.py": helper, **tests}
    repo = fake_github.add_repo(REPO, installation_id=INSTALLATION, files=files)
    head = {path: text.replace("0.", "0.0") for path, text in tests.items()}  # all three change
    repo.open_pr(6, head_files=head)
    client = client_for(fake_github)
    before = len(fake_github.requests(repo=REPO))

    found = read_thresholds(client, REPO, client.pull(REPO, 6), max_bytes=2048)

    changed = {(c.head.metric, c.head.literal) for c in found.changes}
    assert changed == {("clean_wer", "0.0083"), ("noisy_wer", "0.017"), ("accented_wer", "0.012")}
    calls = fake_github.requests(repo=REPO)[before:]
    trees = [c for c in calls if "/git/trees/" in c.path]
    helper_reads = [c for c in calls if c.path.endswith("/contents/evals/checks.py")]
    # three files at two refs (head, base): one tree and one helper read per ref, not per file
    assert len(trees) == 2
    assert len(helper_reads) == 2
