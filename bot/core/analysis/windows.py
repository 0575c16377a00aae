"""Which runs a gate's limit is computed over: the last N runs having the metric, the current
regime (its last N runs when the metric drifts in it), or the runs since a date.

A metric's history is held as a :class:`Series` (numpy columns, extracted once per metric); every
window is a suffix of it, ``series.tail(window_start(series, spec))``, found by binary search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time

import numpy as np
import numpy.typing as npt

from bot.core.models import Run, WindowInfo, WindowSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "BoolArray",
    "FloatArray",
    "IntArray",
    "Series",
    "run_times",
    "series_of",
    "window_start",
]


@dataclass(frozen=True, eq=False)
class Series:
    """One metric over the finished runs that have it, oldest first.

    ``values`` is what a gate compares per run (``bot.core.analysis.values``). Gates on a
    per-step series also carry ``stepped``: whether the value came from the run's series (else
    from its summary); golden curves carry ``grid``: the run's value at each checked step
    (a row per run, a column per step, NaN where the run has no value at that step).
    """

    metric: str
    values: FloatArray  # float64 metric values
    times: FloatArray  # float64 POSIX timestamps of created_at
    index: IntArray  # int64 position of each run among all finished runs
    stepped: BoolArray | None = None
    grid: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.values.size)

    def tail(self, start: int) -> Series:
        """The suffix of this series from position ``start``."""
        return Series(
            self.metric,
            self.values[start:],
            self.times[start:],
            self.index[start:],
            None if self.stepped is None else self.stepped[start:],
            None if self.grid is None else self.grid[start:],
        )

    def info(self, spec: WindowSpec, runs: Sequence[Run]) -> WindowInfo:
        """This series described as a window of ``spec``'s kind (``runs``: all finished runs)."""
        if not len(self):
            return WindowInfo(kind=spec.kind, runs=0)
        first, last = runs[int(self.index[0])], runs[int(self.index[-1])]
        return WindowInfo(
            kind=spec.kind, runs=len(self), first=first.created_at, last=last.created_at
        )


def run_times(runs: Sequence[Run]) -> FloatArray:
    """POSIX timestamps of ``runs``' ``created_at`` (one pass, shared by every series)."""
    return np.fromiter((r.created_at.timestamp() for r in runs), dtype=float, count=len(runs))


def series_of(runs: Sequence[Run], metric: str, times: FloatArray | None = None) -> Series:
    """Extract ``metric`` from ``runs`` (finished, oldest first); runs without it are skipped."""
    column = np.fromiter(
        (r.summary.get(metric, np.nan) for r in runs), dtype=float, count=len(runs)
    )
    present = np.flatnonzero(~np.isnan(column))
    all_times = run_times(runs) if times is None else times
    return Series(metric, column[present], all_times[present], present.astype(np.int64))


def _cutoff(spec: WindowSpec, regime_start: datetime | None) -> float | None:
    if spec.kind == "regime":
        return None if regime_start is None else regime_start.timestamp()
    if spec.kind == "since" and spec.since is not None:
        return datetime.combine(spec.since, time(), tzinfo=UTC).timestamp()
    return None


def window_start(
    series: Series,
    spec: WindowSpec,
    *,
    regime_start: datetime | None = None,
    drifting: bool = False,
) -> int:
    """Position in ``series`` where the window ``spec`` begins (the window is the suffix).

    ``regime_start``: when the metric's current regime begins (None: the whole history);
    ``drifting``: the metric drifts in it, so a ``regime`` window holds only its last
    ``spec.runs`` runs (a level set over a whole trend would be stale at once).
    """
    last = max(0, len(series) - spec.runs)
    if spec.kind == "last":
        return last
    cutoff = _cutoff(spec, regime_start)
    start = 0 if cutoff is None else int(np.searchsorted(series.times, cutoff, side="left"))
    return max(start, last) if spec.kind == "regime" and drifting else start
