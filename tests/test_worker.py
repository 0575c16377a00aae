"""Workers: retries with backoff, permanent failures, claims, leases and recovery."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from github import GithubException, RateLimitExceededException
from huey import RedisHuey, SqliteHuey

from bot.adapters.queue import make_huey
from bot.adapters.store import deliveries
from bot.adapters.store.deliveries import NewDelivery
from bot.app import owners
from bot.app.runtime import Runtime, build
from bot.core.history.sources import HistoryNotFound, HistoryUnavailable
from bot.core.retry import PermanentError, TransientError, backoff_delay, is_transient
from bot.features.context import HandlerContext
from tests.conftest import ROOT
from tests.live import Recorder, make_settings, wait_until
from tests.webhooks import fixture, new_delivery_id

pytestmark = pytest.mark.servers


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(("pull_request", ()), ("check_run", ()))


@pytest.fixture
def runtime(tmp_path: Path, recorder: Recorder, database_url: str) -> Iterator[Runtime]:
    rt = build(make_settings(tmp_path, database_url=database_url), router=recorder.router)
    yield rt
    rt.close()


def _store(rt: Runtime, name: str = "pull_request.opened", delivery_id: str | None = None) -> str:
    payload = fixture(name)
    new = NewDelivery(
        id=delivery_id or new_delivery_id(),
        event=name.split(".")[0],
        action=payload.get("action"),
        installation_id=(payload.get("installation") or {}).get("id"),
        body=json.dumps(payload),
    )
    assert deliveries.add(rt.sessions, new).accepted
    return new.id


def _finished(rt: Runtime, delivery_id: str) -> deliveries.Delivery:
    def done() -> bool:
        d = deliveries.get(rt.sessions, delivery_id)
        return d is not None and d.status in ("done", "failed")

    wait_until(done, what=f"{delivery_id} to finish")
    found = deliveries.get(rt.sessions, delivery_id)
    assert found is not None
    return found


def test_transient_errors_are_retried_then_succeed(runtime: Runtime, recorder: Recorder) -> None:
    recorder.fail_with += [GithubException(502, {"message": "Bad Gateway"}), TransientError("x")]
    runtime.start_workers()
    delivery_id = _store(runtime)
    runtime.queue.enqueue(delivery_id)
    done = _finished(runtime, delivery_id)
    assert done.status == "done"
    assert done.attempts == 3
    assert done.last_error == "TransientError: x"  # the last failure is kept for the record
    assert [c[3] for c in recorder.calls] == [1, 2, 3]  # attempt numbers seen by the handler


def test_transient_errors_give_up_after_max_attempts(runtime: Runtime, recorder: Recorder) -> None:
    attempts = runtime.settings.max_attempts
    recorder.fail_with += [HistoryUnavailable("W&B is down")] * (attempts + 2)
    runtime.start_workers()
    delivery_id = _store(runtime)
    runtime.queue.enqueue(delivery_id)
    failed = _finished(runtime, delivery_id)
    assert failed.status == "failed"
    assert failed.attempts == attempts
    assert failed.last_error == "HistoryUnavailable: W&B is down"
    assert len(recorder.calls) == attempts


def test_permanent_errors_fail_at_once(runtime: Runtime, recorder: Recorder) -> None:
    recorder.fail_with.append(GithubException(404, {"message": "Not Found"}))
    runtime.start_workers()
    delivery_id = _store(runtime)
    runtime.queue.enqueue(delivery_id)
    failed = _finished(runtime, delivery_id)
    assert (failed.status, failed.attempts) == ("failed", 1)
    assert failed.last_error is not None and failed.last_error.startswith("GithubException: 404")


def test_error_classification() -> None:
    secondary = RateLimitExceededException(
        403, {"message": "You have exceeded a secondary rate limit."}, {"retry-after": "60"}
    )
    assert is_transient(secondary)
    assert is_transient(GithubException(500, {"message": "oops"}))
    assert is_transient(GithubException(429, {"message": "slow down"}))
    assert is_transient(GithubException(403, {"message": "secondary rate limit"}))
    assert is_transient(HistoryUnavailable("timeout"))
    assert is_transient(ConnectionResetError())
    assert not is_transient(GithubException(403, {"message": "Resource not accessible"}))
    assert not is_transient(GithubException(422, {"message": "Validation Failed"}))
    assert not is_transient(HistoryNotFound("no such project"))
    assert not is_transient(PermanentError("GitHub says 5xx but we know better"))
    assert not is_transient(KeyError("head"))


def test_backoff_is_exponential_and_capped() -> None:
    rng = random.Random(7)
    for attempt in range(1, 12):
        expected = min(300.0, 10.0 * 2 ** (attempt - 1))
        delay = backoff_delay(attempt, 10.0, 300.0, jitter=0.1, rng=rng)
        assert expected * 0.9 <= delay <= expected * 1.1
    assert backoff_delay(3, 10.0, 300.0, jitter=0.0) == 40.0


def test_a_delivery_enqueued_many_times_runs_once(runtime: Runtime, recorder: Recorder) -> None:
    delivery_id = _store(runtime)
    for _ in range(5):
        runtime.queue.enqueue(delivery_id)
    sentinel = _store(runtime, "check_run.rerequested")
    runtime.queue.enqueue(sentinel)
    runtime.start_workers()
    _finished(runtime, sentinel)
    assert _finished(runtime, delivery_id).attempts == 1
    wait_until(lambda: runtime.queue.pending() == 0, what="queue to drain")
    assert sorted(recorder.ids()) == sorted([delivery_id, sentinel])


def test_claims_are_exclusive_until_the_lease_runs_out(runtime: Runtime) -> None:
    delivery_id = _store(runtime)
    first = deliveries.claim(runtime.sessions, delivery_id, "worker-a", lease=60)
    assert first is not None and first.status == "running" and first.attempts == 1
    assert deliveries.claim(runtime.sessions, delivery_id, "worker-b", lease=60) is None
    assert [d.id for d in deliveries.recoverable(runtime.sessions)] == []
    expired = _store(runtime)
    assert deliveries.claim(runtime.sessions, expired, "worker-dead", lease=0.001) is not None
    time.sleep(0.01)  # let the tiny lease run out
    assert [d.id for d in deliveries.recoverable(runtime.sessions)] == [expired]
    taken = deliveries.claim(runtime.sessions, expired, "worker-b", lease=60)
    assert taken is not None and taken.attempts == 2
    deliveries.finish(runtime.sessions, delivery_id)
    assert deliveries.claim(runtime.sessions, delivery_id, "worker-b", lease=60) is None


def test_recovery_reenqueues_open_deliveries(
    tmp_path: Path, recorder: Recorder, database_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=database_url)
    first = build(settings, router=recorder.router)
    queued = [_store(first) for _ in range(3)]  # stored, never enqueued (crash before enqueue)
    retry = _store(first)
    deliveries.schedule_retry(first.sessions, retry, "TransientError: later", datetime.now(UTC))
    done = _store(first)
    deliveries.finish(first.sessions, done)
    first.close()
    # A new process: recovery finds everything open in the table.
    second = build(settings, router=recorder.router)
    try:
        second.start_workers()
        for delivery_id in [*queued, retry]:
            assert _finished(second, delivery_id).status == "done"
        assert sorted(recorder.ids()) == sorted([*queued, retry])
    finally:
        second.close()


NAME_ITSELF = "import sys; from bot.app import owners; print(owners.current(), flush=True)"


def _other_process(state: str) -> tuple[str, subprocess.Popen[str]]:
    """Another Python process's lease-holder name; the process is then ``alive`` (until its
    stdin is closed), ``exited`` and reaped (no process has its pid), or a ``zombie``
    (exited, its exit status not yet collected)."""
    code = NAME_ITSELF + ("; sys.stdin.read()" if state == "alive" else "")
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    name = proc.stdout.readline().strip()
    if state == "exited":
        assert proc.wait(timeout=60) == 0
    elif state == "zombie":
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited; left unreaped
    return name, proc


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="holders are told apart by /proc")
def test_recovery_takes_over_at_once_from_dead_processes_on_this_host(runtime: Runtime) -> None:
    dead, _ = _other_process("exited")
    zombie, unreaped = _other_process("zombie")
    alive, living = _other_process("alive")
    try:
        me = owners.current()
        parsed = owners.Owner.parse(dead)
        assert parsed is not None and (parsed.host, parsed.space) == (me.host, me.space)
        holders = {
            "dead": dead,
            "zombie": zombie,
            "pid reused": str(replace(me, start=str(int(me.start) + 1))),  # our pid, not us
            "alive": alive,
            "other host": str(replace(parsed, host=f"not-{me.host}")),
            "other pid space": str(replace(parsed, space="another-boot/4026531836")),
            "not a name": "worker-7",
        }
        ids = {}
        for what, holder in holders.items():
            ids[what] = _store(runtime)
            claimed = deliveries.claim(runtime.sessions, ids[what], holder, lease=600)
            assert claimed is not None and claimed.attempts == 1

        taken = {"dead", "zombie", "pid reused"}
        assert runtime.supervisor.recover() == len(taken)  # well within every lease

        for what, delivery_id in ids.items():
            stored = deliveries.get(runtime.sessions, delivery_id)
            assert stored is not None
            assert stored.status == ("queued" if what in taken else "running"), what
        runtime.start_workers()
        for what in taken:
            assert _finished(runtime, ids[what]).attempts == 2
    finally:
        assert living.stdin is not None
        living.stdin.close()
        living.wait(timeout=60)
        unreaped.wait(timeout=60)


def test_long_handlers_keep_their_lease(tmp_path: Path) -> None:
    release = threading.Event()
    started = threading.Event()
    runs: list[str] = []
    recorder = Recorder()

    @recorder.router.register("pull_request")
    def slow(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        runs.append(ctx.delivery.id)
        started.set()
        release.wait(timeout=30)

    rt = build(make_settings(tmp_path, lease_seconds=0.6), router=recorder.router)
    try:
        rt.start_workers()
        delivery_id = _store(rt)
        rt.queue.enqueue(delivery_id)
        assert started.wait(timeout=30)
        deadline = time.monotonic() + 2.0  # > 3 leases: renewal keeps others out
        while time.monotonic() < deadline:
            assert deliveries.claim(rt.sessions, delivery_id, "intruder", lease=60) is None
            time.sleep(0.05)
        release.set()
        assert _finished(rt, delivery_id).status == "done"
        assert runs == [delivery_id]
    finally:
        release.set()
        rt.close()


def test_a_delivery_this_process_holds_and_no_thread_runs_is_put_back_once(
    tmp_path: Path, database_url: str
) -> None:
    """A claim that committed as its connection dropped (the thread never learnt it had the
    delivery) leaves it running under this live process: its lease is not renewed for ever,
    the supervisor puts it back and it runs once; one a thread runs is left alone."""
    release = threading.Event()
    runs: list[str] = []
    recorder = Recorder()

    @recorder.router.register("pull_request")
    def slow(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        runs.append(ctx.delivery.id)
        release.wait(timeout=30)

    settings = make_settings(tmp_path, database_url=database_url, lease_seconds=600)
    rt = build(settings, router=recorder.router)
    try:
        owner, sessions = rt.worker.owner, rt.sessions
        rt.start_workers()
        running = _store(rt)
        rt.queue.enqueue(running)
        wait_until(lambda: runs == [running], what="a thread to run the first delivery")
        orphan = _store(rt)
        assert deliveries.claim(sessions, orphan, owner, lease=600) is not None
        assert rt.worker.in_hand() == {running}
        assert deliveries.renew_leases(sessions, owner, 600, rt.worker.in_hand()) == 1
        assert rt.supervisor.release_orphans() == 1
        wait_until(lambda: runs == [running, orphan], what="the orphan to run again")
        assert rt.supervisor.release_orphans() == 0  # both are in hand now
        release.set()
        for delivery_id in (running, orphan):
            assert _finished(rt, delivery_id).status == "done"
        stored = deliveries.get(sessions, orphan)
        assert stored is not None and stored.attempts == 2  # the lost claim, and this run
    finally:
        release.set()
        rt.close()


def test_a_non_object_payload_fails_without_retry(runtime: Runtime) -> None:
    new = NewDelivery(
        id="bad-1", event="pull_request", action=None, installation_id=None, body="[]"
    )
    assert deliveries.add(runtime.sessions, new).accepted
    runtime.worker.run("bad-1")
    stored = deliveries.get(runtime.sessions, "bad-1")
    assert stored is not None and (stored.status, stored.attempts) == ("failed", 1)
    assert stored.last_error == "PermanentError: payload is not a JSON object"


def test_queue_backend_follows_the_settings(tmp_path: Path) -> None:
    embedded = make_huey(make_settings(tmp_path, queue_path=None))
    assert isinstance(embedded, SqliteHuey)
    assert embedded.storage.filename == str(tmp_path / "bot-queue.db")
    shared = make_huey(make_settings(tmp_path, redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(shared, RedisHuey)  # connects lazily: nothing is contacted here


def test_enqueue_many_runs_each_delivery_once_on_every_worker(
    runtime: Runtime, recorder: Recorder
) -> None:
    ids = [_store(runtime) for _ in range(6)]
    runtime.queue.enqueue_many(ids)
    assert runtime.queue.pending() == 1  # one job for the lot
    runtime.start_workers()
    for delivery_id in ids:
        assert _finished(runtime, delivery_id).attempts == 1
    wait_until(lambda: runtime.queue.pending() == 0, what="queue to drain")
    assert sorted(recorder.ids()) == sorted(ids)


def test_workers_start_no_job_while_a_webhook_is_in_flight(
    runtime: Runtime, recorder: Recorder
) -> None:
    hold = 1.0  # the gate's max_wait: how long a worker gives way to a request in flight
    runtime.gate.max_wait = hold
    ran = threading.Event()
    seen: list[tuple[float, int]] = []  # when the handler ran, and the requests then in flight

    @recorder.router.register("check_run")
    def record(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        seen.append((time.monotonic(), runtime.gate.active))
        ran.set()

    runtime.start_workers()
    runtime.gate.enter()  # a webhook request being answered
    try:
        delivery_id = _store(runtime, "check_run.rerequested")
        sent = time.monotonic()
        runtime.queue.enqueue(delivery_id)
        assert ran.wait(timeout=60)  # the worker gave way once max_wait ran out
        ((at, in_flight),) = seen
        assert in_flight == 1 and at - sent >= hold  # held back until then
    finally:
        runtime.gate.leave()
    assert _finished(runtime, delivery_id).status == "done"
    assert recorder.ids() == [delivery_id]
