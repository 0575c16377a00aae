"""``/rebaseline`` planning over a real shell script, history and review."""

from __future__ import annotations

import difflib
from datetime import UTC, date, datetime, timedelta

import numpy as np

from bot.core.analysis.limits import recompute_limit
from bot.core.analysis.review import build_review
from bot.core.commands import Command, parse_command_line
from bot.core.config import RepoConfig
from bot.core.models import GateChange, History, RuleSettings, Run, ThresholdFile, WindowSpec
from bot.core.thresholds.discover import find_gates
from bot.features.rebaseline.plan import commit_message, plan_file, rule_for, unknown_gates

SCRIPT = """#!/bin/bash
# nightly gsm8k e2e
export EVAL_ACC_MIN_VALUE=0.56  # eval floor
export AVG_NUM_TOKENS_MAX_VALUE="283"
export CLIP_RATIO_MAX_VALUE=0.040

python get_summary.py --project_name "gsm8k_ci" \\
  --asserts "eval/all/avg_score >= $EVAL_ACC_MIN_VALUE" \\
  "generate/avg_num_tokens <= ${AVG_NUM_TOKENS_MAX_VALUE}" \\
  "actor/clip_ratio <= $CLIP_RATIO_MAX_VALUE"
"""


def history(n: int = 40) -> History:
    rng = np.random.default_rng(7)
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    runs = []
    for i in range(n):
        step = i >= 25  # a regime change: accuracy drops, tokens rise
        runs.append(
            Run(
                id=f"r{i}",
                created_at=t0 + timedelta(days=i),
                commit=f"{i:040x}",
                summary={
                    "eval/all/avg_score": float(rng.normal(0.53 if step else 0.59, 0.005)),
                    "generate/avg_num_tokens": float(rng.normal(300 if step else 265, 2)),
                    "actor/clip_ratio": 0.0,
                },
            )
        )
    return History(runs=tuple(runs))


def threshold_file() -> ThresholdFile:
    tf = find_gates("ci/nightly.sh", SCRIPT, RepoConfig())
    assert tf is not None
    return tf


def review_for(tf: ThresholdFile, cmd: Command, rule: RuleSettings | None = None):  # type: ignore[no-untyped-def]
    rule = rule_for(cmd, rule or RuleSettings())
    return build_review([GateChange(head=g, base=g) for g in tf.gates], history(), rule=rule)


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_rebaseline_all_changes_only_literals_and_provenance() -> None:
    tf = threshold_file()
    cmd = parse_command_line("/rebaseline")
    assert isinstance(cmd, Command)
    review = review_for(tf, cmd)
    plan = plan_file(tf, SCRIPT, review, cmd, today=date(2026, 12, 2), by="alice")

    finished = history().finished
    last20 = finished[-20:]
    acc = [r.summary["eval/all/avg_score"] for r in last20]
    tok = [r.summary["generate/avg_num_tokens"] for r in last20]
    want_acc = recompute_limit(acc, ">=", "0.56", RuleSettings())
    want_tok = recompute_limit(tok, "<=", "283", RuleSettings())
    assert want_acc is not None and want_tok is not None
    edits = {e.gate.name: e.new for e in plan.edits}
    assert edits["EVAL_ACC_MIN_VALUE"] == want_acc[0]
    assert edits["AVG_NUM_TOKENS_MAX_VALUE"] == want_tok[0]
    # clip ratio stays 0.0 -> rule says a limit at/above 0 but the literal may already allow it
    for line in changed_lines(SCRIPT, plan.text):
        body = line[1:]
        assert body.startswith(("export EVAL_ACC", "export AVG_NUM", "export CLIP", "# ")), line
    assert 'export AVG_NUM_TOKENS_MAX_VALUE="' in plan.text  # quotes kept
    assert "# eval floor" in plan.text
    assert plan.provenance_written and "by alice with /rebaseline" in plan.text
    message = commit_message([plan], review.rule, "alice")
    assert "EVAL_ACC_MIN_VALUE: 0.56 →" in message and "@alice" in message


