from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.store import approvals, audit
from bot.adapters.store.db import init_db, make_engine
from bot.core.permissions import allows, effective_level

pytestmark = pytest.mark.servers


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield init_db(engine)
    engine.dispose()


def test_audit_entries_are_listed_newest_first_per_repo(sessions: sessionmaker[Session]) -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    with sessions() as s:
        audit.add(s, repo="o/r", actor="alice", action="rebaseline", outcome="done", at=t0)
        audit.add(
            s,
            repo="o/r",
            actor="bob",
            action="approve",
            outcome="refused",
            pr_number=7,
            detail={"required": "write"},
            at=t0 + timedelta(hours=1),
        )
        audit.add(s, repo="o/other", actor="eve", action="help", outcome="done", at=t0)
        s.commit()
    with sessions() as s:
        rows = audit.entries(s, "o/r")
        assert [(r.actor, r.outcome) for r in rows] == [("bob", "refused"), ("alice", "done")]
        assert rows[0].detail == {"required": "write"} and rows[0].pr_number == 7


def test_approval_survives_a_new_engine_and_tracks_gate_values(database_url: str) -> None:
    url = database_url
    key = "ci/n.sh:EVAL_MIN|eval/acc >=|-"  # as bot.features.review.approval.gate_key writes it
    values = {key: 0.5}
    with init_db(make_engine(url))() as s:
        assert approvals.latest(s, "o/r", 3) is None
        approvals.approve(
            s, repo="o/r", pr_number=3, head_sha="a" * 40, approver="alice", gate_values=values
        )
        s.commit()
    with init_db(make_engine(url))() as s:  # as after a restart
        row = approvals.latest(s, "o/r", 3)
        assert row is not None and row.approver == "alice" and row.head_sha == "a" * 40
        assert approvals.still_valid(row, values)
        assert not approvals.still_valid(row, {key: 0.49})
        assert not approvals.still_valid(None, values)


@pytest.mark.parametrize(
    ("permission", "role", "required", "expected"),
    [
        ("admin", "admin", "write", True),
        ("write", "maintain", "maintain", True),
        ("write", "write", "maintain", False),
        ("read", "triage", "write", False),
        ("read", None, "read", True),
        ("none", None, "read", False),
        ("write", "custom-release-role", "write", True),
        (None, None, "read", False),
        ("write", None, "superuser", False),
    ],
)
def test_permission_levels(
    permission: str | None, role: str | None, required: str, expected: bool
) -> None:
    assert allows(effective_level(permission, role), required) is expected
