"""The backtest's one line in the review: a gate whose model (minmax) misses a harmful step
that another default model catches gets the hint, in the JSON, the comment and the
terminal; a history on which the models tie gets none.  The limits that decide it are
computed here from the generated runs."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from bot.core.analysis.review import build_review
from bot.core.formatting import day_month_year
from bot.core.models import (
    BacktestSettings,
    GateChange,
    History,
    RuleSettings,
)
from bot.core.render.review import render_comment, render_json
from bot.core.render.terminal import review_table
from tests.builders import history_of, limit_gate, series_runs

T0 = datetime(2026, 6, 1, tzinfo=UTC)
RUNS, STEP_AT, WINDOW = 55, 40, 20
HARM = 0.02  # a 3% drop is harmful; minmax's 5% allowance lets it through
RULE = RuleSettings(backtest=BacktestSettings(harm=HARM))
GATE = limit_gate("acc", ">=", "0.90", name="ACC")


def _values(step: float, runs: int = RUNS) -> list[float]:
    """``acc`` at 1.0 with noise 0.001, ``step`` lower from run ``STEP_AT``."""
    rng = np.random.default_rng(3)
    return [(1.0 if i < STEP_AT else 1.0 - step) + rng.normal(0, 0.001) for i in range(runs)]


def _history(values: list[float]) -> History:
    return history_of(series_runs(values, start=T0))


def _before(values: list[float], i: int) -> list[float]:
    return values[max(0, i - WINDOW) : i]


def _minmax(window: list[float]) -> float:
    return min(window) * (1 - RULE.allowance)  # rounding down only lowers it further


def _percentile(window: list[float]) -> float:
    q = float(np.percentile(window, 5))
    return min(q * (1 - RULE.allowance), min(window))


def _zscore(window: list[float]) -> float:
    """mean − 3·(1.4826·MAD), at most the window's minimum, rounded down at 2 decimals."""
    sigma = float(stats.median_abs_deviation(window, scale="normal"))
    raw = min(float(np.mean(window)) - 3 * sigma, min(window))
    return math.floor(raw * 100) / 100


def _review_of(values: list[float]) -> dict[str, object]:
    review = build_review([GateChange(head=GATE, base=GATE)], _history(values), rule=RULE)
    gate: dict[str, object] = json.loads(render_json(review))["gates"][0]
    return gate


def test_a_missed_harmful_step_gets_the_hint() -> None:
    values = _values(0.03)
    level = float(np.median(values[:STEP_AT]))
    assert float(np.median(values[STEP_AT:])) < level * (1 - HARM)  # harmful
    within = range(STEP_AT, STEP_AT + RULE.backtest.detect_within)
    # minmax and the 5th percentile (both with the 5% allowance) pass the new level...
    assert all(values[i] >= _minmax(_before(values, i)) for i in within)
    assert all(values[i] >= _percentile(_before(values, i)) for i in within)
    # ... the z-score (the next default model) fails its first run, and no run before
    assert values[STEP_AT] < _zscore(_before(values, STEP_AT))
    first = RULE.backtest.min_runs
    assert all(values[i] >= _zscore(_before(values, i)) for i in range(first, STEP_AT))
    when = day_month_year(T0 + timedelta(days=STEP_AT))
    expected = (
        f"Backtest: with `zscore k=3` this gate would have caught the change of {when}"
        " within 1 run, which `minmax` missed — `threshold-bot backtest`"
    )
    assert _review_of(values)["backtest_hint"] == expected


def test_no_hint_when_the_models_tie() -> None:
    values = _values(0.0)  # no step: nothing harmful, and minmax fails no run
    first = RULE.backtest.min_runs
    assert all(values[i] >= _minmax(_before(values, i)) for i in range(first, RUNS))
    assert _review_of(values)["backtest_hint"] == ""


def test_no_hint_without_enough_runs() -> None:
    values = _values(0.03)[STEP_AT - 1 : STEP_AT - 1 + RULE.backtest.min_runs]
    assert len(values) == RULE.backtest.min_runs
    assert _review_of(values)["backtest_hint"] == ""


@pytest.fixture(scope="module")
def hinted() -> tuple[str, str, str]:
    review = build_review([GateChange(head=GATE, base=GATE)], _history(_values(0.03)), rule=RULE)
    console = Console(width=240, file=io.StringIO(), color_system=None)
    console.print(review_table(review))
    assert isinstance(console.file, io.StringIO)
    return review.gates[0].backtest_hint, render_comment(review), console.file.getvalue()


def test_the_hint_is_one_line_under_its_gate(hinted: tuple[str, str, str]) -> None:
    hint, comment, terminal = hinted
    assert hint
    shown = hint.replace("`zscore k=3`", "<code>zscore k=3</code>")
    shown = shown.replace("`minmax`", "<code>minmax</code>")
    shown = shown.replace("`threshold-bot backtest`", "<code>threshold-bot backtest</code>")
    assert f"\n  - 🔁 {shown}\n" in comment
    assert hint in " ".join(terminal.split())
