"""``bot.adapters.locks`` on every backend: lock rows (SQLite and PostgreSQL), PostgreSQL
advisory locks and Redis, between real processes (``tests/lock_holder.py``)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis import Redis
from sqlalchemy import update

from bot.adapters.locks import Gone, Locks, make_locks
from bot.adapters.locks.postgres import AdvisoryLocks, lock_key
from bot.adapters.locks.redis import PREFIX, RedisLocks
from bot.adapters.locks.rows import RowLocks
from bot.adapters.settings import Settings
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.locks import LockRow
from bot.app import owners
from tests.conftest import ROOT
from tests.lock_holder import KINDS, open_locks

pytestmark = pytest.mark.servers

TTL = 1.5  # seconds a Redis or row lease lasts unrenewed in these tests
MARGIN = 5.0  # seconds of slack for a loaded machine on an upper bound of a wait


@dataclass
class Backend:
    """A lock backend under test: its kind and URL, as ``tests.lock_holder`` takes them."""

    kind: str
    url: str
    opened: list[Locks]

    def locks(self, holder: str = "tests", ttl: float = TTL, gone: Gone | None = None) -> Locks:
        found = open_locks(self.kind, self.url, holder, ttl, gone)
        self.opened.append(found)
        return found

    def child(self, *args: str, ttl: float = TTL) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "tests.lock_holder", self.kind, self.url, str(ttl)]
        return subprocess.Popen(
            [*command, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )

    @property
    def expires(self) -> bool:
        """Whether a dead holder's lock waits for its TTL (not advisory locks)."""
        return self.kind != "advisory"


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    if kind == "rows-sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    elif kind == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        url = server.url
    else:
        url = request.getfixturevalue("postgres_url")
    found = Backend(kind, url, [])
    yield found
    for locks in found.opened:
        locks.close()


def name() -> str:
    return f"test:{uuid.uuid4().hex[:8]}"


def test_processes_hold_a_lock_one_at_a_time(backend: Backend) -> None:
    lock = name()
    children = [backend.child("cycle", lock, "4", "0.15") for _ in range(3)]
    held: list[tuple[float, float]] = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        held += [(float(a), float(b)) for _, a, b in (line.split() for line in out.splitlines())]
    assert len(held) == 12
    held.sort()
    for (_, end), (start, _) in itertools.pairwise(held):
        assert start >= end, f"two processes held {lock} at once: {held}"


def test_a_held_lease_outlives_its_ttl(backend: Backend) -> None:
    lock = name()
    mine, other = backend.locks("a"), backend.locks("b")
    lease = mine.acquire(lock)
    assert lease is not None
    time.sleep(TTL * 2.5)  # renewed in the background meanwhile
    assert other.acquire(lock) is None
    assert not lease.lost
    lease.release()
    assert other.acquire(lock) is not None


def test_a_killed_holders_lock_is_taken_over(backend: Backend) -> None:
    lock = name()
    child = backend.child("hold", lock)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "acquired"
        locks = backend.locks("survivor")
        assert locks.acquire(lock) is None
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        # an expiring lease outlives its dead holder by what was left of its TTL (renewed
        # every TTL/3; how much is left depends on when the holder last ran)
        outlived = not backend.expires or locks.acquire(lock) is None
        lease = locks.acquire(lock, wait=TTL + MARGIN)
        waited = time.monotonic() - killed
    finally:
        child.kill()
        child.wait()
    assert lease is not None and outlived
    if backend.expires:
        assert waited < TTL + MARGIN
    else:  # PostgreSQL ends the dead connection's session, and its locks, at once
        assert waited < 1.0


def test_a_dead_holder_on_this_host_loses_its_lock_at_once(backend: Backend) -> None:
    """What a worker does after a crash on its host: the dead process's locks are free
    now, not after their TTL (as its deliveries are, ``Supervisor.recover``)."""
    lock = name()
    child = backend.child("hold", lock, ttl=60.0)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "acquired"
        survivor = backend.locks("survivor", ttl=60.0, gone=owners.is_gone)
        assert survivor.acquire(lock) is None  # alive: held
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        lease = survivor.acquire(lock, wait=10.0)
        waited = time.monotonic() - killed
    finally:
        child.kill()
        child.wait()
    assert lease is not None
    assert waited < 5.0  # the child's lease had about a minute left (none: advisory)
    other = backend.locks("other", gone=owners.is_gone)
    assert other.acquire(lock) is None  # the survivor, alive, keeps it


