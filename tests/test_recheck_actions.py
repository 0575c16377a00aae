"""The 15-minute re-check syncs ``actions`` sources too: a PR whose gate reads a nightly's
artifacts is re-reviewed when a new nightly's artifact appears, without a ``workflow_run``
delivery (an App installed without that event, or a missed delivery).

``recheck_job`` as the App runs it: the real run cache (SQLite), PyGithub against the fake
GitHub's Actions endpoints with each installation's own client, the recording of check runs
by the fake.  Two repositories of two installations read a nightly of the same name.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.app import client_factory
from bot.adapters.history.factory import source_factory
from bot.adapters.locks import DEFAULT_TTL
from bot.adapters.locks.rows import RowLocks
from bot.adapters.settings import Settings
from bot.adapters.store import tracked
from bot.adapters.store.db import init_db, make_engine
from bot.features.review.recheck import recheck_job, review_and_track
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo
from tests.live import make_settings
from tests.test_history_actions_series import RUNS, STEP_S, downloads, tensorboard_zip
from tests.test_review_pr import CONFIG, METRIC, SCRIPT, script

pytestmark = pytest.mark.servers

ACTIONS_SOURCE = (
    "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
    "    artifact: results\n    file: results.json\ndefault_source: nightly\n"
)
REPOS = {"octo/ml": 7, "acme/ml": 8}  # repository -> installation
START = datetime(2026, 8, 1, 3, tzinfo=UTC)


def archive(value: float) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.json", json.dumps({METRIC: value}))
    return out.getvalue()


def nightlies(repo: Repo, values: list[float]) -> None:
    workflow = repo.workflow("nightly.yml")
    assert workflow is not None
    done = len(repo.workflow_runs)
    for i, value in enumerate(values, done):
        run = repo.add_workflow_run(workflow, created_at=START + timedelta(days=i))
        repo.add_artifact(run, "results", archive(value))


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def settings(tmp_path: Path, fake: FakeGitHub) -> Settings:
    return make_settings(
        tmp_path, app_id=fake.app_id, private_key=fake.private_key, github_api_url=fake.base_url
    )


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    found = make_engine(settings.database_url)
    yield found
    found.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return init_db(engine)


@pytest.fixture
def locks(engine: Engine, sessions: sessionmaker[Session]) -> Iterator[RowLocks]:
    found = RowLocks(engine, "tests", DEFAULT_TTL)
    yield found
    found.close()


def conclusion(repo: Repo, number: int) -> str | None:
    pr = repo.pr(number)
    (run,) = [r for r in repo.check_runs(pr.head_sha) if r.name == "threshold-bot"]
    return run.conclusion


def test_a_new_nightly_artifact_re_reviews_the_pr_at_the_next_round(
    fake: FakeGitHub, settings: Settings, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    """Both repositories' PRs lower the gate to 0.53, which their 25 nightlies pass; a new
    nightly of octo/ml fails it: the round re-reviews octo/ml's PR only."""
    github = client_factory(settings)
    remote = source_factory(settings, sessions)
    repos: dict[str, Repo] = {}
    for name, installation in REPOS.items():
        repo = fake.add_repo(
            name,
            installation_id=installation,
            files={SCRIPT: script("0.56"), CONFIG: ACTIONS_SOURCE},
        )
        repo.add_workflow("nightly.yml")
        nightlies(repo, [0.55 + 0.001 * (i % 5) for i in range(25)])
        repo.open_pr(2, head="lower", head_files={SCRIPT: script("0.53")})
        review_and_track(github(installation), sessions, installation, name, 2, remote, locks=locks)
        assert conclusion(repo, 2) == "success"
        repos[name] = repo
    with sessions() as session:
        assert {(t.repo, t.number) for t in tracked.tracked(session)} == {
            (name, 2) for name in REPOS
        }
    job = recheck_job(settings, sessions, github, remote, locks)

    quiet = job()
    assert quiet.sources == 2 and quiet.changed == () and quiet.reviewed == ()

    nightlies(repos["octo/ml"], [0.50, 0.51, 0.50])
    report = job()

    assert report.changed == ("actions:octo/ml/nightly.yml:results",)
    assert report.reviewed == ("octo/ml#2",) and report.failed == ()
    assert conclusion(repos["octo/ml"], 2) == "action_required"
    assert conclusion(repos["acme/ml"], 2) == "success"
    # each repository's nightly was listed with its own installation's client
    assert fake.requests("GET", repo="acme/ml")


PERF = "tests/functional/perf.sh"
TB_SOURCE = (
    "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
    "    artifact: tensorboard\ndefault_source: nightly\n"
)


def perf_script(limit: str) -> str:
    """A functional test's checks on its TensorBoard logs: the mean of the last five steps."""
    return (
        "#!/bin/bash\nset -eou pipefail\n"
        "uv run tests/check_metrics.py metrics.json \\\n"
        f"    'mean(data[\"{STEP_S}\"][-5:]) < {limit}'\n"
    )


def test_the_round_keeps_the_series_a_tracked_pr_reads_when_it_first_reads_the_run(
    fake: FakeGitHub,
    settings: Settings,
    sessions: sessionmaker[Session],
    locks: RowLocks,
    tmp_path: Path,
) -> None:
    """The re-review after the round reads the new nightly's series from the cache: each
    artifact is downloaded once, though the round's sync read it first."""
    github = client_factory(settings)
    remote = source_factory(settings, sessions)
    repo = fake.add_repo(
        "octo/train", installation_id=7, files={PERF: perf_script("44"), CONFIG: TB_SOURCE}
    )
    nightly = repo.add_workflow("nightly.yml")

    def add(i: int) -> None:
        run = repo.add_workflow_run(nightly, created_at=START + timedelta(days=i))
        repo.add_artifact(run, "tensorboard", tensorboard_zip(tmp_path, i))

    for i in range(RUNS):
        add(i)
    repo.open_pr(3, head="tighter", head_files={PERF: perf_script("42")})
    review_and_track(github(7), sessions, 7, "octo/train", 3, remote, locks=locks)
    assert conclusion(repo, 3) == "action_required"  # the slow tails' means exceed 42
    with sessions() as session:
        (pull,) = tracked.tracked(session)
    assert [s.series for s in pull.sources] == [(STEP_S,)]

    add(RUNS)
    report = recheck_job(settings, sessions, github, remote, locks)()

    assert report.reviewed == ("octo/train#3",)
    assert downloads(fake) == RUNS + 1