def test_named_gate_only_and_window_override() -> None:
    tf = threshold_file()
    cmd = parse_command_line("/rebaseline EVAL_ACC_MIN_VALUE --window 10 --allowance 10%")
    assert isinstance(cmd, Command)
    review = review_for(tf, cmd)
    assert review.rule.window == WindowSpec(kind="last", runs=10)
    assert review.rule.allowance == 0.10
    plan = plan_file(tf, SCRIPT, review, cmd, today=date(2026, 12, 2))
    assert [e.gate.name for e in plan.edits] == ["EVAL_ACC_MIN_VALUE"]
    acc = [r.summary["eval/all/avg_score"] for r in history().finished[-10:]]
    want = recompute_limit(acc, ">=", "0.56", review.rule)
    assert want is not None and plan.edits[0].new == want[0]


def test_nothing_to_change_keeps_text() -> None:
    tf = threshold_file()
    cmd = parse_command_line("/rebaseline NOPE")
    assert isinstance(cmd, Command)
    assert unknown_gates(cmd, [tf]) == ["NOPE"]
    plan = plan_file(tf, SCRIPT, review_for(tf, cmd), cmd, today=date(2026, 12, 2))
    assert plan.edits == () and plan.text == SCRIPT and not plan.provenance_written


def test_literal_shared_by_two_metrics_gets_the_value_passing_both() -> None:
    # one variable bounds two metrics: the literal must pass both windows, whichever
    # comparison comes first in the file
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    runs = tuple(
        Run(id=f"r{i}", created_at=t0 + timedelta(days=i), summary={"a": 0.8 + i / 1000, "b": 0.6})
        for i in range(25)
    )
    for order in ('"a >= $X" "b >= $X"', '"b >= $X" "a >= $X"'):
        text = f"X=0.9\nrun --asserts {order}\n"
        tf = find_gates("t.sh", text, RepoConfig())
        assert tf is not None and len(tf.gates) == 2
        cmd = parse_command_line("/rebaseline")
        assert isinstance(cmd, Command)
        review = build_review([GateChange(head=g, base=g) for g in tf.gates], History(runs=runs))
        plan = plan_file(tf, text, review, cmd, today=date(2026, 12, 2))
        limits = {g.metric: g.recomputed for g in review.gates}
        assert limits["a"] is not None and limits["b"] is not None and limits["b"] < limits["a"]
        [edit] = plan.edits  # one literal, one edit
        assert edit.new == limits["b"]
        assert all(r.summary[m] >= edit.new for r in runs[-20:] for m in ("a", "b"))


def test_lower_and_upper_bound_sharing_a_literal_is_left_alone() -> None:
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    runs = tuple(
        Run(id=f"r{i}", created_at=t0 + timedelta(days=i), summary={"a": 0.8, "b": 0.6})
        for i in range(25)
    )
    text = 'X=0.9\nrun --asserts "a >= $X" "b <= $X"\n'
    tf = find_gates("t.sh", text, RepoConfig())
    assert tf is not None
    cmd = parse_command_line("/rebaseline")
    assert isinstance(cmd, Command)
    review = build_review([GateChange(head=g, base=g) for g in tf.gates], History(runs=runs))
    assert {g.verdict for g in review.gates} == {"unchanged_failing", "unchanged"}
    plan = plan_file(tf, text, review, cmd, today=date(2026, 12, 2))
    assert plan.edits == () and plan.text == text


def test_commit_message_and_provenance_keep_a_fractional_allowance() -> None:
    tf = threshold_file()
    cmd = parse_command_line("/rebaseline --allowance 2.5%")
    assert isinstance(cmd, Command)
    review = review_for(tf, cmd)
    plan = plan_file(tf, SCRIPT, review, cmd, today=date(2026, 12, 2))
    assert plan.edits and plan.provenance_written
    assert "# threshold-bot:" in plan.text and "rule: 2.5% allowance" in plan.text
    assert "Rule: 2.5% allowance" in commit_message([plan], review.rule, None)
