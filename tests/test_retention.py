"""Retention of deliveries: finished ones are purged, open ones kept; ignored ones bodiless."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from bot.adapters.store import deliveries
from bot.adapters.store.deliveries import NewDelivery
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from tests.live import SECRET, Recorder, live_server, make_settings
from tests.webhooks import fixture, new_delivery_id, signed_fixture

pytestmark = pytest.mark.servers

RETENTION_DAYS = 30.0
HOUR = timedelta(hours=1)


@pytest.fixture
def runtime(tmp_path: Path, database_url: str) -> Iterator[Runtime]:
    settings = make_settings(
        tmp_path, database_url=database_url, delivery_retention_days=RETENTION_DAYS
    )
    rt = build(settings)
    yield rt
    rt.close()


def _store(rt: Runtime, status: deliveries.Status, age: timedelta) -> str:
    """A delivery brought to ``status``, received (and finished) ``age`` ago; its id."""
    if status == "ignored":
        new = NewDelivery(new_delivery_id(), "push", None, 1, "", "ignored", "no handler")
    else:
        body = json.dumps(fixture("pull_request.opened"))
        new = NewDelivery(new_delivery_id(), "pull_request", "opened", 1, body)
    deliveries.add(rt.sessions, new)
    if status not in ("queued", "ignored"):
        assert deliveries.claim(rt.sessions, new.id, "test-worker", lease=60) is not None
    if status == "done":
        deliveries.finish(rt.sessions, new.id)
    elif status == "failed":
        deliveries.fail(rt.sessions, new.id, "PermanentError: x")
    elif status == "retry":
        deliveries.schedule_retry(rt.sessions, new.id, "TransientError: x", datetime.now(UTC))
    then = datetime.now(UTC).replace(tzinfo=None) - age
    table = deliveries.DeliveryRow.__table__
    row = table.c.id == new.id
    with rt.engine.begin() as conn:
        conn.execute(update(table).where(row).values(received_at=then, updated_at=then))
        finished = row & table.c.finished_at.is_not(None)
        conn.execute(update(table).where(finished).values(finished_at=then))
    return new.id


def _purge_job(rt: Runtime) -> None:
    """Run the periodic job the runtime registered (the scheduler's hourly ``purge``)."""
    job = rt.scheduler.jobs["purge"]
    assert job.period == 3600
    job.run()


def test_the_hourly_job_deletes_only_finished_deliveries_past_retention(runtime: Runtime) -> None:
    retention = timedelta(days=RETENTION_DAYS)
    ages = {"old": retention + HOUR, "recent": retention - HOUR}
    stored = {
        (status, when): _store(runtime, status, age)
        for status in ("done", "failed", "ignored", "queued", "running", "retry")
        for when, age in ages.items()
    }
    before = {key: deliveries.get(runtime.sessions, d) for key, d in stored.items()}
    _purge_job(runtime)
    expected_gone = {
        key
        for key, found in before.items()
        if found is not None
        and found.status in deliveries.FINISHED
        and found.finished_at is not None
        and datetime.now(UTC) - found.finished_at > retention
    }
    assert expected_gone == {(s, "old") for s in ("done", "failed", "ignored")}
    left = {key for key, d in stored.items() if deliveries.get(runtime.sessions, d) is not None}
    assert left == set(stored) - expected_gone
    kept = deliveries.get(runtime.sessions, stored[("done", "recent")])
    assert kept is not None and json.loads(kept.body) == fixture("pull_request.opened")


def test_a_retention_shorter_than_the_dedupe_window_keeps_the_ids(runtime: Runtime) -> None:
    short = 1.0  # days: under DEDUPE_DAYS
    dedupe = timedelta(days=deliveries.DEDUPE_DAYS)
    fresh = _store(runtime, "done", timedelta(days=short) - HOUR)
    past_retention = _store(runtime, "failed", timedelta(days=short) + HOUR)
    past_dedupe = _store(runtime, "done", dedupe + HOUR)
    assert deliveries.purge(runtime.sessions, short) == (1, 1)
    kept = deliveries.get(runtime.sessions, fresh)
    emptied = deliveries.get(runtime.sessions, past_retention)
    assert kept is not None and kept.body != ""
    assert emptied is not None and emptied.body == "" and emptied.status == "failed"
    assert deliveries.get(runtime.sessions, past_dedupe) is None
    # GitHub's Redeliver of the failed one: re-opened, with the redelivered body
    body = json.dumps(fixture("pull_request.opened"))
    again = NewDelivery(past_retention, "pull_request", "opened", 1, body)
    recorded = deliveries.add(runtime.sessions, again)
    assert (recorded.accepted, recorded.duplicate, recorded.status) == (True, True, "queued")
    reopened = deliveries.get(runtime.sessions, past_retention)
    assert reopened is not None and reopened.body == body


def test_purge_deletes_batch_after_batch_until_none_is_left(runtime: Runtime) -> None:
    n = 2 * deliveries.PURGE_BATCH + 1
    batch = [
        NewDelivery(new_delivery_id(), "push", None, 1, "", "ignored", "no handler")
        for _ in range(n)
    ]
    deliveries.add_many(runtime.sessions, batch)
    then = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=RETENTION_DAYS) - HOUR
    table = deliveries.DeliveryRow.__table__
    with runtime.engine.begin() as conn:
        conn.execute(update(table).values(finished_at=then))
    assert deliveries.purge(runtime.sessions, RETENTION_DAYS) == (n, 0)
    assert deliveries.count_by_status(runtime.sessions) == {}


def test_ignored_deliveries_are_stored_without_their_body(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, workers=1)
    recorder = Recorder(("pull_request", ("opened",)), ("issue_comment", ("created",)))
    rt = build(settings, router=recorder.router)
    cases = {
        "handled": ("pull_request.opened", {}),
        "no handler": ("push", {}),
        "the app's own comment": (
            "issue_comment.created",
            {"comment.performed_via_github_app": {"id": settings.app_id}},
        ),
    }
    sent: dict[str, tuple[str, bytes]] = {}
    try:
        with live_server(create_app(settings, rt)) as url:
            for case, (name, changes) in cases.items():
                body, headers = signed_fixture(name, SECRET, changes)
                answer = httpx.post(f"{url}/webhook", content=body, headers=headers, timeout=30)
                assert answer.status_code == 202, answer.text
                expected = "queued" if case == "handled" else "ignored"
                assert answer.json()["status"] == expected
                sent[case] = (headers["X-GitHub-Delivery"], body)
        stored = {case: deliveries.get(rt.sessions, d) for case, (d, _) in sent.items()}
    finally:
        rt.close()
    handled = stored.pop("handled")
    assert handled is not None and handled.body == sent["handled"][1].decode()
    for found in stored.values():
        assert found is not None and found.status == "ignored" and found.body == ""
