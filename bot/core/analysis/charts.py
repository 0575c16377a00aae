"""The data of the review's charts (pure): each gate's recent history with its old, proposed
and rule values, and the regime-relevant metrics over the newest runs.

A gate's chart shows what its numbers describe: the runs having its metric among the newest
``max(window, rule.failure_lookback)`` of them (the window, plus the runs the old value's
failures are counted on), each with the value the gate compares (summary value or aggregate)
and the median of the metric in the regime holding the run. Golden curves get no chart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bot.core.analysis.context import HistoryContext
from bot.core.analysis.values import Extraction, extract
from bot.core.analysis.windows import Series
from bot.core.models import (
    Band,
    BandEdges,
    Change,
    ChartPoint,
    GateChange,
    GateChart,
    GateReview,
    MetricChart,
    Regime,
    RuleSettings,
)

__all__ = ["MAX_METRIC_CHARTS", "MAX_METRIC_RUNS", "chart_metrics", "gate_chart", "metric_charts"]

MAX_METRIC_CHARTS = 6  # regime-relevant metrics charted at most
MAX_METRIC_RUNS = 350  # newest runs per metric chart


def _edges(band: Band | None) -> BandEdges | None:
    return None if band is None else (band.band_low, band.band_high)


def _points(ctx: HistoryContext, series: Series, key: str) -> tuple[ChartPoint, ...]:
    """One point per run of ``series``, with the median of ``key`` in the run's regime."""
    firsts = np.array([r.first_index for r in ctx.regimes], dtype=np.int64)
    holding = (np.searchsorted(firsts, series.index, side="right") - 1).tolist()
    medians = [r.medians.get(key) for r in ctx.regimes]
    lasts = [r.last_index for r in ctx.regimes]
    points: list[ChartPoint] = []
    for value, index, slot in zip(
        series.values.tolist(), series.index.tolist(), holding, strict=True
    ):
        run = ctx.runs[index]
        inside = slot >= 0 and lasts[slot] >= index
        points.append(
            ChartPoint(
                at=run.created_at,
                value=value,
                run=run.name or run.id,
                commit=run.commit,
                regime_median=medians[slot] if inside else None,
            )
        )
    return tuple(points)


def gate_chart(
    ctx: HistoryContext, change: GateChange, gate: GateReview, rule: RuleSettings
) -> GateChart | None:
    """The chart of ``gate`` (reviewed from ``change``): None for a golden curve or without
    data. The head's values when the head's metric has runs, else the base's."""
    head = change.head
    if head.points or (change.base is not None and change.base.points):
        return None
    series = ctx.values(head)
    if not len(series) and change.base is not None:
        series = ctx.values(change.base)
    if not len(series):
        return None
    shown = max(gate.window.runs, rule.failure_lookback)
    start = max(0, len(series) - shown)
    added = change.base is None
    return GateChart(
        metric=series.metric,
        points=_points(ctx, series.tail(start), series.metric),
        window_start=max(0, min(shown, len(series)) - gate.window.runs),
        old=None if added else gate.old,
        proposed=gate.proposed,
        rule=gate.recomputed,
        old_band=None if added else _edges(gate.old_band),
        proposed_band=_edges(gate.proposed_band),
        rule_band=_edges(gate.recomputed_band),
    )


def _move_size(change: Change, metric: str) -> float:
    shift = change.metrics[metric]
    return shift.sigma if shift.sigma is not None else abs(shift.relative or 0.0)


def chart_metrics(
    regimes: Sequence[Regime],
    changes: Sequence[Change],
    gated: Sequence[str],
    limit: int = MAX_METRIC_CHARTS,
) -> list[str]:
    """The regime-relevant metrics, as the regime table picks them: the gated keys the
    regimes have, the metric each change moved most when it moved none of them, then the
    other metrics by how far they moved; at most ``limit``."""
    present = {m for r in regimes for m in r.medians}
    picked = [m for m in dict.fromkeys(gated) if m in present]
    for change in changes:
        moved = [m for m in change.metrics if m in present]
        if moved and not any(m in picked for m in moved):
            picked.append(max(moved, key=lambda m: _move_size(change, m)))
    effects: dict[str, float] = {}
    for change in changes:
        for metric in change.metrics:
            effects[metric] = max(effects.get(metric, 0.0), _move_size(change, metric))
    others = [m for m in effects if m in present and m not in picked]
    picked += sorted(others, key=lambda m: (-effects[m], m))
    return picked[:limit]


def metric_charts(
    ctx: HistoryContext, gated: Sequence[str], runs: int = MAX_METRIC_RUNS
) -> tuple[MetricChart, ...]:
    """The charts of :func:`chart_metrics` (``gated``: the gates' history keys): each metric's
    summary value over the newest ``runs`` finished runs having it."""
    charts: list[MetricChart] = []
    for metric in chart_metrics(ctx.regimes, ctx.changes, gated):
        what = Extraction(metric)
        series = ctx.columns.get(what)
        if series is None:
            series = extract(ctx.runs, what, ctx.times)
        series = series.tail(max(0, len(series) - runs))
        charts.append(MetricChart(metric=metric, points=_points(ctx, series, metric)))
    return tuple(charts)
