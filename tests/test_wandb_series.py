"""Per-step series from W&B: the real wandb client's ``scan_history`` against the fake W&B
GraphQL server, cached in a real SQLite run cache, and asked for by the review."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from bot.adapters.github.api import PullInfo
from bot.adapters.history.cache import CachedSource
from bot.adapters.history.wandb_source import WandbSource
from bot.adapters.store import runs as store
from bot.adapters.store.db import init_db, make_engine
from bot.cli.main import app
from bot.core import deadline
from bot.core.config import RepoConfig
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import GateChange, History, SourceSpec
from bot.core.thresholds.discover import find_gates
from bot.features.review.pull import PullThresholds, analyse
from tests.fakes.wandb_server import API_KEY, FakeRun, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ENTITY, PROJECT = "acme", "gpt3_functional"
METRICS = ("lm loss", "iteration-time")
SPEC = SourceSpec(kind="wandb", entity=ENTITY, project=PROJECT)
SERIES = SPEC.model_copy(update={"series": METRICS})
STATES = ("finished",) * 6 + ("running", "failed")
LAST_STEP, PAGE = 50, 20
PAGES = math.ceil((LAST_STEP + 1) / PAGE)  # steps 0..50, 20 a request
GOLDEN = Path(__file__).parent / "fixtures" / "gates" / "series" / "golden_values_ci.json"
HISTORY_OPS = ("RunHistoryKeys", "RunParquetHistory", "SampledHistoryPage")


def curve_run(i: int, state: str = "finished", last_step: int = LAST_STEP) -> FakeRun:
    """Run ``i`` of a functional test: the loss every 10 steps from step 1, the iteration
    time every step; run 2 logged a NaN loss at step 21."""
    rows: list[dict[str, Any]] = []
    for step in range(1, last_step + 1):
        row: dict[str, Any] = {"_step": step, "iteration-time": 0.6 + ((7 * i + step) % 5) / 100}
        if step % 10 == 1:
            row["lm loss"] = round(10.85 - 0.05 * step - 0.01 * i, 4)
        rows.append(row)
    if i == 2:
        rows[20]["lm loss"] = "NaN"
    run = nightly_run(i, state=state)
    run.history = rows
    run.summary = {"lm loss": rows[-10]["lm loss"], "_step": last_step}
    return run


def expected(run: FakeRun, key: str, first: int = 0) -> dict[int, float]:
    """What the series of ``key`` must be: the run's finite values from step ``first`` on."""
    return {
        row["_step"]: float(row[key])
        for row in run.history
        if key in row and isinstance(row[key], float) and row["_step"] >= first
    }


def scans(fake: FakeWandb) -> dict[str, int]:
    """How many history requests of each kind the fake answered."""
    return {op: fake.requests[op] for op in HISTORY_OPS}


@pytest.fixture()
def fake() -> FakeWandb:
    server = FakeWandb()
    for i, state in enumerate(STATES):
        server.add_run(ENTITY, PROJECT, curve_run(i, state))
    return server


@pytest.fixture()
def url(fake: FakeWandb) -> Iterator[str]:
    with serve(fake) as base:
        yield base


@pytest.fixture()
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    return init_db(make_engine(f"sqlite:///{tmp_path / 'cache.db'}"))


def wandb(url: str, **options: Any) -> WandbSource:
    return WandbSource(
        api_key=API_KEY,
        base_url=url,
        per_page=10,
        retries=1,
        retry_wait=(1.0, 1.0),
        history_page=options.pop("history_page", PAGE),
        **options,
    )


def runs_of(fake: FakeWandb) -> dict[str, FakeRun]:
    return fake.projects[(ENTITY, PROJECT)]


def finished(fake: FakeWandb) -> list[FakeRun]:
    return [r for r in runs_of(fake).values() if r.state == "finished"]


# --------------------------------------------------------------------------- the source


def test_fetch_reads_the_series_of_finished_runs(fake: FakeWandb, url: str) -> None:
    history = wandb(url).fetch(SERIES)
    for run in history.runs:
        stored = runs_of(fake)[run.id]
        if run.state != "finished":
            assert run.series == {} and stored.history_asked == []
            continue
        assert run.series == {m: expected(stored, m) for m in METRICS}
        assert stored.history_asked == [("lm loss",)] * PAGES + [("iteration-time",)] * PAGES
    assert history.stats.non_finite_values == 1  # run 2's NaN loss
    assert fake.requests["SampledHistoryPage"] == len(finished(fake)) * len(METRICS) * PAGES


