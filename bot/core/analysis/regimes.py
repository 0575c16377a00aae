"""Regimes of a run history: per-metric change points merged into shared boundaries.

Each metric is segmented on its own (``bot.core.analysis.changepoints``); change points
of different metrics within ``merge_distance`` runs of each other are one boundary
(boundaries closer than ``min_regime_runs`` join too), placed at the run that best
splits the nearby runs of the metrics that changed there.  For every boundary the metrics
that moved are reported with their medians before and after, the relative change and the
size of the move in units of in-regime noise, largest first, together with the
runs on either side (ids, timestamps and commits for attribution to pull requests).  A
metric's move is measured over its own stretches (from its previous change to its next),
not between the regimes other metrics' changes cut.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot.core import deadline
from bot.core.analysis.changepoints import EFFECT_WINDOW, Detection, detect
from bot.core.analysis.noise import (
    FloatArray,
    SegmentNoise,
    Step,
    local_residuals,
    pooled_sigma,
    residual_sigma,
    segment_half,
    step_margin,
)
from bot.core.analysis.trends import drift_line
from bot.core.models import Change, MetricShift, Regime, RegimeSettings, Run, Trend


@dataclass(frozen=True)
class _Point:
    """One metric's change point, in run indices, with its strength."""

    index: int
    metric: str
    effect: float


def metric_matrix(runs: Sequence[Run], names: Sequence[str]) -> FloatArray:
    """Runs x metrics array of values, NaN where a run lacks a metric (or it is not finite)."""
    matrix = np.full((len(runs), len(names)), np.nan)
    column = {name: j for j, name in enumerate(names)}
    for i, run in enumerate(runs):
        for name, value in run.summary.items():
            j = column.get(name)
            if j is not None:
                matrix[i, j] = value
    matrix[~np.isfinite(matrix)] = np.nan
    return matrix


def _metric_points(
    values: FloatArray, metric: str, settings: RegimeSettings
) -> tuple[list[_Point], Detection]:
    """Change points of one metric column (NaN = missing) in run indices, and its detection."""
    present = np.flatnonzero(~np.isnan(values))
    found = detect(values[present], settings)
    points = [
        _Point(int(present[i]), metric, effect)
        for i, effect in zip(found.changepoints, found.effects, strict=True)
    ]
    return points, found


def _cluster(points: list[_Point], n: int, settings: RegimeSettings) -> list[list[_Point]]:
    """Group change points within ``merge_distance`` runs; keep regimes >= min length."""
    clusters: list[list[_Point]] = []
    for point in sorted(points, key=lambda p: p.index):
        if clusters and point.index - clusters[-1][-1].index <= settings.merge_distance:
            clusters[-1].append(point)
        else:
            clusters.append([point])
    merged = True
    while merged:  # a boundary too close to its neighbour joins it; one too close to an end goes
        merged = False
        positions = [_position(c) for c in clusters]
        for i, pos in enumerate(positions):
            if pos < settings.min_regime_runs or n - pos < settings.min_regime_runs:
                del clusters[i]
            elif i > 0 and pos - positions[i - 1] < settings.min_regime_runs:
                clusters[i - 1] = clusters[i - 1] + clusters.pop(i)
            else:
                continue
            merged = True
            break
    return clusters


def _position(cluster: list[_Point]) -> int:
    """Rough place of a merged boundary: the strongest change point of the cluster."""
    return max(cluster, key=lambda p: (p.effect, -p.index)).index


def _l1(values: FloatArray) -> float:
    values = values[~np.isnan(values)]
    return float(np.abs(values - np.median(values)).sum()) if values.size else 0.0


def _local_scale(values: FloatArray, half: int) -> float:
    """Noise of a few runs around a boundary (tiny when they are piecewise constant)."""
    values = values[~np.isnan(values)]
    scale = residual_sigma(local_residuals(values, half), half) if values.size > 2 else 0.0
    return scale if scale > 0 else max(float(np.max(np.abs(values), initial=0.0)), 1.0) * 1e-9


def _place(
    clusters: list[list[_Point]],
    matrix: FloatArray,
    columns: dict[str, int],
    settings: RegimeSettings,
) -> list[int]:
    """Where each merged boundary sits: the run that best splits its metrics' nearby runs.

    Candidates lie between the cluster's change points (two runs of slack); the cost is
    the absolute deviation from the medians on either side, over up to
    ``EFFECT_WINDOW * min_regime_runs`` runs, in units of each metric's noise around
    the boundary, summed over the cluster's metrics.  Only nearby runs count, so runs
    appended later do not move it.
    """
    n = matrix.shape[0]
    rough = [_position(c) for c in clusters]
    reach = EFFECT_WINDOW * settings.min_regime_runs
    half = segment_half(settings.min_regime_runs)
    out: list[int] = []
    for i, cluster in enumerate(clusters):
        start = out[-1] if out else 0
        stop = rough[i + 1] if i + 1 < len(rough) else n
        indices = [p.index for p in cluster]
        lo = max(min(indices) - 2, start + settings.min_regime_runs)
        hi = min(max(indices) + 2, stop - settings.min_regime_runs)
        if hi <= lo:
            out.append(min(max(rough[i], lo), max(hi, lo)))
            continue
        costs = np.zeros(hi - lo + 1)
        for name in sorted({p.metric for p in cluster}):
            column = matrix[:, columns[name]]
            scale = _local_scale(column[max(start, lo - reach) : min(stop, hi + reach)], half)
            for k, t in enumerate(range(lo, hi + 1)):
                left = column[max(start, t - reach) : t]
                right = column[t : min(stop, t + reach)]
                costs[k] += (_l1(left) + _l1(right)) / scale
        out.append(lo + int(np.argmin(costs)))
    return out


