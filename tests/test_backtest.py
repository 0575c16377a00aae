"""The backtest's replay and scoring (bot/core/analysis/backtest.py, docs/backtest.md):
a run is never judged by a limit it helped set, each model's replayed limit keeps the rule's
guarantee, harmful changes and false alarms are counted as documented, bands are one gate."""

from __future__ import annotations

import time
import tracemalloc
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bot.core import deadline
from bot.core.analysis import backtest
from bot.core.analysis.backtest import (
    DEFAULT_MODELS,
    Bound,
    backtest_gates,
    backtest_history,
    limits_before,
    replay,
)
from bot.core.analysis.context import HistoryContext
from bot.core.analysis.limits import recompute_limit
from bot.core.limit_model import parse_model
from bot.core.models import (
    MAX_WINDOW,
    Change,
    Gate,
    History,
    MetricShift,
    Op,
    RuleSettings,
    Run,
    passes,
)
from tests.builders import limit_gate, series_runs

MODELS = [m.describe() for m in DEFAULT_MODELS] + ["zscore k=2 sigma=std", "minmax max_limit=2"]
OPS = [">=", ">", "<=", "<"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)

values_strategy = arrays(
    np.float64,
    st.integers(8, 60),
    elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 3)),
)


@settings(max_examples=150, deadline=None)
@given(
    values=values_strategy,
    junk=st.floats(-1e4, 1e4, allow_nan=False),
    model=st.sampled_from(MODELS),
    op=st.sampled_from(OPS),
    window=st.integers(2, 25),
    min_runs=st.integers(2, 8),
    cut=st.data(),
)
def test_a_run_never_sets_the_limit_that_judges_it(
    values: np.ndarray,
    junk: float,
    model: str,
    op: str,
    window: int,
    min_runs: int,
    cut: st.DataObject,
) -> None:
    rule = RuleSettings(model=parse_model(model))
    bound = Bound(op, "0.5")  # type: ignore[arg-type]
    limits = limits_before(values, bound, rule, window, min_runs)
    i = cut.draw(st.integers(0, values.size - 1))
    changed = values.copy()
    changed[i:] = junk  # run i and every later run replaced
    again = limits_before(changed, bound, rule, window, min_runs)
    np.testing.assert_array_equal(limits[: i + 1], again[: i + 1])


@settings(max_examples=150, deadline=None)
@given(
    values=values_strategy,
    model=st.sampled_from(MODELS[:-1]),
    op=st.sampled_from(OPS),
    window=st.integers(2, 25),
    min_runs=st.integers(2, 8),
)
def test_each_replayed_limit_is_the_rule_on_the_runs_before_and_passes_them(
    values: np.ndarray, model: str, op: str, window: int, min_runs: int
) -> None:
    rule = RuleSettings(model=parse_model(model))
    limits = limits_before(values, Bound(op, "0.5"), rule, window, min_runs)  # type: ignore[arg-type]
    for i in range(values.size):
        if i < min_runs:
            assert np.isnan(limits[i])
            continue
        before = values[max(0, i - window) : i]
        expected = recompute_limit(before, op, "0.5", rule)  # type: ignore[arg-type]
        assert expected is not None and limits[i] == expected[0]
        assert all(passes(float(v), op, float(limits[i])) for v in before)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    values=values_strategy,
    model=st.sampled_from(MODELS[:-1]),
    op=st.sampled_from(OPS),
    window=st.integers(1, 25),
    min_runs=st.integers(2, 8),
    chunk=st.integers(1, 600),
)
def test_the_replay_in_chunks_of_bounded_bytes_is_the_rule_on_each_window(
    values: np.ndarray, model: str, op: str, window: int, min_runs: int, chunk: int
) -> None:
    """Chunks of 1 to 600 bytes: a window per chunk (the smallest) to several."""
    rule = RuleSettings(model=parse_model(model))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backtest, "CHUNK_BYTES", chunk)
        limits = limits_before(values, Bound(op, "0.5"), rule, window, min_runs)  # type: ignore[arg-type]
    for i in range(values.size):
        found = recompute_limit(values[max(0, i - window) : i], op, "0.5", rule)  # type: ignore[arg-type]
        expected = np.nan if i < min_runs or found is None else found[0]
        np.testing.assert_array_equal(limits[i], expected)


