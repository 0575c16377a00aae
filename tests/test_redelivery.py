"""Deliveries GitHub could not hand over are redelivered once the App is back, once each.

GitHub does not redeliver on its own: the App's leader lists the App's webhook deliveries
(``GET /app/hook/deliveries``) and asks for the failed ones again
(``bot.features.redelivery``).  Here ``serve`` (with its workers) runs on a PostgreSQL
cluster of this module's own and Redis, and the fake GitHub in this process sends the
deliveries and records what the App answered (``tests/fakes/github_endpoints_hooks.py``):

- some PRs' ``opened`` deliveries are answered 202 (never redelivered);
- while PostgreSQL is stopped, others are answered 503;
- while ``serve`` is down after a ``kill -9``, others get no answer (status code 0);

and after PostgreSQL and ``serve`` are back, each PR has its check run exactly once, each
delivery is stored once and was run once, and GitHub was asked to redeliver each failed
delivery once (counted in ``/metrics``).  The bounds of one look (``redeliver_failed``:
pages, requests, the window, the mark) are tried on an SQLite store with attempts arranged
on the fake.
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import CHECK_NAME
from bot.adapters.github.errors import GitHubNotFound
from bot.adapters.github.hooks import AppHooks
from bot.adapters.store import deliveries, redeliveries
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import NewDelivery
from bot.core.redelivery import MAX_ASKS, Asked
from bot.features import redelivery
from bot.features.redelivery import MARK, redeliver_failed
from tests.cluster import app_env
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import HookDelivery
from tests.live import SECRET, ServerProcess, wait_until
from tests.pull_traffic import Pull, arrange, delivery
from tests.services import (
    Postgres,
    Redis,
    free_port,
    postgres_running,
)
from tests.webhooks import signed_fixture

pytestmark = pytest.mark.servers

PERIOD = 2.0  # REDELIVERY_SECONDS: how often the leader looks for failed deliveries
EACH = 3  # PRs per phase


@pytest.fixture
def cluster() -> Iterator[Postgres]:
    """A PostgreSQL cluster of this test's own: the test stops and starts it."""
    with postgres_running() as server:
        yield server


