"""The dashboard's record (``bot.adapters.store.dashboards``) on SQLite and PostgreSQL: claims
and leases, saves by the holder only, the body's and the notes' bounds, a repository
forgotten, and a store of revision 0005 upgraded to hold it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.config import Config

from bot.adapters.store import dashboards, schema
from bot.adapters.store.dashboards import BODY_LIMIT, NOTE_LIMIT, NOTES_KEPT, Dashboard, Sessions
from bot.adapters.store.db import init_db, make_engine

pytestmark = pytest.mark.servers

REPO = "octo/ml"


@pytest.fixture
def sessions(database_url: str) -> Iterator[Sessions]:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def _claim(
    sessions: Sessions, owner: str, seconds: float = 60.0, repo: str = REPO
) -> Dashboard | None:
    return dashboards.claim(sessions, repo=repo, installation_id=7, owner=owner, seconds=seconds)


def test_a_claim_creates_the_row_and_a_second_owner_waits(sessions: Sessions) -> None:
    assert dashboards.get(sessions, REPO) is None
    first = _claim(sessions, "a")
    assert first == Dashboard(repo=REPO, installation_id=7)
    assert dashboards.get(sessions, REPO) == first
    assert _claim(sessions, "b") is None  # the lease of "a" holds
    assert _claim(sessions, "a") is not None  # its holder may claim it again (renewal)
    assert _claim(sessions, "b", repo="octo/other") is not None  # another repository


def test_an_expired_lease_is_taken_over_and_the_old_holder_can_no_longer_save(
    sessions: Sessions,
) -> None:
    held = _claim(sessions, "a", seconds=0.2)
    assert held is not None
    assert _claim(sessions, "b") is None
    time.sleep(0.3)
    taken = _claim(sessions, "b")
    assert taken is not None
    assert not dashboards.save(sessions, Dashboard(REPO, 7, issue=5, body="stale"), "a")
    assert dashboards.get(sessions, REPO) == taken
    assert dashboards.save(sessions, Dashboard(REPO, 7, issue=9, body="fresh"), "b")
    saved = dashboards.get(sessions, REPO)
    assert saved is not None and (saved.issue, saved.body) == (9, "fresh")


def test_release_frees_the_row_only_for_its_holder(sessions: Sessions) -> None:
    assert _claim(sessions, "a") is not None
    dashboards.release(sessions, REPO, "b")  # not the holder: a no-op
    assert _claim(sessions, "b") is None
    dashboards.release(sessions, REPO, "a")
    assert _claim(sessions, "b") is not None
    assert not dashboards.save(sessions, Dashboard(REPO, 7, note="x"), "a")


def test_saved_fields_round_trip_and_notes_keep_the_newest(sessions: Sessions) -> None:
    held = _claim(sessions, "a")
    assert held is not None
    body = "<!-- threshold-bot:dashboard -->\n- [ ] rebaseline — ünïcode ✓\n" + "x" * 60_000
    written = Dashboard(
        repo=REPO, installation_id=7, issue=3, body=body, fingerprint="f" * 64, note="n"
    )
    for i in range(NOTES_KEPT + 3):
        written = written.noted(f"@alice asked {i}")
    assert written.notes[0] == f"@alice asked {NOTES_KEPT + 2}"  # newest first
    assert len(written.notes) == NOTES_KEPT
    assert dashboards.save(sessions, written, "a")
    assert dashboards.get(sessions, REPO) == written
    long = written.noted("@bob " + "y" * (2 * NOTE_LIMIT))
    assert len(long.notes[0]) == NOTE_LIMIT
    assert dashboards.save(sessions, long, "a")
    got = dashboards.get(sessions, REPO)
    assert got is not None and got.notes == long.notes


def test_a_body_past_githubs_limit_is_refused_and_nul_characters_dropped(
    sessions: Sessions,
) -> None:
    assert len(Dashboard(REPO, 7, body="b" * BODY_LIMIT).body) == BODY_LIMIT
    with pytest.raises(ValueError, match="65537 characters"):
        Dashboard(REPO, 7, body="b" * (BODY_LIMIT + 1))
    assert _claim(sessions, "a") is not None
    assert dashboards.save(sessions, Dashboard(REPO, 7, body="a\x00b", notes=("c\x00d",)), "a")
    got = dashboards.get(sessions, REPO)
    assert got is not None and (got.body, got.notes) == ("ab", ("cd",))


def test_forget_repo_deletes_its_row_only(sessions: Sessions) -> None:
    assert _claim(sessions, "a") is not None
    assert _claim(sessions, "a", repo="octo/other") is not None
    with sessions.begin() as session:
        assert dashboards.forget_repo(session, REPO) == 1
    assert dashboards.get(sessions, REPO) is None
    assert dashboards.get(sessions, "octo/other") is not None


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
    row = dashboards.get(sessions, REPO)
    assert row is not None
    losers = [f"w{i}" for i in range(threads) if f"w{i}" != won[0]]
    assert not any(dashboards.save(sessions, row, o) for o in losers)
    assert dashboards.save(sessions, row, won[0])


def test_a_store_at_0005_upgrades_to_hold_dashboards_and_downgrades(database_url: str) -> None:
    engine = make_engine(database_url)
    config = Config()
    config.set_main_option("script_location", str(schema.MIGRATIONS))
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005")
        conn.commit()
    assert schema.current(engine) == "0005"
    sessions = init_db(engine, upgrade=True)
    assert schema.current(engine) == schema.head()
    assert _claim(sessions, "a") is not None
    assert dashboards.save(sessions, Dashboard(REPO, 7, issue=4, body="kept"), "a")
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0005")
        conn.commit()
    assert schema.current(engine) == "0005"
    engine.dispose()
