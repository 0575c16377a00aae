"""Reference gates (a reference ± a tolerance): bands, the rule's reference, verdicts, the
tolerance a window needs, placeholders, and the JSON contract through the CLI. Every expected
number is computed here from the test's own runs."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.review import build_review, unavailable_review
from bot.core.analysis.verdicts import needs_action
from bot.core.models import (
    Gate,
    GateChange,
    History,
    Op,
    RuleSettings,
    Run,
    Tolerance,
    Verdict,
)

T0 = datetime(2026, 3, 2, 6, tzinfo=UTC)
METRIC = "eval/gsm8k/acc"
WINDOW = RuleSettings().window.runs  # 20
LOOKBACK = RuleSettings().failure_lookback  # 30


def runs_of(values: list[float], metric: str = METRIC) -> History:
    """One nightly run a day with ``metric`` = each value."""
    return History(
        runs=tuple(
            Run(id=f"n{i:03d}", created_at=T0 + timedelta(days=i), summary={metric: v})
            for i, v in enumerate(values)
        )
    )


def reference(
    literal: str,
    op: Op = ">=",
    *,
    rel: float | None = None,
    absolute: float | None = None,
    **update: object,
) -> Gate:
    tolerance = None if rel is None and absolute is None else Tolerance(rel=rel, abs=absolute)
    gate = Gate(
        name="gsm8k.acc",
        file="accuracy.yaml",
        line=3,
        metric=METRIC,
        op=op,
        value=float(literal),
        literal=literal,
        start=20,
        end=20 + len(literal),
        kind="reference",
        tolerance=tolerance,
    )
    return gate.model_copy(update=update)


def dec(value: float | str) -> Decimal:
    return Decimal(str(value))


def median_at(values: list[float], places: int) -> float:
    unit = Decimal(1).scaleb(-places)
    return float(dec(statistics.median(values)).quantize(unit, rounding=ROUND_HALF_UP))


# a nightly accuracy around 0.93 with a few bad nights
NIGHTLY = [
    0.931, 0.925, 0.940, 0.936, 0.928, 0.862, 0.933, 0.929, 0.944, 0.927,
    0.935, 0.930, 0.871, 0.938, 0.926, 0.932, 0.939, 0.924, 0.934, 0.930,
    0.868, 0.937, 0.929, 0.933, 0.941, 0.926, 0.931, 0.935, 0.873, 0.936,
]  # fmt: skip


# --------------------------------------------------------------------------- one-sided band


def test_lower_reference_counts_runs_below_the_floor() -> None:
    gate = reference("0.95", rel=0.08)
    review = build_review([GateChange(head=gate, base=gate)], runs_of(NIGHTLY))
    (g,) = review.gates
    floor = dec("0.95") - dec("0.08") * dec("0.95")  # 0.874, exactly
    window = NIGHTLY[-WINDOW:]
    assert g.kind == "reference" and g.sides == "lower"
    assert g.reference == 0.95 and g.tolerance == Tolerance(rel=0.08)
    assert g.old_band is not None and g.old_band.band_low == float(floor)
    assert g.old_band.band_high is None and g.proposed_band == g.old_band
    assert g.old_failures.failed == sum(dec(v) < floor for v in NIGHTLY[-LOOKBACK:]) == 4
    assert g.proposed_failures.failed == sum(dec(v) < floor for v in window) == 3
    assert g.verdict == "unchanged_failing"
    # the rule's reference: the window's median at the literal's two decimals
    assert g.recomputed == median_at(window, 2) == 0.93
    rec_floor = dec("0.93") - dec("0.08") * dec("0.93")
    assert g.recomputed_band is not None and g.recomputed_band.band_low == float(rec_floor)
    assert g.window_min == min(window) and g.window_max == max(window)
    assert g.decimals == 2
    assert review.conclusion == "action_required"


def test_upper_reference_open_below() -> None:
    latency = [41.0 + (i % 5) * 0.5 for i in range(25)]
    gate = reference("40", "<=", rel=0.05, name="latency", metric="latency_ms")
    review = build_review([GateChange(head=gate, base=gate)], runs_of(latency, "latency_ms"))
    (g,) = review.gates
    ceiling = dec(40) * (1 + dec("0.05"))  # 42
    assert g.sides == "upper" and g.old_band is not None
    assert g.old_band.band_low is None and g.old_band.band_high == float(ceiling)
    window = latency[-WINDOW:]
    assert g.proposed_failures.failed == sum(dec(v) > ceiling for v in window)
    assert g.proposed_failures.failed > 0


def test_no_tolerance_is_the_reference_itself() -> None:
    values = [0.5, 0.6, 0.7] * 7
    gate = reference("0.6", ">=")
    (g,) = build_review([GateChange(head=gate, base=gate)], runs_of(values)).gates
    assert g.old_band is not None and g.old_band.band_low == 0.6
    assert g.proposed_failures.failed == sum(v < 0.6 for v in values[-WINDOW:])
    assert g.tolerance is None


# --------------------------------------------------------------------------- verdicts

STEADY = [0.90 + 0.01 * ((i * 7) % 5 - 2) for i in range(WINDOW)]  # 0.88 … 0.92, median 0.90


@pytest.mark.parametrize(
    ("proposed", "op", "verdict"),
    [
        ("0.90", ">=", "ok"),  # the rule's own band
        ("0.89", ">=", "ok"),  # a floor 0.0095 lower: within one step of 0.01
        ("0.88", ">=", "looser_than_rule"),  # 0.019 lower: more than a step
        ("0.93", ">=", "too_tight"),  # floor 0.8835 fails the 0.88 runs
        ("0.90", "<=", "ok"),
        ("0.92", "<=", "looser_than_rule"),
        ("0.86", "<=", "too_tight"),  # ceiling 0.903 fails the 0.91 and 0.92 runs
        ("0.90", "==", "ok"),
        ("0.92", "==", "looser_than_rule"),  # the ceiling is too high ...
        ("0.95", "==", "too_tight"),  # ... and here the floor fails runs too
    ],
)
def test_verdicts_compare_bands(proposed: str, op: Op, verdict: Verdict) -> None:
    rel = 0.05
    base = reference("0.91", op, rel=rel)
    head = reference(proposed, op, rel=rel)
    (g,) = build_review([GateChange(head=head, base=base)], runs_of(STEADY)).gates
    ref = dec(median_at(STEADY, 2))
    margin, prop_margin = dec(rel) * ref, dec(rel) * dec(proposed)
    lows = (ref - margin, dec(proposed) - prop_margin)
    highs = (ref + margin, dec(proposed) + prop_margin)
    fails = sum(
        (op != "<=" and dec(v) < lows[1]) or (op != ">=" and dec(v) > highs[1]) for v in STEADY
    )
    looser = max(
        [lows[0] - lows[1]] * (op != "<=") + [highs[1] - highs[0]] * (op != ">="),
    )
    expected: Verdict = (
        "too_tight" if fails else "looser_than_rule" if looser > dec("0.01") else "ok"
    )
    assert g.verdict == expected == verdict
    assert g.proposed_failures.failed == fails
    assert g.recomputed == float(ref)


def test_explanation_words_the_band() -> None:
    base = reference("0.91", rel=0.08)
    head = reference("0.95", rel=0.08)
    (g,) = build_review([GateChange(head=head, base=base)], runs_of(NIGHTLY)).gates
    floor = dec("0.95") * (1 - dec("0.08"))
    failed = sum(dec(v) < floor for v in NIGHTLY[-WINDOW:])
    assert f"0.95 ±8% (≥ 0.874) fails {failed} of {WINDOW} runs in the window" in g.explanation
    assert ">=" not in g.explanation

    loose = reference("0.85", rel=0.08)
    (g,) = build_review([GateChange(head=loose, base=base)], runs_of(STEADY)).gates
    assert g.verdict == "looser_than_rule"
    rule_floor = dec("0.90") * (1 - dec("0.08"))
    assert f"looser than the rule's 0.90 ±8% (≥ {rule_floor.normalize()})" in g.explanation


def test_mean_reference() -> None:
    values = [0.80, 0.81, 0.82, 0.83, 0.99] * 4  # mean 0.85, median 0.82
    gate = reference("0.80", "==", absolute=0.2)
    rule = RuleSettings(reference="mean")
    (g,) = build_review([GateChange(head=gate, base=gate)], runs_of(values), rule=rule).gates
    assert g.recomputed == float(dec(statistics.mean(values)).quantize(dec("0.01"))) == 0.85
    (m,) = build_review([GateChange(head=gate, base=gate)], runs_of(values)).gates
    assert m.recomputed == median_at(values, 2) == 0.82


# --------------------------------------------------------------------------- the tolerance


def test_tolerance_tighter_than_the_spread() -> None:
    values = [0.91, 0.95, 0.93, 0.94, 0.92] * 4
    gate = reference("0.93", "==", rel=0.02)
    (g,) = build_review([GateChange(head=gate, base=gate)], runs_of(values)).gates
    ref = dec(median_at(values, 2))
    low, high = ref * (1 - dec("0.02")), ref * (1 + dec("0.02"))
    held = sum(low <= dec(v) <= high for v in values)
    assert held < len(values)
    # the smallest relative tolerance holding every run, rounded up (3 decimals: 2 digits)
    need = max(ref - dec(min(values)), dec(max(values)) - ref) / ref
    rel = float(need.quantize(dec("0.001"), rounding=ROUND_CEILING))
    assert g.recomputed_tolerance == Tolerance(rel=rel)
    assert (
        "the tolerance ±2% is tighter than the window's spread: the band around the median"
        f" 0.93 holds {held} of {len(values)} runs; ±{rel * 100:g}% would hold them all"
    ) in g.warnings
    for v in values:  # the recomputed tolerance does hold them all
        assert float(ref) * (1 - rel) <= v <= float(ref) * (1 + rel)


def test_band_holding_no_run() -> None:
    values = [0.80, 1.00] * 10  # median 0.90: a band of ±0.01 holds neither
    gate = reference("0.90", "==", absolute=0.01)
    review = build_review([GateChange(head=gate, base=gate)], runs_of(values))
    (g,) = review.gates
    assert g.proposed_failures.failed == g.proposed_failures.total == len(values)
    assert g.verdict == "unchanged_failing"
    assert g.recomputed_tolerance == Tolerance(abs=0.1)  # 0.90 ± 0.10 holds them all
    assert any("holds no run of 20; ±0.1 would hold them all" in w for w in g.warnings)
    assert review.conclusion == "action_required"


def test_tolerance_wide_enough_needs_none() -> None:
    gate = reference("0.90", ">=", rel=0.05)
    (g,) = build_review([GateChange(head=gate, base=gate)], runs_of(STEADY)).gates
    assert g.recomputed_tolerance is None
    assert not any("tolerance" in w for w in g.warnings)


# --------------------------------------------------------------------------- regimes


def test_two_sided_band_tied_to_a_drop() -> None:
    rng = np.random.default_rng(3)
    values = [0.90 + rng.normal(0, 0.002) for _ in range(40)]
    values += [0.80 + rng.normal(0, 0.002) for _ in range(30)]
    gate = reference("0.90", "==", rel=0.05)
    (g,) = build_review([GateChange(head=gate, base=gate)], runs_of(values)).gates
    assert g.classification == "failing_every_run"
    assert g.consecutive_failures == 30
    # a drop moves the metric away from the reference: the change toward failing
    assert "since the change" in g.explanation and "moved eval/gsm8k/acc" in g.explanation


# --------------------------------------------------------------------------- placeholders


def test_ignored_gate_failing_every_run_is_never_action() -> None:
    placeholder = reference("0.99", rel=0.001, ignored="# threshold-bot: ignore")
    fine = reference("0.90", rel=0.05, name="other")
    review = build_review(
        [GateChange(head=placeholder, base=placeholder), GateChange(head=fine, base=fine)],
        runs_of(STEADY),
    )
    ignored, other = review.gates
    assert ignored.ignored == "# threshold-bot: ignore"
    assert ignored.proposed_failures.failed == ignored.proposed_failures.total == len(STEADY)
    assert ignored.verdict == "unchanged_failing" and not needs_action(ignored)
    assert other.verdict == "unchanged"
    assert review.conclusion == "success"


def test_ignored_gate_without_data_changes_nothing() -> None:
    changed = reference("0.99", ignored="listed under 'ignore' in the config", metric="nope")
    review = build_review([GateChange(head=changed)], runs_of(STEADY))
    assert review.gates[0].verdict == "no_data"
    assert review.conclusion == "success"
    unavailable = unavailable_review([GateChange(head=changed)], "W&B timed out")
    assert unavailable.conclusion == "neutral"
    # without the placeholder mark, the same gate needs a maintainer
    plain = changed.model_copy(update={"ignored": ""})
    review = build_review([GateChange(head=plain)], runs_of(STEADY))
    assert review.conclusion == "action_required"


def test_unavailable_review_keeps_the_reference_fields() -> None:
    base = reference("0.91", rel=0.08, context="TestAccuracy.test_gsm8k")
    head = reference("0.95", rel=0.08, context="TestAccuracy.test_gsm8k")
    review = unavailable_review([GateChange(head=head, base=base)], "timeout")
    (g,) = review.gates
    assert g.kind == "reference" and g.reference == 0.95
    assert g.old_band is not None and g.old_band.band_low == float(dec("0.91") * dec("0.92"))
    assert g.proposed_band is not None and g.proposed_band.band_low == 0.874
    assert g.recomputed_band is None and g.context == "TestAccuracy.test_gsm8k"
    assert review.conclusion == "action_required"


# --------------------------------------------------------------------------- the CLI

CONFIG = """\
files:
  - path: accuracy.yaml
    kind: reference
    tolerance: {rel: 0.08}
    gates:
      - {key: gsm8k.acc, metric: eval/gsm8k/acc, sides: lower}