def test_without_series_no_history_is_read(fake: FakeWandb, url: str) -> None:
    history = wandb(url).fetch(SPEC)
    assert all(r.series == {} for r in history.runs)
    assert scans(fake) == dict.fromkeys(HISTORY_OPS, 0)


def test_only_the_last_steps_are_scanned(fake: FakeWandb, url: str) -> None:
    history = wandb(url, series_steps=15, history_page=10).fetch(SERIES)
    first = LAST_STEP + 1 - 15
    for run in history.finished:
        assert run.series == {m: expected(runs_of(fake)[run.id], m, first) for m in METRICS}
        assert min(run.series["iteration-time"]) == first
    assert fake.requests["SampledHistoryPage"] == len(finished(fake)) * len(METRICS) * 2


def test_summary_keys_name_the_history_key(fake: FakeWandb, url: str) -> None:
    spec = SPEC.model_copy(update={"summary_keys": {"loss": "lm loss"}, "series": ("loss",)})
    history = wandb(url).fetch(spec)
    newest = history.finished[-1]
    assert newest.series == {"loss": expected(runs_of(fake)[newest.id], "lm loss")}
    assert set(runs_of(fake)[newest.id].history_asked) == {("lm loss",)}


def test_a_run_without_the_metric_has_an_empty_series(fake: FakeWandb, url: str) -> None:
    spec = SPEC.model_copy(update={"series": ("eval/acc",)})
    history = wandb(url).fetch(spec)
    assert {json.dumps(r.series) for r in history.finished} == {'{"eval/acc": {}}'}


# --------------------------------------------------------------------------- the cache


