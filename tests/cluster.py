"""A cluster of the App's processes on this host, and what their JSON logs say.

``Cluster`` runs ``python -m bot.cli.serve serve [--no-workers]`` and ``... worker``
subprocesses sharing one store (an SQLite file, or PostgreSQL) and one queue (the
embedded file next to the SQLite store, or Redis), each logging to its own file;
``kill`` freezes a process (``SIGSTOP``), lets the caller look at the store while
nothing can change what the process holds, then ``kill -9``s it.  ``app_env`` is the
processes' environment for a fake GitHub in the calling process.

The log readers are pure: ``review_intervals`` (when each process was reviewing each
PR, from the ``reviewing pull request`` / ``reviewed pull request`` lines, a killed
process's open review ending when it was frozen), ``overlaps``, ``periodic_runs``
(``periodic job ran`` per job and period), ``done_lines`` (``delivery done`` per
delivery id and process) and ``retried``.  ``running_by_pid`` reads the store: who holds
which running delivery.  Used by ``tests/test_scale_e2e.py``, ``tests/test_crash.py`` and
``bench/bench_scale.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.store.deliveries import DeliveryRow
from bot.app.owners import Owner
from tests.conftest import ROOT
from tests.fakes.github_api import FakeGitHub
from tests.live import SECRET, ServerProcess, wait_until

T = TypeVar("T")
KEEP = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")
# a statement a frozen process sent just before lands within this (``Cluster.kill``)
SETTLE_SECONDS = 0.2
SETTLE_TRIES = 10
READY = "worker running with"  # the worker's line once its threads run


def app_env(
    fake: FakeGitHub | None,
    database_url: str,
    redis_url: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """The environment of the App's processes: this store and queue, the test secret, the
    fake GitHub's App (or an address that is never the internet), fast retries."""
    env = {k: v for k, v in os.environ.items() if k in KEEP}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "WEBHOOK_SECRET": SECRET,
            "DATABASE_URL": database_url,
            "RETRY_BASE_SECONDS": "0.2",
            "RETRY_MAX_SECONDS": "1",
        }
    )
    if fake is not None:
        assert fake.private_key is not None
        env.update(
            {
                "APP_ID": str(fake.app_id),
                "PRIVATE_KEY": fake.private_key,
                "GITHUB_API_URL": fake.base_url,
                "BOT_LOGIN": fake.state.bot_login,
            }
        )
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    env.update(extra)
    return env


def now() -> datetime:
    """The wall clock in UTC, as the processes stamp their log lines."""
    return datetime.now(UTC)


@dataclass
class Member:
    """One process of the cluster."""

    name: str
    role: str  # "serve" or "worker"
    proc: subprocess.Popen[bytes]
    log: Path
    url: str | None = None  # serve: its base URL
    started_at: datetime = field(default_factory=now)
    killed_at: datetime | None = None  # when it was frozen, then killed
    stopped_at: datetime | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        """Running, and (a worker) its threads started."""
        if not self.alive():
            return False
        return self.role != "worker" or READY in self.log.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """Its log lines as JSON objects; a killed process's last line may be cut short."""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        found = []
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if self.killed_at is not None and number == len(lines):
                    break
                raise AssertionError(f"{self.name}: line {number} is not JSON: {line!r}") from None
            found.append(record)
        return found

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


