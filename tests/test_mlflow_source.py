"""MlflowSource against a real ``mlflow server`` (SQLite backend) on 127.0.0.1."""

from __future__ import annotations

import socket
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
from tests.mlflow_server import free_port

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
def logged(mlflow_server: str) -> tuple[str, list[Logged]]:
    """Seven runs in one experiment; the last one still running."""
    client = mlflow_tracking.MlflowClient(tracking_uri=mlflow_server)
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
    mlflow_server: str, logged: tuple[str, list[Logged]]
) -> None:
    _, runs = logged
    history = MlflowSource(tracking_uri=mlflow_server, per_page=2).fetch(SPEC)  # several pages
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


def test_filters(mlflow_server: str, logged: tuple[str, list[Logged]]) -> None:
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
    assert [r.id for r in MlflowSource(tracking_uri=mlflow_server).fetch(spec).runs] == expected


def test_tracking_uri_from_the_spec_and_summary_keys(
    mlflow_server: str, logged: tuple[str, list[Logged]]
) -> None:
    spec = SPEC.model_copy(
        update={"tracking_uri": mlflow_server, "summary_keys": {"acc": "eval/acc"}}
    )
    history = MlflowSource(allowed=[mlflow_server]).fetch(spec)  # a server the operator allows
    assert all(r.summary["acc"] == r.summary["eval/acc"] for r in history.runs)


def test_incremental_sync_through_the_cache(mlflow_server: str, tmp_path: Path) -> None:
    client = mlflow_tracking.MlflowClient(tracking_uri=mlflow_server)
    experiment_id = client.create_experiment("incremental")
    spec = SourceSpec(kind="mlflow", experiment="incremental")
    first = [log_run(client, experiment_id, i, "FINISHED") for i in range(3)]
    running = log_run(client, experiment_id, 3, None)
    sessions: sessionmaker[Session] = init_db(make_engine(f"sqlite:///{tmp_path / 'c.db'}"))
    source = CachedSource(sessions, MlflowSource(tracking_uri=mlflow_server))
    assert source.sync(spec).new == len(first) + 1
    assert not source.sync(spec).changed
    client.set_terminated(running.run_id, status="FINISHED")
    log_run(client, experiment_id, 4, "FINISHED")
    log_run(client, experiment_id, 5, "FAILED")
    result = source.sync(spec)
    assert (result.new, result.updated, result.total) == (2, 1, 6)
    states = {r.id: r.state for r in source.cached(spec).runs}
    assert states[running.run_id] == "finished"


def test_missing_experiment_is_not_found(mlflow_server: str) -> None:
    spec = SPEC.model_copy(update={"experiment": "no_such_experiment"})
    with pytest.raises(HistoryNotFound, match="no_such_experiment"):
        MlflowSource(tracking_uri=mlflow_server).fetch(spec)


def test_unreachable_server_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(HistoryUnavailable, match=r"127\.0\.0\.1"):
        MlflowSource(tracking_uri=url).fetch(SPEC)


def test_no_tracking_uri_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(HistoryNotFound, match="MLFLOW_TRACKING_URI"):
        MlflowSource().fetch(SPEC)