def test_each_finished_run_is_read_once_then_served_from_the_cache(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    n = len(finished(fake))
    cold = CachedSource(sessions, wandb(url)).fetch(SERIES)
    # one scan per run and metric; the last step is asked once more per run, up front
    assert scans(fake) == {
        "RunHistoryKeys": n * (1 + len(METRICS)),
        "RunParquetHistory": n * len(METRICS),
        "SampledHistoryPage": n * len(METRICS) * PAGES,
    }
    before = scans(fake)
    warm = CachedSource(sessions, wandb(url)).fetch(SERIES)
    assert scans(fake) == before  # not one history request
    assert [r.series for r in warm.runs] == [r.series for r in cold.runs]
    for run in warm.finished:
        assert run.series == {m: expected(runs_of(fake)[run.id], m) for m in METRICS}
    assert warm.stats.non_finite_values == cold.stats.non_finite_values == 1


def test_series_do_not_change_the_cache_key(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    assert store.source_key(SERIES) == store.source_key(SPEC)
    source = CachedSource(sessions, wandb(url))
    source.fetch(SERIES)
    runs_before = fake.requests["Runs"]
    plain = source.fetch(SPEC)  # the same cache: an incremental sync, no series
    assert fake.requests["Runs"] - runs_before == 1
    assert len(plain.runs) == len(STATES) and all(r.series == {} for r in plain.runs)


def test_a_new_run_costs_one_scan_per_metric(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, wandb(url))
    source.fetch(SERIES)
    before = scans(fake)
    fake.add_run(ENTITY, PROJECT, curve_run(len(STATES)))
    history = source.fetch(SERIES)
    assert fake.requests["RunParquetHistory"] - before["RunParquetHistory"] == len(METRICS)
    newest = runs_of(fake)[history.finished[-1].id]
    assert history.finished[-1].series == {m: expected(newest, m) for m in METRICS}


def test_a_running_run_is_read_once_it_finished(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, wandb(url))
    running = next(r for r in runs_of(fake).values() if r.state == "running")
    running.history = curve_run(6, last_step=20).history
    source.fetch(SERIES)
    assert running.history_asked == []
    fake.update_run(ENTITY, PROJECT, running.name, state="finished")
    running.history = curve_run(6).history
    history = source.fetch(SERIES)
    now = next(r for r in history.runs if r.id == running.name)
    assert now.series == {m: expected(running, m) for m in METRICS}
    assert max(now.series["iteration-time"]) == LAST_STEP


def test_a_run_that_changed_is_read_again_after_a_full_sync(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, wandb(url))
    source.fetch(SERIES)
    before = fake.requests["RunParquetHistory"]
    source.sync(SERIES, full=True)  # nothing changed: the series stay cached
    assert all(r.series for r in source.fetch(SERIES).finished)
    assert fake.requests["RunParquetHistory"] == before
    resumed = finished(fake)[0]  # resumed, and finished again 10 steps later
    longer = curve_run(0, last_step=LAST_STEP + 10)
    fake.update_run(ENTITY, PROJECT, resumed.name, history=longer.history, summary=longer.summary)
    source.sync(SERIES, full=True)
    history = source.fetch(SERIES)
    assert fake.requests["RunParquetHistory"] - before == len(METRICS)  # that run only
    again = next(r for r in history.runs if r.id == resumed.name)
    assert again.series == {m: expected(longer, m) for m in METRICS}
    assert max(again.series["iteration-time"]) == LAST_STEP + 10


def test_only_the_newest_finished_runs_are_read(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, wandb(url), series_runs=2)
    history = source.fetch(SERIES)
    read = [r.id for r in history.finished if r.series]
    assert read == [r.id for r in history.finished][-2:]
    assert fake.requests["RunParquetHistory"] == 2 * len(METRICS)
    fake.add_run(ENTITY, PROJECT, curve_run(len(STATES)))  # pushes the older of the two out
    history = source.fetch(SERIES)
    assert [r.id for r in history.finished if r.series] == [r.id for r in history.finished][-2:]
    assert fake.requests["RunParquetHistory"] == 3 * len(METRICS)
    key = store.source_key(SPEC)
    with sessions() as session:  # its series left the cache
        assert store.missing_series(session, key, read[:1], METRICS) == {read[0]: list(METRICS)}
        assert store.missing_series(session, key, read[1:], METRICS) == {}


def test_an_outage_midway_keeps_the_series_already_read(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    per_run = len(METRICS) * PAGES
    fake.fail(503, count=100, operation="SampledHistoryPage", after=2 * per_run)
    source = CachedSource(sessions, wandb(url))
    with pytest.raises(HistoryUnavailable, match="HTTP 503"):
        source.fetch(SERIES)
    fake.faults.clear()
    before = fake.requests["RunParquetHistory"]
    history = source.fetch(SERIES)
    # the two newest runs were read (and cached) before the outage: only the others now
    assert fake.requests["RunParquetHistory"] - before == (len(finished(fake)) - 2) * len(METRICS)
    assert all(r.series for r in history.finished)


def test_the_job_deadline_stops_series_reads(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, wandb(url))
    with deadline.within(0.0), pytest.raises(deadline.JobTimeout, match="per-step history"):
        source.fetch(SERIES)
    assert fake.requests["SampledHistoryPage"] == 0
    assert len(source.cached(SPEC).runs) == len(STATES)  # the runs were synced
    assert all(r.series for r in source.fetch(SERIES).finished)  # read once time allows


# --------------------------------------------------------------------------- the review


def test_the_review_asks_for_the_series_of_curve_gates() -> None:
    thresholds = find_gates(
        "tests/functional/golden_values_ci.json", GOLDEN.read_text(), RepoConfig()
    )
    assert thresholds is not None
    changes = tuple(
        GateChange(head=g.model_copy(update={"source": SPEC})) for g in thresholds.gates
    )
    asked: list[SourceSpec] = []

    class Recording:
        def fetch(self, spec: SourceSpec) -> History:
            asked.append(spec)
            return History(runs=())

    pull = PullInfo(7, "golden", "u", "open", False, False, "a", "main", "b", "f", "h", None)
    found = PullThresholds(pull=pull, config=RepoConfig(), base_sha="b", changes=changes)
    analyse(found, Recording())
    assert [s.series for s in asked] == [tuple(sorted(METRICS))]
    assert asked[0].key() == SPEC.key()


def test_review_wandb_reads_the_golden_curves_series(
    fake: FakeWandb, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", API_KEY)
    monkeypatch.setenv("WANDB_BASE_URL", url)
    monkeypatch.chdir(tmp_path)
    args = ["review", "--wandb", f"{ENTITY}/{PROJECT}", "--file", str(GOLDEN), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    assert {g["metric"] for g in review["gates"]} == set(METRICS)
    for run in runs_of(fake).values():
        read = set(run.history_asked)
        assert read == ({(m,) for m in METRICS} if run.state == "finished" else set())
