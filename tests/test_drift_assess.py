"""The drift watch's decision (``bot.core.analysis.drift``) over reviews built the honest way:
the real ``build_review`` over synthetic histories, each gate reviewed at its literal
(``base == head``) with the drift window; expected numbers computed here from the data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bot.core.analysis.drift import assess, drift_report
from bot.core.analysis.review import build_review
from bot.core.config import DriftSettings
from bot.core.formatting import day_month_year
from bot.core.models import (
    COMPARISONS,
    Change,
    Gate,
    GateChange,
    GateKind,
    History,
    Op,
    RegimeSettings,
    Review,
    RuleSettings,
    Run,
    Tolerance,
)

T0 = datetime(2026, 6, 1, 2, tzinfo=UTC)
METRIC = "eval/acc"
LOOKBACK = RuleSettings().failure_lookback
BEFORE = 40  # runs before the step
# the detector confirms a regime of this many runs: a 3-run tail is a regime here
SHORT_REGIMES = RegimeSettings(min_regime_runs=3)


def history(values: list[float]) -> History:
    runs = tuple(
        Run(id=f"r{i}", created_at=T0 + timedelta(days=i), summary={METRIC: round(v, 4)})
        for i, v in enumerate(values)
    )
    return History(runs=runs, source="file:runs.jsonl")


def step(after: int, low: float = 0.80, high: float = 0.70, seed: int = 1) -> list[float]:
    """``BEFORE`` runs near ``low``, then ``after`` runs near ``high``."""
    rng = np.random.default_rng(seed)
    values = [low + rng.normal(0, 0.005) for _ in range(BEFORE)]
    return values + [high + rng.normal(0, 0.005) for _ in range(after)]


def gate(
    op: Op = ">=",
    literal: str = "0.75",
    kind: GateKind = "limit",
    tolerance: Tolerance | None = None,
    ignored: str = "",
) -> Gate:
    return Gate(
        name="ACC_MIN",
        file="ci/nightly.sh",
        line=3,
        metric=METRIC,
        op=op,
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
        kind=kind,
        tolerance=tolerance,
        ignored=ignored,
    )


def review_of(
    g: Gate,
    values: list[float],
    settings: DriftSettings = DriftSettings(),
    regimes: RegimeSettings = RegimeSettings(),
) -> tuple[Review, History]:
    h = history(values)
    rule = RuleSettings(window=settings.window)
    review = build_review([GateChange(head=g, base=g)], h, rule=rule, regime_settings=regimes)
    return review, h


def fails_of(g: Gate, h: History) -> list[bool]:
    values = [r.summary[METRIC] for r in h.runs]
    if g.kind == "reference":
        margin = g.tolerance.margin(g.value) if g.tolerance else 0.0
        return [abs(v - g.value) > margin for v in values]
    return [not COMPARISONS[g.op](v, g.value) for v in values]


def streak(fails: list[bool]) -> int:
    n = 0
    for failed in reversed(fails):
        if not failed:
            break
        n += 1
    return n


def test_a_step_failing_the_last_two_runs_is_not_yet_drifting() -> None:
    g = gate()
    review, h = review_of(g, step(after=2))
    fails = fails_of(g, h)
    assert streak(fails) == 2 and sum(fails[-LOOKBACK:]) == 2  # the data's premise
    (found,) = assess(review, DriftSettings())
    assert found.status == "passing"
    assert (found.failed, found.total, found.streak) == (2, LOOKBACK, 2)
    assert (found.since, found.change) == (None, None)
    assert found.reason == (
        f"failed its last 2 runs in a row, fewer than 3 (min_failures); 2 of the last"
        f" {LOOKBACK} runs failed"
    )


def test_a_step_failing_the_last_three_runs_drifts_tied_to_the_change() -> None:
    g = gate()
    review, h = review_of(g, step(after=3), regimes=SHORT_REGIMES)
    fails = fails_of(g, h)
    first_after = h.runs[BEFORE].created_at
    assert streak(fails) == 3 and sum(fails[-LOOKBACK:]) == 3  # the data's premise
    (found,) = assess(review, DriftSettings())
    assert found.status == "drifting"
    assert (found.failed, found.total, found.streak) == (3, LOOKBACK, 3)
    assert found.change is not None and found.change.at == first_after
    assert found.since == first_after
    assert found.gate.tied_change == first_after
    assert found.reason == f"failed its last 3 runs in a row, since {day_month_year(first_after)}"
    report = drift_report("ci/nightly.sh", review, DriftSettings())
    assert report.drifting == (found,) and report.flaky == ()


@pytest.mark.parametrize(("least", "status"), [(1, "drifting"), (5, "passing")])
def test_min_failures_decides(least: int, status: str) -> None:
    g = gate()
    review, h = review_of(g, step(after=2 if least == 1 else 4), regimes=SHORT_REGIMES)
    n = streak(fails_of(g, h))
    assert (n >= least) == (status == "drifting")  # the data's premise
    (found,) = assess(review, DriftSettings(min_failures=least))
    assert found.status == status
    assert found.streak == n


def test_min_failures_one_dates_an_untied_streak_by_its_first_run() -> None:
    g = gate()
    review, h = review_of(g, step(after=2))  # too short for the detector: no change
    assert not review.changes
    (found,) = assess(review, DriftSettings(min_failures=1))
    assert found.status == "drifting" and found.change is None
    assert found.since == h.runs[-2].created_at == found.gate.failing_since


def test_a_change_at_the_streaks_first_run_is_named_when_the_review_ties_none() -> None:
    g = gate()
    review, h = review_of(g, step(after=3))
    (reviewed,) = review.gates
    first = h.runs[BEFORE]
    assert reviewed.failing_since == first.created_at  # the data's premise
    assert reviewed.tied_change is None or reviewed.tied_change == first.created_at
    onset = Change(at=first.created_at, index=BEFORE, pulls=(12,))
    kept = tuple(c for c in review.changes if c.at != first.created_at)
    with_onset = review.model_copy(update={"changes": (*kept, onset)})
    (found,) = assess(with_onset, DriftSettings())
    assert found.status == "drifting" and found.change == onset and found.since == first.created_at


def test_scattered_failures_are_flaky_with_their_rate_and_never_drift() -> None:
    rng = np.random.default_rng(4)
    values = [0.80 + rng.normal(0, 0.005) for _ in range(60)]
    for position in (-25, -14, -4):  # three scattered failures in the last 30 runs
        values[position] = 0.70
    g = gate()
    review, h = review_of(g, values)
    fails = fails_of(g, h)
    failed = sum(fails[-LOOKBACK:])
    assert failed == 3 and not fails[-1]  # the data's premise
    for least in (1, 3, 5):
        (found,) = assess(review, DriftSettings(min_failures=least))
        assert found.status == "flaky"
        assert (found.failed, found.total) == (failed, LOOKBACK)
        assert found.reason == f"failed 3 of the last {LOOKBACK} runs (10%), scattered: flaky"
        assert found.since is None and found.change is None
    report = drift_report("ci/nightly.sh", review, DriftSettings())
    assert report.flaky == report.gates and report.drifting == ()


def test_a_passing_gate() -> None:
    g = gate(literal="0.60")
    review, _ = review_of(g, step(after=10))
    (found,) = assess(review, DriftSettings())
    assert (found.status, found.failed, found.streak) == ("passing", 0, 0)
    assert found.reason == f"passes its last {LOOKBACK} runs"


def test_an_upper_bound_gate_drifts_when_the_metric_steps_up() -> None:
    g = gate(op="<=", literal="0.75")
    values = step(after=8, low=0.70, high=0.80)
    review, h = review_of(g, values)
    fails = fails_of(g, h)
    n = streak(fails)
    assert n == 8 == sum(fails)  # the data's premise
    (found,) = assess(review, DriftSettings())
    assert found.status == "drifting" and found.streak == n
    assert found.change is not None and found.change.at == h.runs[BEFORE].created_at
    assert found.gate.recomputed is not None and found.gate.recomputed > 0.80


def test_a_reference_gate_drifts_out_of_its_band() -> None:
    g = gate(op="==", literal="0.80", kind="reference", tolerance=Tolerance(rel=0.05))
    review, h = review_of(g, step(after=8))
    fails = fails_of(g, h)
    assert streak(fails) == 8 == sum(fails)  # the band is 0.76 - 0.84: the new level is out
    (found,) = assess(review, DriftSettings())
    assert found.status == "drifting" and found.gate.kind == "reference"
    assert found.change is not None and found.change.at == h.runs[BEFORE].created_at
    assert found.gate.recomputed is not None and abs(found.gate.recomputed - 0.70) < 0.02


def test_placeholders_are_skipped_and_gates_without_data_say_so() -> None:
    kept = gate()
    placeholder = gate(ignored="a placeholder").model_copy(update={"name": "TODO"})
    missing = gate().model_copy(update={"name": "OTHER", "metric": "eval/none"})
    h = history(step(after=2))
    changes = [GateChange(head=x, base=x) for x in (kept, placeholder, missing)]
    review = build_review(changes, h)
    found = assess(review, DriftSettings())
    assert [f.gate.name for f in found] == ["ACC_MIN", "OTHER"]
    assert found[1].status == "no_data" and found[1].reason == "no finished run has its metric"


def test_tied_change_is_the_change_the_review_ties_the_case_to() -> None:
    g = gate()
    review, h = review_of(g, step(after=8))
    (reviewed,) = review.gates
    (change,) = review.changes
    assert change.at == h.runs[BEFORE].created_at  # the data's premise
    assert reviewed.classification == "failing_every_run"
    assert reviewed.tied_change == change.at
    passing, _ = review_of(gate(literal="0.60"), step(after=8))
    assert passing.gates[0].tied_change is None


def test_a_shift_that_fails_most_runs_since_the_change_drifts_without_a_streak() -> None:
    rng = np.random.default_rng(2)
    values = [0.80 + rng.normal(0, 0.005) for _ in range(BEFORE)]
    values += [0.752 if i % 3 == 2 else 0.74 for i in range(12)]  # 2 of 3 fail 0.75
    g = gate()
    review, h = review_of(g, values)
    fails = fails_of(g, h)
    failed = sum(fails[-LOOKBACK:])
    assert not fails[-1] and failed == sum(fails[BEFORE:]) == 8  # the data's premise
    (found,) = assess(review, DriftSettings())
    assert found.gate.classification == "shifted"
    assert found.status == "drifting" and found.streak == 0
    assert found.change is not None and found.change.at == h.runs[BEFORE].created_at
    assert found.since == found.change.at
    assert found.reason == (
        f"failed {failed} of the last {LOOKBACK} runs; at least half the runs since the"
        f" regime change of {day_month_year(found.since)} fail"
    )
    (fewer,) = assess(review, DriftSettings(min_failures=failed + 1))
    assert fewer.status == "passing"
