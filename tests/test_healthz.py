"""``GET /healthz`` names the store and the queue in use and fails, in time, with either.

Real uvicorn on a free port (``tests.live.live_server``), on SQLite with the embedded
queue and on PostgreSQL with Redis (``tests/services.py``).  PostgreSQL is reached
through a TCP relay of the test's own, so the test can make it unreachable (the relay's
port closed, its connections cut) or hang (bytes held); Redis is a server of the
test's own, stopped.  The answers never carry the URLs' hosts, ports or passwords.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from bot.adapters.store.db import init_db, make_engine
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from tests.conftest import ROOT
from tests.live import live_server, make_settings
from tests.services import Postgres, Redis, redis_running

pytestmark = pytest.mark.servers

TIMEOUT = 1.0  # STORE_TIMEOUT_SECONDS of these tests
MARGIN = 3.0  # slack for a loaded machine
PASSWORD = "pw-never-shown-7d1e"


@contextmanager
def serving(tmp_path: Path, **overrides: Any) -> Iterator[tuple[httpx.Client, Runtime]]:
    """A ``serve --no-workers`` App on uvicorn with the given settings, and a client."""
    settings = make_settings(tmp_path, store_timeout_seconds=TIMEOUT, **overrides)
    runtime = build(settings)
    try:
        with (
            live_server(create_app(settings, runtime, start_workers=False)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            yield client, runtime
    finally:
        runtime.close()


def timed_health(client: httpx.Client) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = client.get("/healthz")
    return answer, time.monotonic() - started


class Relay:
    """A TCP relay from a port of 127.0.0.1 to ``target``: it can hold the bytes (the
    service hangs) or close its port and cut every connection (the service is gone)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port: int = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.accepted = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self.accepted += 1
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            self.flowing.wait()
            if not data or self.closed.is_set():
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        for sock in (src, dst):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def connections(self) -> int:
        with self._lock:
            return self.accepted

    def close(self) -> None:
        """Close the port and cut every connection: the service is unreachable."""
        self.closed.set()
        self.flowing.set()
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


@pytest.fixture
def relay(postgres: Postgres) -> Iterator[tuple[Relay, str]]:
    """A relay to the session's PostgreSQL, and the URL of a new database through it
    (with a password, which trust authentication ignores: the answers must not show it)."""
    name = postgres.create_database("healthz")
    relay = Relay(postgres.port)
    url = make_url(postgres.url(name)).set(port=relay.port, password=PASSWORD)
    try:
        yield relay, url.render_as_string(hide_password=False)
    finally:
        relay.close()
        postgres.drop_database(name)


@pytest.fixture
def own_redis() -> Iterator[Redis]:
    """A ``redis-server`` of this test's own, to stop."""
    with redis_running() as server:
        yield server


def assert_no_url_parts(text: str, url: str) -> None:
    """Neither the host, the port, the user nor the password of ``url`` is in ``text``."""
    parsed = make_url(url)
    parts = [parsed.host, str(parsed.port), parsed.username, parsed.password]
    assert all(parts), url
    for part in parts:
        assert str(part) not in text, part


# ----- SQLite and the embedded queue ---------------------------------------------------
def test_sqlite_and_the_embedded_queue_are_named(tmp_path: Path) -> None:
    with serving(tmp_path) as (client, _runtime):
        answer = client.get("/healthz")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "status": "ok",
        "store": {"engine": "sqlite", "ok": True},
        "queue": {"kind": "embedded", "ok": True},
        "workers": False,
    }


def test_a_deleted_queue_file_is_503_naming_the_queue(tmp_path: Path) -> None:
    queue_file = tmp_path / "queue.db"  # make_settings' QUEUE_PATH
    with serving(tmp_path) as (client, _runtime):
        assert client.get("/healthz").status_code == 200
        os.remove(queue_file)
        answer, took = timed_health(client)
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["reason"] == f"queue: the queue file {queue_file.resolve()} was deleted"
    assert body["store"] == {"engine": "sqlite", "ok": True}
    assert body["queue"] == {"kind": "embedded", "ok": False, "reason": body["reason"][7:]}
    assert took < TIMEOUT + MARGIN


