"""The App as a cluster of processes, end to end, with workers killed while they work.

On PostgreSQL + Redis: two ``serve --no-workers`` processes (the test's client spreads
the webhooks over both) and three ``worker`` processes; 300 signed deliveries for 30 PRs
on the fake GitHub (in this process), in bursts where each PR gets several deliveries at
once (``tests/pull_traffic.py``); every few seconds a random worker is frozen, what it
holds read from the store, then ``kill -9``-ed and a new worker started.  On SQLite, the
same smaller: one ``serve --no-workers`` and two workers sharing the embedded queue file.

Then: every delivery answered 202 is stored and done, with one ``delivery done`` line
over all the processes' logs, and as many attempts as kills interrupted it plus
transient errors retried it, plus one; each PR has one comment by the App and one check
run on its head (and at most one on any earlier head); the periodic jobs ran at most
once per period (``RECHECK_SECONDS`` of 3 s), and the re-check in most periods; no two
processes reviewed a PR at the same time (from the ``reviewing pull request`` /
``reviewed pull request`` lines, a killed worker's review ending when it was frozen).
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import CHECK_NAME
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import DeliveryRow
from bot.core.render.review import MARKER
from tests.cluster import (
    Cluster,
    Member,
    app_env,
    done_lines,
    now,
    overlaps,
    periodic_runs,
    retried,
    review_intervals,
    running_by_pid,
)
from tests.fakes.github_api import FakeGitHub
from tests.live import wait_until
from tests.pull_traffic import REVIEWED, Pull, arrange, bursts, post_burst, push

pytestmark = pytest.mark.servers

RECHECK_SECONDS = 3.0
LEASE_SECONDS = 5.0
BURST_GAP = 1.0  # seconds between bursts
KILLS = 3  # at least, while the test runs
DEADLINE = 180.0  # seconds for every delivery to be done after the last burst


@dataclass(frozen=True)
class Scenario:
    servers: int
    workers: int
    pulls: int
    bursts: int
    burst_size: int
    kill_every: float  # seconds


SCENARIOS = {
    "postgresql+redis": Scenario(
        servers=2, workers=3, pulls=30, bursts=10, burst_size=30, kill_every=3.0
    ),
    "sqlite": Scenario(servers=1, workers=2, pulls=12, bursts=6, burst_size=18, kill_every=4.0),
}


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as running:
        yield running
        running.check()


class Killer:
    """Every ``period`` seconds, once ``size`` workers run, kill -9 a random one, busy if
    one becomes so within ``period`` (frozen first, its running deliveries read from the
    store), and start another."""

    def __init__(
        self,
        cluster: Cluster,
        sessions: sessionmaker[Session],
        size: int,
        period: float,
        seed: int = 16,
    ) -> None:
        self.cluster = cluster
        self.sessions = sessions
        self.size = size
        self.period = period
        self.rng = random.Random(seed)
        self.interrupted: Counter[str] = Counter()  # delivery id -> kills that interrupted it
        self.killed: list[Member] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="killer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        if self.errors:
            raise self.errors[0]

    def _busy(self, workers: list[Member]) -> list[Member]:
        """The workers running deliveries, waiting up to ``period`` for one."""
        deadline = time.monotonic() + self.period
        while time.monotonic() < deadline and not self._stop.is_set():
            held = running_by_pid(self.sessions)
            busy = [w for w in workers if w.pid in held]
            if busy:
                return busy
            time.sleep(0.05)
        return []

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.period):
                while len(workers := self.cluster.workers()) < self.size:  # a restart is starting
                    if self._stop.wait(0.1):
                        return
                victim = self.rng.choice(self._busy(workers) or workers)
                held = self.cluster.kill(
                    victim, lambda w: running_by_pid(self.sessions).get(w.pid, set())
                )
                self.interrupted.update(held)
                self.killed.append(victim)
                self.cluster.worker(wait=False)
        except BaseException as exc:  # raised again by ``stop``
            self.errors.append(exc)


def test_a_cluster_with_workers_killed_processes_every_delivery_once(
    tmp_path: Path, fake: FakeGitHub, backends: dict[str, str]
) -> None:
    scenario = SCENARIOS["postgresql+redis" if backends else "sqlite"]
    pulls = arrange(fake, scenario.pulls)
    plan = bursts(pulls, scenario.bursts, scenario.burst_size)
    database_url = backends.get("database_url", f"sqlite:///{tmp_path / 'bot.db'}")
    env = app_env(
        fake,
        database_url,
        backends.get("redis_url"),
        WORKERS="4",
        LEASE_SECONDS=str(LEASE_SECONDS),
        RECHECK_SECONDS=str(RECHECK_SECONDS),
        MAX_ATTEMPTS="30",
    )
    sent: dict[str, tuple[Pull, str, int]] = {}
    with Cluster(env, tmp_path) as cluster:
        # every process starts at once on the empty database
        starting = [cluster.worker(wait=False) for _ in range(scenario.workers)]
        urls = [cluster.serve().url or "" for _ in range(scenario.servers)]
        for member in starting:
            cluster.wait_ready(member)
        started = now()
        sessions = init_db(make_engine(database_url))
        killer = Killer(cluster, sessions, scenario.workers, scenario.kill_every)
        killer.start()
        try:
            for n, burst in enumerate(plan):
                for serial, pull in enumerate(burst.push):
                    push(pull, n * 100 + serial)
                sent.update(post_burst(urls, list(burst.items)))
                time.sleep(BURST_GAP)
            ids = list(sent)

            def all_done() -> bool:
                query = select(DeliveryRow.status, DeliveryRow.last_error).where(
                    DeliveryRow.id.in_(ids)
                )
                with sessions() as session:
                    rows = session.execute(query).all()
                failed = [error for status, error in rows if status == "failed"]
                assert not failed, failed[:3]
                return len(rows) == len(ids) and all(status == "done" for status, _ in rows)

            wait_until(all_done, timeout=DEADLINE, what="every delivery to be done")
            wait_until(lambda: len(killer.killed) >= KILLS, timeout=DEADLINE, what="kills")
            # the periodic jobs go on after the kills: two more periods
            time.sleep(2 * RECHECK_SECONDS)
        finally:
            killer.stop()
        ended = now()
        codes = cluster.stop()
        members = list(cluster.members)

    # nothing lost: every POST answered 202, every id stored and done
    assert Counter(status for _, _, status in sent.values()) == {202: len(sent)}
    with sessions() as session:
        rows = {r.id: r for r in session.execute(select(DeliveryRow)).scalars()}
    assert sorted(rows) == sorted(sent)
    assert {r.status for r in rows.values()} == {"done"}

    # exactly once: at most one "done" line per delivery over every process (none only for
    # a delivery whose worker was killed between committing "done" and writing the line);
    # attempts explained
    assert killer.interrupted, "a kill must catch a worker mid-job"
    finished = Counter(delivery_id for delivery_id, _ in done_lines(members).elements())
    assert set(finished) <= set(sent)
    assert all(n == 1 for n in finished.values()), [d for d, n in finished.items() if n > 1]
    unlogged = [d for d in sent if finished[d] == 0]
    assert len(unlogged) <= len(killer.killed), unlogged
    retries = retried(members)
    wrong = {
        d: (r.attempts, killer.interrupted[d], retries[d])
        for d, r in rows.items()
        if r.attempts != 1 + killer.interrupted[d] + retries[d]
    }
    assert not wrong, wrong  # attempts, kills that interrupted it, transient errors
    assert all(r.claimed_by is None and r.lease_until is None for r in rows.values())

    # one comment by the App per PR, one check run on its head
    for pull in pulls:
        with fake.state.lock:
            comments = [c for c in pull.repo.comments(pull.number) if c.app_id == fake.app_id]
            assert [c.body.startswith(MARKER) for c in comments] == [True], pull.name
            pr = pull.repo.pr(pull.number)
            heads = [c.sha for c in pull.repo.pr_commits(pr)]
            checks = {sha: pull.repo.check_runs(sha) for sha in heads}
        current = [r for r in checks[pull.head_sha] if r.name == CHECK_NAME]
        assert [r.status for r in current] == ["completed"], pull.name
        for sha, on_sha in checks.items():
            assert len([r for r in on_sha if r.name == CHECK_NAME]) <= 1, (pull.name, sha)

    # no PR reviewed by two processes at once; every review delivery reviewed
    intervals = review_intervals(members)
    reviews = Counter(pull.name for pull, kind, _ in sent.values() if kind in REVIEWED)
    for pull in pulls:
        found = intervals.get(pull.name, [])
        assert not overlaps(found), (pull.name, overlaps(found)[:2])
        closed = [i for i in found if i.end is not None]
        assert len(closed) >= reviews[pull.name], pull.name  # the re-check may add some

    # the periodic jobs: once per period at most, the re-check in most periods
    ran = periodic_runs(members)
    assert ran and set(ran.values()) == {1}, [k for k, v in ran.items() if v > 1][:5]
    periods = {datetime.fromisoformat(period) for job, period in ran if job == "recheck"}
    # every whole period of the run had its re-check, but for one claimed by a process
    # killed before it ran, or skipped because the previous run was still going (logged)
    first = math.ceil(started.timestamp() / RECHECK_SECONDS) * RECHECK_SECONDS
    whole = [
        datetime.fromtimestamp(first + i * RECHECK_SECONDS, UTC)
        for i in range(int((ended.timestamp() - first) // RECHECK_SECONDS))
    ]
    missing = [p for p in whole if p not in periods]
    skipped = sum(
        1
        for m in members
        for r in m.records()
        if str(r["msg"]).startswith("periodic job skipped") and r.get("job") == "recheck"
    )
    assert whole and len(missing) <= len(killer.killed) + skipped, (missing, skipped)
    # uvicorn stops gracefully on SIGTERM, then re-raises the signal
    assert all(code in (0, -signal.SIGTERM) for code in codes.values()), codes