def _shift(s: Step) -> MetricShift:
    sigma = s.effect if math.isfinite(s.effect) else None
    return MetricShift(before=s.before, after=s.after, relative=s.relative, sigma=sigma)


@dataclass(frozen=True)
class _Stretch:
    """One metric inside one regime: its median, noise, runs with it and its trend if any."""

    median: float
    sigma: float
    runs: int
    trend: Trend | None = None

    @property
    def first(self) -> float:
        """Where the stretch starts: its trend line's first value, else its median."""
        return self.median if self.trend is None else self.trend.first

    @property
    def last(self) -> float:
        """Where the stretch ends: its trend line's last value, else its median."""
        return self.median if self.trend is None else self.trend.last


def _trend(a: int, b: int, found: Detection, min_effect: float) -> Trend | None:
    """The metric's trend over its values [a, b) (None: flat, wandering or too few runs)."""
    if found.fits is None or found.wandering:
        return None
    line = drift_line(found.fits, a, b, found.slope_penalty, min_effect)
    if line is None:
        return None
    scale = found.sigma
    return Trend(
        slope=line.slope * scale,
        first=line.at(a) * scale,
        last=line.at(b - 1) * scale,
        runs=b - a,
    )


def _stretches(
    column: FloatArray, edges: Sequence[int], found: Detection, settings: RegimeSettings
) -> list[_Stretch | None]:
    """Per regime, the metric's median, in-regime noise and trend (None: no run has it)."""
    present = np.flatnonzero(~np.isnan(column))
    values = column[present]
    prior = found.sigma
    noise = SegmentNoise(
        values, prior, settings.min_regime_runs, segment_half(settings.min_regime_runs)
    )
    cuts = [int(c) for c in np.searchsorted(present, edges)]
    out: list[_Stretch | None] = []
    for a, b in itertools.pairwise(cuts):
        if a == b:
            out.append(None)
            continue
        trend = _trend(a, b, found, settings.min_effect_sigma)
        out.append(_Stretch(float(np.median(values[a:b])), noise(a, b), b - a, trend))
    return out


def _moved_metrics(
    stretches: dict[str, list[_Stretch | None]],
    boundary: int,
    detected: set[str],
    beta: float,
    settings: RegimeSettings,
) -> dict[str, MetricShift]:
    """The metrics that moved between regimes ``boundary`` and ``boundary + 1``.

    Those with a change point in the boundary's cluster, and those whose move between
    the two regimes passes the same effect-size and significance tests; largest first.
    A drifting stretch moves from where its trend line ends to where the next one starts.
    """
    steps: list[tuple[str, Step]] = []
    for name, table in stretches.items():
        left, right = table[boundary], table[boundary + 1]
        if left is None or right is None:
            continue
        pooled = pooled_sigma(left.runs, left.sigma, right.runs, right.sigma)
        s = Step(left.last, right.first, pooled, left.runs, right.runs)
        if name in detected or step_margin(s, settings, beta) >= 1.0:
            steps.append((name, s))
    steps.sort(key=lambda item: (-item[1].effect, item[0]))
    return {name: _shift(s) for name, s in steps}


def _own_moves(
    moved: list[dict[str, MetricShift]],
    edges: Sequence[int],
    matrix: FloatArray,
    columns: dict[str, int],
    detections: dict[str, Detection],
    settings: RegimeSettings,
) -> list[dict[str, MetricShift]]:
    """Each metric's moves measured over its own stretches: from its previous change to the
    boundary and on to its next, not between the regimes other metrics' changes cut (which
    metrics moved where stays as ``moved`` found it); largest first."""
    out: list[dict[str, MetricShift]] = [{} for _ in moved]
    for name, found in detections.items():
        at = [i for i, shifts in enumerate(moved) if name in shifts]
        if not at:
            continue
        own = [0, *(edges[i + 1] for i in at), edges[-1]]
        table = _stretches(matrix[:, columns[name]], own, found, settings)
        for k, i in enumerate(at):
            left, right = table[k], table[k + 1]
            if left is None or right is None:  # cannot be: the metric moved there
                out[i][name] = moved[i][name]
                continue
            pooled = pooled_sigma(left.runs, left.sigma, right.runs, right.sigma)
            out[i][name] = _shift(Step(left.last, right.first, pooled, left.runs, right.runs))
    return [
        dict(sorted(shifts.items(), key=lambda item: (-_size(item[1]), item[0]))) for shifts in out
    ]


