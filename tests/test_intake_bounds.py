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
# a budget of 256 KiB with no rate to keep: the tests of the budget alone, whatever the load
SMALL_BUDGET: dict[str, Any] = {
    "max_unverified_bytes": BUDGET,
    "max_body_bytes": 4 * BUDGET,
    "body_min_bytes_per_second": 0,
}


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


def _head(length: int | None, signature: str = UNSIGNED, forwarded_for: str = "") -> bytes:
    """The request line and headers of an unsigned delivery of ``length`` bytes (sent for
    ``forwarded_for`` by a proxy on this host, if given)."""
    size = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    proxy = f"X-Forwarded-For: {forwarded_for}\r\n" if forwarded_for else ""
    return (
        "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: d-unverified\r\n"
        f"X-Hub-Signature-256: {signature}\r\n{proxy}{size}\r\n\r\n"
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


def _connect(live: Live, peer: str = "127.0.0.1") -> socket.socket:
    """A connection to the server from the loopback address ``peer`` (127.0.0.0/8: each
    address is another client to the server)."""
    return socket.create_connection(("127.0.0.1", live.port), timeout=30, source_address=(peer, 0))


def _post_timed(live: Live, name: str) -> tuple[int, float]:
    """POST the signed fixture ``name`` (a delivery of normal size); its status and the
    seconds to the answer."""
    body, headers = signed_fixture(name, SECRET)
    started = time.monotonic()
    response = live.client.post("/webhook", content=body, headers=headers)
    return response.status_code, time.monotonic() - started


def test_unverified_bytes_beyond_the_budget_are_503_as_they_arrive(tmp_path: Path) -> None:
    fit = BUDGET // SIZE
    body = b"x" * SIZE
    with serving(tmp_path, **SMALL_BUDGET) as live:
        held = [_connect(live, f"127.0.0.{2 + i}") for i in range(fit)]
        refused = [_connect(live, f"127.0.0.{10 + i}") for i in range(3)]
        try:
            for sock in held:  # all but the last byte: what has arrived is counted
                sock.sendall(_head(SIZE) + body[:-1])
            wait_until(lambda: _gauge(live) == fit * (SIZE - 1), what="the bodies to arrive")
            for sock in refused:
                sock.sendall(_head(SIZE) + body[:-1])
                status, headers = _answer(sock)  # answered before its last byte was sent
                assert status == 503
                assert int(headers["retry-after"]) >= 1
            for sock in held:
                sock.sendall(body[-1:])
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


def test_a_slow_body_flood_at_the_budget_leaves_signed_deliveries_their_room(
    tmp_path: Path,
) -> None:
    mib = 1024 * 1024
    with serving(tmp_path) as live:  # the defaults: a 64 MiB budget, 25 MiB bodies at most
        budget = live.runtime.settings.max_unverified_bytes
        assert budget == 64 * mib
        # the reported attack: three clients declare 25 + 25 + 14 MiB and send one byte
        declared = [_connect(live, f"127.0.0.{2 + i}") for i in range(3)]
        # then a flood that sends what it declares, up to the part of the budget any body
        # may use, four clients with 12 MiB each, and stalls
        share = budget - budget // 4
        part = share // 4
        sending = [_connect(live, f"127.0.0.{5 + i}") for i in range(4)]
        flood = declared + sending
        try:
            for sock, size in zip(declared, (25 * mib, 25 * mib, 14 * mib), strict=True):
                sock.sendall(_head(size) + b"x")
            wait_until(lambda: _gauge(live) == 3, what="the one byte of each to arrive")
            answers = [_post_timed(live, "pull_request.opened") for _ in range(5)]
            assert [status for status, _ in answers] == [202] * 5
            assert [_answer(sock)[0] for sock in declared] == [408] * 3  # cut: too slow
            for sock in sending:
                sock.sendall(_head(25 * mib) + b"x" * part)
            wait_until(lambda: _gauge(live) == 4 * part, what="the flood to arrive")
            answers += [_post_timed(live, "pull_request.synchronize") for _ in range(5)]
            assert [status for status, _ in answers] == [202] * 10
            assert max(seconds for _, seconds in answers) < 1.0
            with _connect(live, "127.0.0.9") as late:  # the budget's open part is spent
                late.sendall(_head(25 * mib) + b"x" * (2 * mib))
                assert _answer(late)[0] == 503
        finally:
            for sock in flood:
                sock.close()
        wait_until(lambda: _gauge(live) == 0, what="the flood's bytes to be given back")


def test_a_chunked_body_is_counted_as_it_arrives(tmp_path: Path) -> None:
    chunk = b"y" * (16 * 1024)
    left = BUDGET - 2 * SIZE  # what the budget has once two bodies have arrived
    with serving(tmp_path, **SMALL_BUDGET) as live:
        firsts = [_connect(live, f"127.0.0.{2 + i}") for i in range(2)]
        try:
            for sock in firsts:
                sock.sendall(_head(SIZE + 1) + b"x" * SIZE)
            wait_until(lambda: _gauge(live) == 2 * SIZE, what="the first bodies to arrive")
            with _connect(live, "127.0.0.4") as chunked:
                chunked.sendall(_head(None))
                sent = 0
                while sent <= left:  # the budget runs out somewhere in here
                    chunked.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                    sent += len(chunk)
                assert _answer(chunked)[0] == 503
                assert _gauge(live) == 2 * SIZE  # the chunked body's bytes were given back
        finally:
            for sock in firsts:
                sock.close()
        wait_until(lambda: _gauge(live) == 0, what="the first bodies' bytes to be given back")


def test_one_client_holds_at_most_its_share(tmp_path: Path) -> None:
    share = BUDGET // 2  # UNVERIFIED_PEER_SHARE 0.5
    part = share * 3 // 4  # two of these from one client are over its share, not the budget's
    body = b"x" * part
    with serving(tmp_path, **SMALL_BUDGET) as live:
        with (
            _connect(live, "127.0.0.2") as first,
            _connect(live, "127.0.0.2") as second,
            _connect(live, "127.0.0.3") as other,
        ):
            first.sendall(_head(part) + body[:-1])
            wait_until(lambda: _gauge(live) == part - 1, what="the first body to arrive")
            second.sendall(_head(part) + body[:-1])
            status, headers = _answer(second)
            assert status == 429
            assert int(headers["retry-after"]) >= 1
            assert _gauge(live) == part - 1  # the refused body's bytes were given back
            other.sendall(_head(part) + body[:-1])  # another client still has room
            wait_until(lambda: _gauge(live) == 2 * (part - 1), what="the other body to arrive")
            for sock in (first, other):
                sock.sendall(body[-1:])
                assert _answer(sock)[0] == 401
        assert _gauge(live) == 0
        assert _rejected(live, 429) == 1


def test_the_addresses_of_one_ipv6_network_are_one_client(tmp_path: Path) -> None:
    part = BUDGET // 2 * 3 // 4  # two of these are over one client's share
    body = b"x" * part
    with serving(tmp_path, **SMALL_BUDGET) as live:  # behind a proxy on this host
        with _connect(live) as first, _connect(live) as second, _connect(live) as other:
            first.sendall(_head(part, forwarded_for="2001:db8:1:2::1") + body[:-1])
            wait_until(lambda: _gauge(live) == part - 1, what="the first body to arrive")
            second.sendall(_head(part, forwarded_for="2001:db8:1:2:ffff::9") + body[:-1])
            assert _answer(second)[0] == 429  # another address of the same /64
            other.sendall(_head(part, forwarded_for="2001:db8:1:3::1") + body[:-1])
            wait_until(lambda: _gauge(live) == 2 * (part - 1), what="the other body to arrive")
            for sock in (first, other):
                sock.sendall(body[-1:])
                assert _answer(sock)[0] == 401
        assert _rejected(live, 429) == 1


def test_a_body_arriving_too_slowly_is_cut_with_408_and_a_steady_one_is_not(
    tmp_path: Path,
) -> None:
    rate, grace = 4096, 0.5  # bytes/s; seconds
    signed_body, headers = signed_fixture("pull_request.opened", SECRET)
    steady = rate * 4  # bytes/s, well above the rate
    steady_seconds = len(signed_body) / steady
    assert steady_seconds > 2 * grace  # still arriving long after the grace period
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    signed_head = (
        f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(signed_body)}\r\n"
        f"{head}\r\n"
    ).encode()
    settings = {"body_min_bytes_per_second": rate, "body_grace_seconds": grace}
    with serving(tmp_path, **settings) as live:
        with _connect(live, "127.0.0.2") as slow, _connect(live, "127.0.0.3") as fine:
            started = time.monotonic()
            slow.sendall(_head(SIZE) + b"x" * 512)
            slow.settimeout(0.05)
            status = 0
            while not status:  # 100 bytes each 0.1 s: 1,000 bytes/s
                try:
                    status = _answer(slow)[0]
                except TimeoutError:
                    slow.sendall(b"x" * 100)
                    time.sleep(0.05)
            cut_after = time.monotonic() - started
            assert status == 408
            # cut once the average fell behind the rate after the grace, long before the
            # 10 s any body has
            assert cut_after < intake.BODY_SECONDS / 2
            assert _rejected(live, 408) == 1
            step = 1024
            for at in range(0, len(signed_body), step):
                fine.sendall((signed_head if at == 0 else b"") + signed_body[at : at + step])
                time.sleep(step / steady)
            assert _answer(fine)[0] == 202
        assert deliveries.get(live.runtime.sessions, headers["X-GitHub-Delivery"]) is not None
        assert _rejected(live, 408) == 1


def test_a_large_signed_delivery_gets_through_when_nothing_else_is_happening(
    tmp_path: Path,
) -> None:
    size = 5 * 1024 * 1024
    payload = {"action": "opened", "padding": "z" * size}
    body, headers = signed("pull_request", payload, SECRET)
    with serving(tmp_path) as live:  # the default limits
        response = live.client.post("/webhook", content=body, headers=headers)
        assert response.status_code == 202, response.text
        stored = deliveries.get(live.runtime.sessions, headers["X-GitHub-Delivery"])
        assert stored is not None and len(stored.body) == len(body)
        assert _gauge(live) == 0


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
        # the lock waits for a write of the server's own (a heartbeat, a periodic job) to end
        locker = sqlite3.connect(live.db, timeout=30, isolation_level=None)
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
            if locker.in_transaction:
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
