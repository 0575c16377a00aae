"""Bounds of the webhook intake: unverified bodies, a store that is locked, deleted or full.

Real uvicorn on a free port, real SQLite; requests go over raw sockets where a test
needs to stop half-way through a body.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.adapters.store import deliveries
from bot.adapters.store.group_commit import GroupCommit
from bot.app import intake
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from tests.live import SECRET, Recorder, live_server, make_settings, wait_until
from tests.webhooks import signed, signed_fixture

pytestmark = pytest.mark.servers

SIZE = 100 * 1024  # each unverified body
BUDGET = 256 * 1024  # MAX_UNVERIFIED_BYTES of these tests: two bodies fit, not three
HEAD = 1024  # the part of a body sent before the answer is read
STORE_TIMEOUT = 1.0
MARGIN = 4.0  # slack for a loaded machine; GitHub gives up after 10 s
UNSIGNED = "sha256=" + "0" * 64


@dataclass
class Live:
    url: str
    port: int
    client: httpx.Client
    runtime: Runtime
    recorder: Recorder
    db: Path


@contextmanager
def serving(tmp_path: Path, **overrides: Any) -> Iterator[Live]:
    settings = make_settings(tmp_path, workers=1, **overrides)
    recorder = Recorder(("pull_request", ("opened", "synchronize")))
    runtime = build(settings, router=recorder.router)
    try:
        with (
            live_server(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            port = httpx.URL(url).port
            assert port is not None
            yield Live(url, port, client, runtime, recorder, tmp_path / "bot.db")
    finally:
        runtime.close()


def _head(length: int | None, signature: str = UNSIGNED) -> bytes:
    """The request line and headers of an unsigned delivery of ``length`` bytes."""
    size = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return (
        "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: d-unverified\r\n"
        f"X-Hub-Signature-256: {signature}\r\n{size}\r\n\r\n"
    ).encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """The status and headers of the answer read from ``sock`` (its body is skipped)."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        if not got:
            raise AssertionError(f"connection closed after {data!r}")
        data += got
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    status_line, *lines = head.split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
    return int(status_line.split()[1]), headers


def _gauge(live: Live) -> float:
    text = live.client.get("/metrics").text
    found = re.search(r"^threshold_bot_webhook_unverified_bytes (\S+)$", text, re.M)
    assert found is not None
    return float(found.group(1))


def _rejected(live: Live, status: int) -> float:
    text = live.client.get("/metrics").text
    pattern = rf'^threshold_bot_deliveries_rejected_total{{status="{status}"}} (\S+)$'
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def _connect(live: Live) -> socket.socket:
    return socket.create_connection(("127.0.0.1", live.port), timeout=30)


def test_unverified_bodies_beyond_the_budget_are_503_before_being_read(tmp_path: Path) -> None:
    fit = BUDGET // SIZE
    body = b"x" * SIZE
    with serving(tmp_path, max_unverified_bytes=BUDGET, max_body_bytes=4 * BUDGET) as live:
        held = [_connect(live) for _ in range(fit)]
        refused = [_connect(live) for _ in range(3)]
        try:
            for sock in held:  # their reservations cover the whole declared size
                sock.sendall(_head(SIZE) + body[:HEAD])
            wait_until(lambda: _gauge(live) == fit * SIZE, what="the bodies to be reserved")
            for sock in refused:
                sock.sendall(_head(SIZE) + body[:HEAD])
                status, headers = _answer(sock)  # answered with most of the body unsent
                assert status == 503
                assert int(headers["retry-after"]) >= 1
            for sock in held:
                sock.sendall(body[HEAD:])
                assert _answer(sock)[0] == 401
        finally:
            for sock in held + refused:
                sock.close()
        assert _gauge(live) == 0
        assert _rejected(live, 503) == len(refused)
        assert _rejected(live, 401) == fit
        signed_body, headers = signed_fixture("pull_request.opened", SECRET)
        assert live.client.post("/webhook", content=signed_body, headers=headers).status_code == 202
        assert deliveries.get(live.runtime.sessions, headers["X-GitHub-Delivery"]) is not None


def test_a_chunked_body_is_reserved_as_it_arrives(tmp_path: Path) -> None:
    chunk = b"y" * (16 * 1024)
    left = BUDGET - SIZE  # what the budget has once the first body is reserved
    with serving(tmp_path, max_unverified_bytes=BUDGET, max_body_bytes=4 * BUDGET) as live:
        with _connect(live) as first, _connect(live) as chunked:
            first.sendall(_head(SIZE) + b"x" * HEAD)
            wait_until(lambda: _gauge(live) == SIZE, what="the first body to be reserved")
            chunked.sendall(_head(None))
            sent = 0
            while sent <= left:  # the budget runs out somewhere in here
                chunked.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
            assert _answer(chunked)[0] == 503
            assert _gauge(live) == SIZE  # the chunked body's reservation was given back
        wait_until(lambda: _gauge(live) == 0, what="the first body's reservation to end")


