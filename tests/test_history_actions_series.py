"""Per-step series of an ``actions`` source through the App's run cache: TensorBoard event
files (written here by tensorboardX's SummaryWriter) in the nightly's artifacts, read by
PyGithub against the fake GitHub, kept in the real store (SQLite).

An aggregation gate (``mean(data['timing/step_s'][-5:]) <= 42``) compares each run on the
mean of its last five steps: the runs whose last steps slow down fail it though their last
step (the summary) passes.  Series are kept when a run is first read, so they outlive the
artifacts' retention; series asked for later are read from the artifacts still there.
"""

from __future__ import annotations

import io
import statistics
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from tensorboardX import SummaryWriter

from bot.adapters.github.client import GitHubClient
from bot.adapters.history.actions_source import ActionsSource
from bot.adapters.history.cache import CachedSource
from bot.adapters.history.files import FileSource
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.runs import CachedSeries
from bot.core.analysis.review import build_review
from bot.core.history.series import with_series
from bot.core.models import Gate, GateChange, History, RuleSettings, SourceSpec
from bot.features.review.pull import HistoryRouter
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_routes import BLOB_PREFIX
from tests.fakes.github_state import Repo

pytestmark = pytest.mark.servers

REPO = "octo/train"
INSTALLATION = 9
ARTIFACT = "tensorboard"
STEP_S = "timing/step_s"
SPEC = SourceSpec(kind="actions", workflow="nightly.yml", artifact=ARTIFACT)
START = datetime(2026, 3, 1, 3, tzinfo=UTC)
RUNS = 24
SLOW_TAILS = (17, 21)  # nightlies whose steps 25-28 slow down (the last step does not)
MEAN5 = Gate(
    name="STEP_TIME",
    file="ci/perf.sh",
    line=3,
    metric=STEP_S,
    op="<=",
    value=42.0,
    literal="42",
    start=10,
    end=12,
    aggregation="mean",
    last_steps=5,
)
WINDOW = RuleSettings().window.runs


def steps(run: int) -> dict[int, float]:
    """The step times of nightly ``run``: 80 s warming up, then 40 to 40.75 s (exact in
    the float32 that TensorBoard keeps)."""
    times = {s: (80.0 if s < 3 else 40.0 + 0.25 * ((run + s) % 4)) for s in range(30)}
    if run in SLOW_TAILS:
        times.update({s: 46.0 for s in range(25, 29)})
    return times


def tensorboard_zip(tmp_path: Path, run: int) -> bytes:
    logdir = tmp_path / f"run{run}"
    with SummaryWriter(logdir=str(logdir)) as writer:
        for step, value in steps(run).items():
            writer.add_scalar(STEP_S, value, step)
            writer.add_scalar("train/loss", 2.0 / (step + 1), step)
    (path,) = logdir.glob("events.out.tfevents.*")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"logs/{path.name}", path.read_bytes())
    return out.getvalue()


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub, tmp_path: Path) -> Repo:
    repo = fake.add_repo(REPO, installation_id=INSTALLATION, files={"README.md": "# train\n"})
    nightly = repo.add_workflow("nightly.yml")
    for i in range(RUNS):
        run = repo.add_workflow_run(nightly, created_at=START + timedelta(days=i))
        repo.add_artifact(run, ARTIFACT, tensorboard_zip(tmp_path, i))
    return repo


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
    yield init_db(engine)
    engine.dispose()


def router(
    fake: FakeGitHub, sessions: sessionmaker[Session], series_runs: int = 200
) -> HistoryRouter:
    """The App's router: the repository's actions sources through the run cache, read with
    the installation's client."""
    client: GitHubClient = fake.github_app().installation(INSTALLATION)
    cache = CachedSource(sessions, ActionsSource(client, 1 << 20), series_runs=series_runs)
    files = FileSource(lambda path: None)  # type: ignore[arg-type, return-value]
    return HistoryRouter(files, lambda spec: cache, repo=REPO, actions=client)


def downloads(fake: FakeGitHub) -> int:
    return sum(1 for c in fake.requests("GET", path=None) if c.path.startswith(BLOB_PREFIX))


def mean5(run: int) -> float:
    times = steps(run)
    return statistics.mean(times[s] for s in sorted(times)[-5:])


def review(history: History) -> tuple[int, float, list[str]]:
    (gate,) = build_review([GateChange(head=MEAN5, base=MEAN5)], history).gates
    return gate.proposed_failures.failed, gate.window_max, list(gate.warnings)


def test_a_mean_of_the_last_steps_gate_reads_the_series_kept_at_first_read(
    fake: FakeGitHub, repo: Repo, sessions: sessionmaker[Session]
) -> None:
    spec = with_series(SPEC, [MEAN5])
    history = router(fake, sessions).fetch(spec)

    window = range(RUNS - WINDOW, RUNS)
    assert [dict(r.series[STEP_S]) for r in history.runs] == [steps(i) for i in range(RUNS)]
    failed, worst, warnings = review(history)
    assert failed == sum(mean5(i) > 42 for i in window) == len(SLOW_TAILS)
    assert worst == max(mean5(i) for i in window)
    assert not [w for w in warnings if "could not be applied" in w]
    assert downloads(fake) == RUNS  # each artifact once: the series came with the run

    for item in repo.artifacts.values():  # past their retention: the cache is the only copy
        item.expired = True
    again = router(fake, sessions).fetch(spec)
    assert [r.series for r in again.runs] == [r.series for r in history.runs]
    assert downloads(fake) == RUNS


def test_series_asked_for_later_are_read_from_the_artifacts_once(
    fake: FakeGitHub, repo: Repo, sessions: sessionmaker[Session]
) -> None:
    assert all(not r.series for r in router(fake, sessions).fetch(SPEC).runs)
    spec = with_series(SPEC, [MEAN5])

    history = router(fake, sessions).fetch(spec)
    assert [dict(r.series[STEP_S]) for r in history.runs] == [steps(i) for i in range(RUNS)]
    assert downloads(fake) == 2 * RUNS
    assert router(fake, sessions).fetch(spec).runs == history.runs
    assert downloads(fake) == 2 * RUNS  # kept: not read again


def test_series_are_kept_for_the_newest_runs_only(
    fake: FakeGitHub, repo: Repo, sessions: sessionmaker[Session]
) -> None:
    history = router(fake, sessions, series_runs=10).fetch(with_series(SPEC, [MEAN5]))

    assert [bool(r.series) for r in history.runs] == [i >= RUNS - 10 for i in range(RUNS)]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(CachedSeries)) == 10
