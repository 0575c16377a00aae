"""Failure counts, the newest failing streak, and the cases of an old value: failing every
run, failed only before a change, shifted, or flaky."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bot.core.analysis.failures import (
    Diagnosis,
    count_failures,
    diagnose,
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


def case(text: str, lookback: int = 30, **changes: list[int]) -> Diagnosis:
    """``diagnose`` of the flags ``text`` (run positions 0, 1, …)."""
    fails = flags(text)
    return diagnose(fails, np.arange(fails.size), lookback=lookback, **changes)


def test_passing_and_no_data() -> None:
    assert case("." * 40).classification == "passing"
    # a failure older than the lookback does not count
    assert case("x" + "." * 39) == Diagnosis("passing", Failures(failed=0, total=30))
    assert case("") == Diagnosis("no_data", Failures(failed=0, total=0))


def test_flaky_without_regime_change() -> None:
    fails = "....x.......x.........x......x"
    assert case(fails) == Diagnosis("flaky", Failures(failed=4, total=30), streak=1)
    assert find_shift(flags(fails), np.arange(len(fails)), []) is None


def test_failing_every_run_since_a_change() -> None:
    text = "." * 40 + "x" * 10
    assert find_shift(flags(text), np.arange(len(text)), [40]) == 40
    # every run since the change fails: tied to it, with what the runs since it did
    tied = case(text, toward=[40])
    assert tied == Diagnosis(
        "failing_every_run", Failures(failed=10, total=30), 10, 40, Failures(failed=10, total=10)
    )
    # the same failures with no change detected: every failure is in the newest streak
    assert case(text) == Diagnosis("failing_every_run", Failures(failed=10, total=30), 10)


def test_failing_every_run_longer_than_the_lookback() -> None:
    # the streak counts every run having the metric, not only the lookback
    assert case("x" * 146) == Diagnosis("failing_every_run", Failures(failed=30, total=30), 146)
    # most runs failed before the change too: the streak began 2 runs before it
    text = "xx.x.xx.xxx.x" + "x" * 40
    found = case(text, toward=[14])
    assert (found.classification, found.streak, found.change) == ("failing_every_run", 41, 14)
    # a change far into the streak, or one that moved the metric away, is not its cause
    assert case(text, toward=[30]).change is None
    assert case(text, away=[14]).change is None


def test_failed_only_before_a_change() -> None:
    text = "." * 10 + "x..x....x" + "." * 21  # failures, then a change that fixed them
    found = case(text, away=[19])
    assert found == Diagnosis(
        "failed_before_change", Failures(failed=3, total=30), 0, 19, Failures(failed=0, total=21)
    )
    # a change toward failing cannot be what made them pass
    assert case(text, toward=[19]).classification == "flaky"
    # nor can a change before the last failure
    assert case(text, away=[15]).classification == "flaky"


def test_shifted_with_the_newest_streak() -> None:
    text = "." * 30 + "xx.xxx.xxx"  # 8 of 10 since the change, the newest 3 in a row
    found = case(text, toward=[30])
    assert found == Diagnosis(
        "shifted", Failures(failed=8, total=30), 3, 30, Failures(failed=8, total=10)
    )


def test_a_short_newest_streak_among_scattered_failures_is_flaky() -> None:
    assert case("." * 20 + "x...x....x").classification == "flaky"
    assert case("." * 30 + "xx").classification == "flaky"  # fewer than MIN_STREAK in a row
    assert case("." * 30 + "xxx").classification == "failing_every_run"


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
    text = "." * 20 + "x" * 10 + "." * 10
    assert find_shift(flags(text), np.arange(len(text)), [20, 30]) is None
    found = case(text, toward=[20], away=[30])
    assert (found.classification, found.change) == ("failed_before_change", 30)


def test_scattered_failures_on_both_sides_of_a_change_are_flaky() -> None:
    text = "...x....x...x..." + "..x...x...x...x."
    assert case(text, toward=[16], away=[16]).classification == "flaky"