def metric(url: str, name: str, labels: str) -> float:
    """The value of ``name{labels}`` on the App's ``/metrics`` (0 when absent)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_deliveries_failed_during_an_outage_are_redelivered_once(
    tmp_path: Path, cluster: Postgres, redis_server: Redis
) -> None:
    redis_server.flush()
    database = cluster.url(cluster.create_database("redeliver"))
    with FakeGitHub() as fake:
        pulls = arrange(fake, 3 * EACH)
        env = app_env(
            fake,
            database,
            redis_server.url,
            REDELIVERY_SECONDS=str(PERIOD),
            DRIFT_WATCH="false",
            STORE_TIMEOUT_SECONDS="2",
        )
        port = free_port()
        fake.state.webhook_url = f"http://127.0.0.1:{port}/webhook"
        log = tmp_path / "serve.log"

        def serve() -> ServerProcess:
            return ServerProcess(env, tmp_path, log, ("--port", str(port)))

        def send(batch: list[Pull]) -> dict[str, int]:
            sent = {}
            for pull in batch:
                item = delivery(pull, "opened")
                sent[item.id] = fake.deliver(item.body, item.headers).status_code
            return sent

        def checks(pull: Pull) -> list[str]:
            with fake.state.lock:
                runs = pull.repo.check_runs(pull.head_sha)
                return [r.status for r in runs if r.name == CHECK_NAME]

        first = serve()
        answered = send(pulls[:EACH])
        assert set(answered.values()) == {202}, answered
        engine = make_engine(database)
        sessions = init_db(engine)

        def done(guids: Iterable[str]) -> bool:
            found = [deliveries.get(sessions, guid) for guid in guids]
            return all(d is not None and d.status == "done" for d in found)

        wait_until(lambda: done(answered), timeout=60, what="the first deliveries to be done")
        engine.dispose()

        cluster.halt()
        refused = send(pulls[EACH : 2 * EACH])
        assert set(refused.values()) == {503}, refused
        first.stop(signal.SIGKILL)
        unanswered = send(pulls[2 * EACH :])
        assert set(unanswered.values()) == {0}, unanswered
        cluster.resume()

        second = serve()
        try:
            wait_until(
                lambda: all(checks(p) for p in pulls), timeout=90, what="every PR's check run"
            )
            failed = {**refused, **unanswered}
            # a few more looks for failed deliveries: nothing is asked twice
            requested = "threshold_bot_redeliveries_total"
            wait_until(
                lambda: metric(second.url, requested, 'outcome="skipped"') >= len(failed),
                timeout=30,
                what="a look that skips the redelivered ones",
            )
            assert metric(second.url, requested, 'outcome="requested"') == len(failed)
            assert metric(second.url, requested, 'outcome="failed"') == 0
            metrics_text = httpx.get(f"{second.url}/metrics", timeout=10).text
        finally:
            code = second.stop(signal.SIGTERM)
        assert code in (0, -signal.SIGTERM), log.read_text()[-3000:]
        fake.check()

        with fake.state.lock:
            attempts = list(fake.state.hook_deliveries)
        redelivered = Counter(a.guid for a in attempts if a.redelivery)
        assert redelivered == Counter(dict.fromkeys(failed, 1)), metrics_text
        assert all(a.status_code == 202 for a in attempts if a.redelivery)
        assert not set(redelivered) & set(answered)  # a delivery that succeeded: never again

        for pull in pulls:  # each PR reviewed once: one check run, completed
            assert checks(pull) == ["completed"], pull.name
        try:
            for guid in [*answered, *failed]:
                stored = deliveries.get(sessions, guid)
                assert stored is not None
                assert (stored.status, stored.attempts) == ("done", 1), (
                    guid in answered,
                    stored.last_error,
                )
        finally:
            engine.dispose()


# ----- the bounds of one look ---------------------------------------------------------------
WINDOW = timedelta(hours=24)
REFUSED = "http://127.0.0.1:9/webhook"  # nothing listens: a redelivery gets no answer


def attempt_made(
    fake: FakeGitHub, code: int, ago: timedelta = timedelta(minutes=1)
) -> HookDelivery:
    """An attempt GitHub made ``ago``, answered ``code`` (0: no answer)."""
    body, headers = signed_fixture("pull_request.opened", SECRET)
    with fake.state.lock:
        made = HookDelivery(
            id=fake.state.next_id(),
            guid=headers["X-GitHub-Delivery"],
            event="pull_request",
            action="opened",
            installation_id=1,
            repository_id=1,
            delivered_at=(datetime.now(UTC) - ago).replace(microsecond=0),
            redelivery=False,
            status_code=code,
            duration=0.01,
            body=body,
            headers=headers,
        )
        fake.state.hook_deliveries.append(made)
    return made


@pytest.fixture
def store(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
    yield init_db(engine)
    engine.dispose()


@pytest.fixture
def hooks(fake_github: FakeGitHub) -> AppHooks:
    fake_github.state.webhook_url = REFUSED
    return AppHooks(fake_github.github_app().integration())


def asked_for(fake: FakeGitHub) -> list[int]:
    """The attempts GitHub was asked to redeliver (those it took), in order."""
    found = [c for c in fake.requests("POST") if c.path.endswith("/attempts")]
    return [int(c.path.split("/")[-2]) for c in found if c.status == 202]


def redelivered(fake: FakeGitHub) -> list[str]:
    with fake.state.lock:
        return [a.guid for a in fake.state.hook_deliveries if a.redelivery]


def test_a_look_asks_once_for_each_failed_delivery_the_store_lacks(
    fake_github: FakeGitHub, hooks: AppHooks, store: sessionmaker[Session]
) -> None:
    too_old = attempt_made(fake_github, 503, ago=WINDOW + timedelta(minutes=1))
    stored = attempt_made(fake_github, 503, ago=timedelta(minutes=3))
    refused = attempt_made(fake_github, 503, ago=timedelta(minutes=2))
    fine = attempt_made(fake_github, 202, ago=timedelta(minutes=2))
    unanswered = attempt_made(fake_github, 0, ago=timedelta(minutes=1))
    deliveries.add(store, NewDelivery(stored.guid, "pull_request", "opened", 1, "{}"))

    first = redeliver_failed(hooks, store, WINDOW)
    assert (first.requested, first.skipped, first.failed, first.complete) == (2, 1, 0, True)
    assert asked_for(fake_github) == [refused.id, unanswered.id]
    found = redeliveries.asked(store, {a.guid for a in (too_old, stored, refused, fine)})
    assert found == {refused.guid: Asked(1, refused.id)}
    assert redeliveries.mark(store, MARK) == unanswered.delivered_at

    # the redeliveries get no answer either: each is asked for again, MAX_ASKS times in all
    for times in range(2, MAX_ASKS + 1):
        made = 2 * (times - 1)  # the redeliveries asked for so far
        wait_until(lambda n=made: len(redelivered(fake_github)) == n, what="redeliveries")
        again = redeliver_failed(hooks, store, WINDOW)
        assert (again.requested, again.skipped, again.failed) == (2, 1, 0)
        assert len(asked_for(fake_github)) == 2 * times
    wait_until(lambda: len(redelivered(fake_github)) == 2 * MAX_ASKS, what="redeliveries")
    last = redeliver_failed(hooks, store, WINDOW)
    assert (last.requested, last.skipped, last.failed) == (0, 3, 0)
    assert len(asked_for(fake_github)) == 2 * MAX_ASKS
    assert Counter(redelivered(fake_github)) == {refused.guid: 3, unanswered.guid: 3}
    with fake_github.state.lock:
        newest = max(a.delivered_at for a in fake_github.state.hook_deliveries)
    assert redeliveries.mark(store, MARK) == newest


def test_a_request_github_refuses_is_made_again_at_the_next_look(
    fake_github: FakeGitHub, hooks: AppHooks, store: sessionmaker[Session]
) -> None:
    failed = attempt_made(fake_github, 502, ago=timedelta(minutes=10))
    later = attempt_made(fake_github, 202)
    fake_github.fail_next("POST", r"/attempts$", 502)
    first = redeliver_failed(hooks, store, WINDOW)
    assert (first.requested, first.failed) == (0, 1)
    assert redeliveries.asked(store, {failed.guid}) == {}
    assert redeliveries.mark(store, MARK) == failed.delivered_at  # not past it: later is
    assert later.delivered_at > failed.delivered_at

    second = redeliver_failed(hooks, store, WINDOW)
    assert (second.requested, second.failed) == (1, 0)
    assert asked_for(fake_github) == [failed.id]


def test_one_look_makes_at_most_max_requests_oldest_first(
    fake_github: FakeGitHub,
    hooks: AppHooks,
    store: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redelivery, "MAX_REQUESTS", 2)
    failed = [attempt_made(fake_github, 503, ago=timedelta(minutes=9 - i)) for i in range(3)]
    assert redeliver_failed(hooks, store, WINDOW).requested == 2
    assert asked_for(fake_github) == [failed[0].id, failed[1].id]
    wait_until(lambda: len(redelivered(fake_github)) == 2, what="the redeliveries")
    # the third, then the older of the two redeliveries (which got no answer either)
    assert redeliver_failed(hooks, store, WINDOW).requested == 2
    with fake_github.state.lock:
        first_again = min(a.id for a in fake_github.state.hook_deliveries if a.redelivery)
    assert asked_for(fake_github)[2:] == [failed[2].id, first_again]


def test_one_look_reads_at_most_max_pages_and_keeps_its_mark(
    fake_github: FakeGitHub,
    hooks: AppHooks,
    store: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    oldest = attempt_made(fake_github, 503, ago=timedelta(minutes=30))
    for i in range(200):
        attempt_made(fake_github, 202, ago=timedelta(minutes=20, seconds=-i))
    monkeypatch.setattr(redelivery, "MAX_PAGES", 2)
    cut = redeliver_failed(hooks, store, WINDOW)
    assert (cut.requested, cut.complete) == (0, False)
    listed = [c for c in fake_github.requests("GET") if c.path == "/app/hook/deliveries"]
    assert [c.query.get("cursor") is not None for c in listed] == [False, True]
    assert redeliveries.mark(store, MARK) is None  # the next look reads as far back again

    monkeypatch.setattr(redelivery, "MAX_PAGES", 3)
    whole = redeliver_failed(hooks, store, WINDOW)
    assert (whole.requested, whole.complete) == (1, True)
    assert asked_for(fake_github) == [oldest.id]


def test_the_fake_lists_by_outcome_and_redelivers_only_what_it_delivered(
    fake_github: FakeGitHub, hooks: AppHooks
) -> None:
    failed = attempt_made(fake_github, 503)
    fine = attempt_made(fake_github, 202)
    requester = fake_github.integration().requester
    for status, expected in (("failure", [failed.guid]), ("success", [fine.guid])):
        _, listed = requester.requestJsonAndCheck(
            "GET", "/app/hook/deliveries", parameters={"status": status}
        )
        assert [item["guid"] for item in listed] == expected
    with pytest.raises(GitHubNotFound):
        hooks.redeliver(fine.id + 1000)
