"""Benchmark: W&B history sync through the real wandb client against the local fake server.

Cold sync of 1,000 and 10,000 runs into an empty SQLite run cache, then a warm sync
with 5 new runs, each in a fresh client (as a new process would be).  The fake runs
in a child process, so its GraphQL execution does not compete for our GIL.  Prints time
and request counts and checks the targets: requests <= runs/per_page + 3 (cold) and
<= 3 (warm).  Run: ``.venv/bin/python bench/bench_wandb.py``.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.history.cache import CachedSource  # noqa: E402
from bot.adapters.history.wandb_source import WandbSource  # noqa: E402
from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.core.models import SourceSpec  # noqa: E402
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve  # noqa: E402

PER_PAGE = 1000
SPEC = SourceSpec(kind="wandb", entity="acme", project="bench")


def fake_process(conn: Connection, runs: int) -> None:
    """Serve a fake W&B with ``runs`` runs in this (child) process; obey ``conn``."""
    fake = FakeWandb()
    for i in range(runs):
        fake.add_run("acme", "bench", nightly_run(i, state="finished"))
    with serve(fake) as url:
        conn.send(url)
        while True:
            command, *args = conn.recv()
            if command == "add":
                for i in range(*args):
                    fake.add_run("acme", "bench", nightly_run(i, state="finished"))
            elif command == "reset":
                fake.requests.clear()
            elif command == "stop":
                return
            conn.send(fake.total_requests)


class RemoteFake:
    """A fake W&B in a child process, so its work does not share our GIL."""

    def __init__(self, runs: int) -> None:
        self.conn, child = multiprocessing.get_context("spawn").Pipe()
        self.process = multiprocessing.get_context("spawn").Process(
            target=fake_process, args=(child, runs), daemon=True
        )
        self.process.start()
        self.url: str = self.conn.recv()

    def call(self, *command: object) -> int:
        """Send a command; return the request count the fake reports."""
        self.conn.send(command)
        return int(self.conn.recv())

    def stop(self) -> None:
        """Stop the child process."""
        self.conn.send(("stop",))
        self.process.join(timeout=30)


def measure(fake: RemoteFake, db: str) -> tuple[float, int, int]:
    """One sync in a fresh client (as a new process would be): seconds, requests, new runs."""
    source = CachedSource(
        init_db(make_engine(db)),
        WandbSource(api_key=API_KEY, base_url=fake.url, per_page=PER_PAGE),
    )
    fake.call("reset")
    started = time.perf_counter()
    result = source.sync(SPEC)
    seconds = time.perf_counter() - started
    return seconds, fake.call("count"), result.new


def row(name: str, runs: int, target: int, figures: tuple[float, int, int]) -> bool:
    """Print one result line; return whether the request target was met."""
    seconds, requests, new = figures
    met = requests <= target
    print(
        f"{name:<20}{runs:>7}{new:>7}{seconds:>9.2f}{requests:>6}"
        f"{'<=' + str(target):>8}{'' if met else '  MISSED'}"
    )
    return met


def main() -> int:
    """Run the benchmark; exit 1 if a request-count target is missed."""
    ok = True
    print(f"per_page={PER_PAGE}; the fake W&B server runs in a separate process")
    print(f"{'case':<20}{'runs':>7}{'new':>7}{'seconds':>9}{'req':>6}{'target':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        warmup = RemoteFake(1)
        started = time.perf_counter()
        measure(warmup, f"sqlite:///{tmp}/warmup.db")  # starts the wandb-core sidecar once
        print(f"(wandb-core start and first sync: {time.perf_counter() - started:.2f} s)")
        warmup.stop()
        for n in (1_000, 10_000):
            fake = RemoteFake(n)
            db = f"sqlite:///{tmp}/bench-{n}.db"
            ok &= row("cold sync", n, math.ceil(n / PER_PAGE) + 3, measure(fake, db))
            fake.call("add", n, n + 5)
            ok &= row("warm sync, 5 new", n + 5, 3, measure(fake, db))
            fake.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
