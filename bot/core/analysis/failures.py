"""How a limit fares against history: failure counts, the newest failing streak, and which of
the cases of docs/limit-rule.md#how-the-old-value-fares it is: failing every run, shifted at a
regime change, failed only before a change, or flaky."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from bot.core.analysis.references import band_mask, band_of
from bot.core.analysis.windows import BoolArray, FloatArray, IntArray
from bot.core.models import COMPARISONS, Classification, Failures, Gate, Op, Run

__all__ = [
    "Diagnosis",
    "count_failures",
    "diagnose",
    "failing_mask",
    "failing_streak",
    "find_shift",
    "gate_failing_mask",
    "streak_length",
    "tally",
]

# a shift: at least this share of the runs since a change fail ...
SHIFTED_MIN_RATE = 0.5
# ... and before it at most this fraction of that share did
SHIFTED_MAX_BEFORE = 0.5
# a streak this long holding every failure of the lookback is no flake
MIN_STREAK = 3
# a change begins a failing streak when it lies within this many of its first runs ...
STREAK_SLACK = 3
# ... or within this fraction of the streak
STREAK_SLACK_FRACTION = 0.1


def failing_mask(values: Sequence[float] | FloatArray, op: Op, limit: float) -> BoolArray:
    """Boolean array: True where a value fails ``value op limit`` (as the CI assert does)."""
    array = np.asarray(values, dtype=float)
    return ~np.asarray(COMPARISONS[op](array, limit), dtype=np.bool_)


def gate_failing_mask(gate: Gate, values: FloatArray, value: float) -> BoolArray:
    """True where a value fails ``gate`` at ``value``: ``value op limit`` for a limit, outside
    the band around the reference ``value`` for a reference gate."""
    if gate.kind == "reference":
        return band_mask(values, band_of(value, gate.tolerance, gate.sides).band)
    return failing_mask(values, gate.op, value)


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


@dataclass(frozen=True)
class Diagnosis:
    """How an old value fares: its case, the lookback's failures, the newest failing streak
    (over every run having the metric) and the regime change the case is tied to."""

    classification: Classification
    recent: Failures  # the last ``lookback`` runs
    streak: int = 0
    change: int | None = None  # finished-run position of the change, if tied to one
    since_change: Failures | None = None  # the runs since that change


def _positions(index: IntArray, changes: Sequence[int]) -> list[tuple[int, int]]:
    """``(change, series position of its first run)`` for changes inside the series."""
    ordered = sorted(set(changes))
    starts = np.searchsorted(index, ordered, side="left")
    return [(c, int(p)) for c, p in zip(ordered, starts, strict=True) if p < index.size]


def _change_at_streak(
    fails: BoolArray, index: IntArray, streak: int, toward: Sequence[int]
) -> int | None:
    """The first change toward failing that lies at the start of the newest streak."""
    start = fails.size - streak
    slack = max(STREAK_SLACK, int(streak * STREAK_SLACK_FRACTION))
    return next((c for c, p in _positions(index, toward) if start <= p <= start + slack), None)


def diagnose(
    fails: BoolArray,
    index: IntArray,
    *,
    lookback: int,
    toward: Sequence[int] = (),
    away: Sequence[int] = (),
) -> Diagnosis:
    """The case of an old value, in this order (docs/limit-rule.md#how-the-old-value-fares):

    - ``no_data``: no run has the metric; ``passing``: no failure in the last ``lookback``;
    - ``failing_every_run``: the newest runs fail in a row, covering the lookback, or every
      run since the newest change, or at least half the lookback, or every failure of the
      lookback (``MIN_STREAK`` or more); tied to the change toward failing at the start of
      the streak, if any;
    - ``failed_before_change``: every run since a change away from failing passes, the
      lookback's failures all came before it;
    - ``shifted``: most runs since a change toward failing fail (:func:`find_shift`);
    - ``flaky``: scattered failures.

    ``fails``/``index``: failure flags and finished-run positions of the runs having the
    metric, oldest first; ``toward``/``away``: finished-run positions of the regime changes
    that moved the metric toward failing the limit / away from it (both when unknown).
    """
    recent = tally(fails[-lookback:])
    if fails.size == 0:
        return Diagnosis("no_data", recent)
    if not recent.failed:
        return Diagnosis("passing", recent)
    streak = streak_length(fails)
    positions = _positions(index, [*toward, *away])
    start = fails.size - streak  # series position of the streak's first run
    since_newest = bool(positions) and start <= positions[-1][1]
    only = streak == recent.failed and streak >= MIN_STREAK
    if streak and (
        streak >= min(lookback, fails.size) or since_newest or only or 2 * streak >= lookback
    ):
        change = _change_at_streak(fails, index, streak, toward)
        return _tied("failing_every_run", recent, streak, change, fails, index)
    last_failure = int(np.flatnonzero(fails)[-1])
    after = [c for c, p in _positions(index, away) if p > last_failure]
    if after:
        return _tied("failed_before_change", recent, streak, after[0], fails, index)
    shift = find_shift(fails, index, toward)
    if shift is not None:
        return _tied("shifted", recent, streak, shift, fails, index)
    return Diagnosis("flaky", recent, streak)


def _tied(
    case: Classification,
    recent: Failures,
    streak: int,
    change: int | None,
    fails: BoolArray,
    index: IntArray,
) -> Diagnosis:
    if change is None:
        return Diagnosis(case, recent, streak)
    since = tally(fails[int(np.searchsorted(index, change, side="left")) :])
    return Diagnosis(case, recent, streak, change, since)
