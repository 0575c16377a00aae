"""How a limit fares against history: failure counts, the newest failing streak, and whether
failures are scattered (flaky) or began at a regime change (shifted)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

from bot.core.analysis.windows import BoolArray, FloatArray, IntArray, series_of
from bot.core.models import Classification, Failures, Op, Run

__all__ = [
    "classify",
    "count_failures",
    "failing_mask",
    "failing_streak",
    "find_shift",
    "streak_length",
]

# a shift: at least this share of the runs since a change fail ...
SHIFTED_MIN_RATE = 0.5
# ... and before it at most this fraction of that share did
SHIFTED_MAX_BEFORE = 0.5

_PASSES: dict[str, Callable[[FloatArray, float], BoolArray]] = {
    ">=": np.greater_equal,
    ">": np.greater,
    "<=": np.less_equal,
    "<": np.less,
}


def failing_mask(values: Sequence[float] | FloatArray, op: Op, limit: float) -> BoolArray:
    """Boolean array: True where a value fails ``value op limit`` (as the CI assert does)."""
    array = np.asarray(values, dtype=float)
    return ~_PASSES[op](array, limit)


def count_failures(values: Sequence[float] | FloatArray, op: Op, limit: float) -> Failures:
    """How many of ``values`` fail the gate ``op limit``."""
    fails = failing_mask(values, op, limit)
    return Failures(failed=int(fails.sum()), total=int(fails.size))


def streak_length(fails: BoolArray) -> int:
    """Length of the run of True at the end of ``fails`` (the newest failures in a row)."""
    passing = np.flatnonzero(~fails)
    return int(fails.size if passing.size == 0 else fails.size - 1 - passing[-1])


def failing_streak(
    runs: Sequence[Run], metric: str, op: Op, limit: float
) -> tuple[int, datetime | None]:
    """The newest runs in a row (among those having ``metric``) that fail ``op limit``, and the
    ``created_at`` of the streak's first run (None without a streak)."""
    series = series_of(runs, metric)
    streak = streak_length(failing_mask(series.values, op, limit))
    if streak == 0:
        return 0, None
    return streak, runs[int(series.index[-streak])].created_at


def find_shift(fails: BoolArray, index: IntArray, changes: Sequence[int]) -> int | None:
    """The regime change since which a limit fails, or None when the failures are not tied to one.

    ``fails``/``index``: failure flags and finished-run positions of a metric's runs, oldest
    first; ``changes``: finished-run positions where regimes start. The newest change is
    returned whose runs since then fail at least half the time while the runs just before
    it (as many as since) failed at most half as often; the current regime must be failing too.
    """
    if not changes or fails.size == 0:
        return None
    ordered = sorted(changes)
    starts = [int(s) for s in np.searchsorted(index, ordered, side="left")]
    current = fails[starts[-1] :]
    if current.size == 0 or current.mean() < SHIFTED_MIN_RATE:
        return None
    for change, start in reversed(list(zip(ordered, starts, strict=True))):
        after = fails[start:]
        before = fails[max(0, start - after.size) : start]
        if after.size == 0 or before.size == 0:
            continue
        rate = after.mean()
        if rate >= SHIFTED_MIN_RATE and before.mean() <= SHIFTED_MAX_BEFORE * rate:
            return int(change)
    return None


def classify(
    fails: BoolArray, index: IntArray, *, lookback: int, changes: Sequence[int] = ()
) -> Classification:
    """``passing`` (no failure in the last ``lookback`` runs), ``shifted`` (failing since a regime
    change, see :func:`find_shift`), ``flaky`` (failures scattered within a regime) or
    ``no_data``."""
    if fails.size == 0:
        return "no_data"
    if not fails[-lookback:].any():
        return "passing"
    return "shifted" if find_shift(fails, index, changes) is not None else "flaky"
