"""The intake's mechanisms: what it reads of a payload, the gate that holds workers back,
and the group commit."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.adapters.store import deliveries
from bot.adapters.store.deliveries import NewDelivery
from bot.adapters.store.group_commit import GroupCommit
from bot.app.intake import parse_delivery
from bot.app.intake_gate import IntakeGate
from bot.app.routes import app_router
from bot.app.runtime import build
from bot.core.routing import skip_reason
from tests.live import make_settings
from tests.webhooks import event_of, fixture, fixture_names, new_delivery_id

pytestmark = pytest.mark.servers

LONG = 30.0  # generous bound for a loaded CI machine; reached only on failure
SHORT = 0.2  # a max_wait the tests run out on purpose


def _waiter(gate: IntakeGate) -> tuple[threading.Thread, threading.Event, list[bool]]:
    done = threading.Event()
    result: list[bool] = []

    def wait() -> None:
        result.append(gate.wait_quiet())
        done.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, done, result


def test_gate_is_open_when_no_request_is_in_flight() -> None:
    gate = IntakeGate(quiet=0.0, max_wait=LONG)
    assert gate.wait_quiet() is True
    with gate.request():
        assert gate.active == 1
    assert gate.active == 0
    assert gate.wait_quiet() is True


def test_gate_holds_workers_back_until_the_last_request_finishes() -> None:
    gate = IntakeGate(quiet=0.0, max_wait=SHORT)
    gate.enter()
    gate.enter()
    started = time.monotonic()
    assert gate.wait_quiet() is False  # two requests in flight: held back all of max_wait
    assert time.monotonic() - started >= SHORT
    gate.leave()
    assert gate.wait_quiet() is False  # one still in flight
    gate.max_wait = 2 * LONG
    thread, done, result = _waiter(gate)
    gate.leave()
    assert done.wait(LONG)  # let go by the last request, long before max_wait runs out
    assert result == [True]
    thread.join(LONG)


def test_gate_gives_way_after_max_wait_so_workers_never_starve() -> None:
    gate = IntakeGate(quiet=0.0, max_wait=SHORT)
    gate.enter()  # never leaves
    thread, done, result = _waiter(gate)
    assert done.wait(LONG)
    assert result == [False]
    thread.join(LONG)


def test_gate_waits_for_the_quiet_period_after_a_request() -> None:
    gate = IntakeGate(quiet=LONG, max_wait=SHORT)
    with gate.request():
        pass
    assert gate.wait_quiet() is False  # the last request ended less than ``quiet`` ago


def test_group_commit_stores_one_turns_items_in_one_call() -> None:
    calls: list[list[int]] = []
    handed_on: list[list[tuple[int, int]]] = []
    answered: list[int] = []

    def store(items: list[int]) -> list[int]:
        calls.append(list(items))
        return [i * 10 for i in items]

    def after(stored: list[tuple[int, int]]) -> None:
        assert len(answered) == len(stored)  # every caller had its answer first
        handed_on.append(stored)

    committer: GroupCommit[int, int] = GroupCommit(store, after)

    async def caller(i: int) -> int:
        result = await committer.submit(i)
        answered.append(i)
        return result

    async def burst() -> list[int]:
        return await asyncio.gather(*(caller(i) for i in range(20)))

    assert asyncio.run(burst()) == [i * 10 for i in range(20)]
    assert calls == [list(range(20))]
    assert committer.batches == 1
    assert handed_on == [[(i, i * 10) for i in range(20)]]


def test_group_commit_batches_what_arrives_while_a_batch_is_stored() -> None:
    calls: list[list[int]] = []

    def store(items: list[int]) -> list[int]:
        calls.append(list(items))
        return items

    committer: GroupCommit[int, int] = GroupCommit(store)

    async def later(i: int) -> int:
        await asyncio.sleep(0)  # one turn later: the next batch
        return await committer.submit(i)

    async def two_turns() -> list[int]:
        return list(
            await asyncio.gather(committer.submit(0), committer.submit(1), later(2), later(3))
        )

    assert asyncio.run(two_turns()) == [0, 1, 2, 3]
    assert calls == [[0, 1], [2, 3]]


def test_group_commit_failure_reaches_every_caller_and_nothing_is_handed_on() -> None:
    handed_on: list[object] = []

    def store(items: list[int]) -> list[int]:
        raise OSError("disk full")

    committer: GroupCommit[int, int] = GroupCommit(store, handed_on.append)

    async def burst() -> list[int | BaseException]:
        return await asyncio.gather(
            *(committer.submit(i) for i in range(3)), return_exceptions=True
        )

    results = asyncio.run(burst())
    assert [type(r) for r in results] == [OSError] * 3
    assert handed_on == []


def _new(status: deliveries.Status = "queued", delivery_id: str | None = None) -> NewDelivery:
    payload = fixture("pull_request.closed")
    return NewDelivery(
        id=delivery_id or new_delivery_id(),
        event="pull_request",
        action=payload["action"],
        installation_id=payload["installation"]["id"],
        body=json.dumps(payload),
        status=status,
        outcome="no handler" if status == "ignored" else None,
    )


def test_record_many_matches_record_one_by_one(tmp_path: Path, database_url: str) -> None:
    rt = build(make_settings(tmp_path, database_url=database_url))
    try:
        fresh = [_new(), _new(), _new("ignored")]
        got = deliveries.add_many(rt.sessions, fresh)
        assert [(r.accepted, r.status, r.duplicate) for r in got] == [
            (True, "queued", False),
            (True, "queued", False),
            (True, "ignored", False),
        ]
        assert deliveries.count_by_status(rt.sessions) == {"queued": 2, "ignored": 1}
        failed = fresh[0].id
        deliveries.fail(rt.sessions, failed, "PermanentError: x")
        again = _new()
        # an id already stored (failed: re-opened), one stored and open, one new twice
        mixed = [_new(delivery_id=failed), fresh[1], again, again]
        got = deliveries.add_many(rt.sessions, mixed)
        assert [(r.accepted, r.status, r.duplicate) for r in got] == [
            (True, "queued", True),
            (False, "queued", True),
            (True, "queued", False),
            (False, "queued", True),
        ]
        assert deliveries.count_by_status(rt.sessions) == {"queued": 3, "ignored": 1}
        late = _new()  # a new id alongside a stored one: the batch insert fails, then one by one
        got = deliveries.add_many(rt.sessions, [late, fresh[2]])
        assert [(r.accepted, r.status, r.duplicate) for r in got] == [
            (True, "queued", False),
            (False, "ignored", True),
        ]
        assert deliveries.count_by_status(rt.sessions) == {"queued": 4, "ignored": 1}
        stored = deliveries.get(rt.sessions, again.id)
        assert stored is not None and json.loads(stored.body) == fixture("pull_request.closed")
    finally:
        rt.close()


@pytest.mark.parametrize("kind", ["intake", "workers"])
def test_only_the_workers_connections_checkpoint_soon(tmp_path: Path, kind: str) -> None:
    rt = build(make_settings(tmp_path))
    intake = deliveries.intake_sessions(rt.sessions)
    try:
        sessions = intake if kind == "intake" else rt.sessions
        with sessions.kw["bind"].connect() as conn:
            pages = conn.execute(text("PRAGMA wal_autocheckpoint")).scalar()
            mode = conn.execute(text("PRAGMA journal_mode")).scalar()
        expected = deliveries.INTAKE_CHECKPOINT_PAGES if kind == "intake" else 1000
        assert (pages, mode) == (expected, "wal")
        new = _new()
        assert deliveries.add_many(intake, [new])[0].accepted
        assert deliveries.get(rt.sessions, new.id) is not None  # same database
    finally:
        intake.kw["bind"].dispose()
        rt.close()


def test_group_commit_in_a_thread_batches_what_arrives_meanwhile() -> None:
    entered = threading.Event()
    release = threading.Event()
    calls: list[list[int]] = []
    committed: list[list[int]] = []  # the batches ``store`` has returned, in order
    handed_on: list[list[tuple[int, int]]] = []
    answered: list[tuple[int, bool]] = []  # each item, and whether it was committed when answered

    def store(items: list[int]) -> list[int]:
        calls.append(list(items))
        entered.set()
        assert release.wait(LONG)
        committed.append(list(items))
        return [-i for i in items]

    def on_answer(item: int) -> Callable[[asyncio.Future[int]], None]:
        return lambda _: answered.append((item, any(item in batch for batch in committed)))

    async def scenario() -> list[int]:
        with ThreadPoolExecutor(1) as pool:
            committer: GroupCommit[int, int] = GroupCommit(store, handed_on.append, pool)
            first = asyncio.ensure_future(committer.submit(0))
            first.add_done_callback(on_answer(0))
            assert await asyncio.to_thread(entered.wait, LONG)  # batch [0] is being stored
            rest = [asyncio.ensure_future(committer.submit(i)) for i in (1, 2, 3)]
            for i, later in zip((1, 2, 3), rest, strict=True):
                later.add_done_callback(on_answer(i))
            release.set()
            results = await asyncio.gather(first, *rest)
            await asyncio.sleep(0)  # the hand-on runs after the answers
            return list(results)

    assert asyncio.run(scenario()) == [0, -1, -2, -3]
    assert calls == [[0], [1, 2, 3]]
    assert sorted(answered) == [(i, True) for i in range(4)]  # none answered before its commit
    assert [pair for batch in handed_on for pair in batch] == [(i, -i) for i in range(4)]


APP_ID = 4242
ODD_PAYLOADS: list[tuple[str, object]] = [  # shapes GitHub does not send, and the App's own
    ("pull_request", {"action": "opened", "pull_request": "not an object"}),
    ("pull_request", {"action": ["opened"], "installation": 7, "sender": "someone"}),
    ("issue_comment", {"action": "created", "issue": None, "comment": {"body": "x"}}),
    (
        "issue_comment",
        {"action": "created", "comment": {"performed_via_github_app": {"id": APP_ID}}},
    ),
    (
        "check_run",
        {
            "action": "rerequested",
            "sender": {"login": "threshold-bot[bot]", "type": "Bot"},
            "check_run": {"app": {"id": APP_ID, "slug": "threshold-bot"}},
            "installation": {"id": 11},
        },
    ),
    (
        "pull_request",
        {"action": "opened", "check_suite": [], "issue": {"performed_via_github_app": 1}},
    ),
]


@pytest.mark.parametrize("login", [None, "threshold-bot[bot]"])
def test_the_fields_the_intake_reads_decide_as_the_whole_payload_would(login: str | None) -> None:
    router = app_router(())
    cases = [(event_of(name), fixture(name)) for name in fixture_names()] + ODD_PAYLOADS
    for event, payload in cases:
        body = json.dumps(payload).encode()
        got = parse_delivery(event, "d-1", body)
        assert isinstance(payload, dict)
        action = payload.get("action")
        installation = payload.get("installation")
        assert got.delivery.action == (action if isinstance(action, str) else None)
        expected_id = installation.get("id") if isinstance(installation, dict) else None
        assert got.delivery.installation_id == expected_id
        assert got.delivery.body == body.decode()
        whole = skip_reason(router, event, payload, login, APP_ID)
        assert skip_reason(router, event, got.payload, login, APP_ID) == whole, (event, payload)