def test_the_replays_memory_does_not_grow_with_the_window() -> None:
    """14,000 runs at the largest window: the windows stacked whole would be 112 MB."""
    rng = np.random.default_rng(0)
    values = np.round(0.8 + rng.normal(0, 0.004, 14_000), 4)
    rule = RuleSettings(model=parse_model("zscore k=3"))  # the most temporaries: two medians
    tracemalloc.start()
    try:
        limits = limits_before(values, Bound(">=", "0.5"), rule, MAX_WINDOW, 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.isfinite(limits[5:]).all()
    assert peak < 4 * backtest.CHUNK_BYTES + 64 * values.nbytes, f"{peak / 1e6:.0f} MB"


def test_a_job_past_its_limit_stops_between_chunks_of_one_replay() -> None:
    values, _ = _step_history()
    with deadline.within(0.0):
        time.sleep(0.01)
        with pytest.raises(deadline.JobTimeout, match=r"while backtesting$"):
            limits_before(values, Bound(">=", "0.5"), RuleSettings(), 20, 5)


def _series(values: list[float], *, metric: str = "acc") -> list[Run]:
    return series_runs(values, metric, start=T0)


def _gate(op: Op = ">=", *, name: str = "ACC_MIN", metric: str = "acc", line: int = 1) -> Gate:
    return limit_gate(metric, op, "0.50", name=name, file="ci.sh", line=line)


def _step_history(seed: int = 3) -> tuple[np.ndarray, int]:
    """120 runs of a metric at 0.80 (noise 0.4 %) dropping 12 % at run 70."""
    rng = np.random.default_rng(seed)
    values = np.round(0.8 * (1 + rng.normal(0, 0.004, 120)), 4)
    values[70:] = np.round(values[70:] * 0.88, 4)
    return values, 70


def _naive(
    values: np.ndarray, op: str, rule: RuleSettings, window: int, min_runs: int
) -> list[bool]:
    """Whether each judged run fails the rule on the runs before it (a plain loop)."""
    fails = []
    for i in range(min_runs, values.size):
        found = recompute_limit(values[max(0, i - window) : i], op, "0.50", rule)  # type: ignore[arg-type]
        assert found is not None
        fails.append(not passes(float(values[i]), op, found[0]))  # type: ignore[arg-type]
    return fails


def test_a_drop_is_caught_and_false_alarms_are_counted_outside_its_span() -> None:
    values, at = _step_history()
    runs = _series(values.tolist())
    change = Change(
        at=runs[at].created_at,
        index=at,
        metrics={
            "acc": MetricShift(
                before=float(np.median(values[:at])), after=float(np.median(values[at:]))
            )
        },
    )
    ctx = HistoryContext(runs, [], [change], len(runs))
    rule = RuleSettings()
    (result,) = backtest_gates(ctx, [_gate()], rule)
    window, min_runs = rule.window.runs, rule.backtest.min_runs
    for score in result.scores:
        fails = _naive(values, ">=", score.rule, window, min_runs)
        span = range(at - min_runs, at - min_runs + window)  # positions in ``fails``
        healthy = [f for k, f in enumerate(fails) if k not in span]
        first = next((k - (at - min_runs) + 1 for k in span if fails[k]), None)
        assert (score.judged, score.false_alarms) == (len(healthy), sum(healthy))
        assert [c.runs for c in score.caught] == [first]
        assert score.caught[0].moved == pytest.approx(-0.12, abs=0.01)
    minmax = result.current
    assert minmax is not None and minmax.model.name == "minmax"
    assert minmax.caught[0].runs == 1  # a 12 % drop under a 5 % allowance fails at once


def test_a_move_smaller_than_the_harm_is_not_a_change_to_catch() -> None:
    values, at = _step_history()
    values[at:] = values[at:] / 0.88 * 0.97  # a 3 % drop: under the 5 % allowance
    runs = _series(values.tolist())
    change = Change(at=runs[at].created_at, index=at)
    ctx = HistoryContext(runs, [], [change], len(runs))
    (result,) = backtest_gates(ctx, [_gate()], RuleSettings())
    assert all(not s.caught for s in result.scores)
    assert result.note == "no harmful change in the history: judged on false alarms alone"
    # judged without a detection span: every judged run counts
    assert all(s.judged == values.size - RuleSettings().backtest.min_runs for s in result.scores)
    stricter = RuleSettings(backtest={"harm": "2%"})
    (harsher,) = backtest_gates(ctx, [_gate()], stricter)
    assert all(len(s.caught) == 1 for s in harsher.scores)


def test_the_recommendation_is_the_quietest_model_catching_every_harmful_change() -> None:
    values, at = _step_history()
    rng = np.random.default_rng(9)
    spikes = rng.choice(np.arange(10, at - 5), size=4, replace=False)
    values[spikes] = np.round(values[spikes] * 0.93, 4)  # single bad runs: noise, not regimes
    runs = _series(values.tolist())
    change = Change(at=runs[at].created_at, index=at)
    ctx = HistoryContext(runs, [], [change], len(runs))
    (result,) = backtest_gates(ctx, [_gate()], RuleSettings())
    able = [s for s in result.scores if all(c.runs is not None and c.runs <= 3 for c in s.caught)]
    assert result.recommended is not None
    assert result.recommended.false_alarms == min(s.false_alarms for s in able)
    assert result.recommended is next(
        s for s in able if s.false_alarms == result.recommended.false_alarms
    )


def test_no_recommendation_when_no_model_catches_the_change_in_time() -> None:
    values, at = _step_history()
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [Change(at=runs[at].created_at, index=at)], len(runs))
    loose = parse_model("absolute min_limit=0.1")
    (result,) = backtest_gates(ctx, [_gate()], RuleSettings(model=loose), models=[loose])
    assert [c.runs for c in result.scores[0].caught] == [None]
    assert result.recommended is None
    assert result.note == "no model catches every harmful change within 3 runs"


