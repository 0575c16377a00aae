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
delivery once (counted in ``/metrics``).
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from bot.adapters.github.api import CHECK_NAME
from bot.adapters.store import deliveries
from bot.adapters.store.db import init_db, make_engine
from tests.cluster import app_env
from tests.fakes.github_api import FakeGitHub
from tests.live import ServerProcess, wait_until
from tests.pull_traffic import Pull, arrange, delivery
from tests.services import (
    Postgres,
    Redis,
    _run_as,
    free_port,
    postgres_missing,
    start_postgres,
    unavailable,
)

pytestmark = pytest.mark.servers

PERIOD = 2.0  # REDELIVERY_SECONDS: how often the leader looks for failed deliveries
EACH = 3  # PRs per phase


@pytest.fixture
def cluster() -> Iterator[Postgres]:
    """A PostgreSQL cluster of this test's own: the test stops and starts it."""
    reason = postgres_missing()
    if reason:
        unavailable(reason)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


def _pg_ctl(server: Postgres, *args: str) -> None:
    _run_as(server.user, [str(server.pg_ctl), "-D", str(server.root / "data"), "-w", *args])


def stop_postgres(server: Postgres) -> None:
    """``pg_ctl stop -m fast``: the clients' connections are closed."""
    _pg_ctl(server, "-m", "fast", "stop")


def start_postgres_again(server: Postgres) -> None:
    """Start the stopped cluster on its port again."""
    options = f"-p {server.port} -c listen_addresses=127.0.0.1 "
    options += f"-c unix_socket_directories={server.root} -c fsync=off"
    _pg_ctl(server, "-l", str(server.root / "server.log"), "-o", options, "start")


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

        stop_postgres(cluster)
        refused = send(pulls[EACH : 2 * EACH])
        assert set(refused.values()) == {503}, refused
        first.stop(signal.SIGKILL)
        unanswered = send(pulls[2 * EACH :])
        assert set(unanswered.values()) == {0}, unanswered
        start_postgres_again(cluster)

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
