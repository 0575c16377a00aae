"""Test helpers: settings in a temp dir, a real uvicorn server on a free port, a recorder.

``live_server(app)`` runs uvicorn in a thread on ``127.0.0.1:0`` and yields its base
URL; ``Recorder`` is a router whose handlers record what they were called with
(the bedevere way of testing routing); ``ServerProcess`` runs
``python -m bot.cli.serve serve`` as a subprocess (crash test, benchmark).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI

from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.core.routing import Router
from bot.features.context import HandlerContext

SECRET = "test-secret-0123456789"


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for a test: database and queue under ``tmp_path``, no ``.env``, fast retries."""
    values: dict[str, Any] = {
        "app_id": 4242,
        "webhook_secret": SECRET,
        "database_url": f"sqlite:///{tmp_path / 'bot.db'}",
        "queue_path": tmp_path / "queue.db",
        "workers": 2,
        "retry_base_seconds": 0.05,
        "retry_max_seconds": 0.2,
        "max_attempts": 3,
        "lease_seconds": 5,
        "bot_login": "threshold-bot[bot]",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def wait_until(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``check`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def deliver_and_wait(
    url: str,
    sessions: Any,
    name: str,
    changes: dict[str, Any],
    *,
    secret: str = SECRET,
    timeout: float = 60.0,
) -> deliveries.Delivery:
    """POST the signed fixture delivery ``name`` to the App at ``url``; wait until a worker
    has finished it (done or failed) and return its stored record."""
    from tests.webhooks import signed_fixture

    body, headers = signed_fixture(name, secret, changes)
    return post_and_wait(url, sessions, body, headers, what=name, timeout=timeout)


def post_and_wait(
    url: str,
    sessions: Any,
    body: bytes,
    headers: dict[str, str],
    *,
    what: str = "delivery",
    timeout: float = 60.0,
) -> deliveries.Delivery:
    """POST a signed delivery (``tests.webhooks.signed``) to the App at ``url``; wait until
    a worker has finished it (done or failed) and return its stored record."""
    answer = httpx.post(f"{url}/webhook", content=body, headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    delivery_id = headers["X-GitHub-Delivery"]

    def settled() -> bool:
        found = deliveries.get(sessions, delivery_id)
        return found is not None and found.status in ("done", "failed")

    wait_until(settled, timeout=timeout, what=f"{what} delivery to be processed")
    found = deliveries.get(sessions, delivery_id)
    assert found is not None
    return found


@contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free local port; yield ``http://127.0.0.1:PORT``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), what="uvicorn to start")
        if not server.started:
            raise AssertionError("uvicorn did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


class Recorder:
    """A router with handlers that record each call; ``fail_with`` makes them raise."""

    def __init__(self, *routes: tuple[str, tuple[str, ...]]) -> None:
        self.router = Router[HandlerContext]()
        self.calls: list[tuple[str, str | None, str, int]] = []  # event, action, id, attempt
        self.payloads: list[dict[str, Any]] = []
        self.fail_with: list[BaseException] = []  # raised one by one, then succeed
        self._lock = threading.Lock()
        for event, actions in routes:
            self.router.register(event, *actions)(self.handle)

    def handle(self, ctx: HandlerContext, payload: dict[str, Any]) -> None:
        """Record the call; raise the next queued error, if any."""
        with self._lock:
            d = ctx.delivery
            self.calls.append((d.event, d.action, d.id, d.attempt))
            self.payloads.append(payload)
            if self.fail_with:
                raise self.fail_with.pop(0)

    def ids(self) -> list[str]:
        """Delivery ids of the recorded calls, in order."""
        with self._lock:
            return [c[2] for c in self.calls]


def make_pem() -> str:
    """A fresh RSA private key in PEM, as a GitHub App's key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def server_env(workdir: Path) -> dict[str, str]:
    """The environment of a ``ServerProcess`` for a benchmark: a store in ``workdir``, the
    test secret, and a GitHub address that is never the internet."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(
        {
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            "APP_ID": "4242",
            "PRIVATE_KEY": make_pem(),
            "WEBHOOK_SECRET": SECRET,
            "DATABASE_URL": f"sqlite:///{workdir / 'bot.db'}",
            "GITHUB_API_URL": "http://127.0.0.1:9",
        }
    )
    return env


class ServerProcess:
    """``python -m bot.cli.serve serve --port 0`` as a subprocess, logging to a file."""

    def __init__(
        self, env: dict[str, str], cwd: Path, log: Path, args: tuple[str, ...] = ()
    ) -> None:
        self.log = log
        self._offset = log.stat().st_size if log.exists() else 0
        self.stream = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli.serve",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                *args,
            ],
            env=env,
            cwd=cwd,
            stdout=self.stream,
            stderr=subprocess.STDOUT,
        )
        try:
            self.port = self._wait_for_port()
            self.url = f"http://127.0.0.1:{self.port}"
            wait_until(self._healthy, timeout=60, what="/healthz")
        except BaseException:
            self.stop(signal.SIGKILL)
            raise

    def _wait_for_port(self) -> int:
        found: list[int] = []

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log.read_text()[-2000:]}")
            text = self.log.read_bytes()[self._offset :].decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("{") and '"port"' in line:
                    found.append(int(json.loads(line)["port"]))
                    return True
            return False

        wait_until(listening, timeout=60, what="the server to listen")
        return found[0]

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, sig: int) -> int:
        """Send ``sig`` (SIGKILL: a crash; SIGTERM: a graceful stop); return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        self.stream.close()
        return code
