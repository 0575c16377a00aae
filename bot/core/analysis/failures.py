"""How a limit fares against history: failure counts, the newest failing streak, and whether
failures are scattered (flaky) or began at a regime change (shifted)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from bot.core.analysis.windows import BoolArray, FloatArray, IntArray
from bot.core.models import COMPARISONS, Classification, Failures, Op, Run

__all__ = [
    "classify",
    "count_failures",
    "failing_mask",
    "failing_streak",
    "find_shift",
    "streak_length",
    "tally",
]

# a shift: at least this share of the runs since a change fail ...
SHIFTED_MIN_RATE = 0.5
# ... and before it at most this fraction of that share did
SHIFTED_MAX_BEFORE = 0.5


def failing_mask(values: Sequence[float] | FloatArray, op: Op, limit: float) -> BoolArray:
    """Boolean array: True where a value fails ``value op limit`` (as the CI assert does)."""
    array = np.asarray(values, dtype=float)
    return ~np.asarray(COMPARISONS[op](array, limit), dtype=np.bool_)


def tally(fails: BoolArray) -> Failures:
    """``fails`` counted: how many are True, of how many."""
    return Failures(failed=int(fails.sum()), total=int(fails.size))


def count_failures(values: Sequence[float] | FloatArray, op: Op, limit: float) -> Failures:
    """How many of ``values`` fail the gate ``op limit``."""
    return tally(failing_mask(values, op, limit))


def streak_length(fails: BoolArray) -> int:
    """Length of the run of True at the end of ``fails`` (the newest failures in a row)."""
    passing = np.flatnonzero(~fails)
    return int(fails.size if passing.size == 0 else fails.size - 1 - passing[-1])


def failing_streak(
    fails: BoolArray, index: IntArray, runs: Sequence[Run]
) -> tuple[int, datetime | None]:
    """The newest failures in a row and the ``created_at`` of the streak's first run (None
    without a streak).

    ``fails``/``index``: failure flags and positions in ``runs`` (finished, oldest first) of
    the runs having the gate's metric, so runs without it neither count nor break the streak.
    """
    streak = streak_length(fails)
    if streak == 0:
        return 0, None
    return streak, runs[int(index[-streak])].created_at


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