class Cluster:
    """Processes of the App started with ``env`` in ``workdir``; ``stop`` ends the rest."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.members: list[Member] = []
        self._servers: dict[str, ServerProcess] = {}

    def _log(self, role: str) -> tuple[str, Path]:
        name = f"{role}-{sum(m.role == role for m in self.members) + 1}"
        return name, self.workdir / f"{name}.log"

    def serve(self, *, workers: bool = False, **env: str) -> Member:
        """Start ``serve`` (``--no-workers`` unless ``workers``); return once it is healthy."""
        name, log = self._log("serve")
        args = () if workers else ("--no-workers",)
        server = ServerProcess({**self.env, **env}, self.workdir, log, args)
        member = Member(name, "serve", server.proc, log, url=server.url)
        self._servers[name] = server
        self.members.append(member)
        return member

    def worker(self, *, wait: bool = True, prefix: Sequence[str] = (), **env: str) -> Member:
        """Start ``worker`` (its command after ``prefix``, e.g. ``unshare``: it must exec the
        worker in its own process); with ``wait``, return once its threads run."""
        name, log = self._log("worker")
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "bot.cli.serve", "worker"],
                env={**self.env, **env},
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        member = Member(name, "worker", proc, log)
        self.members.append(member)
        if wait:
            self.wait_ready(member)
        return member

    def wait_ready(self, member: Member, timeout: float = 60) -> None:
        """Wait until a worker says its threads run (fail if it exits first)."""

        def ready() -> bool:
            if not member.alive():
                raise AssertionError(f"{member.name} exited: {member.tail()}")
            return member.ready()

        wait_until(ready, timeout=timeout, what=f"{member.name} to start")

    def servers(self) -> list[Member]:
        return [m for m in self.members if m.role == "serve" and m.alive()]

    def workers(self) -> list[Member]:
        """The workers running now whose threads have started."""
        return [m for m in self.members if m.role == "worker" and m.ready()]

    def kill(self, member: Member, while_frozen: Callable[[Member], T]) -> T:
        """Freeze ``member`` (SIGSTOP), call ``while_frozen(member)``, then ``kill -9`` it.

        What the process holds cannot change while it is frozen (it is alive, so nobody
        takes its deliveries over), except by a statement it sent to a database server just
        before: ``while_frozen`` is called until two calls ``SETTLE_SECONDS`` apart agree,
        so it sees exactly what the kill interrupts.  ``killed_at`` is the moment it was
        frozen: it sent nothing after."""
        member.killed_at = now()
        os.kill(member.pid, signal.SIGSTOP)
        try:
            seen = while_frozen(member)
            for _ in range(SETTLE_TRIES):
                time.sleep(SETTLE_SECONDS)
                again = while_frozen(member)
                if again == seen:
                    break
                seen = again
            return seen
        finally:
            member.proc.send_signal(signal.SIGKILL)
            member.proc.wait(timeout=30)
            member.stopped_at = now()

    def stop(self, sig: int = signal.SIGTERM) -> dict[str, int]:
        """Stop every process still running (``sig``, then SIGKILL after 60 s); exit codes."""
        alive = [m for m in self.members if m.alive()]
        for member in alive:
            member.proc.send_signal(sig)
        codes = {}
        for member in alive:
            try:
                codes[member.name] = member.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                member.proc.kill()
                codes[member.name] = member.proc.wait(timeout=30)
            member.stopped_at = now()
        for server in self._servers.values():
            server.stream.close()
        return codes

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for member in self.members:
            if member.alive():
                member.proc.kill()
                member.proc.wait(timeout=30)
        for server in self._servers.values():
            server.stream.close()


def running_by_pid(sessions: sessionmaker[Session]) -> dict[int, set[str]]:
    """The running deliveries of the store by the process id of their holder (this host)."""
    query = select(DeliveryRow.id, DeliveryRow.claimed_by).where(DeliveryRow.status == "running")
    held: dict[int, set[str]] = {}
    with sessions() as session:
        for delivery_id, holder in session.execute(query):
            owner = Owner.parse(holder or "")
            assert owner is not None, f"running delivery {delivery_id} held by {holder!r}"
            held.setdefault(owner.pid, set()).add(delivery_id)
    return held


# ----- what the logs say ---------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A process reviewing a PR from ``start`` to ``end`` (``end`` None: never ended)."""

    pull: str
    member: str
    start: datetime
    end: datetime | None


def stamp(record: dict[str, Any]) -> datetime:
    """When a log line was written (its ``ts``, millisecond precision, UTC)."""
    return datetime.fromisoformat(str(record["ts"]))


def review_intervals(members: Iterable[Member]) -> dict[str, list[Interval]]:
    """Per PR, every review of it in every process: ``reviewing pull request`` opens one,
    ``reviewed pull request`` closes it; one still open in a killed process ends when it
    was frozen, in a process that stopped otherwise it stays open (``end`` None)."""
    found: dict[str, list[Interval]] = {}
    for member in members:
        open_: dict[str, list[datetime]] = {}
        for record in member.records():
            pull = record.get("pull")
            if pull is None:
                continue
            if record["msg"] == "reviewing pull request":
                open_.setdefault(str(pull), []).append(stamp(record))
            elif record["msg"] == "reviewed pull request" and open_.get(str(pull)):
                start = open_[str(pull)].pop(0)
                found.setdefault(str(pull), []).append(
                    Interval(str(pull), member.name, start, stamp(record))
                )
        for pull, starts in open_.items():
            for start in starts:
                found.setdefault(pull, []).append(
                    Interval(pull, member.name, start, member.killed_at)
                )
    return found


def overlaps(intervals: Iterable[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of reviews of one PR that ran at the same time (an open one never ends)."""
    ordered = sorted(intervals, key=lambda i: i.start)
    pairs = []
    for n, first in enumerate(ordered):
        for second in ordered[n + 1 :]:
            if first.end is None or second.start < first.end:
                pairs.append((first, second))
    return pairs


def periodic_runs(members: Iterable[Member]) -> Counter[tuple[str, str]]:
    """How many times each (job, period start) ran, over every process."""
    return Counter(
        (str(r["job"]), str(r["period"]))
        for m in members
        for r in m.records()
        if r["msg"] == "periodic job ran"
    )


def done_lines(members: Iterable[Member]) -> Counter[tuple[str, str]]:
    """How many ``delivery done`` lines each (delivery id, process name) has."""
    return Counter(
        (str(r["delivery"]), m.name)
        for m in members
        for r in m.records()
        if str(r["msg"]).startswith("delivery done") and "delivery" in r
    )


def retried(members: Iterable[Member]) -> Counter[str]:
    """How many attempts of each delivery ended in a transient error (retried later)."""
    return Counter(
        str(r["delivery"])
        for m in members
        for r in m.records()
        if str(r["msg"]).startswith("transient error, retrying") and "delivery" in r
    )
