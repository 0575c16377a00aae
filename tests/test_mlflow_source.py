"""MlflowSource against a real ``mlflow server`` (SQLite backend) on 127.0.0.1."""

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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.history.cache import CachedSource
from bot.adapters.history.mlflow_source import COMMIT_TAG, MlflowSource, prepare_environment
from bot.adapters.store.db import init_db, make_engine
from bot.core.history.sources import HistoryNotFound, HistoryUnavailable
from bot.core.models import SourceSpec

pytestmark = pytest.mark.servers

prepare_environment()  # before mlflow is imported: no telemetry, bounded retries
mlflow_tracking = pytest.importorskip(
    "mlflow.tracking", reason="mlflow is not installed (pip install '.[dev]')"
)
Metric = pytest.importorskip("mlflow.entities").Metric

EXPERIMENT = "gsm8k_ci"
T0 = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
STATUSES = ["FINISHED", "FINISHED", "FAILED", "FINISHED", "KILLED", "FINISHED"]


@dataclass
class Logged:
    """What the test logged for one run, to compute expectations from."""

    run_id: str
    name: str
    created_at: datetime
    status: str
    commit: str
    tags: dict[str, str]
    acc: float  # the latest eval/acc value


def _free_port() -> int:
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
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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
        port = _free_port()
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


def log_run(client: object, experiment_id: str, i: int, status: str | None) -> Logged:
    """Log run ``i`` (three steps of eval/acc); leave it running when ``status`` is None."""
    created = T0 + timedelta(hours=i)
    tags = {COMMIT_TAG: f"{i:040x}", "nightly" if i % 2 else "manual": "true"}
    run = client.create_run(  # type: ignore[attr-defined]
        experiment_id,
        start_time=int(created.timestamp() * 1000),
        run_name=f"nightly_{i}",
        tags=tags,
    )
    run_id = run.info.run_id
    values = [0.4 + i / 100 + step / 1000 for step in range(3)]
    at = int(created.timestamp() * 1000)
    metrics = [Metric("eval/acc", v, at + step, step) for step, v in enumerate(values)]
    metrics.append(Metric("tokens", 200 + i, at, 0))
    client.log_batch(run_id, metrics=metrics)  # type: ignore[attr-defined]
    if status is not None:
        client.set_terminated(run_id, status=status)  # type: ignore[attr-defined]
    return Logged(
        run_id, f"nightly_{i}", created, status or "RUNNING", f"{i:040x}", tags, values[-1]
    )


@pytest.fixture(scope="module")
def logged(server: str) -> tuple[str, list[Logged]]:
    """Seven runs in one experiment; the last one still running."""
    client = mlflow_tracking.MlflowClient(tracking_uri=server)
    experiment_id = client.create_experiment(EXPERIMENT)
    runs = [log_run(client, experiment_id, i, STATUSES[i % len(STATUSES)]) for i in range(6)]
    runs.append(log_run(client, experiment_id, 6, None))
    return experiment_id, runs


SPEC = SourceSpec(kind="mlflow", experiment=EXPERIMENT)


@pytest.fixture(autouse=True)
def no_outbound(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Refuse and record any connection from this process to a non-loopback address."""
    attempts: list[object] = []
    real_connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            attempts.append(address)
            raise OSError(f"test guard: outbound connection to {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield attempts
    assert attempts == [], f"outbound connections attempted: {attempts}"


def test_reads_runs_with_commit_latest_metrics_and_states(
    server: str, logged: tuple[str, list[Logged]]
) -> None:
    _, runs = logged
    history = MlflowSource(tracking_uri=server, per_page=2).fetch(SPEC)  # several pages
    by_id = {r.id: r for r in history.runs}
    assert [r.id for r in history.runs] == [r.run_id for r in runs]  # oldest first
    states = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "killed", "RUNNING": "running"}
    for expected in runs:
        run = by_id[expected.run_id]
        assert run.commit == expected.commit
        assert run.name == expected.name
        assert run.created_at == expected.created_at
        assert run.state == states[expected.status]
        assert run.summary["eval/acc"] == pytest.approx(expected.acc)
        assert run.tags == tuple(sorted(k for k in expected.tags if not k.startswith("mlflow.")))
    assert history.stats.finished == sum(r.status == "FINISHED" for r in runs)
    assert history.source == f"mlflow:{EXPERIMENT}"


def test_filters(server: str, logged: tuple[str, list[Logged]]) -> None:
    _, runs = logged
    after = T0 + timedelta(hours=1)
    spec = SPEC.model_copy(
        update={
            "states": ("finished",),
            "created_after": after,
            "tags": ("nightly",),
            "name_regex": r"_[135]$",
        }
    )
    expected = [
        r.run_id
        for r in runs
        if r.status == "FINISHED"
        and r.created_at >= after
        and "nightly" in r.tags
        and r.name[-1] in "135"
    ]
    assert expected
    assert [r.id for r in MlflowSource(tracking_uri=server).fetch(spec).runs] == expected


def test_tracking_uri_from_the_spec_and_summary_keys(
    server: str, logged: tuple[str, list[Logged]]
) -> None:
    spec = SPEC.model_copy(update={"tracking_uri": server, "summary_keys": {"acc": "eval/acc"}})
    history = MlflowSource(allowed=[server]).fetch(spec)  # a server the operator allows
    assert all(r.summary["acc"] == r.summary["eval/acc"] for r in history.runs)


def test_incremental_sync_through_the_cache(server: str, tmp_path: Path) -> None:
    client = mlflow_tracking.MlflowClient(tracking_uri=server)
    experiment_id = client.create_experiment("incremental")
    spec = SourceSpec(kind="mlflow", experiment="incremental")
    first = [log_run(client, experiment_id, i, "FINISHED") for i in range(3)]
    running = log_run(client, experiment_id, 3, None)
    sessions: sessionmaker[Session] = init_db(make_engine(f"sqlite:///{tmp_path / 'c.db'}"))
    source = CachedSource(sessions, MlflowSource(tracking_uri=server))
    assert source.sync(spec).new == len(first) + 1
    assert not source.sync(spec).changed
    client.set_terminated(running.run_id, status="FINISHED")
    log_run(client, experiment_id, 4, "FINISHED")
    log_run(client, experiment_id, 5, "FAILED")
    result = source.sync(spec)
    assert (result.new, result.updated, result.total) == (2, 1, 6)
    states = {r.id: r.state for r in source.cached(spec).runs}
    assert states[running.run_id] == "finished"


def test_missing_experiment_is_not_found(server: str) -> None:
    spec = SPEC.model_copy(update={"experiment": "no_such_experiment"})
    with pytest.raises(HistoryNotFound, match="no_such_experiment"):
        MlflowSource(tracking_uri=server).fetch(spec)


def test_unreachable_server_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with pytest.raises(HistoryUnavailable, match=r"127\.0\.0\.1"):
        MlflowSource(tracking_uri=url).fetch(SPEC)


def test_no_tracking_uri_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(HistoryNotFound, match="MLFLOW_TRACKING_URI"):
        MlflowSource().fetch(SPEC)
