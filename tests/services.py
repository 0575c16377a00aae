"""Real PostgreSQL and Redis for the tests: throwaway servers on 127.0.0.1, one per session.

Loaded from ``tests/conftest.py`` (``pytest_plugins``).  Fixtures:

- ``postgres``: a cluster made with ``initdb`` in a temporary directory and started with
  ``pg_ctl`` (as the ``postgres`` user, or ``nobody``, when the tests run as root: the
  server refuses root), trust authentication on 127.0.0.1 only, stopped at the end;
- ``redis_server``: ``redis-server`` on 127.0.0.1 without persistence;
- ``postgres_running()`` / ``redis_running(appendonly=...)``: servers of a test's own, to
  ``restart``, or ``halt`` and ``resume`` (same port, same data: a fault test);
- ``database_url`` (parametrised ``sqlite`` / ``postgres``): a new empty database per test,
  as an SQLAlchemy URL; a test using it runs on both engines;
- ``postgres_url``: a new empty PostgreSQL database per test;
- ``backends`` (parametrised): the App's settings overrides for SQLite, or PostgreSQL + Redis
  (``module_backends``: the same for a module-scoped App).

What they need comes from ``make services`` (Debian's ``postgresql`` and ``redis-server``
when apt-get is usable).  Without a binary the tests that need it skip with a one-line
reason, or fail when ``THRESHOLD_BOT_SERVICE_TESTS=required`` (CI sets it) — never
silently pass.  ``bench/bench_scale.py`` starts its servers with ``start_postgres`` and
``start_redis`` too.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

REQUIRED_ENV = "THRESHOLD_BOT_SERVICE_TESTS"
PG_USER = "threshold"  # the cluster's superuser (trust authentication on 127.0.0.1)
START_SECONDS = 60.0


def unavailable(reason: str) -> NoReturn:
    """Skip the test with ``reason``; fail instead when the service tests are required."""
    if os.environ.get(REQUIRED_ENV) == "required":
        pytest.fail(f"service tests required ({REQUIRED_ENV}=required): {reason}", False)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_binary(name: str) -> Path | None:
    """A PostgreSQL server program: on PATH, else the newest ``/usr/lib/postgresql/N/bin``."""
    found = shutil.which(name)
    if found:
        return Path(found)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for bin_dir in reversed(versions):
        if (bin_dir / name).is_file():
            return bin_dir / name
    return None


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as when the tests run as root; None otherwise."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL")


@dataclass
class Postgres:
    """A running throwaway cluster."""

    root: Path
    port: int
    pg_ctl: Path
    user: pwd.struct_passwd | None
    options: str = ""  # the server's command-line options (``pg_ctl -o``)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` (psycopg 3)."""
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        """Run one statement on the ``postgres`` database, outside a transaction."""
        import psycopg

        dsn = f"host=127.0.0.1 port={self.port} user={PG_USER} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; its name."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, closing whatever connections are left on it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        data, log = str(self.root / "data"), str(self.root / "server.log")
        return _run_as(self.user, [str(self.pg_ctl), "-D", data, "-l", log, *args], check=check)

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m mode``: every connection is dropped; returns once the server
        accepts connections again (same port and options)."""
        self._ctl("-m", mode, "-w", "-t", str(int(START_SECONDS)), "restart")

    def halt(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m mode``), keeping its data for ``resume``."""
        self._ctl("-m", mode, "-w", "stop")

    def resume(self) -> None:
        """Start the server ``halt`` stopped; returns once it accepts connections."""
        self._ctl("-w", "-t", str(int(START_SECONDS)), "-o", self.options, "start")

    def stop(self) -> None:
        """Stop the server at once and remove its directory."""
        self._ctl("-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _run_as(
    user: pwd.struct_passwd | None, argv: list[str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    kwargs: dict[str, Any] = {}
    if user is not None:
        kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    if user is not None:
        env["HOME"] = tempfile.gettempdir()
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=check,
        env=env,
        timeout=START_SECONDS,
        **kwargs,
    )


def postgres_missing() -> str | None:
    """Why no throwaway cluster can start here, in one line; None when one can."""
    missing = [name for name in ("initdb", "pg_ctl") if pg_binary(name) is None]
    if missing:
        return (
            f"no PostgreSQL server programs ({', '.join(missing)}) on PATH or in "
            "/usr/lib/postgresql (`make services` installs them as root with apt-get)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]')"
    return None


def start_postgres(durable: bool = False) -> Postgres:
    """initdb + pg_ctl start in a new temporary directory; ``durable=False`` turns fsync off
    (commits are still synchronous: what a test sees committed is committed)."""
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    assert initdb is not None and pg_ctl is not None, postgres_missing()
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="threshold-bot-pg-"))  # /tmp: reachable by `user`
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    data = root / "data"
    _run_as(
        user,
        [
            str(initdb),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        ],
    )
    options = [
        "-c listen_addresses=127.0.0.1",
        f"-c unix_socket_directories={root}",
        "-c max_connections=300",
        "-c shared_buffers=32MB",
    ]
    if not durable:
        options += ["-c fsync=off", "-c full_page_writes=off"]
    for _attempt in range(5):
        port = free_port()
        line = " ".join([f"-p {port}", *options])
        started = _run_as(
            user,
            [
                str(pg_ctl),
                "-D",
                str(data),
                "-l",
                str(root / "server.log"),
                "-w",
                "-t",
                str(int(START_SECONDS)),
                "-o",
                line,
                "start",
            ],
            check=False,
        )
        if started.returncode == 0:
            return Postgres(root=root, port=port, pg_ctl=pg_ctl, user=user, options=line)
    log = (root / "server.log").read_text(errors="replace")[-2000:]
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError(f"PostgreSQL did not start: {started.stderr.strip()}\n{log}")


