"""The store behaves the same on SQLite and PostgreSQL where the engines differ.

PostgreSQL enforces ``VARCHAR`` lengths, refuses NUL characters in text, NaN in JSON and
integers over 32 bits in ``INTEGER``, and runs transactions at read committed with
concurrent writers; SQLite does none of that.  Every test here runs on both engines
(``database_url``) and expects the same: descriptive text cleaned and cut to its column,
identifying text refused, GitHub ids of 64 bits kept, one winner per claim, group commit
in one transaction.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.store import approvals, audit, deliveries, installations, reports, runs, tracked
from bot.adapters.store import drift as records
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import NewDelivery
from bot.adapters.store.group_commit import GroupCommit
from bot.core.history.runs import SourceRun
from bot.core.history.series import Steps
from bot.core.models import Run, SourceSpec
from tests.webhooks import new_delivery_id

pytestmark = pytest.mark.servers

Sessions = sessionmaker[Session]
NUL = "\x00"
BIG_ID = 2**40 + 7  # a GitHub id past 32 bits (check runs and comments are already there)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    made = make_engine(database_url)
    init_db(made)
    yield made
    made.dispose()


@pytest.fixture
def sessions(engine: Engine) -> Sessions:
    return sessionmaker(engine, expire_on_commit=False)


def hostile(limit: int) -> str:
    """A string past ``limit`` characters, with NUL characters early on."""
    return "a\x00b" + "é" * limit + NUL


def cleaned(text: str, limit: int | None = None) -> str:
    """What a descriptive column keeps of ``text``."""
    kept = text.replace(NUL, "")
    return kept if limit is None else kept[:limit]


def refused(write: Callable[[], object]) -> None:
    with pytest.raises(StatementError) as caught:
        write()
    assert isinstance(caught.value.orig, ValueError), caught.value


def _new(delivery_id: str | None = None, **kw: Any) -> NewDelivery:
    values: dict[str, Any] = {
        "id": delivery_id or new_delivery_id(),
        "event": "pull_request",
        "action": "opened",
        "installation_id": 1,
        "body": "{}",
    }
    values.update(kw)
    return NewDelivery(**values)


# ----- text columns ----------------------------------------------------------------------


def test_descriptive_delivery_text_is_cleaned_and_cut_alike(sessions: Sessions) -> None:
    action, outcome, error, owner = hostile(64), hostile(200), hostile(10), hostile(200)
    body = '{"k": "v' + NUL + '"}'
    new = _new(action=action, body=body, status="ignored", outcome=outcome)
    assert deliveries.add(sessions, new).accepted
    stored = deliveries.get(sessions, new.id)
    assert stored is not None
    assert (stored.action, stored.outcome) == (cleaned(action, 64), cleaned(outcome, 200))
    assert stored.body == cleaned(body)

    running = _new()
    deliveries.add(sessions, running)
    assert deliveries.claim(sessions, running.id, owner, lease=60) is not None
    assert deliveries.holders(sessions) == {cleaned(owner, 200)}
    assert deliveries.renew_leases(sessions, owner, 60, [running.id]) == 1  # the cut holder
    deliveries.schedule_retry(sessions, running.id, error, datetime.now(UTC))
    retried = deliveries.get(sessions, running.id)
    assert retried is not None and retried.last_error == cleaned(error)
    deliveries.fail(sessions, running.id, error * 300)
    failed = deliveries.get(sessions, running.id)
    assert failed is not None
    assert failed.last_error == cleaned((error * 300)[: deliveries.MAX_ERROR_CHARS])


@pytest.mark.parametrize("column", ["id", "event"])
def test_a_hostile_delivery_key_is_refused_and_nothing_stored(
    sessions: Sessions, column: str
) -> None:
    for value in ("x" * 65, "ab" + NUL):
        refused(lambda value=value: deliveries.add(sessions, _new(**{column: value})))
    assert deliveries.count_by_status(sessions) == {}


def test_drift_rows_clip_their_notes_and_refuse_hostile_keys(sessions: Sessions) -> None:
    owner, note = hostile(100), hostile(50)
    item = records.claim(
        sessions, repo="o/r", file="ci/a.sh", installation_id=1, owner=owner, seconds=60
    )
    assert item is not None
    again = records.claim(  # the holder, under the name it was cut to, renews its lease
        sessions, repo="o/r", file="ci/a.sh", installation_id=1, owner=owner, seconds=60
    )
    assert again == item
    opened = item.opened(mode="issue", issue=3)
    changed = replace(opened, note=note, shown=hostile(64))
    assert records.save(sessions, changed, owner)
    saved = records.get(sessions, "o/r", "ci/a.sh")
    assert saved is not None
    assert (saved.note, saved.shown) == (cleaned(note), cleaned(hostile(64), 64))
    long_branch = replace(saved, branch="b" * 301)
    refused(lambda: records.save(sessions, long_branch, owner))
    for repo, file in (("o/" + "r" * 199, "ci/a.sh"), ("o/r", "f" * 1025), ("o/r", "a" + NUL)):
        refused(
            lambda repo=repo, file=file: records.claim(
                sessions, repo=repo, file=file, installation_id=1, owner="w", seconds=60
            )
        )
    assert [i.file for i in records.of_repo(sessions, "o/r")] == ["ci/a.sh"]


def test_reports_clean_their_html_and_refuse_a_hostile_repository(sessions: Sessions) -> None:
    html = "<p>" + NUL + "report</p>"
    common: dict[str, Any] = {"key": b"k" * 32, "number": 7, "head_sha": "a" * 40}
    token = reports.save(sessions, repo="o/r", html=html, ttl_days=1.0, **common)
    found = reports.find(sessions, token)
    assert found is not None and (found.repo, found.html) == ("o/r", cleaned(html))
    refused(lambda: reports.save(sessions, repo="o/" + NUL, html="x", ttl_days=1.0, **common))


def test_cached_runs_clip_names_and_refuse_hostile_ids(sessions: Sessions) -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    name, commit = hostile(500), hostile(64)
    run = Run(id="r1", created_at=at, name=name, commit=commit, summary={"acc": 0.5})
    with sessions.begin() as s:
        assert runs.upsert_runs(s, "k", [SourceRun(run, 0, 0)]) == {"r1": None}
    with sessions.begin() as s:  # the same run again: nothing changed (compared as stored)
        assert runs.upsert_runs(s, "k", [SourceRun(run, 0, 0)]) == {}
        (loaded,) = runs.load_runs(s, "k")
    assert (loaded.run.name, loaded.run.commit) == (cleaned(name, 500), cleaned(commit, 64))
    spec = SourceSpec(entity="e", project=hostile(600))
    with sessions.begin() as s:
        runs.mark_synced(s, "k", spec, at)
    with sessions() as s:
        assert runs.synced_at(s, "k") == at
    for bad in ("i" * 256, "r" + NUL):
        bad_run = Run(id=bad, created_at=at)
        with sessions.begin() as s:
            refused(
                lambda s=s, bad_run=bad_run: runs.upsert_runs(s, "k", [SourceRun(bad_run, 0, 0)])
            )
    with sessions.begin() as s:
        refused(lambda: runs.write_series(s, "k", "r1", {"m" * 501: Steps({1: 1.0}, 0, 0)}))
    nan = Run(id="r2", created_at=at, summary={"acc": float("nan")})
    with sessions.begin() as s:
        refused(lambda: runs.upsert_runs(s, "k", [SourceRun(nan, 0, 0)]))
    with sessions() as s:
        assert runs.cached_ids(s, "k") == {"r1"}


def test_audit_and_approvals_clip_people_and_texts(sessions: Sessions) -> None:
    actor, action, message = hostile(100), hostile(40), hostile(30)
    with sessions.begin() as s:
        audit.add(s, repo="o/r", actor=actor, action=action, outcome=hostile(40), message=message)
        approvals.approve(
            s, repo="o/r", pr_number=3, head_sha="a" * 40, approver=hostile(100), gate_values={}
        )
    with sessions() as s:
        (entry,) = audit.entries(s, "o/r")
        approval = approvals.latest(s, "o/r", 3)
    assert (entry.actor, entry.action) == (cleaned(actor, 100), cleaned(action, 40))
    assert (entry.outcome, entry.message) == (cleaned(hostile(40), 40), cleaned(message))
    assert approval is not None and approval.approver == cleaned(hostile(100), 100)
    with sessions() as s:  # written at the flush
        audit.add(s, repo="r" * 201, actor="a", action="help", outcome="done")
        refused(s.flush)


def test_an_audit_claim_with_hostile_text_is_cleaned_like_an_entry(sessions: Sessions) -> None:
    actor, message = hostile(100), hostile(20)
    claim: dict[str, Any] = {
        "repo": "o/r",
        "pr_number": 4,
        "actor": actor,
        "action": "retry",
        "outcome": "done",
        "delivery_id": "d-1",
        "message": message,
        "cooldown": timedelta(minutes=10),
        "ignore": "refused",
    }
    with sessions.begin() as s:
        assert audit.claim(s, **claim) is None
    with sessions.begin() as s:
        until = audit.claim(s, **claim)
    with sessions() as s:
        (entry,) = audit.entries(s, "o/r")
    assert (entry.actor, entry.message) == (cleaned(actor, 100), cleaned(message))
    assert entry.at.tzinfo is not None and until == entry.at + timedelta(minutes=10)


def test_time_zoned_columns_read_back_as_aware_utc(sessions: Sessions) -> None:
    naive = datetime(2026, 3, 1, 12, 0)  # naive means UTC
    elsewhere = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    with sessions.begin() as s:
        approvals.approve(
            s, repo="o/r", pr_number=1, head_sha="a", approver="x", gate_values={}, at=naive
        )
        audit.add(s, repo="o/r", actor="x", action="help", outcome="done", at=elsewhere)
    with sessions() as s:
        approval = approvals.latest(s, "o/r", 1)
        (entry,) = audit.entries(s, "o/r")
    assert approval is not None and approval.approved_at == naive.replace(tzinfo=UTC)
    assert approval.approved_at.utcoffset() == timedelta(0)
    assert entry.at == elsewhere and entry.at.utcoffset() == timedelta(0)


# ----- numbers ---------------------------------------------------------------------------


def test_github_ids_past_32_bits_round_trip(sessions: Sessions) -> None:
    new = _new(installation_id=BIG_ID)
    deliveries.add(sessions, new)
    stored = deliveries.get(sessions, new.id)
    assert stored is not None and stored.installation_id == BIG_ID
    installations.upsert(sessions, BIG_ID + 1, "acme", "active", ["acme/a"])
    installations.change_repositories(sessions, BIG_ID + 1, ["acme/b"], [])
    found = installations.get(sessions, BIG_ID + 1)
    assert found is not None and found.repositories == ("acme/a", "acme/b")
    item = records.claim(
        sessions, repo="o/r", file="f", installation_id=BIG_ID + 2, owner="w", seconds=60
    )
    assert item is not None and item.installation_id == BIG_ID + 2
    with sessions.begin() as s:
        tracked.track(s, installation_id=BIG_ID + 3, repo="o/r", number=5, head_sha="a", sources=[])
    with sessions() as s:
        assert [t.installation_id for t in tracked.tracked(s)] == [BIG_ID + 3]
    assert records.installation_ids(sessions) == [BIG_ID, BIG_ID + 1]


def test_ids_and_numbers_out_of_range_are_refused_alike(sessions: Sessions) -> None:
    refused(lambda: deliveries.add(sessions, _new(installation_id=2**63)))
    refused(lambda: installations.upsert(sessions, -(2**63) - 1, "acme", "active"))
    with sessions() as s:
        approvals.approve(
            s, repo="o/r", pr_number=2**31, head_sha="a", approver="x", gate_values={}
        )
        refused(s.flush)
    with sessions() as s:
        assert approvals.latest(s, "o/r", 2**31 - 1) is None
    assert deliveries.count_by_status(sessions) == {}
    assert installations.active(sessions) == []


# ----- concurrency -----------------------------------------------------------------------


def _race(threads: int, attempt: Callable[[int], object]) -> list[object]:
    """``attempt(i)`` from ``threads`` threads released at once; their results (errors
    re-raised)."""
    barrier = threading.Barrier(threads)

    def run(i: int) -> object:
        barrier.wait()
        return attempt(i)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(run, range(threads)))


def test_eight_threads_claiming_one_delivery_one_wins(sessions: Sessions) -> None:
    new = _new()
    deliveries.add(sessions, new)
    got = _race(8, lambda i: deliveries.claim(sessions, new.id, f"w{i}", lease=60))
    winners = [g for g in got if g is not None]
    assert len(winners) == 1
    stored = deliveries.get(sessions, new.id)
    assert stored is not None and stored.status == "running" and stored.attempts == 1


def test_eight_threads_adding_one_delivery_store_it_once(sessions: Sessions) -> None:
    delivery_id = new_delivery_id()
    got = _race(8, lambda i: deliveries.add(sessions, _new(delivery_id)))
    accepted = [g for g in got if isinstance(g, deliveries.Recorded) and g.accepted]
    assert len(accepted) == 1 and not accepted[0].duplicate
    assert deliveries.count_by_status(sessions) == {"queued": 1}


def test_eight_concurrent_audit_claims_add_one_entry(sessions: Sessions) -> None:
    def claim(i: int) -> datetime | None:
        with sessions.begin() as s:
            return audit.claim(
                s,
                repo="o/r",
                pr_number=9,
                actor=f"user{i}",
                action="retry",
                outcome="done",
                delivery_id=f"d{i}",
                message="",
                cooldown=timedelta(minutes=10),
                ignore="refused",
            )

    got = _race(8, claim)
    assert got.count(None) == 1
    with sessions() as s:
        assert len(audit.entries(s, "o/r")) == 1


def test_concurrent_repository_changes_all_count(sessions: Sessions) -> None:
    repos = [f"acme/r{i}" for i in range(8)]
    _race(8, lambda i: installations.change_repositories(sessions, 77, [repos[i]], []))
    found = installations.get(sessions, 77)
    assert found is not None and found.repositories == tuple(sorted(repos))


def test_concurrent_tracking_of_one_pr_keeps_one_row(sessions: Sessions) -> None:
    def track(i: int) -> None:
        with sessions.begin() as s:
            tracked.track(s, installation_id=1, repo="o/r", number=1, head_sha=f"{i}", sources=[])

    _race(8, track)
    with sessions() as s:
        rows = tracked.tracked(s)
    assert len(rows) == 1 and rows[0].head_sha in {str(i) for i in range(8)}


# ----- group commit and idempotence ------------------------------------------------------


def test_a_burst_of_200_is_one_transaction_visible_before_anyone_is_answered(
    engine: Engine, sessions: Sessions, database_url: str
) -> None:
    intake = deliveries.intake_sessions(sessions)
    commits: list[int] = []
    event.listen(intake.kw["bind"], "commit", lambda _conn: commits.append(1))
    observer = make_engine(database_url)  # another engine: another connection
    seen: list[int] = []

    def store(batch: list[NewDelivery]) -> list[deliveries.Recorded]:
        recorded = deliveries.add_many(intake, batch)
        with observer.connect() as conn:  # before ``store`` returns, so before any answer
            seen.append(
                int(conn.execute(select(func.count()).select_from(deliveries.T)).scalar_one())
            )
        return recorded

    news = [_new() for _ in range(200)]

    async def burst() -> list[deliveries.Recorded]:
        with ThreadPoolExecutor(1) as writer:
            committer = GroupCommit(store, executor=writer)
            got = await asyncio.gather(*(committer.submit(n) for n in news))
            assert committer.batches == 1
            return got

    try:
        answers = asyncio.run(burst())
    finally:
        observer.dispose()
        intake.kw["bind"].dispose()
    assert all(a.accepted and not a.duplicate for a in answers)
    assert (len(commits), seen) == (1, [200])


def test_duplicate_ids_are_idempotent(sessions: Sessions) -> None:
    first = [_new() for _ in range(3)]
    assert all(r.accepted for r in deliveries.add_many(sessions, first))
    again = deliveries.add_many(sessions, [first[1], _new(first[1].id), _new()])
    assert [(r.accepted, r.duplicate) for r in again] == [
        (False, True),
        (False, True),
        (True, False),
    ]
    assert deliveries.add(sessions, first[0]) == deliveries.Recorded(False, "queued", True)
    assert deliveries.count_by_status(sessions) == {"queued": 4}
