"""End to end: what a warm round of the drift watch asks of GitHub and of the store, with
dashboards on, run as the App runs it.

The real App (uvicorn + worker + store, ``tests/drift_world.py``) with three seed-like
repositories of one installation (``dashboard: on``): one whose rewards gate drifts, two
healthy but for EVAL's scattered failures.  Each round is the periodic job's (``drift_job``,
built once as ``bot.app.runtime`` builds it) run on a new thread, as ``bot.app.periodic`` runs
each period's.  The fake charges one unit of rate limit per request answered 200 and none per
304, as GitHub does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from bot.adapters.store import dashboards
from bot.features.dashboard.write import DashboardStep
from bot.features.drift.rounds import drift_job
from bot.features.drift.watch import WatchReport
from tests.drift_world import INSTALLATION, World, open_world
from tests.fakes.github_api import Call
from tests.fakes.github_state import Repo
from tests.test_dashboard_e2e import run, seed_repository, the_dashboard
from tests.test_drift_e2e import MIN_FAILURES

pytestmark = pytest.mark.servers

LISTING = "/installation/repositories"
TOKENS = f"/app/installations/{INSTALLATION}/access_tokens"
SYNCED = "UPDATE cached_sources SET synced_at="  # bot.adapters.store.runs.mark_synced


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]
) -> Iterator[World]:
    """The App, on SQLite and on PostgreSQL + Redis."""
    with open_world(tmp_path_factory.mktemp("dashboard_warm"), **module_backends) as running:
        yield running


def periodic(world: World) -> Callable[[], WatchReport]:
    """The App's drift job, each call one round on a thread of its own."""
    runtime = world.runtime
    job = drift_job(
        world.settings,
        runtime.sessions,
        runtime.worker.github,
        runtime.worker.history,
        runtime.locks,
        DashboardStep.of(world.settings),
    )

    def round_on_a_thread() -> WatchReport:
        reports: list[WatchReport] = []
        thread = threading.Thread(target=lambda: reports.append(job()), name="periodic-drift")
        thread.start()
        thread.join(120)
        (report,) = reports
        return report

    return round_on_a_thread


@contextmanager
def store_writes(world: World) -> Iterator[list[str]]:
    """The statements that write to the store while in the block."""
    engine = world.runtime.sessions.kw["bind"]
    written: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
            written.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield written
    finally:
        event.remove(engine, "before_cursor_execute", seen)


def head_path(repo: Repo) -> str:
    return f"/repos/{repo.full_name}/git/ref/heads/{repo.default_branch}"


def test_warm_rounds_ask_github_only_304s_and_write_nothing(world: World) -> None:
    world.github.rate_cost = 1  # a 200 costs one request of the rate limit; a 304 none
    drifting, nightly = seed_repository(world, "octo/warm-drifting")
    healthy = [seed_repository(world, f"octo/warm-healthy{n}")[0] for n in (1, 2)]
    repos = [drifting, *healthy]
    job = periodic(world)
    for _night in range(MIN_FAILURES):
        run(nightly)
        job()
    cold_start = len(world.github.calls)
    cold = job()  # nothing new since the last: the caches are warm from here on
    assert {r.repo for r in cold.repositories} == {r.full_name for r in repos}
    boards = {r.full_name: the_dashboard(r).body for r in repos}
    assert world.github.calls[cold_start:]  # a round does ask GitHub

    for _warm in range(2):
        before, remaining = len(world.github.calls), world.github.rate_remaining
        with store_writes(world) as written:
            warm = job()
        calls: list[Call] = world.github.calls[before:]

        assert [c for c in calls if c.status != 304] == []  # every request a 304: free
        assert {c.path for c in calls} == {LISTING} | {head_path(r) for r in repos}
        assert not [c for c in calls if c.path == TOKENS]  # the token is reused
        assert world.github.rate_remaining == remaining
        # the store: nothing but the run cache's record of each W&B project's sync (its
        # ``synced_at``, one per project: the history versions are read every round)
        assert [w for w in written if not w.startswith(SYNCED)] == []
        assert len(written) <= len(repos)
        assert [r.fresh for r in warm.repositories] == [False] * len(repos)
        assert {r.full_name: the_dashboard(r).body for r in repos} == boards

    # a new run in one repository's history: that one alone is evaluated and its dashboard
    # edited, once
    run(nightly)
    issue = the_dashboard(drifting)
    before = len(world.github.calls)
    changed = job()
    calls = world.github.calls[before:]
    fresh = {r.repo for r in changed.repositories if r.fresh}
    assert fresh == {drifting.full_name}
    patches = [c.path for c in calls if c.method == "PATCH"]
    assert patches.count(f"/repos/{drifting.full_name}/issues/{issue.number}") == 1
    assert the_dashboard(drifting).body != boards[drifting.full_name]
    for repo in healthy:
        assert [c for c in calls if c.path.startswith(f"/repos/{repo.full_name}/")] == [
            c for c in calls if c.path == head_path(repo)
        ]
        assert the_dashboard(repo).body == boards[repo.full_name]
    record = dashboards.get(world.runtime.sessions, drifting.full_name)
    assert record is not None and record.body == the_dashboard(drifting).body