@dataclass
class Redis:
    """A running ``redis-server``."""

    port: int
    process: subprocess.Popen[bytes]
    root: Path
    argv: list[str] = field(default_factory=list)  # how it was started (``resume``)

    @property
    def url(self) -> str:
        """The server's URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def flush(self) -> None:
        """Empty every database (between tests)."""
        import redis

        redis.Redis.from_url(self.url).flushall()

    def halt(self) -> None:
        """Stop the server (SIGTERM: with AOF, what it holds is on disk), keeping its
        directory for ``resume``."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def resume(self) -> None:
        """Start the server ``halt`` stopped, on the same port with the same options;
        returns once it answers PING (after loading its append-only file, if any)."""
        process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _answers(process, self.port):
            process.kill()
            process.wait()
            raise RuntimeError(f"redis-server did not start again on port {self.port}")
        self.process = process

    def restart(self, pause: float = 0.0) -> None:
        """``halt``, ``pause`` seconds down (a container's restart takes about one), ``resume``."""
        self.halt()
        time.sleep(pause)
        self.resume()

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)


def redis_missing() -> str | None:
    """Why no ``redis-server`` can start here, in one line; None when one can."""
    if shutil.which("redis-server") is None:
        return "no redis-server on PATH (`make services` installs Debian's redis-server)"
    return None


def _answers(process: subprocess.Popen[bytes], port: int) -> bool:
    """Wait until the ``redis-server`` ``process`` answers PING on ``port``; False if it
    exits or ``START_SECONDS`` pass first."""
    import redis

    deadline = time.monotonic() + START_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return True
        except redis.ConnectionError:  # not listening yet, or loading its data (LOADING)
            time.sleep(0.05)
    return False


def start_redis(appendonly: bool = False) -> Redis:
    """``redis-server`` on a free port of 127.0.0.1, ready to answer; no persistence, or with
    ``appendonly`` an append-only file synced every second (as ``deploy/compose.yaml``)."""
    root = Path(tempfile.mkdtemp(prefix="threshold-bot-redis-"))
    for _attempt in range(5):
        port = free_port()
        argv = [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if appendonly else "no",
            "--appendfsync",
            "everysec",
            "--dir",
            str(root),
            "--protected-mode",
            "yes",
        ]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if _answers(process, port):
            return Redis(port=port, process=process, root=root, argv=argv)
        process.kill()
        process.wait()
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError("redis-server did not start")


# ----- fixtures ------------------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One throwaway PostgreSQL cluster for the session."""
    with postgres_running() as server:
        yield server


@contextlib.contextmanager
def postgres_running() -> Iterator[Postgres]:
    """A PostgreSQL cluster of the caller's own (one to restart), stopped at the end (skips
    the test if none can start)."""
    reason = postgres_missing()
    if reason:
        unavailable(reason)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def redis_running(appendonly: bool = False) -> Iterator[Redis]:
    """A ``redis-server`` of the caller's own, stopped at the end (skips the test if none)."""
    reason = redis_missing()
    if reason:
        unavailable(reason)
    server = start_redis(appendonly)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Redis]:
    """One ``redis-server`` for the session (flush it in a test that needs it empty)."""
    with redis_running() as server:
        yield server


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A new empty PostgreSQL database for this test; dropped afterwards."""
    server: Postgres = request.getfixturevalue("postgres")
    name = server.create_database()
    try:
        yield server.url(name)
    finally:
        server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new empty database as an SQLAlchemy URL: a file of SQLite, or PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    yield request.getfixturevalue("postgres_url")


@pytest.fixture(params=["sqlite", "postgresql+redis"])
def backends(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings overrides for the App's store and queue: ``{}`` (the embedded SQLite store and
    queue of ``make_settings``), or a new PostgreSQL database and the emptied Redis server."""
    if request.param == "sqlite":
        return {}
    server: Redis = request.getfixturevalue("redis_server")
    server.flush()
    return {"database_url": request.getfixturevalue("postgres_url"), "redis_url": server.url}


@pytest.fixture(scope="module", params=["sqlite", "postgresql+redis"])
def module_backends(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """``backends`` for a module-scoped App: one PostgreSQL database for the module."""
    if request.param == "sqlite":
        yield {}
        return
    server: Redis = request.getfixturevalue("redis_server")
    server.flush()
    cluster: Postgres = request.getfixturevalue("postgres")
    name = cluster.create_database("m")
    try:
        yield {"database_url": cluster.url(name), "redis_url": server.url}
    finally:
        cluster.drop_database(name)
