"""The webhook endpoint end to end: real uvicorn, real SQLite, real huey, real payloads."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.adapters.store import deliveries
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.features.context import HandlerContext
from tests.live import SECRET, Recorder, live_server, make_settings, wait_until
from tests.webhooks import (
    event_of,
    fixture,
    fixture_names,
    new_delivery_id,
    signed,
    signed_fixture,
)

pytestmark = pytest.mark.servers

MAX_BODY = 64 * 1024


@dataclass
class Bot:
    client: httpx.Client
    runtime: Runtime
    recorder: Recorder

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return self.client.post("/webhook", content=body, headers=headers)

    def stored(self) -> dict[str, int]:
        return deliveries.count_by_status(self.runtime.sessions)

    def wait_done(self, delivery_id: str) -> deliveries.Delivery:
        def finished() -> bool:
            d = deliveries.get(self.runtime.sessions, delivery_id)
            return d is not None and d.status in ("done", "failed", "ignored")

        wait_until(finished, what=f"delivery {delivery_id} to finish")
        found = deliveries.get(self.runtime.sessions, delivery_id)
        assert found is not None
        return found


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    settings = make_settings(
        tmp_path, webhook_secret=f"rotated-out-secret, {SECRET}", max_body_bytes=MAX_BODY, workers=1
    )
    recorder = Recorder(
        ("pull_request", ("opened", "synchronize", "reopened")),
        ("issue_comment", ("created",)),
        ("ping", ()),
    )
    runtime = build(settings, router=recorder.router)
    with (
        live_server(create_app(settings, runtime)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield Bot(client, runtime, recorder)
    runtime.close()


def test_every_fixture_is_accepted_and_routed(bot: Bot) -> None:
    sent: dict[str, str] = {}
    for name in fixture_names():
        body, headers = signed_fixture(name, SECRET)
        response = bot.post(body, headers)
        assert response.status_code == 202, (name, response.text)
        handled = bot.recorder.router.handlers(event_of(name), fixture(name).get("action"))
        assert response.json()["status"] == ("queued" if handled else "ignored"), name
        sent[headers["X-GitHub-Delivery"]] = name
    for delivery_id, name in sent.items():
        delivery = bot.wait_done(delivery_id)
        assert delivery.event == event_of(name)
        assert delivery.action == fixture(name).get("action")
        if delivery.status == "ignored":  # stored without its body: it is never read
            assert delivery.body == ""
        else:
            assert json.loads(delivery.body) == fixture(name)
        installation = fixture(name).get("installation")
        assert delivery.installation_id == (installation["id"] if installation else None)
    handled_ids = {
        d
        for d, n in sent.items()
        if bot.recorder.router.handlers(event_of(n), fixture(n).get("action"))
    }
    assert sorted(bot.recorder.ids()) == sorted(handled_ids)
    assert bot.stored() == {"done": len(handled_ids), "ignored": len(sent) - len(handled_ids)}


def test_ping_is_stored_and_answered_202(bot: Bot) -> None:
    body, headers = signed_fixture("ping.with-app_id", SECRET)
    response = bot.post(body, headers)
    assert response.status_code == 202
    assert response.json() == {"delivery": headers["X-GitHub-Delivery"], "status": "queued"}
    assert bot.wait_done(headers["X-GitHub-Delivery"]).status == "done"


def test_second_secret_is_accepted(bot: Bot) -> None:
    body, headers = signed_fixture("pull_request.opened", "rotated-out-secret")
    assert bot.post(body, headers).status_code == 202


def _refused(bot: Bot, body: bytes, headers: dict[str, str], status: int) -> None:
    response = bot.post(body, headers)
    assert response.status_code == status, response.text
    assert "error" in response.json()


def test_missing_headers_are_400(bot: Bot) -> None:
    body, headers = signed_fixture("pull_request.opened", SECRET)
    for header in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"):
        _refused(bot, body, {k: v for k, v in headers.items() if k != header}, 400)
    _refused(bot, body, {**headers, "X-GitHub-Event": "Pull Request!"}, 400)
    _refused(bot, body, {**headers, "X-GitHub-Delivery": "x" * 65}, 400)
    assert bot.stored() == {}


def test_bad_signatures_are_401(bot: Bot) -> None:
    body, headers = signed_fixture("pull_request.opened", SECRET)
    key = SECRET.encode()
    sha1 = "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest()
    sha512 = "sha512=" + hmac.new(key, body, hashlib.sha512).hexdigest()
    without_256 = {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}
    _refused(bot, body, {**without_256, "X-Hub-Signature": sha1}, 401)  # SHA-1 only
    _refused(bot, body, {**headers, "X-Hub-Signature-256": sha1}, 401)
    _refused(bot, body, {**headers, "X-Hub-Signature-256": sha512}, 401)
    _, wrong = signed_fixture("pull_request.opened", "not-the-secret")
    _refused(bot, body, {**headers, "X-Hub-Signature-256": wrong["X-Hub-Signature-256"]}, 401)
    _refused(bot, body.replace(b"opened", b"closed", 1), headers, 401)  # tampered body
    assert bot.stored() == {}


def test_non_json_content_type_is_415(bot: Bot) -> None:
    body, headers = signed_fixture("pull_request.opened", SECRET)
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "application/xml"):
        _refused(bot, body, {**headers, "Content-Type": content_type}, 415)
    form = b"payload=" + body
    form_headers = {**signed("pull_request", form, SECRET)[1]}
    _refused(bot, form, {**form_headers, "Content-Type": "application/x-www-form-urlencoded"}, 415)
    accepted = bot.post(body, {**headers, "Content-Type": "application/json; charset=utf-8"})
    assert accepted.status_code == 202
    states = bot.stored()  # read once: the worker may move it from queued to running to done
    assert sum(states.values()) == 1
    assert set(states) <= {"queued", "running", "done"}


def test_oversized_bodies_are_413(bot: Bot) -> None:
    big = {"action": "opened", "padding": "x" * MAX_BODY}
    body, headers = signed("pull_request", big, SECRET)
    assert len(body) > MAX_BODY
    _refused(bot, body, headers, 413)  # declared by Content-Length

    def chunks() -> Iterator[bytes]:  # no Content-Length: caught while streaming
        for i in range(0, len(body), 4096):
            yield body[i : i + 4096]

    streamed = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    response = bot.client.post("/webhook", content=chunks(), headers=streamed)
    assert response.status_code == 413
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert bot.stored() == {}


def test_malformed_payloads_with_valid_signature_are_400(bot: Bot) -> None:
    for raw in (b"{not json", b"[1, 2, 3]", b'"a string"', b"\xff\xfe{}", b""):
        body, headers = signed("pull_request", raw, SECRET)
        _refused(bot, body, headers, 400)
    assert bot.stored() == {}
    assert bot.recorder.calls == []


def test_replayed_delivery_is_acknowledged_not_processed_twice(bot: Bot) -> None:
    delivery_id = new_delivery_id()
    body, headers = signed_fixture("pull_request.opened", SECRET, delivery_id=delivery_id)
    assert bot.post(body, headers).status_code == 202
    bot.wait_done(delivery_id)
    again = bot.post(body, headers)
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    # A different (validly signed) body under the same id is also a duplicate.
    body2, headers2 = signed_fixture("pull_request.synchronize", SECRET, delivery_id=delivery_id)
    assert bot.post(body2, headers2).json()["status"] == "duplicate"
    # One worker, FIFO: once a later delivery is done, nothing else is queued before it.
    sentinel_body, sentinel = signed_fixture("pull_request.reopened", SECRET)
    assert bot.post(sentinel_body, sentinel).status_code == 202
    bot.wait_done(sentinel["X-GitHub-Delivery"])
    assert bot.recorder.ids() == [delivery_id, sentinel["X-GitHub-Delivery"]]
    stored = deliveries.get(bot.runtime.sessions, delivery_id)
    assert stored is not None
    assert json.loads(stored.body)["action"] == "opened"


def test_redelivery_of_a_failed_delivery_runs_again(bot: Bot) -> None:
    bot.recorder.fail_with.append(ValueError("a permanent problem"))
    body, headers = signed_fixture("issue_comment.created", SECRET)
    delivery_id = headers["X-GitHub-Delivery"]
    assert bot.post(body, headers).status_code == 202
    failed = bot.wait_done(delivery_id)
    assert failed.status == "failed"
    assert failed.last_error == "ValueError: a permanent problem"
    again = bot.post(body, headers)
    assert again.status_code == 202 and again.json()["status"] == "queued"
    assert bot.wait_done(delivery_id).status == "done"
    assert bot.recorder.ids() == [delivery_id, delivery_id]


def test_events_sent_by_the_app_itself_are_ignored(bot: Bot) -> None:
    body, headers = signed_fixture(
        "pull_request.synchronize", SECRET, changes={"sender.login": "threshold-bot[bot]"}
    )
    response = bot.post(body, headers)
    assert response.status_code == 202
    assert response.json()["status"] == "ignored"
    stored = deliveries.get(bot.runtime.sessions, headers["X-GitHub-Delivery"])
    assert stored is not None and stored.status == "ignored"
    assert stored.outcome == "sent by the app itself"
    assert bot.recorder.calls == []


def test_healthz_and_metrics(bot: Bot) -> None:
    health = bot.client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    names = ["pull_request.opened", "pull_request.synchronize", "push"]
    ids = []
    for name in names:
        body, headers = signed_fixture(name, SECRET)
        assert bot.post(body, headers).status_code == 202
        ids.append(headers["X-GitHub-Delivery"])
    bad_body, bad = signed_fixture("pull_request.opened", "wrong")
    assert bot.post(bad_body, bad).status_code == 401
    for delivery_id in ids:
        bot.wait_done(delivery_id)
    text = bot.client.get("/metrics").text
    pr = sum(1 for n in names if event_of(n) == "pull_request")
    assert f'threshold_bot_deliveries_received_total{{event="pull_request"}} {pr:.1f}' in text
    assert 'threshold_bot_deliveries_received_total{event="push"} 1.0' in text
    assert (
        f'threshold_bot_deliveries_processed_total{{event="pull_request",outcome="done"}} {pr:.1f}'
        in text
    )
    assert 'threshold_bot_deliveries_processed_total{event="push",outcome="ignored"} 1.0' in text
    assert 'threshold_bot_deliveries_rejected_total{status="401"} 1.0' in text
    assert f"threshold_bot_webhook_ack_seconds_count {len(names):.1f}" in text
    assert f'threshold_bot_deliveries{{status="done"}} {pr:.1f}' in text
    assert 'threshold_bot_delivery_latency_seconds_count{event="pull_request"}' in text


def test_the_answer_does_not_wait_for_the_handler(tmp_path: Path) -> None:
    release = threading.Event()
    entered = threading.Event()
    recorder = Recorder()

    @recorder.router.register("pull_request")
    def blocking(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        entered.set()
        release.wait(timeout=60)

    settings = make_settings(tmp_path, workers=1)
    runtime = build(settings, router=recorder.router)
    try:
        with (
            live_server(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            first_body, first = signed_fixture("pull_request.opened", SECRET)
            assert client.post("/webhook", content=first_body, headers=first).status_code == 202
            assert entered.wait(timeout=30)  # the only worker is now stuck in the handler
            second_body, second = signed_fixture("pull_request.synchronize", SECRET)
            response = client.post("/webhook", content=second_body, headers=second)
            assert response.status_code == 202  # answered while the handler still blocks
            assert not release.is_set()
            stored = deliveries.get(runtime.sessions, second["X-GitHub-Delivery"])
            assert stored is not None and stored.status == "queued"
            release.set()
            wait_until(
                lambda: deliveries.count_by_status(runtime.sessions) == {"done": 2},
                what="both deliveries to finish",
            )
    finally:
        release.set()
        runtime.close()


def test_a_burst_is_stored_before_each_answer_then_processed(bot: Bot) -> None:
    def send(_: int) -> str:
        body, headers = signed_fixture("pull_request.opened", SECRET)
        with httpx.Client(base_url=str(bot.client.base_url), timeout=30) as client:
            response = client.post("/webhook", content=body, headers=headers)
        assert response.status_code == 202, response.text
        stored = deliveries.get(bot.runtime.sessions, headers["X-GitHub-Delivery"])
        assert stored is not None, "answered 202 before the delivery was stored"
        return headers["X-GitHub-Delivery"]

    with ThreadPoolExecutor(max_workers=20) as pool:
        ids = list(pool.map(send, range(40)))
    for delivery_id in ids:
        assert bot.wait_done(delivery_id).status == "done"
    assert sorted(bot.recorder.ids()) == sorted(ids)  # each ran once


def test_a_body_still_arriving_does_not_hold_the_workers_back(tmp_path: Path) -> None:
    hold = 3.0  # the gate's max_wait: how long a worker would give way to a request in flight
    ran = threading.Event()
    seen: list[tuple[float, int]] = []  # when the handler ran, and the requests then in flight
    recorder = Recorder()
    # the request below pauses mid-body for longer than a body may (BODY_GRACE_SECONDS)
    settings = make_settings(tmp_path, workers=1, body_grace_seconds=30)
    runtime = build(settings, router=recorder.router)
    runtime.gate.max_wait = hold

    @recorder.router.register("pull_request")
    def record(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        seen.append((time.monotonic(), runtime.gate.active))
        ran.set()

    queued_body, queued = signed_fixture("pull_request.reopened", SECRET)
    body, headers = signed_fixture("pull_request.opened", SECRET)
    try:
        with (
            live_server(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            port = httpx.URL(url).port
            assert port is not None
            with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
                head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                slow.sendall(
                    f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Length: {len(body)}\r\n{head}\r\n".encode()
                    + body[:100]
                )
                wait_until(lambda: _unverified(client) == 100, what="the body to start arriving")
                sent = time.monotonic()
                response = client.post("/webhook", content=queued_body, headers=queued)
                assert response.status_code == 202  # stored and enqueued
                assert ran.wait(timeout=60)
                ((at, in_flight),) = seen
                assert in_flight == 0  # the slow request is not counted while its body arrives
                assert at - sent < hold  # so the worker did not wait for it
                slow.sendall(body[100:])
                assert slow.recv(4096).startswith(b"HTTP/1.1 202")
            bot = Bot(client, runtime, recorder)
            assert bot.wait_done(queued["X-GitHub-Delivery"]).status == "done"
            assert bot.wait_done(headers["X-GitHub-Delivery"]).status == "done"
    finally:
        runtime.close()


def _unverified(client: httpx.Client) -> float:
    """The bytes of unverified bodies the server holds (its metric)."""
    text = client.get("/metrics").text
    found = re.search(r"^threshold_bot_webhook_unverified_bytes (\S+)$", text, re.M)
    assert found is not None
    return float(found.group(1))
