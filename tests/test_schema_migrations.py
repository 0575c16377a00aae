"""The store's schema migrations (Alembic), on SQLite and on PostgreSQL.

A store made by release 1 (``tests/fixtures/store/release-1*.sql``: the statements its
``create_all`` ran) upgrades in place with every row kept; a fresh store has exactly the
models' schema; the App's processes refuse a schema that is not theirs with one line; several
processes creating the same empty store at once make one schema.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, MetaData, insert, select, text
from typer.testing import CliRunner, Result

from bot.adapters.store import audit, schema
from bot.adapters.store.db import TABLE_MODULES, Base, init_db, make_engine
from bot.cli.main import app
from tests.live import server_env, wait_until

pytestmark = pytest.mark.servers

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "store"
RUNNER = CliRunner()
T0 = datetime(2025, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
NAIVE = T0.replace(tzinfo=None)


# ----- helpers ---------------------------------------------------------------------------
def engine_of(url: str) -> Engine:
    return make_engine(url)


def dialect(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "sqlite"


def release_1_store(url: str) -> None:
    """An empty database made into a store of release 1, from the statements it ran."""
    name = "release-1.postgresql.sql" if dialect(url) == "postgresql" else "release-1.sql"
    lines = (FIXTURES / name).read_text().splitlines()
    sql = "\n".join(line for line in lines if not line.startswith("--"))
    statements = [s.strip() for s in sql.split(";\n") if s.strip()]
    engine = engine_of(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def migrate_to(url: str, revision: str) -> None:
    """Run the migrations up to ``revision`` (as an older version of the App would have)."""
    engine = engine_of(url)
    config = Config()
    config.set_main_option("script_location", str(schema.MIGRATIONS))
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        conn.commit()
    engine.dispose()


def model_differences(url: str) -> list[Any]:
    """What alembic's autogenerate sees between the database and the models."""
    for module in TABLE_MODULES:
        importlib.import_module(module)
    engine = engine_of(url)
    with engine.connect() as conn:
        found = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    return list(found)


def snapshot(url: str) -> dict[str, set[tuple[Any, ...]]]:
    """Every table, column, type, constraint, index (and sequence) of the database."""
    engine = engine_of(url)
    with engine.connect() as conn:
        if dialect(url) == "sqlite":
            rows = conn.execute(
                text("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL")
            )
            found = {"sqlite_master": {tuple(r) for r in rows}}
        else:
            queries = {
                "columns": "SELECT table_name, column_name, data_type, character_maximum_length,"
                " is_nullable, column_default FROM information_schema.columns"
                " WHERE table_schema = 'public'",
                "constraints": "SELECT conrelid::regclass::text, conname, contype,"
                " pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE connamespace = 'public'::regnamespace",
                "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes"
                " WHERE schemaname = 'public'",
                "sequences": "SELECT sequence_name, data_type FROM information_schema.sequences"
                " WHERE sequence_schema = 'public'",
            }
            found = {k: {tuple(r) for r in conn.execute(text(q))} for k, q in queries.items()}
    engine.dispose()
    return found


