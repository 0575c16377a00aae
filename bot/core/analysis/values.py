"""What a gate compares per run (docs/limit-rule.md#what-a-run-is-compared-on), by kind:

- a plain gate: the run's summary value (one numpy column per key, ``series_of``);
- an aggregated gate (``mean(data['x'][-5:]) <= 42``): the aggregation of the run's per-step
  series (``Run.series``) over its last N steps; the run's summary value when it has none;
- a golden curve: the run's values at the curve's checked steps (``Series.grid``) and, as its
  value, the one at the last checked step; the run's summary value when it has no series
  holding any of the curve's steps.

Every extraction is one pass over the runs; the review caches it per :class:`Extraction`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bot.core.analysis.windows import FloatArray, Series, series_of
from bot.core.models import Aggregation, CurvePoint, Gate, Run

__all__ = ["Extraction", "aggregation_words", "checked_points", "extract", "extraction_of"]

_REDUCE: dict[Aggregation, Callable[[FloatArray], float]] = {
    "last": lambda a: float(a[-1]),
    "mean": lambda a: float(np.mean(a)),
    "median": lambda a: float(np.median(a)),
    "min": lambda a: float(np.min(a)),
    "max": lambda a: float(np.max(a)),
}
_NAMES: dict[Aggregation, str] = {
    "last": "last",
    "mean": "mean",
    "median": "median",
    "min": "minimum",
    "max": "maximum",
}


@dataclass(frozen=True)
class Extraction:
    """What a gate reads from each run (hashable: the review's cache key)."""

    key: str  # the summary / series key
    aggregation: Aggregation | None = None
    last_steps: int | None = None
    steps: tuple[int, ...] | None = None  # a golden curve's checked steps; None: no curve


def checked_points(gate: Gate) -> tuple[CurvePoint, ...]:
    """The steps of ``gate``'s golden curve that are checked (a ``nan`` golden is not)."""
    return tuple(p for p in gate.points if p.value is not None)


def extraction_of(gate: Gate, key: str) -> Extraction:
    """What ``gate`` reads under the history key ``key``."""
    if gate.points:
        return Extraction(key, steps=tuple(p.step for p in checked_points(gate)))
    if gate.aggregation is not None:
        return Extraction(key, gate.aggregation, gate.last_steps)
    return Extraction(key)


def aggregation_words(gate: Gate) -> str:
    """``mean of the last 5 steps``, ``median over all steps``, ``the last step``; empty for
    a gate on the summary value."""
    how = gate.aggregation
    if how is None or gate.points:
        return ""
    if how == "last":
        return "the last step"
    n = gate.last_steps
    if n is None:
        return f"{_NAMES[how]} over all steps"
    return f"{_NAMES[how]} of the last step" if n == 1 else f"{_NAMES[how]} of the last {n} steps"


def extract(runs: Sequence[Run], what: Extraction, times: FloatArray) -> Series:
    """``what`` over ``runs`` (finished, oldest first; ``times``: their timestamps); runs
    with neither a usable series nor a summary value are skipped."""
    if what.steps is not None:
        return _curve(runs, what.key, what.steps, times)
    if what.aggregation is not None:
        return _aggregated(runs, what, times)
    return series_of(runs, what.key, times)


def _summary(runs: Sequence[Run], key: str) -> FloatArray:
    return np.fromiter((r.summary.get(key, np.nan) for r in runs), dtype=float, count=len(runs))


def _aggregated(runs: Sequence[Run], what: Extraction, times: FloatArray) -> Series:
    reduce, last = _REDUCE[what.aggregation or "last"], what.last_steps
    values = _summary(runs, what.key)
    stepped = np.zeros(len(runs), dtype=np.bool_)
    for i, run in enumerate(runs):
        steps = run.series.get(what.key)
        if not steps:
            continue
        ordered = np.array([steps[s] for s in sorted(steps)], dtype=float)
        if last is not None:
            ordered = ordered[-last:]
        ordered = ordered[np.isfinite(ordered)]
        if ordered.size:
            values[i], stepped[i] = reduce(ordered), True
    present = np.flatnonzero(np.isfinite(values))
    return Series(
        what.key, values[present], times[present], present.astype(np.int64), stepped[present]
    )


def _curve(runs: Sequence[Run], key: str, steps: tuple[int, ...], times: FloatArray) -> Series:
    grid = np.full((len(runs), len(steps)), np.nan)
    for i, run in enumerate(runs):
        row = run.series.get(key)
        if row:
            grid[i] = [row.get(step, np.nan) for step in steps]
    grid[~np.isfinite(grid)] = np.nan
    stepped = np.isfinite(grid).any(axis=1)
    summary = _summary(runs, key)
    last = grid[:, -1] if steps else np.full(len(runs), np.nan)
    # the value at the last checked step; a run without the series: its summary value
    values = np.where(stepped, last, summary)
    present = np.flatnonzero(stepped | np.isfinite(summary))
    return Series(
        key,
        values[present],
        times[present],
        present.astype(np.int64),
        stepped[present],
        grid[present],
    )
