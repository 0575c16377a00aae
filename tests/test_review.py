"""Review assembly: verdict table, conclusions, merging, and a full review of a synthetic
history with a step change (expected numbers computed here from the data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import pytest

from bot.core.analysis.review import build_review, merge_reviews, unavailable_review
from bot.core.analysis.verdicts import conclusion_of, verdict_of
from bot.core.formatting import day_month, move
from bot.core.models import (
    DeclaredSource,
    Failures,
    Gate,
    GateChange,
    GateReview,
    History,
    HistoryStats,
    Op,
    Regime,
    Review,
    RuleSettings,
    Run,
    SourceSpec,
    UnboundVariable,
    Verdict,
    WindowSpec,
)
from bot.core.render.review import render_json

T0 = datetime(2026, 6, 1, tzinfo=UTC)
SHIFT_AT = 60  # first run of the new regime of ``acc``
N_RUNS = 100
DIPS = (75, 85, 95)  # single runs where ``score`` dips: flaky failures


# --------------------------------------------------------------------------- verdict table


@pytest.mark.parametrize(
    ("changed", "failed", "total", "proposed", "recomputed", "op", "verdict"),
    [
        (True, 0, 20, 0.50, 0.50, ">=", "ok"),
        (True, 0, 20, 0.49, 0.50, ">=", "ok"),  # one rounding step looser is fine
        (True, 0, 20, 0.48, 0.50, ">=", "looser_than_rule"),
        (True, 0, 20, 0.55, 0.50, ">=", "ok"),  # stricter but passing every run
        (True, 2, 20, 0.58, 0.50, ">=", "too_tight"),
        (True, 0, 20, 0.51, 0.50, "<=", "ok"),  # upper bound: looser is larger
        (True, 0, 20, 0.45, 0.50, "<=", "ok"),  # upper bound: stricter is smaller
        (True, 0, 20, 0.51, 0.50, "<", "ok"),
        (True, 0, 20, 0.52, 0.50, "<", "looser_than_rule"),
        (False, 0, 20, 0.30, 0.50, ">=", "unchanged"),  # unchanged: looseness is no verdict
        (False, 1, 20, 0.56, 0.50, ">=", "unchanged_failing"),
        (True, 0, 0, 0.56, None, ">=", "no_data"),
        (False, 0, 0, 0.56, None, ">=", "no_data"),
    ],
)
def test_verdict_table(
    changed: bool,
    failed: int,
    total: int,
    proposed: float,
    recomputed: float | None,
    op: Op,
    verdict: Verdict,
) -> None:
    window = Failures(failed=failed, total=total)
    result = verdict_of(
        changed=changed, window=window, proposed=proposed, recomputed=recomputed, decimals=2, op=op
    )
    assert result == verdict


def test_conclusion_of() -> None:
    def gates(*verdicts: tuple[Verdict, bool]) -> list[GateReview]:
        review = unavailable_review([unchanged(ACC)], "unused")
        return [
            review.gates[0].model_copy(update={"verdict": v, "changed": c}) for v, c in verdicts
        ]

    assert conclusion_of([]) == "success"
    assert conclusion_of(gates(("ok", True), ("unchanged", False))) == "success"
    for bad in ("too_tight", "looser_than_rule", "unchanged_failing"):
        assert conclusion_of(gates(("ok", True), (bad, False))) == "action_required"
    # never green without evidence: a gate without data is at least neutral ...
    assert conclusion_of(gates(("ok", True), ("no_data", False))) == "neutral"
    # ... and one the PR changes cannot be verified: action
    assert conclusion_of(gates(("unchanged", False), ("no_data", True))) == "action_required"


# --------------------------------------------------------------------------- synthetic history


def synthetic_history() -> History:
    """``acc`` steps down from 0.60 to 0.50 at run 60; ``tokens`` is stable; ``score`` dips
    below 0.75 in three single runs; two failed runs carry values that must be ignored."""
    rng = np.random.default_rng(7)
    runs = []
    for i in range(N_RUNS):
        acc = (0.60 if i < SHIFT_AT else 0.50) + rng.normal(0, 0.004)
        score = 0.70 if i in DIPS else 0.80 + rng.normal(0, 0.003)
        summary = {"acc": acc, "tokens": 260 + rng.normal(0, 2.0), "score": score}
        runs.append(
            Run(
                id=f"r{i:03d}",
                created_at=T0 + timedelta(hours=12 * i),
                commit=f"{i:040x}",
                summary=summary,
            )
        )
    broken = [
        Run(
            id=f"f{i}",
            created_at=T0 + timedelta(hours=12 * i + 1),
            state="failed",
            summary={"acc": 0.0, "tokens": 9999.0},
        )
        for i in (70, 90)
    ]
    stats = HistoryStats(total=102, finished=100, by_state={"finished": 100, "failed": 2})
    ordered = sorted([*runs, *broken], key=lambda r: r.created_at)
    return History(runs=tuple(ordered), stats=stats, source="file:runs.jsonl")


def gate(name: str, metric: str, op: Op, literal: str, line: int = 1) -> Gate:
    return Gate(
        name=name,
        file="ci/nightly.sh",
        line=line,
        metric=metric,
        op=op,
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
    )


def unchanged(g: Gate) -> GateChange:
    return GateChange(head=g, base=g)


def changed(base: Gate, literal: str) -> GateChange:
    return GateChange(
        head=base.model_copy(update={"literal": literal, "value": float(literal)}), base=base
    )


def column(history: History, metric: str) -> list[float]:
    return [r.summary[metric] for r in history.finished]


def rule_lower(values: list[float], decimals: int, allowance: str = "0.05") -> float:
    low = Decimal(repr(min(values)))
    exact = low - Decimal(allowance) * abs(low)
    return float(exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_FLOOR))


def rule_upper(values: list[float], decimals: int, allowance: str = "0.05") -> float:
    high = Decimal(repr(max(values)))
    exact = high + Decimal(allowance) * abs(high)
    return float(exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_CEILING))


@pytest.fixture(scope="module")
def history() -> History:
    return synthetic_history()


ACC = gate("ACC_MIN", "acc", ">=", "0.56", 10)
SCORE = gate("SCORE_MIN", "score", ">=", "0.75", 11)
TOKENS = gate("TOKENS_MAX", "tokens", "<=", "300", 12)
MISSING = gate("GONE_MIN", "nope", ">=", "1.0", 13)


def test_unchanged_gate_failing_since_the_shift(history: History) -> None:
    review = build_review([unchanged(ACC)], history)
    finished = history.finished
    acc = column(history, "acc")
    assert [c.index for c in review.changes] == [SHIFT_AT]
    change = review.changes[0]
    assert change.at == finished[SHIFT_AT].created_at
    assert change.metrics["acc"].before == pytest.approx(0.60, abs=0.005)
    assert change.metrics["acc"].after == pytest.approx(0.50, abs=0.005)
    assert [r.runs for r in review.regimes] == [SHIFT_AT, N_RUNS - SHIFT_AT]

    g = review.gates[0]
    assert g.verdict == "unchanged_failing" and not g.changed
    assert g.classification == "failing_every_run"
    assert g.old == g.proposed == 0.56
    assert g.old_failures == Failures(failed=30, total=30)
    assert g.proposed_failures == Failures(failed=20, total=20)
    assert g.consecutive_failures == N_RUNS - SHIFT_AT
    assert g.failing_since == finished[SHIFT_AT].created_at
    assert g.window_min == min(acc[-20:]) and g.window_max == max(acc[-20:])
    assert (g.window.kind, g.window.runs) == ("last", 20)
    assert g.window.first == finished[-20].created_at and g.window.last == finished[-1].created_at
    assert g.recomputed == rule_lower(acc[-20:], 2)
    assert g.decimals == 2
    shift = change.metrics["acc"]
    assert g.explanation == (
        f"fails every run since {day_month(change.at)} ({N_RUNS - SHIFT_AT} runs in a row),"
        f" since the change that moved acc {move(shift.before, shift.after)}"
    )
    assert g.warnings == ()  # the last 20 runs are all in the new regime
    assert review.conclusion == "action_required"


def test_review_carries_history_rule_and_inputs(history: History) -> None:
    rule = RuleSettings(allowance=0.1, failure_lookback=10)
    unbound = [
        UnboundVariable(name="X", file="ci/nightly.sh", line=3, literal="1", reason="unused")
    ]
    review = build_review([unchanged(ACC)], history, rule=rule, hints=unbound, warnings=["note"])
    assert review.history == history.stats
    assert review.rule == rule
    assert review.source == "file:runs.jsonl"
    assert review.hints == tuple(unbound)
    assert review.warnings == ("note",)
    g = review.gates[0]
    assert g.old_failures == Failures(failed=10, total=10)
    assert g.recomputed == rule_lower(column(history, "acc")[-20:], 2, allowance="0.1")
    assert g.source == "file:runs.jsonl"
    # ``source`` is what was read; what the file names is ``declared_source``
    spec = SourceSpec(kind="wandb", entity="team", project="ci")
    named = DeclaredSource.of(spec, "script:7")
    own = build_review(
        [unchanged(ACC.model_copy(update={"source": spec, "declared": named}))], history
    )
    assert own.gates[0].source == "file:runs.jsonl"
    assert own.gates[0].declared_source == named
    assert json.loads(render_json(own))["gates"][0]["declared_source"] == {
        "kind": "wandb", "entity": "team", "project": "ci", "path": None, "experiment": None,
        "from": "script:7",
    }  # fmt: skip


def test_changed_gates_against_the_rule(history: History) -> None:
    tokens = column(history, "tokens")
    recomputed = rule_upper(tokens[-20:], 0)  # ~270: 2 significant digits need no decimals
    ok = changed(TOKENS, f"{recomputed + 1:.0f}")  # one step looser: within the rule
    loose = changed(TOKENS.model_copy(update={"name": "T2"}), f"{recomputed + 5:.0f}")
    tight = changed(TOKENS.model_copy(update={"name": "T3"}), f"{max(tokens[-20:]) - 1:.0f}")
    review = build_review([ok, loose, tight], history)
    verdicts = {g.name: g for g in review.gates}
    assert {g.recomputed for g in review.gates} == {recomputed}
    assert verdicts["TOKENS_MAX"].verdict == "ok"
    assert verdicts["T2"].verdict == "looser_than_rule"
    assert verdicts["T2"].explanation.endswith(
        f"but is looser than the rule's {recomputed:.0f} by 5 (more than one step of 1)"
    )
    t3 = verdicts["T3"]
    assert t3.verdict == "too_tight"
    failing = sum(v > max(tokens[-20:]) - 1 for v in tokens[-20:])
    assert t3.proposed_failures == Failures(failed=failing, total=20)
    assert f"fails {failing} of 20 runs in the window" in t3.explanation
    assert all(g.changed and g.old == 300 for g in review.gates)
    assert review.conclusion == "action_required"


def test_flaky_gate(history: History) -> None:
    review = build_review([unchanged(SCORE)], history)
    g = review.gates[0]
    score = column(history, "score")
    assert g.classification == "flaky"
    dips_recent = sum(i >= N_RUNS - 30 for i in DIPS)
    assert g.old_failures == Failures(failed=dips_recent, total=30)
    assert g.proposed_failures == Failures(failed=sum(v < 0.75 for v in score[-20:]), total=20)
    assert g.verdict == "unchanged_failing"
    assert g.consecutive_failures == (1 if DIPS[-1] == N_RUNS - 1 else 0)
    rate = round(100 * dips_recent / 30)
    assert g.explanation == (
        f"fails {dips_recent} of 30 recent runs ({rate}%), scattered within the current regime"
        " (flaky)"
    )


def test_passing_and_missing_gates(history: History) -> None:
    review = build_review([unchanged(TOKENS), unchanged(MISSING)], history)
    tokens, missing = review.gates
    assert tokens.verdict == "unchanged" and tokens.classification == "passing"
    assert tokens.explanation == "passes all 30 recent runs"
    assert missing.verdict == "no_data" and missing.classification == "no_data"
    assert missing.recomputed is None and missing.window_min is None
    assert missing.window.runs == 0
    assert missing.explanation == (
        f"cannot verify: no run has `nope` ({len(history.runs)} runs read, {N_RUNS} finished)"
    )
    assert missing.closest_keys == ()  # nothing like "nope" in the history
    assert review.conclusion == "neutral"  # unchanged, but not verified either


def test_regime_window(history: History) -> None:
    rule = RuleSettings(window=WindowSpec(kind="regime"))
    review = build_review([changed(ACC, "0.45"), unchanged(TOKENS)], history, rule=rule)
    acc_gate, tokens_gate = review.gates
    acc = column(history, "acc")
    assert acc_gate.window.kind == "regime"
    assert acc_gate.window.runs == N_RUNS - SHIFT_AT
    assert acc_gate.window.first == history.finished[SHIFT_AT].created_at
    assert acc_gate.recomputed == rule_lower(acc[SHIFT_AT:], 2)
    # tokens did not move at the change: its regime is the whole history
    assert tokens_gate.window.runs == N_RUNS
    assert tokens_gate.recomputed == rule_upper(column(history, "tokens"), 0)


def test_straddle_warning(history: History) -> None:
    rule = RuleSettings(window=WindowSpec(kind="last", runs=50))
    review = build_review([unchanged(ACC), unchanged(TOKENS)], history, rule=rule)
    acc_gate, tokens_gate = review.gates
    at = day_month(history.finished[SHIFT_AT].created_at)
    assert acc_gate.warnings == (
        f"the 50-run window straddles the regime change of {at}: the limit mixes two "
        "regimes; consider --window regime",
    )
    assert tokens_gate.warnings == ()


def test_short_window_warning(history: History) -> None:
    rule = RuleSettings(window=WindowSpec(kind="last", runs=500))
    review = build_review([unchanged(TOKENS)], history, rule=rule)
    assert review.gates[0].window.runs == N_RUNS
    assert f"only {N_RUNS} runs in the window (500 wanted)" in review.gates[0].warnings


def test_old_value_is_judged_with_the_old_operator(history: History) -> None:
    # the PR flips ``acc >= 0.56`` into ``acc <= 0.9``: the old value is judged as ``>=``
    head = ACC.model_copy(update={"op": "<=", "literal": "0.9", "value": 0.9})
    review = build_review([GateChange(head=head, base=ACC)], history)
    g = review.gates[0]
    assert g.old_failures == Failures(failed=30, total=30)
    assert g.proposed_failures == Failures(failed=0, total=20)
    assert g.op == "<="


def test_new_gate_in_an_empty_history() -> None:
    review = build_review([GateChange(head=ACC)], History(runs=()))
    g = review.gates[0]
    assert g.verdict == "no_data" and g.changed
    assert review.regimes == () and review.changes == ()
    assert "the history is empty: it has no runs" in review.warnings
    assert g.explanation == "cannot verify: the history is empty (no run read)"
    assert g.no_data_reason == "empty_history"
    assert review.conclusion == "action_required"  # a changed gate nothing can verify


def test_unavailable_review() -> None:
    review = unavailable_review([unchanged(ACC), changed(TOKENS, "280")], "W&B timed out")
    assert review.conclusion == "action_required"  # the PR changes a gate nothing verifies
    assert unavailable_review([unchanged(ACC)], "W&B timed out").conclusion == "neutral"
    assert review.error == "W&B timed out"
    assert [g.verdict for g in review.gates] == ["no_data", "no_data"]
    assert [g.changed for g in review.gates] == [False, True]
    assert review.gates[1].old == 300 and review.gates[1].proposed == 280
    assert all(g.recomputed is None and g.classification == "no_data" for g in review.gates)


def test_merge_reviews(history: History) -> None:
    failing = build_review([unchanged(ACC), unchanged(TOKENS)], history)
    down = unavailable_review([unchanged(SCORE)], "timeout").model_copy(
        update={"source": "wandb:team/other"}
    )
    merged = merge_reviews([down, failing])
    assert [g.name for g in merged.gates] == ["SCORE_MIN", "ACC_MIN", "TOKENS_MAX"]
    assert merged.conclusion == "action_required"  # action beats "could not check"
    assert merged.regimes == failing.regimes and merged.changes == failing.changes
    assert merged.error == "wandb:team/other: timeout"
    assert merged.source == "wandb:team/other, file:runs.jsonl"

    passing = build_review([unchanged(TOKENS)], history)
    assert merge_reviews([passing, down]).conclusion == "neutral"
    assert merge_reviews([passing, passing]).conclusion == "success"
    assert merge_reviews([passing]) is passing
    assert merge_reviews([]) == Review(conclusion="success")


def test_regimes_cover_every_finished_run(history: History) -> None:
    review = build_review([], history)
    regimes: tuple[Regime, ...] = review.regimes
    assert sum(r.runs for r in regimes) == N_RUNS
    assert set(regimes[0].medians) == {"acc", "tokens", "score"}
    assert review.conclusion == "success" and review.gates == ()
