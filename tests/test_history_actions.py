"""The ``actions`` history source: PyGithub against the fake GitHub's Actions endpoints,
through the run cache in the real store.

Each nightly run uploads a zip (built here) holding a results JSON; PR runs upload a
poisoned artifact of the same name, which must never enter the history.  Every test ends
with ``fake.check()`` (responses checked against GitHub's OpenAPI description).
"""

from __future__ import annotations

import io
import json
import math
import re
import shlex
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from bot.adapters.github.client import GitHubClient
from bot.adapters.history.actions_source import ActionsSource
from bot.adapters.history.cache import CachedSource
from bot.adapters.history.files import FileSource
from bot.adapters.store.db import init_db, make_engine
from bot.cli.main import app
from bot.core.history.formats import parse_history
from bot.core.history.sources import SourceRefused
from bot.core.models import History, Review, SourceSpec
from bot.core.render.view import history_phrase
from bot.features.review.pull import HistoryRouter
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_routes import BLOB_PREFIX
from tests.fakes.github_state import Repo, Workflow

pytestmark = pytest.mark.servers

REPO = "octo/ml"
INSTALLATION = 7
ARTIFACT = "nightly-results"
SPEC = SourceSpec(
    kind="actions", repo=REPO, workflow="nightly.yml", artifact=ARTIFACT, file="results.json"
)
START = datetime(2026, 1, 1, 3, tzinfo=UTC)
MAX_BYTES = 1 << 20
POISON = 0.0  # the accuracy every poisoned artifact claims


def archive(accuracy: float, name: str = "results.json") -> bytes:
    """A zip like actions/upload-artifact's, holding one results JSON."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, json.dumps({"accuracy": accuracy, "loss": 1 - accuracy}))
    return out.getvalue()


def member(name: str, data: bytes) -> bytes:
    """A zip holding one member ``name`` (any path, compressed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, data)
    return out.getvalue()


def accuracy(i: int) -> float:
    return round(0.80 + 0.001 * (i % 7), 4)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub) -> Repo:
    return fake.add_repo(REPO, installation_id=INSTALLATION, files={"README.md": "# ml\n"})