def test_the_hint_names_a_model_that_catches_what_the_current_one_misses() -> None:
    values, at = _step_history()
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [Change(at=runs[at].created_at, index=at)], len(runs))
    wide = RuleSettings(allowance=0.2, backtest={"harm": "5%"})  # minmax 20 %: blind to 12 %
    (result,) = backtest_gates(ctx, [_gate()], wide)
    assert result.current is not None and result.current.caught[0].runs is None
    assert result.recommended is not None and result.recommended is not result.current
    day = f"{runs[at].created_at.day} {runs[at].created_at:%b %Y}"
    runs_to_catch = result.recommended.caught[0].runs
    assert result.hint() == (
        f"with `{result.recommended.model.describe()}` this gate would have caught the change"
        f" of {day} within {runs_to_catch} run{'s' if runs_to_catch != 1 else ''},"
        " which `minmax` missed"
    )


def test_the_hint_compares_false_alarms_only_when_clearly_worse() -> None:
    rng = np.random.default_rng(5)
    values = np.round(1 + rng.standard_t(2, 300) * 0.02, 4)  # heavy tails, one regime
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [], len(runs))
    tight = RuleSettings(allowance=0.0)
    (result,) = backtest_gates(ctx, [_gate()], tight)
    now, best = result.current, result.recommended
    assert now is not None and best is not None
    if now.false_alarms >= 2 * best.false_alarms and now.false_alarms - best.false_alarms >= 3:
        expected = (
            f"with `{best.model.describe()}` this gate would have failed {best.false_alarms}"
            f" healthy runs instead of {now.false_alarms} (of {now.judged})"
        )
        assert result.hint() == expected
    else:
        assert result.hint() is None
    assert now.false_alarms > best.false_alarms  # the data is built for it: a 0 % allowance
    (same,) = backtest_gates(ctx, [_gate()], RuleSettings(model=best.model, allowance=0.0))
    assert same.hint() is None  # the current model is the recommended one


