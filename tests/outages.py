"""Outages of the throwaway services of ``tests/services.py``: stop one, start it again on
its port with its options, as an operator's restart would.

``stop_redis`` terminates the server (its directory stays); ``restart_redis`` starts a new
``redis-server`` on the same port and returns it once it answers PING.  ``stop_postgres``
is ``pg_ctl stop -m fast`` (clients' connections are cut); ``restart_postgres`` starts the
cluster again with the options it ran with (``postmaster.opts``).  Used by
``tests/test_log_floods.py`` and ``bench/bench_log_flood.py``.
"""

from __future__ import annotations

import shlex
import subprocess
import time

from tests.services import START_SECONDS, Postgres, Redis, _run_as


def stop_redis(server: Redis) -> None:
    """Stop ``server`` (SIGTERM, then SIGKILL after 10 s); keep its directory."""
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def restart_redis(server: Redis) -> Redis:
    """A new ``redis-server`` on ``server``'s port (no persistence), once it answers."""
    import redis

    argv = ["redis-server", "--port", str(server.port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(server.root)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if redis.Redis(port=server.port, socket_timeout=1).ping():
                return Redis(port=server.port, process=process, root=server.root)
        except redis.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"redis-server did not start again on port {server.port}")


def stop_postgres(server: Postgres) -> None:
    """``pg_ctl stop -m fast``: the server ends every connection and stops."""
    data = str(server.root / "data")
    _run_as(server.user, [str(server.pg_ctl), "-D", data, "-m", "fast", "-w", "stop"])


def restart_postgres(server: Postgres) -> None:
    """Start the stopped cluster again, on its port, with the options it last ran with."""
    data = server.root / "data"
    ran = shlex.split((data / "postmaster.opts").read_text())  # the server's command line
    options = [a for n, a in enumerate(ran[1:], 1) if a != "-D" and ran[n - 1] != "-D"]
    argv = [str(server.pg_ctl), "-D", str(data), "-l", str(server.root / "server.log"), "-w"]
    argv += ["-t", str(int(START_SECONDS)), "-o", shlex.join(options), "start"]
    _run_as(server.user, argv)