def versions(url: str) -> list[str]:
    engine = engine_of(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    engine.dispose()
    return list(rows)


def cli(*args: str) -> Result:
    return RUNNER.invoke(app, list(args))


def plain(value: Any) -> Any:
    """A value as both engines return it: datetimes naive UTC (SQLite drops the zone)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


# What release 1 stored, table by table; ``id`` of autoincrement tables left to the database.
RELEASE_1_ROWS: dict[str, list[dict[str, Any]]] = {
    "deliveries": [
        {
            "id": "d-done",
            "event": "pull_request",
            "action": "opened",
            "installation_id": 77,
            "body": "",
            "received_at": NAIVE,
            "status": "done",
            "attempts": 1,
            "last_error": None,
            "outcome": "reviewed",
            "updated_at": NAIVE + timedelta(seconds=2),
            "next_attempt_at": None,
            "lease_until": None,
            "claimed_by": None,
            "finished_at": NAIVE + timedelta(seconds=2),
        },
        {
            "id": "d-queued",
            "event": "issue_comment",
            "action": "created",
            "installation_id": 77,
            "body": '{"action": "created", "comment": {"body": "/threshold-bot approve"}}',
            "received_at": NAIVE + timedelta(minutes=1),
            "status": "retry",
            "attempts": 2,
            "last_error": "GitHub answered 502",
            "outcome": None,
            "updated_at": NAIVE + timedelta(minutes=1),
            "next_attempt_at": NAIVE + timedelta(minutes=2),
            "lease_until": NAIVE + timedelta(minutes=3),
            "claimed_by": "host:123:worker-1",
            "finished_at": None,
        },
    ],
    "approvals": [
        {
            "repo": "acme/models",
            "pr_number": 12,
            "head_sha": "a" * 40,
            "approver": "maintainer",
            "approved_at": T0,
            "gate_values": {"accuracy": 0.91, "loss": 0.25},
        }
    ],
    "audit_log": [
        {
            "at": T0,
            "repo": "acme/models",
            "pr_number": 12,
            "actor": "maintainer",
            "action": "approve",
            "outcome": "done",
            "detail": {"gates": ["accuracy"]},
            "delivery_id": "d-queued",
            "message": "/threshold-bot approve",
        },
        {
            "at": T0 + timedelta(hours=1),
            "repo": "acme/models",
            "pr_number": None,
            "actor": "threshold-bot[bot]",
            "action": "rebaseline",
            "outcome": "refused",
            "detail": {},
            "delivery_id": None,
            "message": "",
        },
    ],
    "installations": [
        {
            "id": 77,
            "account": "acme",
            "status": "active",
            "repositories": '["acme/models"]',
            "updated_at": NAIVE,
        }
    ],
    "tracked_pulls": [
        {
            "installation_id": 77,
            "repo": "acme/models",
            "number": 12,
            "head_sha": "b" * 40,
            "sources": [{"kind": "wandb", "path": "acme/models"}],
            "conclusion": "success",
            "reviewed_at": T0,
        }
    ],
    "drift_items": [
        {
            "installation_id": 77,
            "repo": "acme/models",
            "file": "tests/thresholds.py",
            "state": "open",
            "mode": "issue",
            "issue": 31,
            "pull": None,
            "branch": "",
            "fingerprint": "f" * 64,
            "values": {"accuracy": "0.9"},
            "note": "",
            "shown": "s" * 64,
            "dismissed": "",
            "opened_at": NAIVE,
            "updated_at": NAIVE,
            "closed_at": None,
            "lease_owner": None,
            "lease_until": None,
        }
    ],
    "cached_runs": [
        {
            "source": "src1",
            "run_id": "run-1",
            "created_at": NAIVE,
            "state": "finished",
            "name": "baseline",
            "commit": "c" * 40,
            "tags": ["main"],
            "summary": {"accuracy": 0.9},
            "non_numeric": 0,
            "non_finite": 1,
        },
        {
            "source": "src1",
            "run_id": "run-2",
            "created_at": NAIVE + timedelta(days=1),
            "state": "running",
            "name": None,
            "commit": None,
            "tags": [],
            "summary": {},
            "non_numeric": 2,
            "non_finite": 0,
        },
    ],
    "cached_series": [
        {
            "source": "src1",
            "run_id": "run-1",
            "metric": "loss",
            "steps": {"0": 1.5, "10": 0.25},
            "non_numeric": 0,
            "non_finite": 0,
        }
    ],
    "cached_sources": [
        {
            "source": "src1",
            "description": "W&B acme/models",
            "spec": {"kind": "wandb", "path": "acme/models"},
            "synced_at": NAIVE,
        }
    ],
    "heartbeat": [{"id": 1, "at": NAIVE}],
    "reports": [
        {
            "token_hash": "h" * 64,
            "nonce": "n" * 32,
            "repo": "acme/models",
            "number": 12,
            "head_sha": "b" * 40,
            "html": "<html>report</html>",
            "created_at": NAIVE,
            "expires_at": NAIVE + timedelta(days=30),
        }
    ],
}
# the columns added to release 1's tables since, as the upgrade leaves them in its rows
ADDED: dict[str, dict[str, Any]] = {"drift_items": {"rebaselined": None, "rebaselined_at": None}}
AUTOINCREMENT = {"approvals", "audit_log", "tracked_pulls", "drift_items", "reports"}


def fill(url: str) -> None:
    """Insert ``RELEASE_1_ROWS`` through the tables as the database describes them."""
    engine = engine_of(url)
    tables = MetaData()
    tables.reflect(engine)
    with engine.begin() as conn:
        for name, rows in RELEASE_1_ROWS.items():
            conn.execute(insert(tables.tables[name]), rows)
    engine.dispose()


def stored(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the tables of ``RELEASE_1_ROWS``, in insertion order, ids of
    autoincrement tables left out."""
    engine = engine_of(url)
    tables = MetaData()
    tables.reflect(engine)
    found: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as conn:
        for name in RELEASE_1_ROWS:
            table = tables.tables[name]
            rows = conn.execute(select(table).order_by(*table.primary_key.columns)).mappings()
            skip = {"id"} if name in AUTOINCREMENT else set()
            found[name] = [{k: plain(v) for k, v in r.items() if k not in skip} for r in rows]
    engine.dispose()
    return found


# ----- a fresh store --------------------------------------------------------------------
def test_a_fresh_store_has_exactly_the_models_schema(database_url: str) -> None:
    init_db(make_engine(database_url))
    assert model_differences(database_url) == []
    assert versions(database_url) == [schema.head()]
    assert schema.current(make_engine(database_url)) == schema.head()


def without_version_table(found: dict[str, set[tuple[Any, ...]]]) -> dict[str, set[Any]]:
    return {k: {r for r in rows if "alembic_version" not in r} for k, rows in found.items()}


@pytest.fixture
def other_url(database_url: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A second empty database on the engine of ``database_url``."""
    if dialect(database_url) == "sqlite":
        yield f"sqlite:///{tmp_path / 'other.db'}"
        return
    server = request.getfixturevalue("postgres")
    name = server.create_database()
    try:
        yield server.url(name)
    finally:
        server.drop_database(name)


def test_revision_0001_is_release_1_exactly(database_url: str, other_url: str) -> None:
    """The first migration makes what release 1's create_all made: statement for statement
    on SQLite, column, constraint and index for each on PostgreSQL."""
    migrate_to(database_url, "0001")
    release_1_store(other_url)
    made = snapshot(database_url)
    assert without_version_table(made) == snapshot(other_url)
    assert versions(database_url) == ["0001"]


# ----- release 1's store, upgraded ------------------------------------------------------
def test_a_release_1_store_upgrades_in_place_keeping_every_row(
    database_url: str, other_url: str
) -> None:
    release_1_store(database_url)
    fill(database_url)
    before = stored(database_url)
    assert before == {
        name: [{k: plain(v) for k, v in row.items()} for row in rows]
        for name, rows in RELEASE_1_ROWS.items()
    }
    assert schema.current(make_engine(database_url)) == schema.LEGACY
    with pytest.raises(schema.SchemaOutOfDate, match="threshold-bot db upgrade"):
        init_db(make_engine(database_url))

    result = cli("db", "upgrade", "--database-url", database_url)

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"upgraded the store from release 1 (unversioned) to revision {schema.head()}\n"
    )
    assert stored(database_url) == {  # every row kept, the columns added since empty
        name: [{**row, **ADDED.get(name, {})} for row in rows] for name, rows in before.items()
    }
    assert versions(database_url) == [schema.head()]
    assert model_differences(database_url) == []
    init_db(make_engine(other_url))  # a fresh store, made by the migrations
    assert snapshot(database_url) == snapshot(other_url)
    # the current code reads and writes the upgraded store
    sessions = init_db(make_engine(database_url))
    with sessions() as session:
        later = T0 + timedelta(hours=2)
        audit.add(session, repo="acme/models", actor="a", action="help", outcome="done", at=later)
        session.commit()
        found = audit.entries(session, "acme/models")
    assert [(e.action, e.outcome) for e in found] == [  # newest first
        ("help", "done"),
        ("rebaseline", "refused"),
        ("approve", "done"),
    ]


def test_init_db_upgrades_when_asked(database_url: str) -> None:
    migrate_to(database_url, "0001")
    with pytest.raises(schema.SchemaOutOfDate) as raised:
        init_db(make_engine(database_url))
    assert str(raised.value) == (
        f"the store's schema is 0001, this version needs revision {schema.head()}: "
        "run `threshold-bot db upgrade`"
    )
    init_db(make_engine(database_url), upgrade=True)
    assert versions(database_url) == [schema.head()]
    assert model_differences(database_url) == []


def test_tables_that_are_not_release_1s_are_not_stamped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE deliveries (id VARCHAR(64) PRIMARY KEY)")
    assert schema.current(engine) == schema.LEGACY
    result = cli("db", "upgrade", "--database-url", url)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "threshold-bot: error: not a store of release 1 (no table approvals, audit_log, "
        "cached_runs, cached_series, cached_sources, drift_items, heartbeat, installations, "
        "reports, tracked_pulls): cannot upgrade it"
    ]
    with engine.connect() as conn:  # left as it was
        tables = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))
        assert tables.scalars().all() == ["deliveries"]


# ----- the App's processes refuse a schema that is not theirs ----------------------------
def run_commands(
    argvs: list[list[str]], url: str, tmp_path: Path
) -> list[subprocess.CompletedProcess[str]]:
    """Run the commands at once, each in a ``python`` of its own; their outcomes."""
    env = server_env(tmp_path) | {"DATABASE_URL": url, "QUEUE_PATH": str(tmp_path / "q.db")}
    running = [
        subprocess.Popen(
            [sys.executable, *argv],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    done = []
    for proc, argv in zip(running, argvs, strict=True):
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


COMMANDS = {
    "serve": ["-m", "bot.cli.serve", "serve", "--host", "127.0.0.1", "--port", "0"],
    "worker": ["-m", "bot.cli.serve", "worker"],
    "audit": ["-c", "from bot.cli.main import app; app()", "audit", "--repo", "acme/models"],
}


@pytest.mark.parametrize(
    ("store", "commands"), [("release 1", ["serve", "worker", "audit"]), ("0001", ["worker"])]
)
def test_the_app_refuses_an_out_of_date_store_with_one_line(
    database_url: str, tmp_path: Path, store: str, commands: list[str]
) -> None:
    if store == "release 1":
        release_1_store(database_url)
    else:
        migrate_to(database_url, "0001")
    found = "release 1 (unversioned)" if store == "release 1" else "0001"
    audit_args = ["--database-url", database_url]  # audit reads --database-url / DATABASE_URL
    argvs = [COMMANDS[c] + (audit_args if c == "audit" else []) for c in commands]

    done = run_commands(argvs, database_url, tmp_path)

    line = (
        f"threshold-bot: error: the store's schema is {found}, this version needs revision "
        f"{schema.head()}: run `threshold-bot db upgrade`"
    )
    assert [(d.returncode, d.stderr.splitlines()) for d in done] == [(2, [line])] * len(argvs)
    assert schema.current(make_engine(database_url)) == (
        schema.LEGACY if store == "release 1" else "0001"
    )  # nothing was changed


def test_a_store_newer_than_the_code_is_refused(database_url: str, tmp_path: Path) -> None:
    init_db(make_engine(database_url))
    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    line = (
        "threshold-bot: error: the store's schema is at revision 9999, newer than this version"
        f" of threshold-bot knows (it runs on {schema.head()}): upgrade threshold-bot"
    )
    with pytest.raises(schema.SchemaTooNew):
        init_db(engine)
    with pytest.raises(schema.SchemaTooNew):
        init_db(engine, upgrade=True)
    (done,) = run_commands([COMMANDS["serve"]], database_url, tmp_path)
    assert (done.returncode, done.stderr.splitlines()) == (2, [line])
    upgraded = cli("db", "upgrade", "--database-url", database_url)
    assert (upgraded.exit_code, upgraded.stderr.splitlines()) == (2, [line])
    current = cli("db", "current", "--database-url", database_url)
    assert (current.exit_code, current.stdout) == (
        1,
        f"9999: newer than this version of threshold-bot (it runs on {schema.head()})\n",
    )
    assert versions(database_url) == ["9999"]


# ----- db current / db upgrade ----------------------------------------------------------
def test_db_current_and_upgrade_say_where_the_store_is(tmp_path: Path) -> None:
    head = schema.head()
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    out_of_date = f"out of date, this version needs {head} (run `threshold-bot db upgrade`)"

    missing = cli("db", "current", "--database-url", url)
    assert (missing.exit_code, missing.stdout) == (1, f"empty: {out_of_date}\n")
    assert not path.exists()  # reading it did not make it

    release_1_store(url)
    legacy = cli("db", "current", "--database-url", url)
    assert (legacy.exit_code, legacy.stdout) == (1, f"release 1 (unversioned): {out_of_date}\n")
    path.unlink()

    migrate_to(url, "0001")
    older = cli("db", "current", "--database-url", url)
    assert (older.exit_code, older.stdout) == (1, f"0001: {out_of_date}\n")
    upgraded = cli("db", "upgrade", "--database-url", url)
    assert (upgraded.exit_code, upgraded.stdout) == (
        0,
        f"upgraded the store from 0001 to revision {head}\n",
    )
    now = cli("db", "current", "--database-url", url)
    assert (now.exit_code, now.stdout) == (0, f"{head}: up to date\n")
    again = cli("db", "upgrade", "--database-url", url)
    assert (again.exit_code, again.stdout) == (
        0,
        f"the store is at revision {head} already: up to date\n",
    )


def test_db_upgrade_creates_a_store_from_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    monkeypatch.setenv("DATABASE_URL", url)
    created = cli("db", "upgrade")
    assert (created.exit_code, created.stdout) == (
        0,
        f"created the store at revision {schema.head()}\n",
    )
    assert versions(url) == [schema.head()]
    assert model_differences(url) == []


def test_db_upgrade_names_a_store_it_cannot_reach_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no-such-dir' / 'store.db'}"
    result = cli("db", "upgrade", "--database-url", url)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "threshold-bot: error: cannot use the store: unable to open database file"
    ]


# ----- several processes at once --------------------------------------------------------
INIT_DB = """
import sys, time
from pathlib import Path
from bot.adapters.store.db import init_db, make_engine
engine = make_engine(sys.argv[1])
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()
while not go.exists():
    time.sleep(0.001)
init_db(engine)
"""


def test_processes_creating_one_store_at_once_make_one_schema(
    database_url: str, tmp_path: Path
) -> None:
    """Four processes, each ready to call ``init_db`` on the same empty database, all let go
    at the same moment: every one succeeds, and there is one schema at one revision."""
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{n}" for n in range(4)]
    root = str(Path(__file__).resolve().parent.parent)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", INIT_DB, database_url, str(go), str(mark)],
            cwd=root,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mark in ready
    ]
    wait_until(lambda: all(mark.exists() for mark in ready), timeout=60, what="4 processes")
    go.touch()
    outcomes = [(p.wait(60), p.communicate()[1]) for p in processes]
    assert outcomes == [(0, "")] * 4
    assert versions(database_url) == [schema.head()]
    assert model_differences(database_url) == []
