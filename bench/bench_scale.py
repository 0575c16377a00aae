"""Benchmark: reviews per second with 1, 2 and 4 worker processes, PostgreSQL + Redis and SQLite.

Each configuration is a fresh cluster (``tests/cluster.py``): one ``serve --no-workers``
process and 1, 2 or 4 ``worker`` processes (``WORKERS`` threads each, the default 2),
sharing PostgreSQL (a throwaway durable cluster, ``tests.services.start_postgres``) and
Redis (``start_redis``), or one SQLite file and the embedded queue next to it.  The fake
GitHub runs in this process, holding ``PULLS`` open PRs over three repositories
(``tests/pull_traffic.py``: the one-gate nightly script and its 40-run history file).
Every PR is opened and reviewed first (not timed: the comments exist, the installation
token is cached); then ``ROUNDS`` bursts of one ``pull_request.synchronize`` per PR are
POSTed back to back, and the time from the first POST until the store says every one of
them is ``done`` gives the reviews per second (each delivery is one full review: read the
PR, its files and the history, analyse, edit the comment, complete the check run).
Reviews of one PR take turns (the per-PR lock).  The fake GitHub shares the machine's
CPUs with the App's processes, so the figures are a floor.

Run: ``.venv/bin/python bench/bench_scale.py`` (``--rounds N`` to size it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.orm import Session, sessionmaker  # noqa: E402

from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.adapters.store.deliveries import DeliveryRow  # noqa: E402
from tests.cluster import Cluster, app_env  # noqa: E402
from tests.fakes.github_api import FakeGitHub  # noqa: E402
from tests.pull_traffic import Pull, arrange, delivery  # noqa: E402
from tests.services import Postgres, Redis, start_postgres, start_redis  # noqa: E402

PULLS = 20
ROUNDS = 12
WORKER_COUNTS = (1, 2, 4)
BACKENDS = ("PostgreSQL + Redis", "SQLite")
TIMEOUT = 600.0


@dataclass(frozen=True)
class Figure:
    reviews: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.reviews / self.seconds


def _open(sessions: sessionmaker[Session], ids: list[str]) -> int:
    """How many of ``ids`` are not done yet (failed ones raise)."""
    query = (
        select(DeliveryRow.status, func.count())
        .where(DeliveryRow.id.in_(ids))
        .group_by(DeliveryRow.status)
    )
    with sessions() as session:
        counts = {status: int(n) for status, n in session.execute(query)}
    if counts.get("failed"):
        raise RuntimeError(f"{counts['failed']} deliveries failed")
    return len(ids) - counts.get("done", 0)


def _send(urls: list[str], pulls: list[Pull], kind: str) -> list[str]:
    """POST one delivery of ``kind`` per PR at once, spread over ``urls``; their ids."""
    signed = [delivery(pull, kind) for pull in pulls]
    clients = [httpx.Client(base_url=url, timeout=60) for url in urls]
    try:

        def post(n: int) -> None:
            d = signed[n]
            answer = clients[n % len(clients)].post("/webhook", content=d.body, headers=d.headers)
            if answer.status_code != 202:
                raise RuntimeError(f"webhook answered {answer.status_code}: {answer.text}")

        with ThreadPoolExecutor(max_workers=min(32, len(signed))) as pool:
            list(pool.map(post, range(len(signed))))
    finally:
        for client in clients:
            client.close()
    return [d.id for d in signed]


def _drain(sessions: sessionmaker[Session], ids: list[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while _open(sessions, ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers did not finish in {TIMEOUT} s")
        time.sleep(0.05)


@contextmanager
def _database(backend: str, pg: Postgres | None, workdir: Path) -> Iterator[str]:
    if pg is None:
        yield f"sqlite:///{workdir / 'bot.db'}"
        return
    name = pg.create_database("bench")
    try:
        yield pg.url(name)
    finally:
        pg.drop_database(name)


def measure(
    backend: str, workers: int, rounds: int, pg: Postgres | None, redis: Redis | None
) -> Figure:
    """One configuration: a fresh store, queue and fake GitHub; the timed rounds."""
    with (
        FakeGitHub() as fake,
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        _database(backend, pg, Path(tmp)) as url,
    ):
        if redis is not None:
            redis.flush()
        pulls = arrange(fake, PULLS)
        env = app_env(fake, url, redis.url if redis is not None else None)
        with Cluster(env, Path(tmp)) as cluster:
            urls = [cluster.serve().url or ""]
            for _ in range(workers):
                cluster.worker()
            sessions = init_db(make_engine(url))
            _drain(sessions, _send(urls, pulls, "opened"))  # warm-up, not timed
            started = time.perf_counter()
            ids: list[str] = []
            for _ in range(rounds):
                ids += _send(urls, pulls, "synchronize")
            _drain(sessions, ids)
            seconds = time.perf_counter() - started
            cluster.stop()
        fake.check()
    return Figure(len(ids), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="bursts of one per PR")
    args = parser.parse_args()
    pg = start_postgres(durable=True)
    redis = start_redis()
    results: dict[tuple[str, int], Figure] = {}
    try:
        for backend in BACKENDS:
            for workers in WORKER_COUNTS:
                served = (pg, redis) if backend != "SQLite" else (None, None)
                figure = measure(backend, workers, args.rounds, *served)
                results[backend, workers] = figure
                print(
                    f"  {backend}, {workers} worker process(es): {figure.reviews} reviews"
                    f" in {figure.seconds:.1f} s",
                    flush=True,
                )
    finally:
        redis.stop()
        pg.stop()
    print(
        f"Reviews per second: {PULLS} PRs x {args.rounds} synchronize deliveries, one"
        f" serve --no-workers, worker processes of 2 threads; {os.cpu_count()} CPUs"
    )
    print(f"  {'workers':>8}" + "".join(f"  {b:>20}" for b in BACKENDS))
    for workers in WORKER_COUNTS:
        cells = "".join(f"  {results[b, workers].per_second:>20.1f}" for b in BACKENDS)
        print(f"  {workers:>8}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
