"""Where the dashboard puts each gate (``bot.core.dashboard.sections``): a repository with
one gate of each kind, each file's drift report built by the real analysis over a generated
history; the numbers expected are computed here from that history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bot.core.dashboard.sections import HORIZON_RUNS, GatePlace, not_evaluated, place_gates
from bot.core.dashboard.view import FileView
from bot.core.formatting import day_month_year
from bot.core.models import COMPARISONS
from tests.builders import limit_gate
from tests.dashboard_views import (
    BEFORE,
    HARM,
    STEP_RUNS,
    TREND_RUNS,
    Kinds,
    day,
    drifting_values,
    file_view,
    kinds,
    looser_values,
    trend_values,
)

LOOKBACK = 30  # RuleSettings().failure_lookback


@pytest.fixture(scope="module")
def made() -> Kinds:
    return kinds()


@pytest.fixture(scope="module")
def placed(made: Kinds) -> dict[str, GatePlace]:
    return {p.gate.name: p for p in place_gates(made.view())}


def _projection(values: list[float], limit: float) -> int:
    """Runs until the least-squares line of ``values`` falls to ``limit``, from its newest."""
    x = np.arange(len(values))
    slope, intercept = np.polyfit(x, values, 1)
    last = intercept + slope * x[-1]
    return math.ceil((last - limit) / -slope)


def test_the_sections_and_their_order(made: Kinds) -> None:
    found = [(p.section, p.gate.name, p.file) for p in place_gates(made.view())]
    assert found == [
        ("attention", "TRAIN", "ci/train.sh"),  # drifting first
        ("attention", "SLIDE", "ci/slide.sh"),  # then toward its limit
        ("attention", "GONE", "ci/gone.sh"),  # then without data
        ("flaky", "EVAL", "ci/eval.sh"),
        ("looser", "LOOSE", "ci/loose.sh"),
        ("healthy", "FINE", "ci/fine.sh"),
    ]


def test_a_drifting_gate_says_since_when(placed: dict[str, GatePlace]) -> None:
    values = drifting_values()
    assert all(v < 0.75 for v in values[BEFORE:]) and values[BEFORE - 1] >= 0.75  # premise
    p = placed["TRAIN"]
    assert p.drift.status == "drifting"
    assert p.why == (
        f"failing since {day_month_year(day(BEFORE))}: {STEP_RUNS} of the last {LOOKBACK}"
        f" runs failed, the last {STEP_RUNS} in a row"
    )
    assert (p.runs_to_fail, p.fails_around) == (None, None)


def test_a_gate_trending_to_its_limit_is_projected(placed: dict[str, GatePlace]) -> None:
    values = trend_values()
    assert all(v >= 0.78 for v in values)  # it passes every run
    runs = _projection(values, 0.78)
    assert 0 < runs <= HORIZON_RUNS  # the premise: within the horizon
    p = placed["SLIDE"]
    assert p.drift.status == "passing"
    assert p.runs_to_fail == runs
    assert p.fails_around == day(TREND_RUNS - 1 + runs)  # a run a day
    assert p.why.startswith(f"passes its last {LOOKBACK} runs, but its trend (−")
    assert p.why.endswith(
        f"reaches the limit in {runs} runs, around {day_month_year(day(TREND_RUNS - 1 + runs))}"
    )


def test_beyond_the_horizon_or_moving_away_needs_no_attention() -> None:
    values = trend_values()
    far = 0.70
    assert _projection(values, far) > HORIZON_RUNS  # the premise
    view = kinds().view()
    files = (
        file_view("ci/far.sh", [limit_gate("acc", ">=", str(far), name="FAR")], values),
        file_view("ci/up.sh", [limit_gate("acc", "<=", "1.5", name="UP")], values),
    )
    found = {p.gate.name: p for p in place_gates(view.model_copy(update={"files": files}))}
    for name in ("FAR", "UP"):  # (far below the metric, both are looser than the history)
        assert found[name].section != "attention" and found[name].runs_to_fail is None
        assert found[name].drift.status == "passing"


def test_no_data_flaky_and_healthy(placed: dict[str, GatePlace]) -> None:
    assert placed["GONE"].drift.status == "no_data"
    assert placed["GONE"].why == "no finished run has its metric"
    assert placed["EVAL"].why == f"failed 3 of the last {LOOKBACK} runs (10%), scattered: flaky"
    assert placed["FINE"].why == f"passes its last {LOOKBACK} runs"


def test_a_looser_gate_shows_the_rule_and_the_better_model(placed: dict[str, GatePlace]) -> None:
    values = looser_values()
    window = values[40:]  # the newest regime: the drift window
    median = float(np.median(window))
    assert all(COMPARISONS[">="](v, 0.90) for v in window)  # it passes every run
    assert median * (1 - HARM) >= 0.90  # a harmful fall still passes it
    p = placed["LOOSE"]
    assert p.section == "looser"
    assert p.rule is not None and p.rule == p.gate.tighten_to
    assert 0.90 < p.rule <= min(window)  # stricter than the gate, still passing the window
    assert p.better_model == "zscore k=3"  # tests/test_backtest_hint.py derives it
    assert p.backtest.startswith("Backtest: with `zscore k=3`")
    harm = f"{HARM:.0%}"
    assert p.why == (
        f"passes its last {LOOKBACK} runs; a harmful move of {harm} from its median would"
        " still pass it"
    )


def test_files_not_evaluated_keep_their_problem(made: Kinds) -> None:
    broken = FileView(path="ci/broken.sh", problem="file:runs.jsonl: not found")
    view = made.view(broken)
    assert not_evaluated(view) == (broken,)
    assert all(p.file != "ci/broken.sh" for p in place_gates(view))


def test_a_shift_without_a_streak_says_since_the_change() -> None:
    rng = np.random.default_rng(2)
    values = [0.80 + float(rng.normal(0, 0.005)) for _ in range(BEFORE)]
    values += [0.752 if i % 3 == 2 else 0.74 for i in range(12)]  # 2 of 3 fail 0.75
    fails = [v < 0.75 for v in values]
    assert not fails[-1] and sum(fails[-LOOKBACK:]) == sum(fails[BEFORE:]) == 8  # premise
    shifted = file_view("ci/shift.sh", [limit_gate("acc", ">=", "0.75", name="SHIFT")], values)
    view = kinds().view().model_copy(update={"files": (shifted,)})
    (p,) = place_gates(view)
    assert (p.section, p.drift.streak) == ("attention", 0)
    assert p.why == (
        f"failing since {day_month_year(day(BEFORE))}: 8 of the last {LOOKBACK} runs failed,"
        " at least half the runs since the regime change"
    )
