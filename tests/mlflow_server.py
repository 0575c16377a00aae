"""A real ``mlflow server`` (SQLite backend) on 127.0.0.1 for the tests that read MLflow: the
fixture ``mlflow_server`` yields its URL (registered in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"mlflow server not healthy after {timeout:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has exited already
        os.killpg(process.pid, signal.SIGTERM)  # the server and its uvicorn workers
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``mlflow server`` with a SQLite store; yields its URL.

    The port is free when chosen but may be taken before the server binds it (other tests
    run in parallel): a server that exits before it is healthy is started again on another."""
    root = tmp_path_factory.mktemp("mlflow")
    env = {
        **os.environ,
        "HOME": str(root),  # keep the server's files out of the real home
        "XDG_CONFIG_HOME": str(root / ".config"),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
    }
    for attempt in range(5):
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--default-artifact-root",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ]
        with (root / f"server-{attempt}.log").open("wb") as log:
            process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=root,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process, timeout=240)  # slow to start on a loaded machine
        except RuntimeError:
            exited = process.poll() is not None
            _stop(process)
            if exited and attempt < 4:
                continue  # exited: most likely the port was taken meanwhile
            raise
        try:
            yield url
        finally:
            _stop(process)
        return
