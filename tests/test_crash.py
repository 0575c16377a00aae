"""Crash safety: ``kill -9`` a real server or worker mid-work, nothing is lost or doubled.

The server runs as ``python -m bot.cli.serve serve --port 0`` (the workers as
``... worker``) with the slow test handler of ``tests/crash_handler.py`` loaded through
``EXTRA_HANDLERS``.  Every case runs on the embedded SQLite store and queue, and on
PostgreSQL + Redis (``backends``, ``tests/services.py``): the jobs then go through Redis.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import httpx
import pytest

from bot.adapters.store import deliveries
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import NewDelivery
from tests.cluster import Cluster, done_lines, running_by_pid
from tests.conftest import ROOT
from tests.crash_handler import EVENT
from tests.live import SECRET, ServerProcess, make_pem, wait_until
from tests.webhooks import fixture, signed

pytestmark = pytest.mark.servers

N = 12
WORKERS = 2


@pytest.fixture
def env(tmp_path: Path, backends: dict[str, str]) -> Iterator[dict[str, str]]:
    values = {
        k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")
    }
    values.update(
        {
            "PYTHONPATH": str(ROOT),
            "APP_ID": "4242",
            "PRIVATE_KEY": make_pem(),
            "GITHUB_API_URL": "http://127.0.0.1:9",  # never the internet (nothing listens)
            "WEBHOOK_SECRET": SECRET,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
            "EXTRA_HANDLERS": "tests.crash_handler",
            "CRASH_TEST_DB": str(tmp_path / "effects.db"),
            "WORKERS": str(WORKERS),
            "LEASE_SECONDS": "2",
        }
    )
    values.update({name.upper(): value for name, value in backends.items()})
    yield values


def _effects(path: Path) -> tuple[list[tuple[str, int, float]], dict[str, int]]:
    """What the slow handler recorded: each start (delivery, attempt, time), each completion."""
    if not path.exists():
        return [], {}
    conn = sqlite3.connect(path, timeout=30)
    try:
        started = conn.execute("SELECT delivery, attempt, at FROM started").fetchall()
        done = dict(conn.execute("SELECT delivery, attempt FROM completed").fetchall())
    except sqlite3.OperationalError:  # tables not created yet
        return [], {}
    finally:
        conn.close()
    return started, done


def test_kill_9_while_queued_and_running_then_restart(tmp_path: Path, env: dict[str, str]) -> None:
    effects = Path(env["CRASH_TEST_DB"])
    log = tmp_path / "server.log"
    # Slow handlers in the first process, so the kill catches them mid-run.
    first = ServerProcess({**env, "CRASH_TEST_SECONDS": "2"}, tmp_path, log)
    ids = []
    with httpx.Client(base_url=first.url, timeout=30) as client:
        for _ in range(N):
            body, headers = signed(EVENT, fixture("push"), SECRET)
            response = client.post("/webhook", content=body, headers=headers)
            assert response.status_code == 202, response.text
            ids.append(headers["X-GitHub-Delivery"])
    wait_until(lambda: len(_effects(effects)[0]) >= WORKERS, what="handlers to start")
    first.stop(signal.SIGKILL)

    started_before, completed_before = _effects(effects)
    interrupted = {d for d, _, _ in started_before} - set(completed_before)
    assert interrupted, "the kill must catch at least one delivery mid-run"
    assert len(completed_before) < N, "the kill must leave queued deliveries behind"

    sessions = init_db(make_engine(env["DATABASE_URL"]))
    before = {d: deliveries.get(sessions, d) for d in ids}
    assert all(d is not None for d in before.values()), "every 202 means stored"
    statuses = {d.status for d in before.values() if d is not None}
    assert statuses <= {"queued", "running", "done"} and "queued" in statuses

    second = ServerProcess({**env, "CRASH_TEST_SECONDS": "0.05"}, tmp_path, log)
    try:

        def all_done() -> bool:
            return all(
                (d := deliveries.get(sessions, i)) is not None and d.status == "done" for i in ids
            )

        wait_until(all_done, timeout=120, what="every delivery to be done after the restart")
        started, completed = _effects(effects)
        assert sorted(completed) == sorted(ids)  # each completed, recorded once
        runs: dict[str, int] = {}
        for delivery_id, _, _ in started:
            runs[delivery_id] = runs.get(delivery_id, 0) + 1
        for delivery_id in ids:
            stored = deliveries.get(sessions, delivery_id)
            assert stored is not None
            # the handler ran once per claim; only interrupted deliveries ran twice
            assert runs[delivery_id] == stored.attempts
            assert stored.attempts == (2 if delivery_id in interrupted else 1), delivery_id
        # A replay after the restart is acknowledged and not run again.
        with httpx.Client(base_url=second.url, timeout=30) as client:
            body, headers = signed(EVENT, fixture("push"), SECRET, delivery_id=ids[0])
            assert client.post("/webhook", content=body, headers=headers).status_code == 200
    finally:
        code = second.stop(signal.SIGTERM)
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal.
    assert code in (0, -signal.SIGTERM), log.read_text()[-3000:]
    assert "Application shutdown complete." in log.read_text()
    assert len(_effects(effects)[0]) == sum(runs.values())


def test_a_restart_takes_over_the_killed_servers_jobs_without_waiting_for_the_lease(
    tmp_path: Path, env: dict[str, str]
) -> None:
    lease = 600  # seconds: far longer than the test may take
    effects = Path(env["CRASH_TEST_DB"])
    log = tmp_path / "server.log"
    env = {**env, "LEASE_SECONDS": str(lease)}
    first = ServerProcess({**env, "CRASH_TEST_SECONDS": str(lease)}, tmp_path, log)
    ids = []
    with httpx.Client(base_url=first.url, timeout=30) as client:
        for _ in range(WORKERS):
            body, headers = signed(EVENT, fixture("push"), SECRET)
            assert client.post("/webhook", content=body, headers=headers).status_code == 202
            ids.append(headers["X-GitHub-Delivery"])
    wait_until(lambda: len(_effects(effects)[0]) == WORKERS, what="every handler to start")
    first.stop(signal.SIGKILL)

    sessions = init_db(make_engine(env["DATABASE_URL"]))
    held = [deliveries.get(sessions, d) for d in ids]
    assert [(d.status, d.attempts) for d in held if d is not None] == [("running", 1)] * WORKERS

    restarted = time.monotonic()
    second = ServerProcess({**env, "CRASH_TEST_SECONDS": "0"}, tmp_path, log)
    try:

        def all_done() -> bool:
            return all(
                (d := deliveries.get(sessions, i)) is not None and d.status == "done" for i in ids
            )

        wait_until(all_done, timeout=lease / 10, what="the killed server's jobs to be taken over")
        assert time.monotonic() - restarted < lease / 10
        started, completed = _effects(effects)
        assert completed == {d: 2 for d in ids}  # finished once each, by the second attempt
        assert sorted((d, a) for d, a, _ in started) == sorted(
            (d, attempt) for d in ids for attempt in (1, 2)
        )
        for delivery_id in ids:
            stored = deliveries.get(sessions, delivery_id)
            assert stored is not None and stored.attempts == 2
    finally:
        second.stop(signal.SIGTERM)
    assert "taking over the deliveries of dead workers" in log.read_text()


def test_worker_process_alone_finishes_stored_deliveries(
    tmp_path: Path, env: dict[str, str]
) -> None:
    sessions = init_db(make_engine(env["DATABASE_URL"]))
    ids = []
    for _ in range(3):  # stored by a web process that died before enqueueing them
        body, headers = signed(EVENT, fixture("push"), SECRET)
        new = NewDelivery(
            id=headers["X-GitHub-Delivery"],
            event=EVENT,
            action=None,
            installation_id=None,
            body=body.decode(),
        )
        assert deliveries.add(sessions, new).accepted
        ids.append(new.id)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.serve", "worker"],
            env={**env, "CRASH_TEST_SECONDS": "0"},
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(
                lambda: all(
                    (d := deliveries.get(sessions, i)) is not None and d.status == "done"
                    for i in ids
                ),
                timeout=120,
                what="the worker to finish the stored deliveries",
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=60)
    assert code == 0, log.read_text()[-3000:]
    assert sorted(_effects(Path(env["CRASH_TEST_DB"]))[1]) == sorted(ids)
    assert "re-enqueued 3 unfinished deliveries" in log.read_text()


def test_a_worker_killed_mid_job_is_taken_over_by_the_other_workers(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """``serve --no-workers`` and three ``worker`` processes on one queue (Redis, or the
    embedded file): a worker killed with ``kill -9`` while it runs deliveries; the others
    take them over (its lease is ``LEASE_SECONDS``; a holder known dead on this host goes
    sooner), each delivery finishes once, none is lost."""
    effects = Path(env["CRASH_TEST_DB"])
    sessions = init_db(make_engine(env["DATABASE_URL"]))
    with Cluster({**env, "CRASH_TEST_SECONDS": "1"}, tmp_path) as cluster:
        server = cluster.serve()
        workers = [cluster.worker() for _ in range(3)]
        ids = []
        with httpx.Client(base_url=server.url or "", timeout=30) as client:
            for _ in range(N):
                body, headers = signed(EVENT, fixture("push"), SECRET)
                response = client.post("/webhook", content=body, headers=headers)
                assert response.status_code == 202, response.text
                ids.append(headers["X-GitHub-Delivery"])

        def victim_busy() -> bool:
            return any(w.pid in running_by_pid(sessions) for w in workers)

        wait_until(victim_busy, timeout=60, what="a worker to run deliveries")
        victim = next(w for w in workers if w.pid in running_by_pid(sessions))
        # frozen first: what it holds cannot change until the kill
        interrupted = cluster.kill(victim, lambda w: running_by_pid(sessions).get(w.pid, set()))
        assert interrupted, "the kill must catch the worker mid-job"
        killed = time.monotonic()

        def all_done() -> bool:
            return all(
                (d := deliveries.get(sessions, i)) is not None and d.status == "done" for i in ids
            )

        wait_until(all_done, timeout=120, what="every delivery to be done")
        took = time.monotonic() - killed
        codes = cluster.stop()

    assert all(code in (0, -signal.SIGTERM) for code in codes.values()), codes  # uvicorn: -TERM
    started, completed = _effects(effects)
    assert sorted(completed) == sorted(ids)  # each completed, recorded once
    runs: dict[str, int] = {}
    for delivery_id, _, _ in started:
        runs[delivery_id] = runs.get(delivery_id, 0) + 1
    finished_by = done_lines(workers)
    assert sorted(d for d, _ in finished_by) == sorted(ids)  # one "done" line each
    assert set(finished_by.values()) == {1}
    for delivery_id in ids:
        stored = deliveries.get(sessions, delivery_id)
        assert stored is not None and stored.status == "done"
        assert runs[delivery_id] == stored.attempts, delivery_id
        assert stored.attempts == (2 if delivery_id in interrupted else 1), delivery_id
        assert completed[delivery_id] == stored.attempts
        if delivery_id in interrupted:  # finished by another worker
            assert (delivery_id, victim.name) not in finished_by
    lease = float(env["LEASE_SECONDS"])
    assert took < lease + 30, took  # taken over within the lease and a sweep, plus the work
    logs = "".join(w.log.read_text() for w in workers if w is not victim)
    assert "taking over the deliveries of dead workers" in logs


OTHER_HOST = "threshold-other-host"
# the worker in a UTS namespace of its own, named as another host: its holder name
# (``bot.app.owners``) is then one this host cannot tell dead, as a worker of another machine
ON_ANOTHER_HOST = ("unshare", "--uts", "sh", "-c", f'hostname {OTHER_HOST} && exec "$@"', "sh")


def _other_hosts_unavailable() -> str | None:
    try:
        done = subprocess.run([*ON_ANOTHER_HOST, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run a worker as another host with `unshare --uts`: {exc}"
    if done.returncode != 0:
        return f"cannot run a worker as another host (`unshare --uts` needs root): {done.stderr!r}"
    return None


def test_a_killed_worker_of_another_host_is_taken_over_once_its_lease_ran_out(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A worker this host cannot tell dead (another host name) is killed with ``kill -9`` while
    it runs deliveries: the workers here take them over only after its lease ran out, and
    finish each once."""
    reason = _other_hosts_unavailable()
    if reason:
        pytest.skip(reason)
    lease = 4.0
    env = {**env, "LEASE_SECONDS": str(lease), "CRASH_TEST_SECONDS": "1"}
    effects = Path(env["CRASH_TEST_DB"])
    sessions = init_db(make_engine(env["DATABASE_URL"]))
    with Cluster(env, tmp_path) as cluster:
        server = cluster.serve()
        victim = cluster.worker(prefix=ON_ANOTHER_HOST)
        ids = []
        with httpx.Client(base_url=server.url or "", timeout=30) as client:
            for _ in range(6):
                body, headers = signed(EVENT, fixture("push"), SECRET)
                assert client.post("/webhook", content=body, headers=headers).status_code == 202
                ids.append(headers["X-GitHub-Delivery"])
        wait_until(lambda: victim.pid in running_by_pid(sessions), 60, "the worker to run")

        def held(member: object) -> dict[str, tuple[str, float]]:
            """The victim's running deliveries: holder and lease end (epoch seconds)."""
            found = {}
            for delivery_id in running_by_pid(sessions)[victim.pid]:
                row = deliveries.get(sessions, delivery_id)
                assert row is not None
                with sessions() as session:
                    stored = session.get(deliveries.DeliveryRow, delivery_id)
                    assert stored is not None and stored.lease_until is not None
                    holder, until = stored.claimed_by or "", stored.lease_until
                found[delivery_id] = (holder, until.replace(tzinfo=UTC).timestamp())
            return found

        interrupted = cluster.kill(victim, held)
        assert interrupted and all(h.startswith(f"{OTHER_HOST}:") for h, _ in interrupted.values())
        survivors = [cluster.worker() for _ in range(2)]

        def all_done() -> bool:
            return all(
                (d := deliveries.get(sessions, i)) is not None and d.status == "done" for i in ids
            )

        wait_until(all_done, timeout=120, what="every delivery to be done")
        cluster.stop()

    started, completed = _effects(effects)
    assert sorted(completed) == sorted(ids)  # each completed, recorded once
    for delivery_id, (_, until) in interrupted.items():
        second = [at for d, attempt, at in started if d == delivery_id and attempt == 2]
        assert len(second) == 1, delivery_id  # taken over once...
        assert second[0] >= until, (second[0], until)  # ...and not before its lease ran out
        stored = deliveries.get(sessions, delivery_id)
        assert stored is not None and stored.attempts == 2
    logs = "".join(w.log.read_text() for w in survivors)
    assert "taking over the deliveries of dead workers" not in logs  # not known dead: leases
