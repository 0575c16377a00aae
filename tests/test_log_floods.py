"""A service down does not flood the log (issue 27, item 8).

A real cluster (``tests/cluster.py``: ``serve --no-workers`` and one ``worker``, on a
PostgreSQL cluster and a Redis server of the test's own, ``tests/services.py``) has Redis,
then PostgreSQL, stopped for ``OUTAGE`` seconds while a load balancer polls ``/healthz`` and
GitHub sends signed deliveries.  Repeats of one error (same logger, level, message template
and exception type) are logged at most ``BURST`` times per ``LOG_REPEAT_SECONDS`` in full,
then once as a summary with their count (``bot.app.logs``): so every kind of line is
bounded by the number of windows the outage spans, the bytes per second by that times a
line's size, and the summary with the count comes after the service is back, once the
window ends.  Lines about one delivery (its 503) are one per delivery, never summarised, their
traceback only among the first.  The loops that met the service down backed off: the
consumer threads' failed reads of Redis, the periodic scheduler's looks at the store.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.adapters.queue import READ_RETRY_MAX_SECONDS, READ_RETRY_SECONDS
from bot.app.periodic import FAILED_MAX_SECONDS, TICK_SECONDS
from tests.cluster import Cluster, Member, app_env
from tests.crash_handler import EVENT
from tests.live import SECRET, make_pem, wait_until
from tests.services import (
    Postgres,
    Redis,
    postgres_missing,
    redis_missing,
    start_postgres,
    start_redis,
    unavailable,
)
from tests.webhooks import fixture, signed

pytestmark = [pytest.mark.servers, pytest.mark.timeout(400)]

INTERVAL = 10.0  # LOG_REPEAT_SECONDS
BURST = 1  # LOG_REPEAT_BURST
OUTAGE = 20.0
THREADS = 2  # the worker's consumer threads (WORKERS, its default)
WINDOWS = math.ceil(OUTAGE / INTERVAL) + 1  # windows an outage can touch
KINDS = 16  # kinds of warning a process writes in an outage (measured: 2 to 11, GitHub unreachable)
LINE = 4096  # the largest line, a traceback included (measured: about 3,300 bytes)
SUBJECTS = {"delivery", "job", "period"}  # fields of a line about one delivery or period
SUMMARY = re.compile(r"\(repeated (\d+) times in the last (\d+) s\)$")


@dataclass
class World:
    cluster: Cluster
    serve: Member
    worker: Member
    postgres: Postgres
    redis: Redis


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    reason = postgres_missing() or redis_missing()
    if reason:
        unavailable(reason)
    postgres, redis = start_postgres(), start_redis()
    world = None
    try:
        env = app_env(
            None,
            postgres.url(postgres.create_database("flood")),
            redis.url,
            APP_ID="4242",
            PRIVATE_KEY=make_pem(),
            GITHUB_API_URL="http://127.0.0.1:9",  # never the internet
            EXTRA_HANDLERS="tests.crash_handler",  # the deliveries sent: queued, then run
            CRASH_TEST_DB=str(tmp_path / "effects.db"),
            CRASH_TEST_SECONDS="0",
            LEASE_SECONDS="3",  # the supervisor's sweep every second
            RECHECK_SECONDS="4",  # periods start during the outage
            STORE_TIMEOUT_SECONDS="1",
            LOG_REPEAT_SECONDS=str(INTERVAL),
            LOG_REPEAT_BURST=str(BURST),
        )
        with Cluster(env, tmp_path) as cluster:
            world = World(cluster, cluster.serve(), cluster.worker(), postgres, redis)
            yield world
            cluster.stop()
    finally:
        (world.redis if world is not None else redis).stop()
        postgres.stop()


def _traffic(url: str, stop: threading.Event, sent: list[str]) -> None:
    """A load balancer's /healthz twice a second, and a signed delivery every second."""
    with httpx.Client(base_url=url, timeout=10) as client:
        n = 0
        while not stop.wait(0.5):
            n += 1
            try:
                client.get("/healthz")
                if n % 2 == 0:
                    body, headers = signed(EVENT, fixture("push"), SECRET)
                    sent.append(headers["X-GitHub-Delivery"])
                    client.post("/webhook", content=body, headers=headers)
            except httpx.HTTPError:
                pass  # the answer does not matter here, the log does


def _records(member: Member, start: int, end: int | None = None) -> list[dict[str, Any]]:
    """``member``'s log lines between two offsets, each with its size (``_bytes``)."""
    data = member.log.read_bytes()[start:end]
    return [{**json.loads(line), "_bytes": len(line) + 1} for line in data.splitlines()]


def _kind(record: dict[str, Any]) -> tuple[str, str, str]:
    """A line's kind as a reader sees it: logger, level, message with its numbers blanked."""
    message = SUMMARY.sub("(repeated)", str(record["msg"]))
    return str(record["logger"]), str(record["level"]), re.sub(r"\d+", "N", message)


