"""Where a failing streak began, as a regime change the PRs can be attributed to.

The regime detector confirms a change only once the new regime holds
``min_regime_runs`` runs, but the drift watch acts after ``min_failures`` (3) failures in
a row.  Until the detector catches up, the boundary between the last run before the
streak and its first run stands in for the change: the PRs merged between their commits
are the candidates, exactly as for a detected change.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime

from bot.core.analysis.keys import resolve_key, summary_keys
from bot.core.models import Change, MetricShift, Run

BEFORE_RUNS = 5  # runs before the streak whose median is the level it left


def onset_change(runs: Sequence[Run], metric: str, since: datetime) -> Change | None:
    """The change at the first run from ``since`` on among ``runs`` (finished, oldest
    first) having ``metric``; None when no run before it has the metric."""
    key = resolve_key(metric, summary_keys(runs))
    having = [i for i, run in enumerate(runs) if key in run.summary]
    first = next((p for p, i in enumerate(having) if runs[i].created_at >= since), None)
    if first is None or first == 0:
        return None
    previous, index = having[first - 1], having[first]
    before, after = runs[previous], runs[index]
    levels_before = [runs[i].summary[key] for i in having[max(0, first - BEFORE_RUNS) : first]]
    levels_after = [runs[i].summary[key] for i in having[first:]]
    old, new = statistics.median(levels_before), statistics.median(levels_after)
    relative = (new - old) / abs(old) if old else None
    return Change(
        at=after.created_at,
        index=index,
        before_run=before.id,
        after_run=after.id,
        before_at=before.created_at,
        before_commit=before.commit,
        after_commit=after.commit,
        earlier_commit=runs[previous - 1].commit if previous >= 1 else None,
        later_commit=runs[index + 1].commit if index + 1 < len(runs) else None,
        metrics={key: MetricShift(before=old, after=new, relative=relative)},
    )
