"""WandbSource: the real wandb client against the local fake W&B GraphQL server."""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.history.wandb_source import (
    WandbSource,
    failure_reason,
    source_run,
    wandb_filters,
)
from bot.core.history.runs import numeric_summary
from bot.core.history.sources import BadHistory, HistoryNotFound, HistoryUnavailable
from bot.core.models import SourceSpec
from tests.fakes.wandb_server import API_KEY, NIGHTLY_START, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parent.parent
ENTITY, PROJECT = "acme", "gsm8k_ci"
SPEC = SourceSpec(kind="wandb", entity=ENTITY, project=PROJECT)
T0 = NIGHTLY_START
MARKER = "internal-host-10.0.0.5 secret"  # what W&B's answers must not carry into a review


@pytest.fixture()
def fake() -> FakeWandb:
    """A fake W&B holding 25 runs of one project."""
    server = FakeWandb()
    for i in range(25):
        server.add_run(ENTITY, PROJECT, nightly_run(i))
    return server


@pytest.fixture()
def url(fake: FakeWandb) -> Iterator[str]:
    """The base URL of the running fake."""
    with serve(fake) as base:
        yield base


def source(url: str, **kwargs: Any) -> WandbSource:
    """A WandbSource pointed at the fake, with small pages and quick retries."""
    options: dict[str, Any] = {"per_page": 10, "retries": 1, "retry_wait": (1.0, 1.0)}
    options.update(kwargs)
    return WandbSource(api_key=API_KEY, base_url=url, **options)


# --------------------------------------------------------------------------- pure


def test_default_spec_has_no_filters() -> None:
    assert wandb_filters(SPEC) == {}


def test_every_spec_filter_becomes_a_server_filter() -> None:
    spec = SPEC.model_copy(
        update={
            "states": ("finished", "running"),
            "tags": ("nightly",),
            "group": "gsm8k",
            "job_type": "eval",
            "name_regex": "^nightly_",
            "created_after": datetime(2026, 7, 1, 10, 0, tzinfo=UTC),
        }
    )
    filters = wandb_filters(spec)
    assert filters == {
        "$and": [
            {"state": {"$in": ["finished", "pending", "preempting", "running"]}},
            {"tags": {"$in": ["nightly"]}},
            {"group": "gsm8k"},
            {"jobType": "eval"},
            {"display_name": {"$regex": "^nightly_"}},
            {"created_at": {"$gte": "2026-07-01T10:00:00"}},
        ]
    }


def test_incremental_filter_ors_new_runs_with_running_ones() -> None:
    since = datetime(2026, 7, 2, 9, 30, tzinfo=UTC)
    spec = SPEC.model_copy(update={"group": "gsm8k"})
    assert wandb_filters(spec, created_since=since, run_ids=["a", "b"]) == {
        "$and": [
            {"group": "gsm8k"},
            {
                "$or": [
                    {"created_at": {"$gte": "2026-07-02T09:30:00"}},
                    {"name": {"$in": ["a", "b"]}},
                ]
            },
        ]
    }


def test_summary_is_flattened_and_mapped() -> None:
    raw = {
        "eval": {"acc": 0.5, "nested": {"deep": 2}},
        "eval/acc": 0.75,  # a flat key wins over the nested spelling
        "loss": float("nan"),
        "ok": True,
        "note": "text",
        "hist": {"_type": "histogram", "values": [1, 2]},
        "_runtime": 12.5,
        "_step": 3,
    }
    summary = numeric_summary(raw, {"accuracy": "eval/acc", "steps": "_step"})
    assert summary.metrics == {
        "eval/acc": 0.75,
        "eval/nested/deep": 2.0,
        "accuracy": 0.75,
        "_step": 3.0,
        "steps": 3.0,
    }
    assert summary.non_finite == 1
    assert summary.non_numeric == 3  # bool, string, histogram


def test_summary_integer_beyond_float_range_is_non_finite() -> None:
    summary = numeric_summary({"big": 10**400, "small": -(10**400), "ok": 1}, {})
    assert summary.metrics == {"ok": 1.0}
    assert summary.non_finite == 2


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("POST /graphql giving up after 4 attempt(s)\nHTTP 503: down", "HTTP 503"),
        ("giving up after 2 attempt(s): HTTP 429: slow down", "HTTP 429"),
        ("HTTP 401: user is not logged in", "API key"),
        ("the service process is busy and did not respond in time.", "within 7 s"),
        ("dial tcp 127.0.0.1:1: connect: connection refused", "WANDB_BASE_URL"),
        (f"HTTP 418: {MARKER}", "W&B answered HTTP 418"),
        (f"something odd: {MARKER}", "details in the App's log"),
    ],
)
def test_failure_reasons_are_explained(message: str, expected: str) -> None:
    reason = failure_reason(message, 7)
    assert expected in reason and MARKER not in reason


