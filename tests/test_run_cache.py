"""CachedSource: incremental sync of the SQLAlchemy run cache from the fake W&B server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.history.cache import CachedSource, tally
from bot.adapters.history.wandb_source import WandbSource
from bot.adapters.store import runs as store
from bot.adapters.store.db import init_db, make_engine
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import SourceSpec
from tests.fakes.wandb_server import API_KEY, NIGHTLY_START, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ENTITY, PROJECT = "acme", "gsm8k_ci"
SPEC = SourceSpec(kind="wandb", entity=ENTITY, project=PROJECT)
N = 25


@pytest.fixture()
def fake() -> FakeWandb:
    """A fake W&B holding ``N`` runs of one project."""
    server = FakeWandb()
    for i in range(N):
        server.add_run(ENTITY, PROJECT, nightly_run(i))
    return server


@pytest.fixture()
def url(fake: FakeWandb) -> Iterator[str]:
    """The base URL of the running fake."""
    with serve(fake) as base:
        yield base


@pytest.fixture()
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    """A fresh store: SQLite, then PostgreSQL."""
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def cached(url: str, sessions: sessionmaker[Session]) -> CachedSource:
    """A CachedSource over a WandbSource pointed at the fake (pages of 10 runs)."""
    upstream = WandbSource(
        api_key=API_KEY, base_url=url, per_page=10, retries=1, retry_wait=(1.0, 1.0)
    )
    return CachedSource(sessions, upstream)


def stored(fake: FakeWandb) -> list[str]:
    """Run ids in the fake, oldest first."""
    runs = fake.projects[(ENTITY, PROJECT)].values()
    return [r.name for r in sorted(runs, key=lambda r: r.created_at)]


def test_cold_sync_caches_every_run(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    result = cached(url, sessions).sync(SPEC)
    assert (result.new, result.updated, result.removed, result.total) == (N, 0, 0, N)
    assert result.changed and result.error is None
    assert result.source == SPEC.describe()
    history = cached(url, sessions).cached(SPEC)
    assert [r.id for r in history.runs] == stored(fake)


def test_warm_sync_with_nothing_new_is_one_request(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    before = fake.total_requests
    result = source.sync(SPEC)
    assert fake.total_requests - before == 1
    assert (result.new, result.updated, result.removed) == (0, 0, 0)
    assert not result.changed


def test_warm_sync_fetches_only_new_and_running_runs(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    cached(url, sessions).sync(SPEC)
    for i in range(N, N + 5):
        fake.add_run(ENTITY, PROJECT, nightly_run(i, state="finished"))
    fake.requests.clear()
    source = cached(url, sessions)  # a new process: new client, so the Viewer query again
    result = source.sync(SPEC)
    assert fake.total_requests <= 3
    assert fake.requests["Runs"] == 1
    assert (result.new, result.updated, result.total) == (5, 0, N + 5)
    assert [r.id for r in source.cached(SPEC).runs] == stored(fake)


def test_a_running_run_that_finishes_is_updated(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    running = [r for r in source.cached(SPEC).runs if r.state == "running"]
    assert running  # the series has running runs older than the newest one
    target = running[0]
    assert target.created_at < source.cached(SPEC).runs[-1].created_at
    fake.update_run(ENTITY, PROJECT, target.id, state="finished", summary={"tokens": 999})
    result = source.sync(SPEC)
    assert (result.new, result.updated) == (0, 1)
    assert result.changed
    after = {r.id: r for r in source.cached(SPEC).runs}[target.id]
    assert after.state == "finished"
    assert after.summary == {"tokens": 999.0}


def test_a_finished_only_source_catches_runs_that_finish_late(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    spec = SPEC.model_copy(update={"states": ("finished",)})
    source = cached(url, sessions)
    source.sync(spec)
    finished = [r.name for r in fake.projects[(ENTITY, PROJECT)].values() if r.state == "finished"]
    assert sorted(r.id for r in source.cached(spec).runs) == sorted(finished)
    late = next(r for r in fake.projects[(ENTITY, PROJECT)].values() if r.state == "running")
    assert late.created_at < max(r.created_at for r in fake.projects[(ENTITY, PROJECT)].values())
    fake.update_run(ENTITY, PROJECT, late.name, state="finished")
    result = source.sync(spec)
    assert (result.new, result.updated) == (1, 0)  # new to a finished-only source
    assert late.name in {r.id for r in source.cached(spec).runs}
    assert all(r.state == "finished" for r in source.cached(spec).runs)


def test_a_deleted_running_run_is_dropped(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    running = [r.id for r in source.cached(SPEC).runs if r.state == "running"]
    fake.delete_run(ENTITY, PROJECT, running[0])
    result = source.sync(SPEC)
    assert (result.removed, result.total) == (1, N - 1)
    assert running[0] not in {r.id for r in source.cached(SPEC).runs}


def test_full_sync_drops_deleted_runs_that_incremental_cannot_see(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    finished = [r.id for r in source.cached(SPEC).runs if r.state == "finished"]
    fake.delete_run(ENTITY, PROJECT, finished[0])
    assert source.sync(SPEC).total == N  # an old finished run is not re-read incrementally
    result = source.sync(SPEC, full=True)
    assert (result.removed, result.total, result.new) == (1, N - 1, 0)
    assert [r.id for r in source.cached(SPEC).runs] == stored(fake)


def test_the_boundary_run_and_page_duplicates_are_not_counted_twice(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    fake.page_overlap = 4
    source = cached(url, sessions)
    assert source.sync(SPEC).new == N
    # the newest cached run comes back ($gte) with one new run at the same second
    newest = stored(fake)[-1]
    fake.add_run(
        ENTITY,
        PROJECT,
        nightly_run(
            N, name="zz-same-second", created_at=fake.projects[(ENTITY, PROJECT)][newest].created_at
        ),
    )
    result = source.sync(SPEC)
    assert (result.new, result.updated, result.total) == (1, 0, N + 1)


def test_a_failed_sync_leaves_the_cache_unchanged(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    for i in range(N, N + 30):
        fake.add_run(ENTITY, PROJECT, nightly_run(i))
    fake.fail(503, count=100, operation="Runs", after=1)  # the second page fails
    with pytest.raises(HistoryUnavailable, match="503"):
        source.sync(SPEC, full=True)
    with pytest.raises(HistoryUnavailable, match="503"):
        source.sync(SPEC)
    assert len(source.cached(SPEC).runs) == N
    fake.faults.clear()
    assert source.sync(SPEC).new == 30


def test_fetch_syncs_then_reads_the_cache(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    fake.update_run(ENTITY, PROJECT, "run00001", summary={"loss": float("nan"), "note": "x"})
    history = cached(url, sessions).fetch(SPEC)
    assert [r.id for r in history.runs] == stored(fake)
    assert history.stats.non_finite_values == 1
    assert history.stats.non_numeric_values == 1
    assert history.stats.total == N
    # the same history again, from a fresh process, costs one request
    fake.requests.clear()
    again = cached(url, sessions).fetch(SPEC)
    assert again == history
    assert fake.requests["Runs"] == 1


def test_changed_filters_use_a_separate_cache(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = cached(url, sessions)
    source.sync(SPEC)
    finished = SPEC.model_copy(update={"states": ("finished",)})
    result = source.sync(finished)
    expected = [r.name for r in fake.projects[(ENTITY, PROJECT)].values() if r.state == "finished"]
    assert result.new == result.total == len(expected)
    assert store.source_key(finished) != store.source_key(SPEC)
    assert len(source.cached(SPEC).runs) == N


def test_created_after_bounds_the_cold_sync(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    after = NIGHTLY_START + timedelta(hours=10)
    spec = SPEC.model_copy(update={"created_after": after})
    result = cached(url, sessions).sync(spec)
    runs = fake.projects[(ENTITY, PROJECT)].values()
    assert result.total == sum(1 for r in runs if r.created_at >= after)


def test_tally_counts_changes_as_the_spec_sees_them() -> None:
    changed = {"a": None, "b": "running", "c": "finished", "d": "finished", "e": None}
    now = {"a": "finished", "b": "finished", "c": "finished", "d": "failed", "e": "running"}
    removed = {"f": "finished", "g": "running"}
    # a: new run; b: finished after running; c: edited; d: failed; e: hidden; f: deleted
    assert tally(changed, removed, now, frozenset({"finished"})) == (2, 1, 2)
    everything = frozenset({"finished", "failed", "running"})
    assert tally(changed, removed, now, everything) == (2, 3, 2)
