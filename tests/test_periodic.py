"""``bot.app.periodic``: each job runs once per period across processes, on SQLite (lock
rows) and on PostgreSQL (advisory locks, or Redis locks), and the per-PR lock of
``review_and_track``."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.locks import DEFAULT_TTL, Locks, make_locks
from bot.adapters.settings import Settings
from bot.adapters.store import periodic
from bot.adapters.store.db import init_db, make_engine
from bot.app.periodic import Scheduler, period_start
from bot.core.retry import is_transient
from bot.features.review.recheck import PullBusy, review_and_track
from tests.conftest import ROOT
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_pr import SCRIPT, script

pytestmark = pytest.mark.servers

SECONDS = 6.5
JOBS = {"fast": 1.0, "slow": 2.0}


@pytest.fixture(params=["sqlite", "postgres", "postgres+redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """(store URL, lock kind, lock URL) as ``tests.lock_holder`` takes them."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        return url, "rows-sqlite", url
    url = request.getfixturevalue("postgres_url")
    if request.param == "postgres":
        return url, "advisory", url
    server = request.getfixturevalue("redis_server")
    server.flush()
    return url, "redis", server.url


def test_three_processes_run_each_job_once_per_period(store: tuple[str, str, str]) -> None:
    url, kind, lock_url = store
    init_db(make_engine(url), upgrade=True).kw["bind"].dispose()
    jobs = [f"{name}:{period:g}" for name, period in JOBS.items()]
    command = [sys.executable, "-m", "tests.lock_holder", kind, lock_url, "2"]
    children = [
        subprocess.Popen(
            [*command, "schedule", url, str(SECONDS), *jobs],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(3)
    ]
    problems = []
    runs: Counter[tuple[str, str]] = Counter()
    by_process: list[int] = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        problems.append(err)
        lines = [line.split() for line in out.splitlines() if line.startswith("ran ")]
        runs.update((job, start) for _, job, start in lines)
        by_process.append(len(lines))

    assert runs and set(runs.values()) == {1}, runs  # never twice for one period
    for job, period in JOBS.items():
        starts = sorted(datetime.fromisoformat(s) for j, s in runs if j == job)
        steps = {(b - a).total_seconds() for a, b in itertools.pairwise(starts)}
        assert steps == {period}, (
            [s.isoformat() for s in starts],
            problems,
        )  # and no period missed
        assert len(starts) >= int(SECONDS / period) - 1
    assert sum(by_process) == sum(runs.values())


def test_period_start_is_aligned_on_the_epoch_in_utc() -> None:
    now = datetime(2026, 3, 1, 10, 7, 31, 500000, tzinfo=UTC)
    assert period_start(now, 900) == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert period_start(now, 3600) == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert period_start(now, 2) == datetime(2026, 3, 1, 10, 7, 30, tzinfo=UTC)


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    found = init_db(make_engine(database_url), upgrade=True)
    yield found
    found.kw["bind"].dispose()


@pytest.fixture
def locks(sessions: sessionmaker[Session]) -> Iterator[Locks]:
    found = make_locks(Settings(redis_url=None), sessions.kw["bind"], "tests")
    yield found
    found.close()


def test_claim_period_has_one_winner_per_period(sessions: sessionmaker[Session]) -> None:
    start = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    claims = [periodic.claim_period(sessions, "recheck", start, f"p{i}") for i in range(3)]
    assert claims == [True, False, False]
    assert not periodic.claim_period(sessions, "recheck", start - timedelta(minutes=15), "p1")
    assert periodic.claim_period(sessions, "recheck", start + timedelta(minutes=15), "p2")
    assert periodic.claim_period(sessions, "purge", start, "p2")  # each job has its own


def test_a_period_whose_previous_run_goes_on_past_it_is_skipped(
    sessions: sessionmaker[Session], locks: Locks, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    scheduler = Scheduler(sessions, locks, "tests")
    scheduler.add("drift", 60, lambda: ran.append("drift"))
    now = datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC)  # a period long over: no waiting
    busy = locks.acquire("periodic:drift")  # the previous round, in another process
    assert busy is not None
    with caplog.at_level(logging.INFO, logger="bot.app.periodic"):
        assert scheduler.tick(now) == ["drift"]  # claimed, but the lock is not free
        scheduler.stop()
        busy.release()
        assert scheduler.tick(now + timedelta(seconds=1)) == []  # the period was spent
        assert scheduler.tick(now + timedelta(seconds=60)) == ["drift"]
        scheduler.stop()
    assert ran == ["drift"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["periodic job skipped: its previous run is still going", "periodic job ran"]


def test_a_run_waits_for_the_previous_one_within_its_period(
    sessions: sessionmaker[Session], locks: Locks
) -> None:
    ran: list[float] = []
    scheduler = Scheduler(sessions, locks, "tests")
    scheduler.add("recheck", 60, lambda: ran.append(time.monotonic()))
    busy = locks.acquire("periodic:recheck")
    assert busy is not None
    now = datetime.now(UTC)
    if period_start(now, 60) + timedelta(seconds=58) < now:  # keep 2 s of the period
        time.sleep(2.5)
        now = datetime.now(UTC)
    released = time.monotonic() + 0.5
    threading.Timer(0.5, busy.release).start()
    assert scheduler.tick(now) == ["recheck"]
    scheduler.stop()
    assert len(ran) == 1 and ran[0] >= released - 0.05


def test_a_failing_job_does_not_stop_the_others(
    sessions: sessionmaker[Session], locks: Locks, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    scheduler = Scheduler(sessions, locks, "tests")
    scheduler.add("broken", 60, broken)
    scheduler.add("purge", 60, lambda: ran.append("purge"))
    now = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    with caplog.at_level(logging.INFO, logger="bot.app.periodic"):
        assert scheduler.tick(now) == ["broken", "purge"]
        scheduler.stop()
        assert scheduler.tick(now + timedelta(seconds=60)) == ["broken", "purge"]
        scheduler.stop()
    assert ran == ["purge", "purge"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("periodic job failed") == 2
    assert messages.count("periodic job ran") == 4


# ----- the per-PR lock of review_and_track ------------------------------------------------


class SlowGitHub(RecordingGitHub):
    """The recording GitHub taking 50 ms per file read (a review takes a while)."""

    def file_text(
        self, repo: str, path: str, ref: str, *, max_bytes: int | None = None
    ) -> str | None:
        time.sleep(0.05)
        return super().file_text(repo, path, ref, max_bytes=max_bytes)


class _Intervals(logging.Handler):
    """When each thread was inside the exclusive section of a review."""

    def __init__(self) -> None:
        super().__init__()
        self.open: dict[str, float] = {}
        self.spans: list[tuple[float, float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message == "reviewing pull request":
            self.open[record.threadName or ""] = record.created
        elif message == "reviewed pull request":
            start = self.open.pop(record.threadName or "")
            self.spans.append((start, record.created, record.__dict__["pull"]))


def test_two_reviews_of_one_pr_never_overlap(sessions: sessionmaker[Session]) -> None:
    engine = sessions.kw["bind"]
    spans = _Intervals()
    logger = logging.getLogger("bot.features.review.recheck")
    logger.addHandler(spans)
    logger.setLevel(logging.INFO)
    errors: list[BaseException] = []

    def reviewer(holder: str) -> None:
        gh = SlowGitHub()
        gh.commit({SCRIPT: script("0.56")})
        gh.open_pull(7, {SCRIPT: script("0.50")})
        locks = make_locks(Settings(redis_url=None), engine, holder, DEFAULT_TTL)
        try:
            for _ in range(3):
                review_and_track(gh, sessions, 1, gh.repo, 7, None, locks=locks)
        except BaseException as exc:
            errors.append(exc)
        finally:
            locks.close()

    threads = [threading.Thread(target=reviewer, args=(f"w{i}",)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        logger.removeHandler(spans)
    assert errors == []
    found = sorted(spans.spans)
    assert len(found) == 6 and {pull for _, _, pull in found} == {"owner/repo#7"}
    for (_, end, _), (start, _, _) in itertools.pairwise(found):
        assert start >= end, found


def test_a_review_that_cannot_get_its_pr_is_retried_later(
    sessions: sessionmaker[Session], locks: Locks
) -> None:
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56")})
    gh.open_pull(7, {SCRIPT: script("0.50")})
    held = locks.acquire(f"pull:{gh.repo}#7")  # another worker is reviewing it
    assert held is not None
    started = time.monotonic()
    with pytest.raises(PullBusy) as caught:
        review_and_track(gh, sessions, 1, gh.repo, 7, None, locks=locks, wait=0.3)
    assert 0.3 <= time.monotonic() - started < 0.3 + 5.0  # waited, not for ever (slack: load)
    assert is_transient(caught.value)
    assert gh.writes() == []
    held.release()
    assert review_and_track(gh, sessions, 1, gh.repo, 7, None, locks=locks).status == "reviewed"
