"""``--window regime`` on a drifting metric: the last N runs of the drifting stretch, never the
whole history.  Regimes carry their trends directly (no detector)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.analysis.review import build_review
from bot.core.analysis.windows import series_of, window_start
from bot.core.models import (
    Change,
    Gate,
    GateChange,
    History,
    HistoryStats,
    MetricShift,
    Regime,
    RuleSettings,
    Run,
    Trend,
    WindowSpec,
)
from bot.core.render.view import window_groups

T0 = datetime(2026, 5, 3, tzinfo=UTC)
N_RUNS, STEP_AT = 60, 30  # ``acc`` is flat at 0.9 before STEP_AT, then falls 0.002 per run
SLOPE = -0.002
REGIME = WindowSpec(kind="regime", runs=20)


def _acc(i: int) -> float:
    return 0.9 if i < STEP_AT else 0.8 + SLOPE * (i - STEP_AT)


RUNS = tuple(
    Run(id=f"r{i:02d}", created_at=T0 + timedelta(days=i), summary={"acc": _acc(i)})
    for i in range(N_RUNS)
)
HISTORY = History(
    runs=RUNS,
    stats=HistoryStats(total=N_RUNS, finished=N_RUNS, by_state={"finished": N_RUNS}),
)
GATE = Gate(
    name="ACC_MIN",
    file="ci/nightly.sh",
    line=1,
    metric="acc",
    op=">=",
    value=0.5,
    literal="0.50",
    start=0,
    end=4,
)


def _regime(first: int, last: int, trends: dict[str, Trend]) -> Regime:
    return Regime(
        start=RUNS[first].created_at,
        end=RUNS[last].created_at,
        runs=last - first + 1,
        medians={"acc": _acc((first + last) // 2)},
        first_index=first,
        last_index=last,
        trends=trends,
    )


def _trend(first: int) -> Trend:
    return Trend(slope=SLOPE, first=_acc(first), last=_acc(N_RUNS - 1), runs=N_RUNS - first)


STEP = Change(
    at=RUNS[STEP_AT].created_at,
    index=STEP_AT,
    metrics={"acc": MetricShift(before=0.9, after=0.8)},
)


# --------------------------------------------------------------------------- window_start


@pytest.mark.parametrize(
    ("regime_from", "drifting", "expected"),
    [
        (STEP_AT, False, STEP_AT),  # a flat regime: all of it
        (STEP_AT, True, N_RUNS - REGIME.runs),  # drifting: its last 20 runs
        (50, True, 50),  # a drifting regime shorter than 20 runs: all of it
        (None, True, N_RUNS - REGIME.runs),  # nothing detected, but it drifts: the last 20
        (None, False, 0),  # nothing detected, flat: the whole history
    ],
)
def test_a_regime_window_on_a_drifting_metric_is_its_last_runs(
    regime_from: int | None, drifting: bool, expected: int
) -> None:
    series = series_of(RUNS, "acc")
    start = None if regime_from is None else RUNS[regime_from].created_at
    assert window_start(series, REGIME, regime_start=start, drifting=drifting) == expected


def test_other_windows_ignore_the_drift() -> None:
    series = series_of(RUNS, "acc")
    last = WindowSpec(kind="last", runs=10)
    assert window_start(series, last, drifting=True) == N_RUNS - 10
    since = WindowSpec.parse(f"since:{RUNS[5].created_at.date()}")
    assert window_start(series, since, drifting=True) == 5


# --------------------------------------------------------------------------- the review


def _window(regimes: list[Regime], changes: list[Change]) -> tuple[int, datetime | None, float]:
    """The window's run count, first run and lowest value, as the review computed them."""
    review = build_review(
        [GateChange(head=GATE, base=GATE)],
        HISTORY,
        rule=RuleSettings(window=REGIME),
        detected=(regimes, changes),
    )
    [g] = review.gates
    assert g.window_min is not None
    return g.window.runs, g.window.first, g.window_min


def test_the_review_takes_the_last_runs_of_the_drifting_regime() -> None:
    flat = _regime(0, STEP_AT - 1, {})
    runs, first, low = _window(
        [flat, _regime(STEP_AT, N_RUNS - 1, {"acc": _trend(STEP_AT)})], [STEP]
    )
    start = N_RUNS - REGIME.runs
    assert (runs, first) == (REGIME.runs, RUNS[start].created_at)
    assert low == min(_acc(i) for i in range(start, N_RUNS))


def test_without_a_trend_the_regime_window_is_the_whole_regime() -> None:
    flat = _regime(0, STEP_AT - 1, {})
    runs, first, _ = _window([flat, _regime(STEP_AT, N_RUNS - 1, {})], [STEP])
    assert (runs, first) == (N_RUNS - STEP_AT, RUNS[STEP_AT].created_at)


def test_a_drift_over_the_whole_history_still_takes_only_the_last_runs() -> None:
    whole = _regime(0, N_RUNS - 1, {"acc": _trend(0)})
    runs, first, _ = _window([whole], [])
    assert (runs, first) == (REGIME.runs, RUNS[N_RUNS - REGIME.runs].created_at)


def test_the_window_is_named_as_the_drifting_regimes_last_runs() -> None:
    review = build_review(
        [GateChange(head=GATE, base=GATE)],
        HISTORY,
        rule=RuleSettings(window=REGIME),
        detected=([_regime(0, N_RUNS - 1, {"acc": _trend(0)})], []),
    )
    [(phrase, names)] = window_groups(review)
    assert names == ["ACC_MIN"]
    assert phrase.startswith("the last 20 finished runs of the metric's drifting regime (")
    assert "runs," not in phrase  # exactly the 20 asked for
