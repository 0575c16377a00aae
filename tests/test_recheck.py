"""``bot.features.review.recheck``: tracking open threshold PRs, re-reviewing them on new runs.

Real SQLite store (tmp_path), the recording GitHub, and a W&B stand-in whose runs the
test extends between re-checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.history.cache import SyncResult
from bot.adapters.locks import DEFAULT_TTL
from bot.adapters.locks.rows import RowLocks
from bot.adapters.store import tracked
from bot.adapters.store.db import init_db, make_engine
from bot.core.models import History, Run, SourceSpec
from bot.features.review.recheck import recheck, review_and_track, stale, unique_sources
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_pr import CONFIG, FILE_SOURCE, HISTORY, METRIC, SCRIPT, history_jsonl, script

PROJECT = "gsm8k_ci"


class GrowingSource:
    """A remote source whose runs the test appends to."""

    def __init__(self, values: Sequence[float]) -> None:
        self.runs: list[Run] = []
        self.add(values)

    def add(self, values: Sequence[float]) -> None:
        start = datetime(2026, 8, 1, tzinfo=UTC)
        for value in values:
            i = len(self.runs)
            self.runs.append(
                Run(id=f"r{i}", created_at=start + timedelta(hours=i), summary={METRIC: value})
            )

    def fetch(self, spec: SourceSpec) -> History:
        return History(runs=tuple(self.runs), source=spec.describe())


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return make_engine(f"sqlite:///{tmp_path / 'bot.db'}")


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return init_db(engine)


@pytest.fixture
def locks(engine: Engine, sessions: sessionmaker[Session]) -> Iterator[RowLocks]:
    found = RowLocks(engine, "tests", DEFAULT_TTL)
    yield found
    found.close()


@pytest.fixture
def gh() -> RecordingGitHub:
    fake = RecordingGitHub()
    fake.commit({SCRIPT: script("0.56", project=PROJECT)})
    return fake


def synced(results: Mapping[str, int]) -> object:
    """A ``SyncSources`` that reports ``results[project]`` new runs and records its calls."""
    calls: list[list[str]] = []

    def sync(specs: Sequence[SourceSpec], clients: object = None) -> dict[str, SyncResult]:
        calls.append([s.project or "" for s in specs])
        return {
            s.key(): SyncResult(source=s.describe(), new=results.get(s.project or "", 0))
            for s in specs
        }

    sync.calls = calls  # type: ignore[attr-defined]
    return sync


def test_reviewing_a_remote_source_pr_tracks_it(
    gh: RecordingGitHub, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    pull = gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})
    source = GrowingSource([0.55] * 25)

    review_and_track(gh, sessions, 42, gh.repo, 7, lambda spec: source, locks=locks)

    with sessions() as session:
        (row,) = tracked.tracked(session)
    assert (row.installation_id, row.repo, row.number, row.head_sha) == (
        42,
        gh.repo,
        7,
        pull.head_sha,
    )
    assert [(s.kind, s.project) for s in row.sources] == [("wandb", PROJECT)]


def test_file_source_pr_is_not_tracked(
    gh: RecordingGitHub, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    gh.commit({SCRIPT: script("0.56"), CONFIG: FILE_SOURCE})
    gh.commit({HISTORY: history_jsonl([gh.commits[-1]] * 40, [0.55] * 40)})
    gh.open_pull(8, {SCRIPT: script("0.50")})

    outcome = review_and_track(gh, sessions, 1, gh.repo, 8, None, locks=locks)

    assert outcome.status == "reviewed"
    with sessions() as session:
        assert tracked.tracked(session) == []


def test_recheck_re_reviews_only_prs_whose_source_got_new_runs(
    gh: RecordingGitHub, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    pull = gh.open_pull(7, {SCRIPT: script("0.53", project=PROJECT)})
    source = GrowingSource([0.55 + 0.001 * (i % 5) for i in range(25)])
    remote = lambda spec: source  # noqa: E731
    review_and_track(gh, sessions, 1, gh.repo, 7, remote, locks=locks)
    assert gh.check_for(pull.head_sha).conclusion != "action_required"
    writes_before = len(gh.writes())

    quiet = synced({})
    report = recheck(sessions, lambda _id: gh, remote, quiet, locks)  # type: ignore[arg-type]
    assert quiet.calls == [[PROJECT]]  # type: ignore[attr-defined]
    assert report.reviewed == () and len(gh.writes()) == writes_before

    source.add([0.51] * 3)  # new runs fail 0.53
    report = recheck(sessions, lambda _id: gh, remote, synced({PROJECT: 3}), locks)  # type: ignore[arg-type]

    assert report.reviewed == (f"{gh.repo}#7",)
    assert gh.writes()[writes_before:] == ["upsert_comment", "upsert_check_run"]
    assert gh.check_for(pull.head_sha).conclusion == "action_required"


def test_recheck_forgets_closed_prs(
    gh: RecordingGitHub, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})
    source = GrowingSource([0.55] * 25)
    review_and_track(gh, sessions, 1, gh.repo, 7, lambda spec: source, locks=locks)
    gh.pulls[7] = replace(gh.pulls[7], state="closed")

    report = recheck(sessions, lambda _id: gh, lambda spec: source, synced({PROJECT: 1}), locks)  # type: ignore[arg-type]

    assert report.reviewed == (f"{gh.repo}#7",)
    with sessions() as session:
        assert tracked.tracked(session) == []


def test_unique_sources_and_stale_are_keyed_by_source() -> None:
    a, b = SourceSpec(project="a"), SourceSpec(project="b")
    pulls = [
        tracked.Tracked(1, "o/r", 1, "s1", (a,)),
        tracked.Tracked(1, "o/r", 2, "s2", (a, b)),
        tracked.Tracked(1, "o/q", 3, "s3", (b,)),
    ]
    assert unique_sources(pulls) == [a, b]
    results = {a.key(): SyncResult("a", new=0), b.key(): SyncResult("b", updated=1)}
    assert [p.number for p in stale(pulls, results)] == [2, 3]
    failed = {b.key(): SyncResult("b", new=2, error="503")}
    assert stale(pulls, failed) == []


def test_a_neutral_review_is_retried_once_its_sources_sync() -> None:
    a, b = SourceSpec(project="a"), SourceSpec(project="b")
    pulls = [tracked.Tracked(1, "o/r", 1, "s1", (a, b), conclusion="neutral")]
    quiet = {a.key(): SyncResult("a"), b.key(): SyncResult("b")}
    one_down = {a.key(): SyncResult("a"), b.key(): SyncResult("b", error="W&B 503")}
    assert stale(pulls, quiet) == pulls
    assert stale(pulls, one_down) == []


def test_a_re_review_owed_by_a_workflow_run_is_done_at_the_next_round(
    gh: RecordingGitHub, sessions: sessionmaker[Session], locks: RowLocks
) -> None:
    gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})
    source = GrowingSource([0.55] * 25)
    remote = lambda spec: source  # noqa: E731
    review_and_track(gh, sessions, 1, gh.repo, 7, remote, locks=locks)
    with sessions.begin() as session:
        tracked.mark_due(session, [(gh.repo, 7)])

    report = recheck(sessions, lambda _id: gh, remote, synced({}), locks)  # type: ignore[arg-type]

    assert report.reviewed == (f"{gh.repo}#7",)  # nothing new, but owed
    with sessions() as session:
        (row,) = tracked.tracked(session)
    assert row.conclusion not in ("", tracked.DUE)  # the review's own again
    assert recheck(sessions, lambda _id: gh, remote, synced({}), locks).reviewed == ()  # type: ignore[arg-type]