def _size(shift: MetricShift) -> float:
    """A move's size for ordering: in noise units (infinite without noise)."""
    return math.inf if shift.sigma is None else shift.sigma


def _trends(stretches: dict[str, list[_Stretch | None]], regime: int) -> dict[str, Trend]:
    """The metrics drifting through one regime, with their trend lines."""
    out = {}
    for name, table in stretches.items():
        stretch = table[regime]
        if stretch is not None and stretch.trend is not None:
            out[name] = stretch.trend
    return out


def _steepest(
    stretches: dict[str, list[_Stretch | None]],
    regime: int,
    detections: dict[str, Detection],
    preferred: Sequence[str] | None,
) -> float | None:
    """The per-run slope of the metric drifting most through a regime (in its noise units),
    among ``preferred`` (the gated metrics) when one of them drifts."""
    trends = _trends(stretches, regime)
    chosen = [name for name in trends if preferred is not None and name in preferred]
    drifts = [
        (abs(trends[name].slope) * trends[name].runs / detections[name].sigma, name)
        for name in chosen or trends
    ]
    return trends[max(drifts)[1]].slope if drifts else None


def _medians(block: FloatArray, names: Sequence[str]) -> dict[str, float]:
    present = ~np.all(np.isnan(block), axis=0)
    if not present.any():
        return {}
    meds = np.nanmedian(block[:, present], axis=0)
    return {
        name: float(m) for name, m in zip(np.asarray(names)[present].tolist(), meds, strict=True)
    }


def _scanned(runs: Sequence[Run], metrics: Sequence[str], extra: int) -> list[str]:
    """``metrics`` present in the runs, plus the ``extra`` other metrics most runs have."""
    counts = Counter(name for run in runs for name in run.summary)
    chosen = {m for m in metrics if m in counts}
    others = sorted((m for m in counts if m not in chosen), key=lambda m: (-counts[m], m))
    return sorted(chosen | set(others[:extra]))


def detect_regimes(
    runs: Sequence[Run],
    settings: RegimeSettings = RegimeSettings(),
    metrics: Sequence[str] | None = None,
    extra: int | None = None,
) -> tuple[list[Regime], list[Change]]:
    """Split finished runs (oldest first) into regimes and describe each boundary.

    ``metrics`` limits which metrics drive the detection (default: all present);
    regime medians cover every metric present.  With ``extra`` as well, only ``metrics``
    and the ``extra`` other metrics most runs have are read at all (detection and medians):
    what a review analyses is bounded whatever the history logs.  Returns the regimes,
    oldest first, covering all runs, and one change per boundary between consecutive regimes.
    """
    if not runs:
        return [], []
    n = len(runs)
    if metrics is not None and extra is not None:
        names = _scanned(runs, metrics, extra)
        wanted = set(names)
    else:
        names = sorted({name for run in runs for name in run.summary})
        wanted = set(names) if metrics is None else set(metrics) & set(names)
    matrix = metric_matrix(runs, names)
    detections: dict[str, Detection] = {}
    points: list[_Point] = []
    for j, name in enumerate(names):
        if name in wanted:
            deadline.check(f"segmenting {name}")
            found, detections[name] = _metric_points(matrix[:, j], name, settings)
            points.extend(found)
    clusters = _cluster(points, n, settings)
    columns = {name: j for j, name in enumerate(names)}
    edges = [0, *_place(clusters, matrix, columns, settings), n]
    stretches = {
        name: _stretches(matrix[:, j], edges, detections[name], settings)
        for j, name in enumerate(names)
        if name in wanted
    }
    wandering = tuple(name for name, found in detections.items() if found.wandering)
    regimes = [
        Regime(
            start=runs[a].created_at,
            end=runs[b - 1].created_at,
            runs=b - a,
            medians=_medians(matrix[a:b], names),
            first_index=a,
            last_index=b - 1,
            slope=_steepest(stretches, i, detections, metrics),
            trends=_trends(stretches, i),
            wandering=wandering,
        )
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]
    beta = settings.penalty * math.log(max(n, 2))
    moved = [
        _moved_metrics(stretches, i, {p.metric for p in cluster}, beta, settings)
        for i, cluster in enumerate(clusters)
    ]
    moved = _own_moves(moved, edges, matrix, columns, detections, settings)
    changes = []
    for i, b in enumerate(edges[1:-1]):
        before, after = runs[b - 1], runs[b]
        changes.append(
            Change(
                at=after.created_at,
                index=b,
                before_run=before.id,
                after_run=after.id,
                before_at=before.created_at,
                before_commit=before.commit,
                after_commit=after.commit,
                earlier_commit=runs[b - 2].commit if b >= 2 else None,
                later_commit=runs[b + 1].commit if b + 1 < n else None,
                metrics=moved[i],
            )
        )
    return regimes, changes