# ----- PostgreSQL and Redis ------------------------------------------------------------
def test_postgresql_and_redis_are_named_never_their_urls(
    tmp_path: Path, relay: tuple[Relay, str], redis_server: Redis
) -> None:
    _relay, url = relay
    with serving(tmp_path, database_url=url, redis_url=redis_server.url) as (client, _runtime):
        answer = client.get("/healthz")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "status": "ok",
        "store": {"engine": "postgresql", "ok": True},
        "queue": {"kind": "redis", "ok": True},
        "workers": False,
    }


def test_redis_stopped_is_503_naming_the_queue(
    tmp_path: Path, postgres_url: str, own_redis: Redis
) -> None:
    with serving(tmp_path, database_url=postgres_url, redis_url=own_redis.url) as (client, _rt):
        assert client.get("/healthz").status_code == 200
        own_redis.stop()
        answer, took = timed_health(client)
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["status"] == "error" and body["reason"].startswith("queue: ")
    assert body["store"] == {"engine": "postgresql", "ok": True}
    assert body["queue"]["kind"] == "redis" and body["queue"]["ok"] is False
    assert "PING" in body["queue"]["reason"]
    assert took < TIMEOUT + MARGIN
    assert "127.0.0.1" not in answer.text and str(own_redis.port) not in answer.text


def test_postgresql_unreachable_is_503_naming_the_store_in_time(
    tmp_path: Path, relay: tuple[Relay, str], redis_server: Redis
) -> None:
    through, url = relay
    with serving(tmp_path, database_url=url, redis_url=redis_server.url) as (client, _rt):
        assert client.get("/healthz").status_code == 200
        through.close()  # its port is closed now: nothing listens there
        answer, took = timed_health(client)
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["reason"].startswith("store: could not take a write: ")
    assert body["store"]["engine"] == "postgresql" and body["store"]["ok"] is False
    assert body["queue"] == {"kind": "redis", "ok": True}
    assert took < TIMEOUT + MARGIN
    assert_no_url_parts(answer.text, url)


def test_postgresql_hanging_is_503_in_time_and_one_probe_waits(
    tmp_path: Path, relay: tuple[Relay, str], redis_server: Redis
) -> None:
    through, url = relay
    with serving(tmp_path, database_url=url, redis_url=redis_server.url) as (client, _rt):
        assert client.get("/healthz").status_code == 200
        through.flowing.clear()  # PostgreSQL receives nothing more, answers nothing
        opened = through.connections()
        answers = [timed_health(client) for _ in range(3)]
        for answer, took in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json()["reason"] == f"store: did not take a write within {TIMEOUT:g} s"
            assert answer.json()["queue"] == {"kind": "redis", "ok": True}
            assert TIMEOUT <= took < TIMEOUT + MARGIN
        assert through.connections() == opened  # the later requests started no new write
        through.flowing.set()
        assert client.get("/healthz").status_code == 200


# ----- the worker container's check: python -m bot.app.health -------------------------
def run_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m bot.app.health`` with only ``env`` as settings (no ``.env``: run in
    ``tmp_path``)."""
    keep = {k: v for k, v in os.environ.items() if not k.isupper() or k in ("PATH", "HOME")}
    return subprocess.run(
        [sys.executable, "-m", "bot.app.health"],
        cwd=tmp_path,
        env={**keep, "PYTHONPATH": str(ROOT), "STORE_TIMEOUT_SECONDS": str(TIMEOUT), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_worker_check_runs_the_probes_once(
    tmp_path: Path, postgres_url: str, own_redis: Redis
) -> None:
    engine = make_engine(postgres_url)
    init_db(engine)  # what `threshold-bot db upgrade` did before the workers start
    engine.dispose()
    settings = {"DATABASE_URL": postgres_url, "REDIS_URL": own_redis.url}
    passed = run_check(tmp_path, **settings)
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout) == {
        "status": "ok",
        "store": {"engine": "postgresql", "ok": True},
        "queue": {"kind": "redis", "ok": True},
    }
    own_redis.stop()
    failed = run_check(tmp_path, **settings)
    assert failed.returncode == 1, failed.stderr
    body = json.loads(failed.stdout)
    assert body["reason"].startswith("queue: ") and body["store"]["ok"] is True
