"""A service down does not flood the log (issue 27, item 8).

A real cluster (``tests/cluster.py``: ``serve --no-workers`` and one ``worker``, on a
PostgreSQL cluster and a Redis server of the test's own, ``tests/services.py``) has Redis,
then PostgreSQL, stopped for ``OUTAGE`` seconds while a load balancer polls ``/healthz`` and
GitHub sends signed deliveries.  Repeats of one error (same logger, level, message template
and exception type) are logged at most ``BURST`` times per ``LOG_REPEAT_SECONDS`` in full,
then once as a summary with their count (``bot.app.logs``): so every kind of line is
bounded by the number of windows the outage spans, the bytes per second by that times a
line's size, and the summary with the count comes after the service is back, once the
window ends.  Lines about one delivery (its 503) are one per delivery, never summarised.
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

from tests.cluster import Cluster, Member, app_env
from tests.crash_handler import EVENT
from tests.live import SECRET, make_pem, wait_until
from tests.outages import restart_postgres, restart_redis, stop_postgres, stop_redis
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
WINDOWS = math.ceil(OUTAGE / INTERVAL) + 1  # windows an outage can touch
KINDS = 8  # kinds of line a process may repeat during one outage (measured: 2 to 4)
LINE = 4096  # the largest line, a traceback included (measured: about 3,300 bytes)
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
    data = member.log.read_bytes()[start:end]
    return [json.loads(line) for line in data.decode().splitlines()]


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
    written = sum(after[name] - before[name] for name in after)
    records = {m.name: _records(m, before[m.name], after[m.name]) for m in members}
    return {"bytes_per_s": written / seconds, "records": records, "sent": sent, "before": before}


def _check_bounded(outage: dict[str, Any]) -> None:
    # the bound: each kind of line BURST times in full and one summary per window touched
    bound = 2 * KINDS * (BURST + 1) * WINDOWS * LINE / OUTAGE
    bound += len(outage["sent"]) * 600 / OUTAGE  # one line per delivery refused
    print(f"log: {outage['bytes_per_s']:,.0f} B/s during the outage (bound {bound:,.0f})")
    for name, records in outage["records"].items():
        kinds = Counter(_kind(r) for r in records if "delivery" not in r)
        assert len(kinds) <= KINDS, (name, kinds)
        flooding = {k: n for k, n in kinds.items() if n > (BURST + 1) * WINDOWS}
        assert not flooding, (name, flooding)
        per_delivery = Counter(str(r["delivery"]) for r in records if "delivery" in r)
        assert set(per_delivery) <= set(outage["sent"]) and set(per_delivery.values()) <= {1}
    assert outage["bytes_per_s"] < bound


def _summary_after(member: Member, offset: int, logger: str) -> list[dict[str, Any]]:
    """The summaries of ``logger``'s repeats ``member`` wrote past ``offset``."""
    return [
        r
        for r in _records(member, offset)
        if r["logger"] == logger and SUMMARY.search(str(r["msg"]))
    ]


def test_redis_down_does_not_flood_the_log(world: World) -> None:
    def back() -> None:
        world.redis = restart_redis(world.redis)

    outage = _outage(world, lambda: stop_redis(world.redis), back)
    worker = outage["records"][world.worker.name]
    # the first failure to read the queue in full, with its traceback
    first = next(r for r in worker if r["logger"] == "huey.consumer.Worker")
    assert first["msg"] == "Error reading from queue" and "ConnectionError" in first["exc"]
    _check_bounded(outage)

    # once Redis is back, the window's repeats are summarised with their count
    offset = outage["before"][world.worker.name]
    found: list[dict[str, Any]] = []

    def summarised() -> bool:
        found[:] = _summary_after(world.worker, offset, "huey.consumer.Worker")
        return bool(found)

    wait_until(summarised, timeout=INTERVAL + 30, what="the summary of the repeats")
    match = SUMMARY.search(found[-1]["msg"])
    assert match is not None and int(match[1]) >= 1 and int(match[2]) <= INTERVAL + 1
    assert found[-1]["msg"].startswith("Error reading from queue (repeated")
    assert found[-1]["repeated"] == int(match[1]) and "exc" not in found[-1]


def test_postgresql_down_does_not_flood_the_log(world: World) -> None:
    outage = _outage(
        world, lambda: stop_postgres(world.postgres), lambda: restart_postgres(world.postgres)
    )
    _check_bounded(outage)
    offset = outage["before"][world.worker.name]
    found: list[dict[str, Any]] = []

    def summarised() -> bool:
        found[:] = _summary_after(world.worker, offset, "bot.app.worker")
        return bool(found)

    wait_until(summarised, timeout=INTERVAL + 30, what="the summary of the repeats")
    assert found[-1]["msg"].startswith("supervisor sweep failed (repeated")
