"""The drift watch's record (``bot.adapters.store.drift``) on SQLite and PostgreSQL: claims
and leases, saves by the holder only, lookups, and which installations a round visits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from bot.adapters.store import deliveries, installations
from bot.adapters.store import drift as records
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import NewDelivery
from bot.adapters.store.drift import DriftItem, Sessions

pytestmark = pytest.mark.servers

REPO, FILE = "octo/ml", "ci/nightly.sh"


@pytest.fixture
def sessions(database_url: str) -> Iterator[Sessions]:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def _claim(sessions: Sessions, owner: str, seconds: float = 60.0, **kw: str) -> DriftItem | None:
    return records.claim(
        sessions,
        repo=kw.get("repo", REPO),
        file=kw.get("file", FILE),
        installation_id=7,
        owner=owner,
        seconds=seconds,
    )


def test_a_claim_creates_the_row_and_a_second_owner_waits(sessions: Sessions) -> None:
    first = _claim(sessions, "a")
    assert first == DriftItem(repo=REPO, file=FILE, installation_id=7)
    assert _claim(sessions, "b") is None  # the lease of "a" holds
    assert _claim(sessions, "a") is not None  # its holder may claim it again (renewal)
    assert _claim(sessions, "b", file="other.sh") is not None  # another file: another row
    assert [i.file for i in records.of_repo(sessions, REPO)] == ["ci/nightly.sh", "other.sh"]


def test_an_expired_lease_is_taken_over_and_the_old_holder_can_no_longer_save(
    sessions: Sessions,
) -> None:
    held = _claim(sessions, "a", seconds=0.2)
    assert held is not None
    assert _claim(sessions, "b") is None
    time.sleep(0.3)
    taken = _claim(sessions, "b")
    assert taken is not None
    stale = held.opened(mode="issue", issue=5)
    assert not records.save(sessions, stale, "a")  # "a" lost the lease: nothing written
    assert records.get(sessions, REPO, FILE) == taken
    assert records.save(sessions, taken.opened(mode="issue", issue=9), "b")
    saved = records.get(sessions, REPO, FILE)
    assert saved is not None and (saved.state, saved.issue, saved.mode) == ("open", 9, "issue")


def test_release_frees_the_row_only_for_its_holder(sessions: Sessions) -> None:
    assert _claim(sessions, "a") is not None
    records.release(sessions, REPO, FILE, "b")  # not the holder: a no-op
    assert _claim(sessions, "b") is None
    records.release(sessions, REPO, FILE, "a")
    assert _claim(sessions, "b") is not None
    assert not records.save(sessions, DriftItem(REPO, FILE, 7, note="x"), "a")


def test_saved_fields_round_trip_and_closing_keeps_the_numbers(sessions: Sessions) -> None:
    item = _claim(sessions, "a")
    assert item is not None
    opened = DriftItem(
        repo=REPO,
        file=FILE,
        installation_id=7,
        branch="threshold-bot/rebaseline/ci/nightly.sh",
        values={"ACC_MIN_VALUE": "0.42"},
        shown="abc",
    ).opened(mode="pull_request", pull=12)
    assert records.save(sessions, opened, "a")
    got = records.get(sessions, REPO, FILE)
    assert got is not None
    assert (got.state, got.pull, got.issue, got.branch) == ("open", 12, None, opened.branch)
    assert got.opened_at is not None and got.closed_at is None
    assert got.values == {}  # ``opened`` starts a new item: nothing written to it yet
    closed = got.closed(by_maintainer=True)
    assert records.save(sessions, closed, "a")
    after = records.get(sessions, REPO, FILE)
    assert after is not None
    assert (after.state, after.pull, after.dismissed) == ("idle", 12, "abc")
    assert after.closed_at is not None
    assert records.get(sessions, REPO, "missing.sh") is None


def test_by_number_finds_open_items_by_issue_or_pull(sessions: Sessions) -> None:
    for file, owner in (("a.sh", "w"), ("b.sh", "w"), ("c.sh", "w")):
        assert _claim(sessions, owner, file=file) is not None
    assert records.save(sessions, DriftItem(REPO, "a.sh", 7).opened(mode="issue", issue=3), "w")
    item = DriftItem(REPO, "b.sh", 7).opened(mode="pull_request", issue=4, pull=5)
    assert records.save(sessions, item, "w")
    closed = DriftItem(REPO, "c.sh", 7).opened(mode="issue", issue=6).closed()
    assert records.save(sessions, closed, "w")
    found = {n: records.by_number(sessions, REPO, n) for n in (3, 4, 5, 6)}
    assert {n: (i.file if i else None) for n, i in found.items()} == {
        3: "a.sh",
        4: "b.sh",
        5: "b.sh",
        6: None,  # closed: no longer an open item
    }
    assert records.by_number(sessions, "octo/other", 3) is None


def test_installation_ids_are_active_ones_and_those_of_deliveries_not_lost(
    sessions: Sessions,
) -> None:
    installations.upsert(sessions, 1, "octo", "active")
    installations.upsert(sessions, 2, "acme", "suspended")
    installations.upsert(sessions, 3, "gone", "deleted")
    for number, installation in enumerate((2, 3, 4, 5, 4, None)):
        new = NewDelivery(
            id=f"d{number}",
            event="push",
            action=None,
            installation_id=installation,
            body="{}",
        )
        assert deliveries.add(sessions, new).accepted
    # 1: active; 4 and 5: heard of through deliveries only; 2 and 3: suspended / deleted
    assert records.installation_ids(sessions) == [1, 4, 5]


@pytest.mark.parametrize("existing", [False, True], ids=["new row", "existing row"])
def test_threads_claiming_one_row_at_once_exactly_one_wins(
    sessions: Sessions, existing: bool
) -> None:
    if existing:
        assert _claim(sessions, "setup", seconds=0.0) is not None  # created, lease expired
        time.sleep(0.01)
    threads = 8
    barrier = threading.Barrier(threads)
    won: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def contender(owner: str) -> None:
        barrier.wait()
        try:
            got = _claim(sessions, owner)
        except BaseException as exc:  # an error is a failure of the test, reported below
            with lock:
                errors.append(exc)
            return
        if got is not None:
            with lock:
                won.append(owner)

    workers = [threading.Thread(target=contender, args=(f"w{i}",)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=60)
    assert errors == []
    assert len(won) == 1
    rows = records.of_repo(sessions, REPO)
    assert len(rows) == 1  # one row, whoever created it
    # the winner holds it: it can save, nobody else can
    losers = [f"w{i}" for i in range(threads) if f"w{i}" != won[0]]
    assert not any(records.save(sessions, rows[0], o) for o in losers)
    assert records.save(sessions, rows[0], won[0])
