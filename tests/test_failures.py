"""Failure counts, the newest failing streak, and flaky-vs-shifted classification."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bot.core.analysis.failures import (
    classify,
    count_failures,
    failing_mask,
    failing_streak,
    find_shift,
    streak_length,
    tally,
)
from bot.core.analysis.windows import BoolArray, series_of
from bot.core.models import Failures, Op, Run

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("op", "failed"),
    [(">=", 1), (">", 2), ("<=", 2), ("<", 3)],
)
def test_count_failures_at_the_boundary(op: Op, failed: int) -> None:
    values = [0.4, 0.5, 0.6, 0.7]  # one below, one on, two above 0.5
    assert count_failures(values, op, 0.5) == Failures(failed=failed, total=4)
    mask = failing_mask(values, op, 0.5)
    assert mask.dtype == np.bool_ and int(mask.sum()) == failed


def test_count_failures_of_nothing() -> None:
    assert count_failures([], ">=", 1.0) == Failures(failed=0, total=0)


def test_tally_counts_flags() -> None:
    assert tally(np.array([True, False, True, True])) == Failures(failed=3, total=4)
    assert tally(np.array([], dtype=bool)) == Failures(failed=0, total=0)


@pytest.mark.parametrize(
    ("flags", "length"),
    [
        ([], 0),
        ([False, False], 0),
        ([True, True, True], 3),
        ([True, False, True, True], 2),
        ([False, True, False], 0),
    ],
)
def test_streak_length(flags: list[bool], length: int) -> None:
    assert streak_length(np.array(flags, dtype=bool)) == length


def runs_of(values: list[float | None]) -> list[Run]:
    return [
        Run(
            id=f"r{i}",
            created_at=T0 + timedelta(days=i),
            summary={} if v is None else {"m": v},
        )
        for i, v in enumerate(values)
    ]


def streak_of(runs: list[Run], metric: str, op: Op, limit: float) -> tuple[int, datetime | None]:
    """``failing_streak`` of ``metric`` in ``runs`` against ``op limit``, as the review calls it."""
    series = series_of(runs, metric)
    return failing_streak(failing_mask(series.values, op, limit), series.index, runs)


def test_failing_streak_counts_only_runs_having_the_metric() -> None:
    # fails >= 0.5 at 0.4: r3, r5, r6 (r4 lacks the metric and does not break the streak)
    runs = runs_of([0.4, 0.6, 0.7, 0.4, None, 0.3, 0.45])
    assert streak_of(runs, "m", ">=", 0.5) == (3, runs[3].created_at)


def test_failing_streak_none() -> None:
    runs = runs_of([0.4, 0.6])
    assert streak_of(runs, "m", ">=", 0.5) == (0, None)
    assert streak_of(runs, "absent", ">=", 0.5) == (0, None)


def flags(text: str) -> BoolArray:
    """``"..xx"`` → [False, False, True, True]."""
    return np.array([c == "x" for c in text], dtype=bool)


def test_classify_passing_and_no_data() -> None:
    index = np.arange(40)
    assert classify(flags("." * 40), index, lookback=30) == "passing"
    # a failure older than the lookback does not count
    assert classify(flags("x" + "." * 39), index, lookback=30) == "passing"
    assert classify(flags(""), np.arange(0), lookback=30) == "no_data"


def test_classify_flaky_without_regime_change() -> None:
    fails = flags("....x.......x.........x.......")
    assert classify(fails, np.arange(fails.size), lookback=30) == "flaky"
    assert find_shift(fails, np.arange(fails.size), []) is None


def test_classify_shifted_at_a_regime_change() -> None:
    fails = flags("." * 40 + "x" * 10)
    index = np.arange(fails.size)
    assert classify(fails, index, lookback=30, changes=[40]) == "shifted"
    assert find_shift(fails, index, [40]) == 40
    # the same failures with no change detected are not explained by one
    assert classify(fails, index, lookback=30, changes=[]) == "flaky"


def test_shift_tolerates_an_occasional_failure_and_a_pass() -> None:
    # before: 1 of 20 fails; since the change: 9 of 10 fail
    fails = flags("....x..............." + "xxxx.xxxxx")
    assert find_shift(fails, np.arange(fails.size), [20]) == 20


def test_shift_uses_run_positions_not_series_positions() -> None:
    # the metric is missing from finished runs 5..9: series position 5 is finished run 10
    index = np.array([0, 1, 2, 3, 4, 10, 11, 12, 13, 14])
    fails = flags(".....xxxxx")
    assert find_shift(fails, index, [10]) == 10
    assert find_shift(fails, index, [7]) == 7  # a change while the metric was missing


def test_shift_is_the_older_change_when_a_newer_one_did_not_alter_failures() -> None:
    # change at 20 starts the failures; change at 35 (another metric) leaves them failing
    fails = flags("." * 20 + "x" * 25)
    assert find_shift(fails, np.arange(fails.size), [20, 35]) == 20


def test_no_shift_when_the_current_regime_passes_again() -> None:
    # failing between the changes at 20 and 30, recovered since 30
    fails = flags("." * 20 + "x" * 10 + "." * 10)
    index = np.arange(fails.size)
    assert find_shift(fails, index, [20, 30]) is None
    assert classify(fails, index, lookback=30, changes=[20, 30]) == "flaky"


def test_scattered_failures_on_both_sides_of_a_change_are_flaky() -> None:
    fails = flags("...x....x...x..." + "..x...x...x...x.")
    index = np.arange(fails.size)
    assert classify(fails, index, lookback=30, changes=[16]) == "flaky"