"""
THRESHOLDS = """\
# golden accuracies of the nightly eval (checked as acc >= golden * (1 - rtol))
gsm8k:
  acc: 0.95
  num_fewshot: 5
"""


def test_cli_json_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("threshold-bot.yml").write_text(CONFIG, encoding="utf-8")
    Path("accuracy.yaml").write_text(THRESHOLDS, encoding="utf-8")
    with Path("history.jsonl").open("w", encoding="utf-8") as out:
        for i, value in enumerate(NIGHTLY):
            created = (T0 + timedelta(days=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            row = {"id": f"n{i}", "created_at": created, "summary": {METRIC: value}}
            out.write(json.dumps(row) + "\n")
    args = ["review", "--file", "accuracy.yaml", "--history", "history.jsonl"]
    result = CliRunner().invoke(app, [*args, "--config", "threshold-bot.yml", "--format", "json"])
    assert result.exit_code == 0, result.output
    (gate,) = json.loads(result.output)["gates"]
    floor = float(dec("0.95") * (1 - dec("0.08")))
    assert gate["kind"] == "reference"
    assert gate["reference"] == 0.95
    assert gate["tolerance"] == {"rel": 0.08, "abs": None}
    assert gate["sides"] == "lower"
    assert gate["old_band"] == gate["proposed_band"] == {"band_low": floor, "band_high": None}
    window, lookback = NIGHTLY[-WINDOW:], NIGHTLY[-LOOKBACK:]
    assert gate["proposed_failures"] == {
        "failed": sum(v < floor for v in window),
        "total": WINDOW,
    }
    assert gate["old_failures"] == {"failed": sum(v < floor for v in lookback), "total": LOOKBACK}
    assert gate["verdict"] == "unchanged_failing"
    assert gate["recomputed"] == median_at(window, 2)