def test_a_lower_and_an_upper_gate_on_one_metric_are_one_band() -> None:
    rng = np.random.default_rng(1)
    values = np.round(1 + rng.normal(0, 0.01, 100), 4)
    values[60:] += 0.2  # up 20 %: harmful for a band, harmless for a lower bound
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [Change(at=runs[60].created_at, index=60)], len(runs))
    low, high = _gate(">=", name="ACC_MIN"), _gate("<=", name="ACC_MAX", line=2)
    (band,) = backtest_gates(ctx, [low, high], RuleSettings())
    assert (band.name, band.sides) == ("ACC_MIN / ACC_MAX", "both")
    assert [c.runs for c in band.scores[0].caught] == [1]
    _, failed = replay(values, [Bound(">=", "0.50"), Bound("<=", "0.50")], RuleSettings(), 20, 5)
    lower_only = replay(values, [Bound(">=", "0.50")], RuleSettings(), 20, 5)[1]
    upper_only = replay(values, [Bound("<=", "0.50")], RuleSettings(), 20, 5)[1]
    np.testing.assert_array_equal(failed, lower_only | upper_only)
    (alone,) = backtest_gates(ctx, [low], RuleSettings())
    assert alone.sides == "lower" and not alone.scores[0].caught


def test_gates_the_backtest_cannot_judge_say_why() -> None:
    runs = _series([0.8] * 4)
    reference = _gate().model_copy(update={"kind": "reference", "op": "=="})
    placeholder = _gate(line=2).model_copy(update={"ignored": "placeholder"})
    missing = _gate(metric="nope", line=3)
    few = _gate(line=4)
    results, _ = backtest_history(
        [reference, placeholder, missing, few], History(runs=tuple(runs)), RuleSettings()
    )
    reasons = [r.skipped for r in results]
    assert reasons == [
        "a reference gate: its band is its tolerance as written",
        "a placeholder",
        "no run has the metric: too few to replay",
        "only 4 runs have the metric: too few to replay",
    ]
    assert all(not r.scores for r in results)


def test_the_current_model_comes_first_and_is_not_repeated() -> None:
    values, _ = _step_history()
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [], len(runs))
    rule = RuleSettings(model=parse_model("zscore k=3"))
    (result,) = backtest_gates(ctx, [_gate()], rule)
    names = [s.model.describe() for s in result.scores]
    assert names[0] == "zscore k=3" and names.count("zscore k=3") == 1
    assert sorted(names) == sorted(m.describe() for m in DEFAULT_MODELS)
    override = RuleSettings(overrides=({"gate": "ACC_*", "model": "iqr k=2"},))
    (result,) = backtest_gates(ctx, [_gate()], override)
    assert result.scores[0].model.describe() == "iqr k=2" and len(result.scores) == 6


def test_a_job_past_its_limit_stops_while_backtesting_and_says_where() -> None:
    values, _ = _step_history()
    runs = _series(values.tolist())
    ctx = HistoryContext(runs, [], [], len(runs))
    with deadline.within(0.0):
        time.sleep(0.01)
        with pytest.raises(deadline.JobTimeout, match=r"while backtesting ACC_MIN$"):
            backtest_gates(ctx, [_gate()], RuleSettings())
    assert backtest_gates(ctx, [_gate()], RuleSettings())[0].scores  # no limit: it runs