def test_a_body_that_does_not_arrive_in_time_is_408(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "BODY_SECONDS", 0.5)
    with serving(tmp_path, max_unverified_bytes=BUDGET) as live:
        with _connect(live) as slow:
            slow.sendall(_head(SIZE) + b"x" * HEAD)  # and nothing more
            assert _answer(slow)[0] == 408
        assert _gauge(live) == 0


def _heartbeat(db: Path) -> datetime | None:
    with closing(sqlite3.connect(db, timeout=30)) as conn:
        row = conn.execute("SELECT at FROM heartbeat").fetchone()
    return None if row is None else datetime.fromisoformat(row[0])


def test_healthz_writes_a_heartbeat(tmp_path: Path) -> None:
    with serving(tmp_path) as live:
        before = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(seconds=1)
        health = live.client.get("/healthz")
        assert health.status_code == 200, health.text
        assert health.json() == {
            "status": "ok",
            "store": {"engine": "sqlite", "ok": True},
            "queue": {"kind": "embedded", "ok": True},
            "workers": True,
        }
        beat = _heartbeat(live.db)
        assert beat is not None and beat >= before


def test_a_locked_store_is_503_in_time_and_the_redelivery_is_stored(tmp_path: Path) -> None:
    body, headers = signed_fixture("pull_request.opened", SECRET)
    delivery_id = headers["X-GitHub-Delivery"]
    with serving(tmp_path, store_timeout_seconds=STORE_TIMEOUT) as live:
        locker = sqlite3.connect(live.db, timeout=0, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            started = time.monotonic()
            response = live.client.post("/webhook", content=body, headers=headers)
            assert response.status_code == 503, response.text
            assert time.monotonic() - started < STORE_TIMEOUT + MARGIN
            assert response.headers["Retry-After"] == str(round(STORE_TIMEOUT))
            started = time.monotonic()
            health = live.client.get("/healthz")
            assert health.status_code == 503 and health.json()["status"] == "error"
            assert time.monotonic() - started < STORE_TIMEOUT + MARGIN
            time.sleep(STORE_TIMEOUT)  # the intake's write has given up by now
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert deliveries.get(live.runtime.sessions, delivery_id) is None
        again = live.client.post("/webhook", content=body, headers=headers)  # GitHub's Redeliver
        assert again.status_code == 202, again.text

        def ran() -> bool:
            found = deliveries.get(live.runtime.sessions, delivery_id)
            return found is not None and found.status == "done"

        wait_until(ran, what="the redelivered delivery to run")
        assert live.recorder.ids() == [delivery_id]
        assert live.client.get("/healthz").status_code == 200


def test_a_deleted_store_file_is_503_on_webhook_and_healthz(tmp_path: Path) -> None:
    with serving(tmp_path) as live:
        body, headers = signed_fixture("pull_request.opened", SECRET)
        assert live.client.post("/webhook", content=body, headers=headers).status_code == 202
        os.remove(live.db)
        body, headers = signed_fixture("pull_request.synchronize", SECRET)
        response = live.client.post("/webhook", content=body, headers=headers)
        assert response.status_code == 503, response.text
        health = live.client.get("/healthz")
        assert health.status_code == 503
        assert live.db.name in health.json()["reason"]


def test_healthz_is_503_without_room_for_the_largest_delivery(tmp_path: Path) -> None:
    largest = 2 * shutil.disk_usage(tmp_path).free + 2**30  # more than the disk has free
    with serving(tmp_path, max_body_bytes=largest) as live:
        health = live.client.get("/healthz")
        assert health.status_code == 503
        assert "full" in health.json()["reason"]
        assert _heartbeat(live.db) is None  # refused before writing


def test_group_commit_leaves_out_callers_that_gave_up_before_their_batch() -> None:
    entered = threading.Event()
    release = threading.Event()
    calls: list[list[int]] = []

    def store(items: list[int]) -> list[int]:
        calls.append(list(items))
        entered.set()
        assert release.wait(30)
        return items

    async def scenario() -> list[int]:
        with ThreadPoolExecutor(1) as pool:
            committer: GroupCommit[int, int] = GroupCommit(store, executor=pool)
            first = asyncio.ensure_future(committer.submit(0))
            assert await asyncio.to_thread(entered.wait, 30)  # batch [0] is being stored
            gave_up = asyncio.ensure_future(committer.submit(1))
            kept = asyncio.ensure_future(committer.submit(2))
            await asyncio.sleep(0)
            gave_up.cancel()  # as a timed-out answer does
            release.set()
            return list(await asyncio.gather(first, kept))

    assert asyncio.run(scenario()) == [0, 2]
    assert calls == [[0], [2]]


def test_a_body_larger_than_the_unverified_budget_is_413(tmp_path: Path) -> None:
    with serving(tmp_path, max_unverified_bytes=BUDGET, max_body_bytes=4 * BUDGET) as live:
        payload = {"action": "opened", "padding": "z" * BUDGET}
        body, headers = signed("pull_request", payload, SECRET)
        assert BUDGET < len(body) < 4 * BUDGET
        response = live.client.post("/webhook", content=body, headers=headers)
        assert response.status_code == 413