def test_a_malformed_run_names_the_field_not_the_value() -> None:
    attrs = {"id": "run1", "created_at": f"yesterday at {MARKER}", "state": "finished"}
    with pytest.raises(BadHistory, match="'run1' is malformed: bad created_at") as err:
        source_run(attrs, {})
    assert MARKER not in str(err.value)
    with pytest.raises(BadHistory, match="malformed: no created_at"):
        source_run({"id": "run2"}, {})


# --------------------------------------------------------------------------- fake server


def test_pages_through_all_runs_with_one_request_per_page(fake: FakeWandb, url: str) -> None:
    history = source(url).fetch(SPEC)
    stored = sorted(fake.projects[(ENTITY, PROJECT)].values(), key=lambda r: r.created_at)
    assert [r.id for r in history.runs] == [r.name for r in stored]
    pages = math.ceil(len(stored) / 10)
    assert fake.requests["Runs"] == pages
    assert fake.total_requests == 1 + pages  # Viewer, then pages: never one request per run
    first, original = history.runs[0], stored[0]
    assert first.name == original.display_name
    assert first.commit == original.commit
    assert first.tags == tuple(original.tags)
    assert first.created_at == original.created_at
    assert first.summary == {"eval/acc": original.summary["eval"]["acc"], "tokens": 200.0}
    states = [r.state for r in stored]
    assert history.stats.finished == states.count("finished")
    assert history.stats.by_state == {s: states.count(s) for s in set(states)}
    assert history.source == f"wandb:{ENTITY}/{PROJECT}"


def test_values_that_are_not_numbers_are_counted_per_key_over_finished_runs() -> None:
    fake = FakeWandb()
    for i in range(12):
        fake.add_run(ENTITY, PROJECT, nightly_run(i, summary={"eval": {"acc": "n/a"}}))
    with serve(fake) as base:
        history = source(base).fetch(SPEC)
    finished = [r for r in fake.projects[(ENTITY, PROJECT)].values() if r.state == "finished"]
    assert history.not_numbers == {"eval/acc": len(finished)}
    assert all("eval/acc" not in r.summary for r in history.runs)


def test_summary_keys_map_metrics(url: str) -> None:
    spec = SPEC.model_copy(update={"summary_keys": {"accuracy": "eval/acc"}})
    history = source(url).fetch(spec)
    assert all(r.summary["accuracy"] == r.summary["eval/acc"] for r in history.runs)


def test_server_side_filters_select_the_expected_runs(fake: FakeWandb, url: str) -> None:
    after = T0 + timedelta(hours=6)
    spec = SPEC.model_copy(
        update={
            "states": ("finished",),
            "tags": ("nightly",),
            "group": "gsm8k",
            "job_type": "eval",
            "name_regex": "^nightly_",
            "created_after": after,
        }
    )
    expected = sorted(
        r.name
        for r in fake.projects[(ENTITY, PROJECT)].values()
        if r.state == "finished"
        and "nightly" in r.tags
        and r.group == "gsm8k"
        and r.job_type == "eval"
        and re.search("^nightly_", r.display_name or "")
        and r.created_at >= after
    )
    assert expected  # the data leaves something to find
    assert sorted(r.id for r in source(url).fetch(spec).runs) == expected


def test_duplicates_across_pages_are_dropped(fake: FakeWandb, url: str) -> None:
    fake.page_overlap = 3  # every page repeats the last 3 runs of the previous one
    history = source(url).fetch(SPEC)
    ids = [r.id for r in history.runs]
    assert len(ids) == len(set(ids)) == 25
    assert history.stats.duplicate_ids == 3 * (fake.requests["Runs"] - 1) > 0


def test_fetch_runs_since_a_time_plus_given_ids(fake: FakeWandb, url: str) -> None:
    since = T0 + timedelta(hours=20)
    runs = source(url).fetch_runs(SPEC, created_since=since, run_ids=["run00002", "run00004"])
    expected = {r.name for r in fake.projects[(ENTITY, PROJECT)].values() if r.created_at >= since}
    assert {item.run.id for item in runs} == expected | {"run00002", "run00004"}
    assert fake.requests["Runs"] == 1


def test_wrong_api_key_is_a_clear_unavailable_error(url: str) -> None:
    bad = WandbSource(api_key="wrong-" + "x" * 40, base_url=url)
    with pytest.raises(HistoryUnavailable, match="API key") as err:
        bad.fetch(SPEC)
    assert f"{ENTITY}/{PROJECT}" in str(err.value)
    assert "not logged in" not in str(err.value)  # the fake's answer: logged, not shown


def test_missing_api_key_is_a_clear_unavailable_error(url: str) -> None:
    with pytest.raises(HistoryUnavailable, match="WANDB_API_KEY"):
        WandbSource(api_key=None, base_url=url).fetch(SPEC)


def test_missing_project_is_not_found(url: str) -> None:
    spec = SPEC.model_copy(update={"project": "no_such_project"})
    with pytest.raises(HistoryNotFound, match=f"{ENTITY}/no_such_project"):
        source(url).fetch(spec)


