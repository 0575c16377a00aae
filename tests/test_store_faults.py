"""The store or the queue fails under a burst of webhooks: nothing stored is lost or doubled,
and everything stored is done soon after the service is back.

As ``deploy/compose.yaml`` runs the App: ``serve --no-workers`` and two ``worker`` processes
(the default lease and sweeps; fast retry backoff, 30 attempts, as the cluster tests) on a
PostgreSQL cluster and a Redis with an append-only file (``tests/services.py``: servers of this
module's own, since each test stops or restarts one).  Bursts of signed deliveries for PRs on
the fake GitHub (``tests/pull_traffic.py``); while a burst is in flight, one fault per test:

- PostgreSQL restarted (``pg_ctl restart -m fast``: every connection dropped), or stopped for
  ``OUTAGE`` seconds;
- Redis restarted (down ``RESTART_PAUSE`` seconds, its append-only file loaded again), or
  stopped for ``OUTAGE`` seconds.

Then every delivery the App stored (each one answered 202, and any whose commit went through
as its connection dropped) is done within ``RECOVERY`` seconds of the service answering
again, with one ``delivery done`` line over the processes' logs; none failed.  Each PR
reviewed has one comment by the App and at most one check run on any head.  Deliveries
answered 503 while the store was down are not stored, so not counted here (GitHub is asked
to send them again).  The times are printed (``pytest -s``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import CHECK_NAME
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import DeliveryRow
from bot.core.render.review import MARKER
from tests.cluster import Cluster, app_env, done_lines, running_by_pid
from tests.fakes.github_api import FakeGitHub
from tests.live import wait_until
from tests.pull_traffic import REVIEWED, Pull, arrange, bursts, post_burst, push
from tests.services import Postgres, Redis, postgres_running, redis_running

pytestmark = pytest.mark.servers

PULLS = 8
BURSTS = 5
BURST_SIZE = 8  # 4 PRs, 2 deliveries each: 40 deliveries
FAULT_AT = 1  # the fault starts with this burst (counted from 0)
OUTAGE = 20.0  # seconds a stopped service stays down
RESTART_PAUSE = 1.0  # seconds Redis is down in a restart (a burst arrives meanwhile)
RECOVERY = 60.0  # seconds after the service is back by which every stored delivery is done


@dataclass(frozen=True)
class Fault:
    """What happens to which service (``run`` returns once it answers again), and the
    seconds between bursts (a burst or two during an outage)."""

    run: Callable[[Postgres, Redis], None]
    gap: float


def _stopped(halt: Callable[[], None], resume: Callable[[], None]) -> None:
    halt()
    time.sleep(OUTAGE)
    resume()


FAULTS = {
    "postgres-restart": Fault(lambda pg, _: pg.restart("fast"), gap=0.5),
    "postgres-stopped": Fault(lambda pg, _: _stopped(lambda: pg.halt("fast"), pg.resume), 5.0),
    "redis-restart": Fault(lambda _, redis: redis.restart(pause=RESTART_PAUSE), gap=0.5),
    "redis-stopped": Fault(lambda _, redis: _stopped(redis.halt, redis.resume), gap=5.0),
}


@pytest.fixture(scope="module")
def cluster_pg() -> Iterator[Postgres]:
    with postgres_running() as server:
        yield server


@pytest.fixture(scope="module")
def aof_redis() -> Iterator[Redis]:
    with redis_running(appendonly=True) as server:
        yield server


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as running:
        yield running
        running.check()


class Sender:
    """Sends the bursts one every ``gap`` seconds in a thread; ``at_fault`` is set as burst
    ``FAULT_AT`` starts."""

    def __init__(self, url: str, pulls: list[Pull], gap: float) -> None:
        self.url = url
        self.plan = bursts(pulls, BURSTS, BURST_SIZE, repeat=2)
        self.gap = gap
        self.sent: dict[str, tuple[Pull, str, int]] = {}
        self.at_fault = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._send, name="sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(timeout=300)
        if self.errors:
            raise self.errors[0]

    def _send(self) -> None:
        try:
            for n, burst in enumerate(self.plan):
                for serial, pull in enumerate(burst.push):
                    push(pull, n * 100 + serial)
                if n == FAULT_AT:
                    self.at_fault.set()
                self.sent.update(post_burst([self.url], list(burst.items)))
                time.sleep(self.gap)
        except BaseException as exc:  # raised again by ``join``
            self.errors.append(exc)
        finally:
            self.at_fault.set()


def _stored(sessions: sessionmaker[Session]) -> dict[str, tuple[str, str | None]]:
    """Every stored delivery: id -> (status, last error)."""
    query = select(DeliveryRow.id, DeliveryRow.status, DeliveryRow.last_error)
    with sessions() as session:
        return {i: (status, error) for i, status, error in session.execute(query)}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_stored_delivery_is_done_once_soon_after_the_service_is_back(
    tmp_path: Path, fake: FakeGitHub, cluster_pg: Postgres, aof_redis: Redis, fault: str
) -> None:
    aof_redis.flush()
    database = cluster_pg.create_database("faults")
    url = cluster_pg.url(database)
    pulls = arrange(fake, PULLS)
    env = app_env(fake, url, aof_redis.url, MAX_ATTEMPTS="30")
    engine = make_engine(url)
    try:
        with Cluster(env, tmp_path) as cluster:
            starting = [cluster.worker(wait=False) for _ in range(2)]
            server = cluster.serve()
            for member in starting:
                cluster.wait_ready(member)
            sessions = init_db(engine)
            sender = Sender(server.url or "", pulls, FAULTS[fault].gap)
            sender.start()
            assert sender.at_fault.wait(120)
            # mid-burst, and mid-work: a worker holds deliveries (claimed, lease written)
            wait_until(lambda: bool(running_by_pid(sessions)), 60, "a worker to run deliveries")
            began = time.monotonic()
            FAULTS[fault].run(cluster_pg, aof_redis)
            back = time.monotonic()
            sender.join()

            def all_done() -> bool:
                stored = _stored(sessions)
                failed = {i: e for i, (s, e) in stored.items() if s == "failed"}
                assert not failed, failed
                return all(s == "done" for s, _ in stored.values())

            try:
                wait_until(all_done, timeout=2 * RECOVERY, what="every stored delivery done")
            finally:
                done = time.monotonic()
                left = Counter(s for s, _ in _stored(sessions).values() if s != "done")
                print(
                    f"\n{fault}: down for {back - began:.1f} s; every stored delivery done "
                    f"{done - back:.1f} s after it answered again"
                    + (f" (still open: {dict(left)})" if left else "")
                )
            codes = cluster.stop()
            members = list(cluster.members)
        stored = _stored(sessions)
    finally:
        engine.dispose()

    answered = Counter(status for _, _, status in sender.sent.values())
    accepted = {i for i, (_, _, status) in sender.sent.items() if status == 202}
    print(f"{fault}: answers {dict(answered)}, {len(stored)} stored")
    assert set(answered) <= {202, 503}, answered
    assert accepted <= set(stored)  # every 202 means stored
    assert set(stored) <= set(sender.sent)
    assert done - back <= RECOVERY  # the bound; the figure is printed above
    # exactly once: one "done" line per stored delivery over every process
    finished = Counter(delivery_id for delivery_id, _ in done_lines(members).elements())
    assert finished == Counter(set(stored)), finished - Counter(set(stored))
    # each PR with a stored review: one comment by the App, at most one check run per head
    reviewed = {sender.sent[i][0] for i in stored if sender.sent[i][1] in REVIEWED}
    assert reviewed
    for pull in pulls:
        with fake.state.lock:
            comments = [c for c in pull.repo.comments(pull.number) if c.app_id == fake.app_id]
            pr = pull.repo.pr(pull.number)
            heads = [c.sha for c in pull.repo.pr_commits(pr)]
            checks = [
                len([r for r in pull.repo.check_runs(sha) if r.name == CHECK_NAME]) for sha in heads
            ]
        expected = [True] if pull in reviewed else []
        assert [c.body.startswith(MARKER) for c in comments] == expected, pull.name
        assert max(checks) <= 1 and (sum(checks) >= 1) == (pull in reviewed), (pull.name, checks)
    # uvicorn stops gracefully on SIGTERM, then re-raises the signal
    assert all(code in (0, -signal.SIGTERM) for code in codes.values()), codes
