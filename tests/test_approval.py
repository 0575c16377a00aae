"""The approval decision (pure) and its lookup from a real SQLite store across restarts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store import approvals
from bot.adapters.store.approvals import Approval
from bot.adapters.store.db import init_db, make_engine
from bot.core.config import RepoConfig
from bot.core.models import Conclusion
from bot.core.thresholds.discover import find_gates
from bot.features.review.approval import (
    apply_approval,
    approval_note,
    gate_key,
    gate_values,
)
from tests.test_review_pr import SCRIPT, script

WHEN = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)


def values_of(value: str) -> dict[str, float]:
    tf = find_gates(SCRIPT, script(value), RepoConfig())
    assert tf is not None
    return gate_values([tf])


def approval(values: dict[str, float], who: str = "maya") -> Approval:
    return Approval(
        repo="o/r", pr_number=7, head_sha="a" * 40, approver=who, approved_at=WHEN,
        gate_values=values,
    )  # fmt: skip


def test_gate_values_are_keyed_by_file_name_metric_operator_and_source() -> None:
    tf = find_gates(SCRIPT, script("0.55"), RepoConfig())
    assert tf is not None and tf.gates[0].source is None  # no project named: no source
    assert values_of("0.55") == {f"{SCRIPT}:EVAL_ACC_MIN_VALUE|eval/all/avg_score >=|-": 0.55}
    named = find_gates(SCRIPT, script("0.55", project="gsm8k_ci"), RepoConfig())
    assert named is not None and named.gates[0].source is not None
    source = named.gates[0].source.key()
    assert '"gsm8k_ci"' in source  # the project the script names
    key = f"{SCRIPT}:EVAL_ACC_MIN_VALUE|eval/all/avg_score >=|{source}"
    assert gate_values([named]) == {key: 0.55} == {gate_key(named.gates[0]): 0.55}


def test_approval_of_the_same_values_turns_action_required_into_success() -> None:
    values = values_of("0.55")

    conclusion, note = apply_approval("action_required", values, approval(values))

    assert conclusion == "success"
    assert note == "Approved by @maya on 2026-12-02" == approval_note(approval(values))


def test_a_changed_value_needs_a_new_approval() -> None:
    conclusion, note = apply_approval(
        "action_required", values_of("0.54"), approval(values_of("0.55"))
    )
    assert (conclusion, note) == ("action_required", None)


def test_a_gate_added_after_the_approval_is_not_covered() -> None:
    values = values_of("0.55")
    more = {**values, "ci/other.sh:LOSS_MAX|loss <=|-": 0.3}
    assert apply_approval("action_required", more, approval(values)) == ("action_required", None)


@pytest.mark.parametrize("conclusion", ["neutral", "success"])
def test_only_action_required_is_ever_changed(conclusion: Conclusion) -> None:
    values = values_of("0.55")
    assert apply_approval(conclusion, values, approval(values)) == (conclusion, None)


def test_no_approval_or_no_gates_changes_nothing() -> None:
    assert apply_approval("action_required", values_of("0.55"), None) == ("action_required", None)
    assert apply_approval("action_required", {}, approval({})) == ("action_required", None)


def test_stored_approval_is_found_after_a_restart_and_the_newest_wins(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    old, new = values_of("0.55"), values_of("0.54")
    with init_db(make_engine(url)).begin() as session:
        approvals.approve(
            session, repo="o/r", pr_number=7, head_sha="a" * 40, approver="maya",
            gate_values=old, at=WHEN,
        )  # fmt: skip
        approvals.approve(
            session, repo="o/r", pr_number=7, head_sha="b" * 40, approver="omar",
            gate_values=new, at=WHEN.replace(hour=10),
        )  # fmt: skip

    lookup = approvals.lookup(init_db(make_engine(url)))  # a new engine: as after a restart
    found = lookup("o/r", 7)

    assert found is not None and found.approver == "omar"
    assert apply_approval("action_required", new, found) == (
        "success",
        "Approved by @omar on 2026-12-02",
    )
    assert apply_approval("action_required", old, found) == ("action_required", None)
    assert lookup("o/r", 8) is None and lookup("o/other", 7) is None


def test_reply_keeps_a_fractional_allowance() -> None:
    from bot.core.models import RuleSettings
    from bot.features.rebaseline.replies import describe_rule

    assert describe_rule(RuleSettings(allowance=0.025)).startswith("2.5% allowance")