def test_a_wait_is_respected(backend: Backend) -> None:
    lock = name()
    holder, waiter = backend.locks("a"), backend.locks("b")
    lease = holder.acquire(lock)
    assert lease is not None
    started = time.monotonic()
    assert waiter.acquire(lock, wait=0.5) is None
    assert 0.5 <= time.monotonic() - started < 0.5 + MARGIN

    threading.Timer(0.5, lease.release).start()
    started = time.monotonic()
    second = waiter.acquire(lock, wait=0.5 + 2 * MARGIN)
    assert second is not None
    assert 0.5 <= time.monotonic() - started < 0.5 + MARGIN  # not the whole wait


def test_a_lease_released_twice_frees_no_one_elses_lock(backend: Backend) -> None:
    lock = name()
    first, second, third = backend.locks("a"), backend.locks("b"), backend.locks("c")
    lease = first.acquire(lock)
    assert lease is not None
    lease.release()
    theirs = second.acquire(lock)
    assert theirs is not None
    lease.release()
    assert third.acquire(lock) is None
    theirs.release()
    assert third.acquire(lock) is not None


def _take_over(backend: Backend, lock: str) -> None:
    """Give ``lock`` to another holder behind its lease's back (what a holder that paused past
    its TTL finds when it wakes)."""
    if backend.kind == "redis":
        Redis.from_url(backend.url).set(PREFIX + lock, "intruder")
        return
    sessions = init_db(make_engine(backend.url))
    with sessions.begin() as session:
        session.execute(update(LockRow).where(LockRow.name == lock).values(holder="intruder"))


def test_a_lease_taken_over_is_lost_and_its_release_frees_nothing(backend: Backend) -> None:
    if not backend.expires:
        pytest.skip("an advisory lock cannot be taken from a live session")
    lock = name()
    lease = backend.locks("a").acquire(lock)
    assert lease is not None
    _take_over(backend, lock)
    deadline = time.monotonic() + TTL + MARGIN  # lost at its next renewal, every TTL/3
    while not lease.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease.lost
    lease.release()
    assert backend.locks("c").acquire(lock) is None  # still the intruder's


def test_an_advisory_lock_is_released_only_by_its_session(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    locks = AdvisoryLocks(engine)
    lease = locks.acquire("pull:octo/ml#7")
    try:
        assert lease is not None
        with engine.connect() as other:  # another session's unlock frees nothing
            found = other.exec_driver_sql(
                "SELECT pg_advisory_unlock(%(k)s)", {"k": lock_key("pull:octo/ml#7")}
            ).scalar()
            assert found is False
        assert locks.acquire("pull:octo/ml#7") is None
    finally:
        if lease is not None:
            lease.release()
        locks.close()
        engine.dispose()


def test_lock_keys_are_stable_signed_64_bit_hashes() -> None:
    assert lock_key("periodic:recheck") == lock_key("periodic:recheck")
    keys = {lock_key(f"pull:octo/ml#{n}") for n in range(1000)}
    assert len(keys) == 1000
    assert all(-(2**63) <= k < 2**63 for k in keys)


def test_make_locks_follows_the_store(tmp_path: Path, postgres_url: str) -> None:
    sqlite = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    init_db(sqlite, upgrade=True)
    postgres = make_engine(postgres_url)
    redis_url = "redis://127.0.0.1:1/0"  # never connected to: SET is not sent here
    chosen = [
        make_locks(Settings(redis_url=None), sqlite, "h"),
        make_locks(Settings(redis_url=redis_url), sqlite, "h"),
        make_locks(Settings(redis_url=redis_url), postgres, "h"),
    ]
    assert [type(c) for c in chosen] == [RowLocks, RedisLocks, AdvisoryLocks]
    for c in chosen:
        c.close()
    sqlite.dispose()
    postgres.dispose()
