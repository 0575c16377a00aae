"""A recording stand-in for an MLflow tracking server on 127.0.0.1.

It answers the two REST calls ``MlflowSource`` makes, ``experiments/get-by-name`` (one
experiment, any name) and ``runs/search`` (the runs given), or every request with a set
failure, and records each request's method, path and headers.  For the trust-boundary
tests: which server received which credentials.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.local_http import serving

EXPERIMENT_ID = "1"


@dataclass(frozen=True)
class Received:
    """One request as the listener received it (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Failure:
    """The answer to every request while set."""

    status: int
    body: str
    content_type: str = "text/plain"


@dataclass
class MlflowListener:
    """State of one listener: the runs it serves, a failure, the requests it received."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    failure: Failure | None = None
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str, bytes]:
        """Record a request; return its status, content type and body."""
        with self.lock:
            self.received.append(Received(method, path, {k.lower(): v for k, v in headers.items()}))
        if self.failure is not None:
            return self.failure.status, self.failure.content_type, self.failure.body.encode()
        route = path.split("?")[0]
        if route.endswith("/experiments/get-by-name"):
            experiment = {"experiment_id": EXPERIMENT_ID, "name": "x", "lifecycle_stage": "active"}
            return 200, "application/json", json.dumps({"experiment": experiment}).encode()
        if route.endswith("/runs/search"):
            return 200, "application/json", json.dumps({"runs": self.runs}).encode()
        return 404, "application/json", b'{"error_code": "ENDPOINT_NOT_FOUND", "message": "no"}'


def mlflow_run(run_id: str, start_ms: int, metrics: Mapping[str, float]) -> dict[str, Any]:
    """A finished run as MLflow's REST API returns it."""
    return {
        "info": {
            "run_id": run_id,
            "run_uuid": run_id,
            "experiment_id": EXPERIMENT_ID,
            "run_name": f"run_{run_id}",
            "status": "FINISHED",
            "start_time": start_ms,
            "lifecycle_stage": "active",
        },
        "data": {
            "metrics": [
                {"key": k, "value": v, "timestamp": start_ms, "step": 0} for k, v in metrics.items()
            ],
            "tags": [{"key": "mlflow.source.git.commit", "value": run_id.ljust(40, "0")}],
        },
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, content_type, body = self.server.listener.answer(
            self.command, self.path, dict(self.headers)
        )
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, listener: MlflowListener) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.listener = listener


@contextmanager
def listen(listener: MlflowListener) -> Iterator[str]:
    """Serve ``listener`` on 127.0.0.1 (a free port) and yield its base URL."""
    with serving(_Server(listener)) as url:
        yield url