def test_missing_entity_is_not_found(url: str) -> None:
    with pytest.raises(HistoryNotFound, match="WANDB_ENTITY"):
        source(url).fetch(SourceSpec(kind="wandb", project=PROJECT))


def test_default_entity_is_used(url: str) -> None:
    history = source(url, default_entity=ENTITY).fetch(SourceSpec(kind="wandb", project=PROJECT))
    assert len(history.runs) == 25


def test_429_with_retry_after_is_retried(fake: FakeWandb, url: str) -> None:
    wandb = source(url, retries=3)
    wandb.fetch(SPEC)  # connect first, so the fault hits the Runs query
    before = fake.requests["Runs"]
    fake.fail(429, count=2, retry_after=1, operation="Runs")
    started = time.monotonic()
    history = wandb.fetch(SPEC)
    assert len(history.runs) == 25
    assert fake.requests["Runs"] - before == 3 + 2  # three pages plus two refused attempts
    assert time.monotonic() - started >= 1.9  # Retry-After: 1 was honoured twice


def test_503_after_the_retry_budget_is_unavailable(fake: FakeWandb, url: str) -> None:
    fake.fail(503, count=100, operation="Runs")
    started = time.monotonic()
    with pytest.raises(HistoryUnavailable, match="HTTP 503") as err:
        source(url, retries=2).fetch(SPEC)
    assert fake.requests["Runs"] == 3  # the first attempt and two retries, then it gives up
    assert f"{ENTITY}/{PROJECT}" in str(err.value)
    assert time.monotonic() - started < 15


def test_429_after_the_retry_budget_is_unavailable(fake: FakeWandb, url: str) -> None:
    fake.fail(429, count=100, retry_after=1, operation="Runs")
    with pytest.raises(HistoryUnavailable, match="HTTP 429"):
        source(url, retries=1).fetch(SPEC)
    assert fake.requests["Runs"] == 2


def test_an_outage_longer_than_the_timeout_fails_within_the_timeout(
    fake: FakeWandb, url: str
) -> None:
    fake.fail(503, count=1000, retry_after=1, operation="Runs")
    started = time.monotonic()
    with pytest.raises(HistoryUnavailable, match="within 2 s"):
        source(url, retries=50, timeout=2).fetch(SPEC)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, "W&B answered HTTP 400"), (404, "W&B answered HTTP 404"), (403, "rejected the API key")],
)
def test_error_texts_of_w_and_b_are_logged_not_repeated(
    fake: FakeWandb, url: str, caplog: pytest.LogCaptureFixture, status: int, expected: str
) -> None:
    fake.fail(status, count=10, operation="Runs", message=MARKER)
    with caplog.at_level(logging.WARNING), pytest.raises(HistoryUnavailable) as err:
        source(url).fetch(SPEC)
    assert expected in str(err.value) and f"{ENTITY}/{PROJECT}" in str(err.value)
    assert MARKER not in str(err.value)
    assert MARKER in caplog.text


# --------------------------------------------------------------------------- isolation


def _core_pids() -> list[int]:
    """Pids of wandb-core processes started by this test process."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"wandb-core" in cmdline[0]:
            pids.append(int(entry.name))
    return pids


def _remote_addresses(pid: int) -> set[str]:
    """Remote IPv4/IPv6 addresses of the TCP sockets process ``pid`` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    remotes = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[2] != "00000000:0000":
                remotes.add(fields[2].split(":")[0])
    return remotes


_LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux /proc")
def test_wandb_talks_only_to_the_fake_and_reports_nothing_home(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            raise AssertionError(f"outbound connection attempted to {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    home_before = {p.name for p in Path.home().iterdir()} if Path.home().is_dir() else set()
    repo_before = {p.name for p in ROOT.iterdir()}
    assert len(source(url).fetch(SPEC).runs) == 25
    pids = _core_pids()
    assert pids, "wandb-core sidecar not found"
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"--no-observability" in cmdline  # no error reporting to W&B's Sentry
        assert _remote_addresses(pid) <= _LOOPBACK
    assert {p.name for p in ROOT.iterdir()} == repo_before
    if Path.home().is_dir():
        assert {p.name for p in Path.home().iterdir()} == home_before
    wandb_dir = Path(os.environ["WANDB_DIR"])
    assert wandb_dir.is_dir() and not wandb_dir.resolve().is_relative_to(ROOT)


def test_an_outage_during_the_key_check_is_an_outage_not_a_rejected_key(
    fake: FakeWandb, url: str
) -> None:
    fake.fail(503, count=1000)  # every request, the key check included
    with pytest.raises(HistoryUnavailable) as err:
        source(url, retries=1, timeout=5).fetch(SPEC)
    assert "rejected the API key" not in str(err.value)
    assert "503" in str(err.value) or "did not answer" in str(err.value)
