"""A process that takes locks or runs periodic jobs, for ``tests/test_locks.py`` and
``tests/test_periodic.py`` (the other processes of a cluster).

``python -m tests.lock_holder KIND URL TTL MODE ...`` where ``KIND`` names the lock backend
(``open_locks``) and ``MODE`` is

- ``hold NAME``: take ``NAME``, print ``acquired``, then sleep until killed;
- ``cycle NAME COUNT HOLD``: ``COUNT`` times take ``NAME`` (waiting), print
  ``held START END`` (``time.time()`` in and out) after holding it ``HOLD`` seconds;
- ``schedule STORE_URL SECONDS JOB:PERIOD ...``: run a ``Scheduler`` on that store with
  those jobs (each sleeps 0.3 s) for ``SECONDS``, printing ``ran JOB PERIOD`` for each
  "periodic job ran" line.
"""

from __future__ import annotations

import logging
import sys
import time

from bot.adapters.locks import Gone, Locks
from bot.adapters.locks.postgres import AdvisoryLocks
from bot.adapters.locks.redis import RedisLocks
from bot.adapters.locks.rows import RowLocks
from bot.adapters.store.db import init_db, make_engine
from bot.app import owners
from bot.app.periodic import Scheduler

KINDS = ("rows-sqlite", "rows-postgres", "advisory", "redis")


def open_locks(kind: str, url: str, holder: str, ttl: float, gone: Gone | None = None) -> Locks:
    """The locks of backend ``kind`` at ``url`` (a store URL; Redis: the server's);
    ``gone``: as for ``make_locks``."""
    if kind == "redis":
        return RedisLocks(url, holder, ttl, gone)
    engine = make_engine(url)
    if kind == "advisory":
        return AdvisoryLocks(engine)
    init_db(engine, upgrade=True)
    return RowLocks(engine, holder, ttl, gone)


class _Ran(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "periodic job ran":
            print("ran", record.__dict__["job"], record.__dict__["period"], flush=True)
        elif record.levelno >= logging.WARNING:
            print(record.getMessage(), record.__dict__, file=sys.stderr, flush=True)


def main(argv: list[str]) -> None:
    kind, url, ttl, mode, *rest = argv
    holder = str(owners.current())  # as the App names its processes
    if mode == "schedule":
        store_url, seconds, *jobs = rest
        sessions = init_db(make_engine(store_url), upgrade=True)
        locks = open_locks(kind, url, holder, float(ttl))
        logging.getLogger("bot.app.periodic").addHandler(_Ran())
        logging.getLogger("bot.app.periodic").setLevel(logging.INFO)
        scheduler = Scheduler(sessions, locks, holder)
        for spec in jobs:
            name, period = spec.split(":")
            scheduler.add(name, float(period), lambda: time.sleep(0.3))
        scheduler.start()
        time.sleep(float(seconds))
        scheduler.stop()
        return
    locks = open_locks(kind, url, holder, float(ttl))
    if mode == "hold":
        lease = locks.acquire(rest[0], wait=30)
        assert lease is not None
        print("acquired", flush=True)
        time.sleep(3600)
    elif mode == "cycle":
        name, count, hold = rest[0], int(rest[1]), float(rest[2])
        for _ in range(count):
            lease = locks.acquire(name, wait=60)
            assert lease is not None
            with lease:
                start = time.time()
                time.sleep(hold)
                end = time.time()
            print("held", start, end, flush=True)
    locks.close()


if __name__ == "__main__":
    main(sys.argv[1:])