@pytest.fixture
def nightly(repo: Repo) -> Workflow:
    return repo.add_workflow("nightly.yml")


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def add_nightlies(repo: Repo, workflow: Workflow, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        run = repo.add_workflow_run(workflow, created_at=START + timedelta(days=i))
        repo.add_artifact(run, ARTIFACT, archive(accuracy(i)))


def source(fake: FakeGitHub, sessions: sessionmaker[Session]) -> CachedSource:
    client: GitHubClient = fake.github_app().installation(INSTALLATION)
    return CachedSource(sessions, ActionsSource(client, MAX_BYTES))


def api_calls(fake: FakeGitHub) -> int:
    """GitHub API requests (the artifact storage host's downloads are not GitHub's API)."""
    return sum(1 for c in fake.requests(repo=REPO) if not c.path.startswith(BLOB_PREFIX))


def accuracies(history: History) -> list[float]:
    return [r.summary["accuracy"] for r in history.runs]


def test_nightly_runs_become_the_history_and_a_warm_read_costs_at_most_two_requests(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, sessions: sessionmaker[Session]
) -> None:
    add_nightlies(repo, nightly, 130)  # two pages of runs and of artifacts
    cache = source(fake, sessions)

    before = api_calls(fake)
    history = cache.fetch(SPEC)
    cold = api_calls(fake) - before

    assert accuracies(history) == [accuracy(i) for i in range(130)]
    assert history.runs[0].commit == repo.branches[repo.default_branch]
    assert cold <= 1.1 * 130, cold
    assert len(fake.requests("GET", path=None)) >= 130  # every archive was downloaded once

    before = api_calls(fake)
    again = cache.fetch(SPEC)
    assert api_calls(fake) - before <= 2
    assert again.runs == history.runs

    add_nightlies(repo, nightly, 1, start=130)
    assert accuracies(cache.fetch(SPEC))[-1] == accuracy(130)


def test_expired_artifacts_leave_the_cached_history_intact(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, sessions: sessionmaker[Session]
) -> None:
    add_nightlies(repo, nightly, 5)
    cache = source(fake, sessions)
    assert len(cache.fetch(SPEC).runs) == 5
    for item in repo.artifacts.values():  # past their retention: the cache is the only copy
        item.expired = True
    add_nightlies(repo, nightly, 1, start=5)
    history = cache.fetch(SPEC)
    assert accuracies(history) == [accuracy(i) for i in range(6)]


@pytest.mark.parametrize(
    ("event", "branch", "fork", "spec"),
    [
        # the branch filter alone: a push to another branch of the repository itself
        ("push", "feature", False, SPEC),
        # the event filter alone: a same-repository PR whose head branch is named as the default
        ("pull_request", "main", False, SPEC),
        # the head repository filter alone: a fork's PR from its own `main`, with an events
        # list that admits pull_request
        (
            "pull_request",
            "main",
            True,
            SPEC.model_copy(update={"events": ("schedule", "pull_request")}),
        ),
    ],
    ids=["branch", "event", "head-repository"],
)
def test_a_poisoned_artifact_from_another_branch_event_or_repository_never_counts(
    fake: FakeGitHub,
    repo: Repo,
    nightly: Workflow,
    sessions: sessionmaker[Session],
    event: str,
    branch: str,
    fork: bool,
    spec: SourceSpec,
) -> None:
    add_nightlies(repo, nightly, 3)
    head = repo.fork("mallory") if fork else repo
    if branch not in head.branches:
        head.branches[branch] = head.branches[head.default_branch]
    poisoned = repo.add_workflow_run(
        nightly, event=event, branch=branch, head_repo=head, created_at=START + timedelta(days=9)
    )
    repo.add_artifact(poisoned, ARTIFACT, archive(POISON))

    history = source(fake, sessions).fetch(spec)

    assert accuracies(history) == [accuracy(i) for i in range(3)]
    assert str(poisoned.id) not in {r.id for r in history.runs}


def test_unreadable_artifacts_are_skipped_with_named_counted_reasons(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, sessions: sessionmaker[Session]
) -> None:
    add_nightlies(repo, nightly, 2)
    day = iter(range(10, 30))

    def run_with(data: bytes, **kwargs: object) -> None:
        run = repo.add_workflow_run(nightly, created_at=START + timedelta(days=next(day)))
        repo.add_artifact(run, ARTIFACT, data, **kwargs)  # type: ignore[arg-type]

    run_with(archive(0.9), expired=True)  # listed as expired
    run_with(b"x" * (MAX_BYTES + 1))  # over MAX_ARTIFACT_BYTES, as listed
    run_with(b"y" * (MAX_BYTES + 1), size_in_bytes=10)  # listed small, streamed over the cap
    run_with(archive(0.9, name="other.txt"))  # no results JSON in it
    run_with(b"not a zip")
    run_with(member("../results.json", b"{}"))  # a member path leading out
    run_with(member("results.json", b"0" * (8 << 20)))  # 8 MiB of zeros: a zip bomb
    repo.add_workflow_run(nightly, created_at=START + timedelta(days=next(day)))  # no artifact

    history = source(fake, sessions).fetch(SPEC)

    assert accuracies(history) == [accuracy(0), accuracy(1)]
    reasons = history.stats.skipped_runs
    bomb = next(r for r in reasons if "ratio" in r)
    assert reasons == {
        "expired": 1,
        "too large": 2,
        "no file matching results.json": 1,
        "not a zip archive: File is not a zip file": 1,
        "unsafe member path ../results.json": 1,
        bomb: 1,
        "no artifact": 1,
    }
    phrase = history_phrase_of(history)
    counted = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    assert phrase == f"2 runs: 2 finished; skipped 8 runs ({counted})"


def history_phrase_of(history: History) -> str:
    return history_phrase(Review(conclusion="success", history=history.stats))


# --------------------------------------------------------------------------- the command line


@pytest.fixture
def cli_env(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The command line's environment: a token of the installation, the fake as GitHub."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", fake.integration().get_access_token(INSTALLATION).token)
    monkeypatch.setenv("GITHUB_API_URL", fake.base_url)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)


def test_export_writes_the_default_branch_runs_and_counts_the_skipped(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, cli_env: None
) -> None:
    add_nightlies(repo, nightly, 4)
    pr = repo.add_workflow_run(
        nightly, event="pull_request", branch="main", created_at=START + timedelta(days=8)
    )
    repo.add_artifact(pr, ARTIFACT, archive(POISON))
    expired = repo.add_workflow_run(nightly, created_at=START + timedelta(days=9))
    repo.add_artifact(expired, ARTIFACT, archive(0.9), expired=True)

    result = CliRunner().invoke(
        app,
        [
            "export",
            "--actions",
            REPO,
            "--workflow",
            "nightly.yml",
            "--artifact",
            ARTIFACT,
            "--file",
            "results.json",
        ],
    )

    assert result.exit_code == 0, result.output
    history = parse_history(result.stdout, "out.jsonl")
    assert accuracies(history) == [accuracy(i) for i in range(4)]
    assert "exported 4 runs (4 finished); skipped 1 unreadable (1 expired)" in result.stderr


def test_export_without_a_token_is_a_usage_problem(
    fake: FakeGitHub, repo: Repo, cli_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    result = CliRunner().invoke(
        app, ["export", "--actions", REPO, "--workflow", "nightly.yml", "--artifact", ARTIFACT]
    )
    assert result.exit_code == 2
    assert "GITHUB_TOKEN is not set" in result.stderr
    assert fake.requests(repo=REPO) == []


# --------------------------------------------------------------------------- the App's router


def test_the_app_reads_the_reviewed_repository_through_the_cache_and_refuses_another(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, sessions: sessionmaker[Session]
) -> None:
    add_nightlies(repo, nightly, 3)
    fake.add_repo("octo/private", installation_id=INSTALLATION, files={"README.md": "x\n"})
    client: GitHubClient = fake.github_app().installation(INSTALLATION)
    cache = CachedSource(sessions, ActionsSource(client, MAX_BYTES))
    files = FileSource(lambda path: "")
    router = HistoryRouter(files, lambda spec: cache, repo=REPO, actions=client)
    unnamed = SPEC.model_copy(update={"repo": None})

    history = router.fetch(unnamed)

    assert accuracies(history) == [accuracy(i) for i in range(3)]
    assert history.source == f"actions:{REPO}/nightly.yml:{ARTIFACT}"  # the key names the repo
    before = len(fake.calls)
    with pytest.raises(SourceRefused, match="octo/private"):
        router.fetch(SPEC.model_copy(update={"repo": "octo/private"}))
    assert len(fake.calls) == before  # refused before any request


def test_the_servers_max_artifact_bytes_bounds_the_apps_downloads(
    fake: FakeGitHub, repo: Repo, nightly: Workflow, sessions: sessionmaker[Session]
) -> None:
    add_nightlies(repo, nightly, 2)
    client: GitHubClient = fake.github_app().installation(INSTALLATION)
    small = min(len(a.data) for a in repo.artifacts.values()) - 1
    cache = CachedSource(sessions, ActionsSource(client, MAX_BYTES), max_artifact_bytes=small)
    router = HistoryRouter(
        FileSource(lambda path: ""), lambda spec: cache, repo=REPO, actions=client
    )

    history = router.fetch(SPEC)

    assert history.runs == () and history.stats.skipped_runs == {"too large": 2}


def test_cli_review_reads_the_configs_actions_source(
    fake: FakeGitHub,
    repo: Repo,
    nightly: Workflow,
    cli_env: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    add_nightlies(repo, nightly, 25)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    (tmp_path / "config.yml").write_text(
        "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
        f"    artifact: {ARTIFACT}\n    file: results.json\ndefault_source: nightly\n"
    )
    gate = 'ACC_MIN={}\npython -m evals --asserts "accuracy >= $ACC_MIN"\n'
    (tmp_path / "base.sh").write_text(gate.format("0.70"))
    (tmp_path / "new.sh").write_text(gate.format("0.803"))
    window = [accuracy(i) for i in range(25)][-20:]

    result = CliRunner().invoke(
        app,
        [
            "review",
            "--file",
            "new.sh",
            "--base",
            "base.sh",
            "--config",
            "config.yml",
            "--format",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    (row,) = review["gates"]
    assert row["proposed_failures"] == {"failed": sum(v < 0.803 for v in window), "total": 20}


def add_values(repo: Repo, workflow: Workflow, values: list[float]) -> None:
    """One nightly a day from ``START`` whose artifact claims each of ``values``."""
    for i, value in enumerate(values):
        run = repo.add_workflow_run(workflow, created_at=START + timedelta(days=i))
        repo.add_artifact(run, ARTIFACT, archive(value))


def stepped_down(before: int = 30, after: int = 8) -> list[float]:
    """``before`` nights near 0.80, then ``after`` nights near 0.70."""
    return [round(0.80 + 0.002 * (i % 3), 4) for i in range(before)] + [
        round(0.70 + 0.002 * (i % 3), 4) for i in range(after)
    ]


def poison_a_pr_run(repo: Repo, workflow: Workflow, day: int) -> None:
    """A PR's run of the workflow, newest of all, uploading a healthy-looking artifact."""
    repo.branches["poison"] = repo.branches[repo.default_branch]
    run = repo.add_workflow_run(
        workflow, event="pull_request", branch="poison", created_at=START + timedelta(days=day)
    )
    repo.add_artifact(run, ARTIFACT, archive(0.99))


def actions_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(
        "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
        f"    artifact: {ARTIFACT}\n    file: results.json\ndefault_source: nightly\n"
    )
    return path


def test_cli_drift_reads_the_configs_actions_source(
    fake: FakeGitHub,
    repo: Repo,
    nightly: Workflow,
    cli_env: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = stepped_down()
    add_values(repo, nightly, values)
    poison_a_pr_run(repo, nightly, len(values))  # would end the streak, were it read
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    config = actions_config(tmp_path)
    (tmp_path / "nightly.sh").write_text(
        'ACC_MIN=0.75\npython -m evals --asserts "accuracy >= $ACC_MIN"\n'
    )

    result = CliRunner().invoke(
        app, ["drift", "--file", "nightly.sh", "--config", str(config), "--format", "json"]
    )

    assert result.exit_code == 1, result.output
    (report,) = json.loads(result.stdout)["files"]
    (gate,) = report["gates"]
    recent = values[-30:]
    assert (gate["status"], gate["streak"]) == ("drifting", 8)
    assert (gate["failed"], gate["total"]) == (sum(v < 0.75 for v in recent), len(recent))
    assert gate["since"] == (START + timedelta(days=30)).isoformat()
    low = min(values[-8:])  # the rule over the current regime: 5% below its minimum
    assert gate["new_value"] == f"{math.floor((low - 0.05 * low) * 100) / 100:.2f}"
    # the markdown report's rebaseline command, run as printed, reads the same source
    markdown = CliRunner().invoke(app, ["drift", "--file", "nightly.sh", "--config", str(config)])
    (command,) = re.findall(r"^  ```sh\n  (.*)\n  ```$", markdown.stdout, re.MULTILINE)
    args = shlex.split(command)
    assert args[:2] == ["threshold-bot", "rebaseline"]
    rebaselined = CliRunner().invoke(app, [*args[1:], "--dry-run"])
    assert rebaselined.exit_code == 0, rebaselined.output
    assert "-ACC_MIN=0.75" in rebaselined.stdout
    assert f"+ACC_MIN={gate['new_value']}" in rebaselined.stdout


def test_cli_backtest_reads_the_configs_actions_source(
    fake: FakeGitHub,
    repo: Repo,
    nightly: Workflow,
    cli_env: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = stepped_down(40, 20)
    add_values(repo, nightly, values)
    poison_a_pr_run(repo, nightly, len(values))
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    config = actions_config(tmp_path)
    (tmp_path / "nightly.sh").write_text(
        'ACC_MIN=0.60\npython -m evals --asserts "accuracy >= $ACC_MIN"\n'
    )

    result = CliRunner().invoke(
        app, ["backtest", "--file", "nightly.sh", "--config", str(config), "--format", "json"]
    )

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["history"]["runs"] == len(values)  # the PR's run is not one of them
    assert data["history"]["regime_changes"] >= 1
    (gate,) = data["gates"]
    assert (gate["name"], gate["runs"]) == ("ACC_MIN", len(values))
    assert gate["harmful_changes"] == 1  # the step down, seen in the artifacts
