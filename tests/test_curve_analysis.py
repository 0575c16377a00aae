"""Golden curves checked step by step on the runs' per-step series, and gates on an
aggregation of a series (``mean(data['timing/step_s'][-5:]) <= 42``). Expected counts, steps
and values are computed here from the runs each test builds."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

import numpy as np
import pytest

from bot.core.analysis.curves import recompute_points
from bot.core.analysis.review import build_review
from bot.core.models import (
    Aggregation,
    CurvePoint,
    Gate,
    GateChange,
    History,
    RuleSettings,
    Run,
    Span,
    Tolerance,
)

T0 = datetime(2026, 5, 4, 2, tzinfo=UTC)
LOSS = "lm loss"
WINDOW = RuleSettings().window.runs
RTOL = 0.05
GOLDEN_STEPS = list(range(1, 51, 5))  # 1, 6, …, 46 (start_step 1, step_interval 5)
NAN_STEP = 51  # the golden file says "nan" here
SPIKE_RUN, SPIKE_STEP = 22, 26  # a run whose loss spikes 10% above the golden at step 26
BARE_RUN = 23  # a run logged without its per-step series
WILD_RUN = 24  # a run whose loss explodes at the nan step only
N_RUNS = 25


def golden(step: int) -> float:
    return round(10.85 - 0.021 * step, 2)


def curve_gate(steps: list[int] = GOLDEN_STEPS, nan_steps: tuple[int, ...] = (NAN_STEP,)) -> Gate:
    """A golden loss curve as a JSON file writes it (two-sided, ±5%)."""
    points: list[CurvePoint] = []
    offset = 40
    for step in sorted([*steps, *nan_steps]):
        literal = "nan" if step in nan_steps else f"{golden(step):.2f}"
        value = None if step in nan_steps else float(literal)
        span = Span(literal=literal, start=offset, end=offset + len(literal), line=3)
        points.append(CurvePoint(step=step, value=value, span=span))
        offset += len(literal) + 10
    last = next(p for p in reversed(points) if p.value is not None)
    assert last.value is not None
    return Gate(
        name="lm loss",
        file="golden_values.json",
        line=last.span.line,
        metric=LOSS,
        op="==",
        value=last.value,
        literal=last.span.literal,
        start=last.span.start,
        end=last.span.end,
        kind="reference",
        tolerance=Tolerance(rel=RTOL),
        points=tuple(points),
    )


def loss_runs() -> list[Run]:
    rng = np.random.default_rng(11)
    runs = []
    for i in range(N_RUNS):
        series = {s: golden(s) * (1 + rng.normal(0, 0.008)) for s in range(1, 52)}
        if i == SPIKE_RUN:
            series[SPIKE_STEP] = golden(SPIKE_STEP) * 1.10
        if i == WILD_RUN:
            series[NAN_STEP] = 1000.0
        summary = {LOSS: series[NAN_STEP] if i != WILD_RUN else series[NAN_STEP - 1]}
        runs.append(
            Run(
                id=f"t{i:02d}",
                created_at=T0 + timedelta(hours=8 * i),
                summary=summary,
                series={} if i == BARE_RUN else {LOSS: series},
            )
        )
    return runs


def outside(value: float, reference: float) -> bool:
    return abs(Decimal(repr(value)) - Decimal(repr(reference))) > Decimal(repr(RTOL)) * Decimal(
        repr(abs(reference))
    )


def fails(run: Run, steps: list[int]) -> bool:
    """The run fails the curve as the review should decide it, written out here."""
    series = run.series.get(LOSS)
    if not series:
        return outside(run.summary[LOSS], golden(steps[-1]))
    return any(outside(series[s], golden(s)) for s in steps if s in series)


def half_up(value: float, places: int) -> float:
    unit = Decimal(1).scaleb(-places)
    return float(Decimal(repr(value)).quantize(unit, rounding=ROUND_HALF_UP))


# --------------------------------------------------------------------------- golden curves


def test_curve_checked_step_by_step() -> None:
    runs = loss_runs()
    gate = curve_gate()
    review = build_review([GateChange(head=gate, base=gate)], History(runs=tuple(runs)))
    (g,) = review.gates
    window = runs[-WINDOW:]
    assert g.proposed_failures.total == WINDOW
    assert g.proposed_failures.failed == sum(fails(r, GOLDEN_STEPS) for r in window) == 1
    assert g.old_failures.failed == sum(fails(r, GOLDEN_STEPS) for r in runs)
    assert g.verdict == "unchanged_failing"
    assert g.worst_step == SPIKE_STEP
    assert f"farthest outside at step {SPIKE_STEP}" in g.explanation
    # the rule: the window's median at the last checked step (the bare run: its summary)
    last = GOLDEN_STEPS[-1]
    at_last = [r.series[LOSS][last] if r.series else r.summary[LOSS] for r in window]
    assert g.recomputed == half_up(statistics.median(at_last), 2)
    assert g.window_min == min(at_last) and g.window_max == max(at_last)
    assert (
        f"no per-step series of `{LOSS}` in 1 of 20 runs in the window: their summary value"
        f" is compared with the last step's reference (step {last})"
    ) in g.warnings
    assert g.kind == "reference" and g.sides == "both"
    assert g.proposed_band is not None
    assert g.proposed_band.band_low == float(
        Decimal(repr(golden(last))) * (1 - Decimal(repr(RTOL)))
    )


def test_nan_golden_is_not_checked() -> None:
    runs = loss_runs()
    gate = curve_gate()
    wild = runs[WILD_RUN].series[LOSS]
    assert outside(wild[NAN_STEP], golden(NAN_STEP))  # it would fail, were the step checked
    change = GateChange(head=gate, base=gate)
    (g,) = build_review([change], History(runs=(runs[WILD_RUN],))).gates
    assert g.proposed_failures.failed == int(fails(runs[WILD_RUN], GOLDEN_STEPS)) == 0
    assert g.verdict == "unchanged"


def test_steps_the_runs_never_logged() -> None:
    runs = [r for i, r in enumerate(loss_runs()) if i != BARE_RUN]
    longer = [*GOLDEN_STEPS, 56, 61]  # the runs stop at step 51
    gate = curve_gate(longer, nan_steps=())
    (g,) = build_review([GateChange(head=gate, base=gate)], History(runs=tuple(runs))).gates
    window = runs[-WINDOW:]
    assert g.proposed_failures.failed == sum(fails(r, longer) for r in window) == 1
    assert "no run in the window logged 2 steps of the golden curve (56, 61): not checked" in (
        g.warnings
    )
    # nothing at the last step: the rule has no reference, the runs are still judged
    assert g.recomputed is None and g.recomputed_band is None and g.window_min is None
    assert g.verdict == "unchanged_failing"


def test_runs_without_any_series_use_the_summary() -> None:
    runs = [r.model_copy(update={"series": {}}) for r in loss_runs()]
    gate = curve_gate()
    (g,) = build_review([GateChange(head=gate, base=gate)], History(runs=tuple(runs))).gates
    window = runs[-WINDOW:]
    assert g.proposed_failures.failed == sum(fails(r, GOLDEN_STEPS) for r in window)
    assert g.worst_step is None
    assert any("in 20 of 20 runs in the window" in w for w in g.warnings)


def test_recompute_points() -> None:
    runs = loss_runs()
    gate = curve_gate([*GOLDEN_STEPS, 56], nan_steps=(NAN_STEP,))
    window = runs[-WINDOW:]
    for point, value in recompute_points(gate, runs, RuleSettings()):
        if point.value is None or point.step == 56:
            assert value is None, point.step  # a nan golden, a step no run logged
            continue
        logged = [r.series[LOSS][point.step] for r in window if r.series]
        assert value == half_up(statistics.median(logged), 2), point.step
    mean_rule = RuleSettings(reference="mean", window=10)
    first = recompute_points(gate, runs, mean_rule)[0]
    logged = [r.series[LOSS][1] for r in runs[-10:] if r.series]
    assert first[1] == half_up(statistics.mean(logged), 2)


# --------------------------------------------------------------------------- aggregations

STEP_S = "timing/step_s"
SLOW_TAILS = (21, 23)  # runs whose last steps slow down
BARE = (20, 22, 24)  # runs logged without their per-step series


def timing_runs() -> list[Run]:
    rng = np.random.default_rng(5)
    runs = []
    for i in range(25):
        steps = {s: (80.0 if s < 3 else 40.0) + rng.normal(0, 0.4) for s in range(30)}
        if i in SLOW_TAILS:
            for s in range(27, 30):
                steps[s] = 46.0 + rng.normal(0, 0.4)
        runs.append(
            Run(
                id=f"p{i}",
                created_at=T0 + timedelta(days=i),
                summary={STEP_S: steps[29] if i not in SLOW_TAILS else 40.5},
                series={} if i in BARE else {STEP_S: steps},
            )
        )
    return runs


def aggregated(how: Aggregation, last: int | None) -> Gate:
    return Gate(
        name="STEP_TIME",
        file="ci/perf.yaml",
        line=7,
        metric=STEP_S,
        op="<=",
        value=42.0,
        literal="42",
        start=110,
        end=112,
        aggregation=how,
        last_steps=last,
    )


REDUCE = {"mean": statistics.mean, "max": max, "median": statistics.median, "min": min}


@pytest.mark.parametrize(
    ("how", "last", "words"),
    [
        ("mean", 5, "mean of the last 5 steps"),
        ("max", None, "maximum over all steps"),
        ("median", 1, "median of the last step"),
    ],
)
def test_aggregation_applied_to_series(how: Aggregation, last: int | None, words: str) -> None:
    runs = timing_runs()
    gate = aggregated(how, last)
    (g,) = build_review([GateChange(head=gate, base=gate)], History(runs=tuple(runs))).gates

    def value(run: Run) -> float:
        steps = run.series.get(STEP_S)
        if not steps:
            return run.summary[STEP_S]
        ordered = [steps[s] for s in sorted(steps)]
        return float(REDUCE[how](ordered[-last:] if last else ordered))

    window = [value(r) for r in runs[-WINDOW:]]
    assert g.aggregation == words
    assert g.proposed_failures.failed == sum(v > 42 for v in window)
    assert g.window_max == max(window)
    top = Decimal(repr(max(window))) * Decimal("1.05")
    places = max(0, 2 - 1 - top.adjusted())
    unit = Decimal(1).scaleb(-places)
    assert g.recomputed == float(top.quantize(unit, rounding=ROUND_CEILING))
    warnings = [w for w in g.warnings if "could not be applied" in w]
    assert warnings == [
        f"{words} could not be applied to {len(BARE)} of 20 runs in the window"
        f" (no per-step series of `{STEP_S}`): their summary value is compared"
    ]


def test_slow_tails_fail_the_mean_not_the_summary() -> None:
    runs = [r for i, r in enumerate(timing_runs()) if i not in BARE]
    mean5 = aggregated("mean", 5)
    plain = mean5.model_copy(update={"aggregation": None, "last_steps": None})
    review = build_review(
        [GateChange(head=mean5, base=mean5), GateChange(head=plain, base=plain)],
        History(runs=tuple(runs)),
    )
    on_mean, on_summary = review.gates
    assert on_mean.proposed_failures.failed == len(SLOW_TAILS)
    assert on_summary.proposed_failures.failed == 0  # the summary hides the slow tail
    assert on_summary.aggregation == "" and not on_mean.warnings