def _outage(world: World, stop: Callable[[], None], start: Callable[[], None]) -> dict[str, Any]:
    """Stop a service for ``OUTAGE`` seconds under traffic; what the processes logged then."""
    members = (world.serve, world.worker)
    assert world.serve.url is not None
    halt, sent = threading.Event(), list[str]()
    before = {m.name: m.log.stat().st_size for m in members}
    stop()
    began = time.monotonic()
    traffic = threading.Thread(target=_traffic, args=(world.serve.url, halt, sent))
    traffic.start()
    try:
        time.sleep(OUTAGE)
    finally:
        halt.set()
        traffic.join()
    after = {m.name: m.log.stat().st_size for m in members}
    seconds = time.monotonic() - began
    start()
    recovered = time.monotonic()
    written = sum(after[name] - before[name] for name in after)
    records = {m.name: _records(m, before[m.name], after[m.name]) for m in members}
    return {
        "bytes_per_s": written / seconds,
        "records": records,
        "sent": sent,
        "before": before,
        "recovered": recovered,
    }


def _check_bounded(outage: dict[str, Any]) -> None:
    """Each kind of warning or error: ``BURST`` lines in full and a summary per window; a
    line about one delivery: one per delivery, its traceback only among the first ones."""
    kinds_seen, largest, lines_of_subjects = 0, 0, 0
    for name, records in outage["records"].items():
        errors = [r for r in records if r["level"] in ("warning", "error", "critical")]
        repeats = Counter(_kind(r) for r in errors if not SUBJECTS & set(r))
        assert len(repeats) <= KINDS, (name, repeats)
        flooding = {k: n for k, n in repeats.items() if n > (BURST + 1) * WINDOWS}
        assert not flooding, (name, flooding)
        own = Counter(str(r["delivery"]) for r in errors if "delivery" in r)
        assert set(own) <= set(outage["sent"]) and set(own.values()) <= {1}, own
        subjects = [r for r in errors if SUBJECTS & set(r)]
        tracebacks = Counter(_kind(r) for r in subjects if "exc" in r)
        assert all(n <= BURST * WINDOWS for n in tracebacks.values()), (name, tracebacks)
        kinds_seen += len(repeats) + len(tracebacks)
        lines_of_subjects += len(subjects)
        largest = max([largest, *(r["_bytes"] for r in records)])
    # the bound: every kind's lines in full and its summary in every window the outage
    # touched, at the largest line's size; a short line about each delivery or period
    bound = kinds_seen * (BURST * largest + 1024) * WINDOWS / OUTAGE
    bound += lines_of_subjects * 1024 / OUTAGE
    print(f"log: {outage['bytes_per_s']:,.0f} B/s during the outage (bound {bound:,.0f})")
    assert outage["bytes_per_s"] < bound


def _said(world: World, outage: dict[str, Any], logger: str, message: str) -> list[Any]:
    """Once every window of the outage has ended: the worker's lines of ``logger`` saying
    ``message`` since the outage began, in full and in summaries."""
    wait_until(
        lambda: time.monotonic() > outage["recovered"] + INTERVAL + 2,
        timeout=INTERVAL + 30,
        what="the windows of the outage to end",
    )
    return [
        r
        for r in _records(world.worker, outage["before"][world.worker.name])
        if r["logger"] == logger and str(r["msg"]).startswith(message)
    ]


def _tries(lines: list[dict[str, Any]]) -> int:
    """How many times it was said: the lines in full and the counts of the summaries."""
    return sum(int(r.get("repeated", 1)) for r in lines)


def test_redis_down_does_not_flood_the_log(world: World) -> None:
    outage = _outage(world, world.redis.halt, world.redis.resume)
    _check_bounded(outage)

    lines = _said(world, outage, "huey.consumer.Worker", "Error reading from queue")
    # the first failure to read the queue in full, with its traceback
    assert lines[0]["msg"] == "Error reading from queue" and "ConnectionError" in lines[0]["exc"]
    # once Redis is back, the last window's repeats are summarised with their count
    summary = lines[-1]
    match = SUMMARY.search(summary["msg"])
    assert match is not None and summary["msg"].startswith("Error reading from queue (repeated")
    assert summary["repeated"] == int(match[1]) >= 1 and int(match[2]) <= INTERVAL + 1
    assert "exc" not in summary
    # each consumer thread backs off between reads: at most this many in the outage
    doubling = math.log2(READ_RETRY_MAX_SECONDS / READ_RETRY_SECONDS) + 1
    bound = THREADS * (OUTAGE / (0.9 * READ_RETRY_MAX_SECONDS) + doubling + 1)
    print(f"reads of the queue failed: {_tries(lines)} (bound {bound:.0f})")
    assert _tries(lines) <= bound


def test_postgresql_down_does_not_flood_the_log(world: World) -> None:
    outage = _outage(world, world.postgres.halt, world.postgres.resume)
    _check_bounded(outage)

    swept = _said(world, outage, "bot.app.worker", "supervisor sweep failed")
    assert "OperationalError" in swept[0]["exc"]
    assert swept[-1]["msg"].startswith("supervisor sweep failed (repeated")
    # the periodic jobs' scheduler backs off while it cannot claim a period
    looked = _said(world, outage, "bot.app.periodic", "periodic scheduler check failed")
    doubling = math.log2(FAILED_MAX_SECONDS / TICK_SECONDS) + 1
    bound = OUTAGE / (0.9 * FAILED_MAX_SECONDS) + doubling + 1
    print(f"looks at the periodic jobs failed: {_tries(looked)} (bound {bound:.0f})")
    assert 1 <= _tries(looked) <= bound
