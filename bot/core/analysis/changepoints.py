"""Change points of one metric: robust bottom-up segmentation of an ordered series.

1. Clean: a Hampel filter replaces values further than ``outlier_sigma`` noise units
   from a running median (bad runs, also two in a row) by that median; the noise
   scale is robust to steps, outliers and exactly constant stretches.
2. Candidates: local maxima of moving two-sample statistics at scales
   ``min_regime_runs * 2^k``, each with its neighbours.
3. Bottom-up: the weakest boundary (least drop of squared error) is removed until all
   pass a BIC-like penalty ``penalty * log(n)``, inflated by the noise's long-run
   variance when it is autocorrelated (a first-difference noise estimate would miss
   that and over-segment); then segments are split again where a candidate was
   missed, and boundaries are moved to their best position.
4. Effect: neighbouring segments merge, weakest first, until every step between
   the medians of up to ``EFFECT_WINDOW * min_regime_runs`` runs on each side is at
   least ``min_effect_sigma`` in-segment noise units (noise measured around a
   running median, so drift is not noise), significant, and not shorter than
   ``min_regime_runs`` runs.  Boundaries are finally placed by least absolute
   deviation (heavy tails).

Effects, noise and placement only look at nearby runs, so appending runs rarely moves
an old boundary; only marginal ones can flip as the series' noise estimate drifts.
The noise scales, the cleaning and the steps are ``bot.core.analysis.noise``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bot.core.analysis.noise import (
    FloatArray,
    SegmentNoise,
    Step,
    clean,
    noise_sigma,
    segment_half,
    step_between,
    step_margin,
)
from bot.core.analysis.numeric import moving_max
from bot.core.analysis.trends import Fits, find_trends, inflation, walk_jumps
from bot.core.models import RegimeSettings

_CANDIDATE_Z = 2.5  # liberal threshold for candidate positions (noise units)
EFFECT_WINDOW = 3  # effect sizes compare up to this many regime lengths on each side
_SHORT_PENALTY = 4.0  # extra penalty per log(n / length of the shorter side)
_NOISE_REACH = 2  # segment noise looks this many effect windows from a boundary
_COARSE = 3.0  # penalty factor of the segmentation the autocorrelation is measured on
_KINK_REACH = 6  # a jump between trends is measured on lines of this many regime lengths


def candidates(cumsum: FloatArray, sigma: float, min_size: int) -> NDArray[np.int64]:
    """Positions where a moving two-sample statistic peaks, at scales min_size * 2^k."""
    n = cumsum.size - 1
    found: list[NDArray[np.int64]] = []
    h = min_size
    while 2 * h <= n:
        t = np.arange(h, n - h + 1)
        diff = (cumsum[t + h] - 2.0 * cumsum[t] + cumsum[t - h]) / h
        z = np.abs(diff) * math.sqrt(h / 2.0) / sigma
        peaks = (z >= moving_max(z, h)) & (z > _CANDIDATE_Z)
        spread = 2 if h == min_size else 0  # the finest scale may be off by two runs
        found.extend(t[peaks] + shift for shift in range(-spread, spread + 1))
        h *= 2
    if not found:
        return np.empty(0, dtype=np.int64)
    every = np.unique(np.concatenate(found))
    return every[(every > 0) & (every < n)].astype(np.int64)


def _gains(
    cumsum: FloatArray, a: NDArray[np.int64], b: NDArray[np.int64], c: NDArray[np.int64]
) -> FloatArray:
    """Drop of the squared error when [a, c) is split at b (vectorised, noise units)."""
    delta: FloatArray = (cumsum[b] - cumsum[a]) / (b - a) - (cumsum[c] - cumsum[b]) / (c - b)
    return np.asarray((b - a) * (c - b) / (c - a) * delta * delta, dtype=np.float64)


def _prune_by_gain(cumsum: FloatArray, bounds: list[int], beta: float, min_size: int) -> list[int]:
    """Remove interior boundaries bottom-up until each one's gain is at least ``beta``.

    Then boundaries next to a segment shorter than ``min_size`` go (weakest first),
    whatever their gain.
    """
    k = len(bounds)
    if k <= 2:
        return bounds
    pos = np.asarray(bounds, dtype=np.int64)
    initial = [float(g) for g in _gains(cumsum, pos[:-2], pos[1:-1], pos[2:])]
    short = [bool(s) for s in (pos[1:-1] - pos[:-2] < min_size) | (pos[2:] - pos[1:-1] < min_size)]
    prev = list(range(-1, k - 1))
    nxt = list(range(1, k + 1))
    version = [0] * k
    cs: list[float] = [float(v) for v in cumsum]  # scalar access: lists beat arrays
    # two heaps of (gain, index, version): all boundaries, and those next to a short segment
    weakest: list[tuple[float, int, int]] = [(g, i + 1, 0) for i, g in enumerate(initial)]
    forced = [entry for entry, s in zip(weakest, short, strict=True) if s]
    heapq.heapify(weakest)
    heapq.heapify(forced)

    def push(i: int) -> None:
        """Queue boundary ``i`` again with its gain between its current neighbours."""
        a, b, c = bounds[prev[i]], bounds[i], bounds[nxt[i]]
        delta = (cs[b] - cs[a]) / (b - a) - (cs[c] - cs[b]) / (c - b)
        version[i] += 1
        entry = ((b - a) * (c - b) / (c - a) * delta * delta, i, version[i])
        heapq.heappush(weakest, entry)
        if b - a < min_size or c - b < min_size:
            heapq.heappush(forced, entry)

    def top(heap: list[tuple[float, int, int]]) -> tuple[float, int, int] | None:
        """The heap's weakest live entry (stale ones are dropped), or None."""
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    while True:
        entry = top(weakest)
        if entry is None or entry[0] >= beta:
            entry = top(forced)
            if entry is None:
                break
        i = entry[1]
        version[i] = -1  # removed: every entry of it is stale now
        p, q = prev[i], nxt[i]
        nxt[p], prev[q] = q, p
        if p > 0:
            push(p)
        if q < k - 1:
            push(q)
    kept = [0]
    i = nxt[0]
    while i < k:
        kept.append(bounds[i])
        i = nxt[i]
    return kept


@dataclass
class _Cleaned:
    """A cleaned series with the noise of its segments."""

    values: FloatArray
    noise: SegmentNoise

    def step_at(self, a: int, b: int, c: int, window: int) -> Step:
        """The step at b between up to ``window`` runs of [a, b) and of [b, c)."""
        lo, hi = max(a, b - window), min(c, b + window)
        reach = _NOISE_REACH * window
        left = self.noise(max(a, b - reach), b)
        right = self.noise(b, min(c, b + reach))
        return step_between(self.values[lo:b], self.values[b:hi], left, right)


def _prune_by_effect(
    series: _Cleaned, bounds: list[int], settings: RegimeSettings, beta: float
) -> list[int]:
    """Merge neighbouring segments whose step is too small, weakest first."""
    bounds = list(bounds)
    window = EFFECT_WINDOW * settings.min_regime_runs
    margins: dict[tuple[int, int, int], float] = {}
    while len(bounds) > 2:
        triples = _triples(bounds)
        for t in triples:
            if t not in margins:
                a, b, c = t
                short = min(b - a, c - b)
                extra = _SHORT_PENALTY * math.log(max(series.values.size / short, 1.0))
                margins[t] = step_margin(series.step_at(a, b, c, window), settings, beta + extra)
        worst = min(range(len(triples)), key=lambda i: margins[triples[i]])
        if margins[triples[worst]] >= 1.0:
            break
        del bounds[worst + 1]
    return bounds


def _autocorrelation(cleaned: FloatArray, bounds: Sequence[int]) -> float:
    """Lag-1 autocorrelation of the residuals from the segment means (within segments).

    Residuals are clipped at 2.5 noise units so that a missed short regime or a
    remaining outlier barely counts.
    """
    num = den = 0.0
    for a, b in itertools.pairwise(bounds):
        r = np.clip(cleaned[a:b] - cleaned[a:b].mean(), -2.5, 2.5)
        num += float(np.dot(r[:-1], r[1:]))
        den += float(np.dot(r, r))
    return num / den if den > 0 else 0.0


def _best_split(cumsum: FloatArray, a: int, c: int, lo: int, hi: int) -> tuple[int, float]:
    """The split t in [lo, hi] of [a, c) with the largest gain, and that gain."""
    t = np.arange(lo, hi + 1)
    left = (cumsum[t] - cumsum[a]) / (t - a)
    right = (cumsum[c] - cumsum[t]) / (c - t)
    gains = (t - a) * (c - t) / (c - a) * (left - right) ** 2
    best = int(np.argmax(gains))
    return int(t[best]), float(gains[best])


def _refine(cumsum: FloatArray, bounds: list[int], min_size: int) -> list[int]:
    """Move each boundary to the best single split between its neighbours (nearby only)."""
    out = list(bounds)
    for i in range(1, len(out) - 1):
        a, b, c = out[i - 1], out[i], out[i + 1]
        lo = max(a + min_size, b - 2 * min_size)
        hi = min(c - min_size, b + 2 * min_size)
        if hi > lo:
            out[i] = _best_split(cumsum, a, c, lo, hi)[0]
    return out


def _refine_l1(values: FloatArray, bounds: list[int], min_size: int) -> list[int]:
    """Place each boundary where absolute deviations from the two local medians are least.

    Robust to heavy tails: looks at up to ``EFFECT_WINDOW * min_size`` runs per side
    and moves a boundary by at most ``min_size`` runs.
    """
    out = list(bounds)
    reach = EFFECT_WINDOW * min_size
    for i in range(1, len(out) - 1):
        a, b, c = out[i - 1], out[i], out[i + 1]
        lo, hi = max(a + min_size, b - min_size), min(c - min_size, b + min_size)
        if hi <= lo:
            continue
        start, stop = max(a, b - reach), min(c, b + reach)
        costs = []
        for t in range(lo, hi + 1):
            left, right = values[start:t], values[t:stop]
            costs.append(
                float(np.abs(left - np.median(left)).sum() + np.abs(right - np.median(right)).sum())
            )
        out[i] = lo + int(np.argmin(costs))
    return out


def _split_missed(cumsum: FloatArray, bounds: list[int], beta: float, min_size: int) -> list[int]:
    """Split segments again where one more boundary is significant (missed candidates)."""
    out = list(bounds)
    for _ in range(len(out) + 8):
        added = False
        for a, c in itertools.pairwise(list(out)):
            if c - a < 2 * min_size:
                continue
            t, gain = _best_split(cumsum, a, c, a + min_size, c - min_size)
            if gain >= beta:
                out.insert(out.index(c), t)
                added = True
        if not added:
            break
    return out


@dataclass(frozen=True)
class Detection:
    """Change points of one series with their effect sizes and the series' noise scale."""

    changepoints: list[int]  # first index of each new segment
    effects: list[float]  # |step| in noise units at each change point (inf: constant sides)
    sigma: float  # robust noise scale of the series (0: piecewise constant)
    fits: Fits | None = None  # lines of the cleaned values in noise units (None: no noise)
    slope_penalty: float = math.inf  # what a slope must save, in squared noise units
    wandering: bool = False  # no stable level: a random walk, cut only at its jumps


def detect(values: ArrayLike, settings: RegimeSettings = RegimeSettings()) -> Detection:
    """Change points of one metric's finite values, oldest first (see the module doc)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    min_size = settings.min_regime_runs
    if n < 2 * min_size or np.all(x == x[0]):
        return Detection([], [], 0.0)
    noise = noise_sigma(x, min_size)
    sigma = noise if noise > 0.0 else _tiny_scale(x)  # piecewise constant: steps are exact
    x = clean(x, sigma, settings.outlier_sigma, min_size)
    y: FloatArray = np.asarray(x / sigma, dtype=np.float64)
    cumsum = np.concatenate(([0.0], np.cumsum(y)))
    start = candidates(cumsum, 1.0, min_size)
    beta = settings.penalty * math.log(n)
    initial = [0, *(int(t) for t in start), n]
    # autocorrelated noise: the penalty grows with the long-run variance, estimated on a
    # conservative segmentation (over-segmenting would hide the autocorrelation)
    coarse = _prune_by_gain(cumsum, initial, beta * _COARSE, min_size)
    lrv = inflation(_autocorrelation(y, coarse))
    bounds = _prune_by_gain(cumsum, initial, beta * lrv, min_size)
    bounds = _split_missed(cumsum, bounds, beta * lrv, min_size)
    bounds = _refine(cumsum, bounds, min_size)
    series = _Cleaned(x, SegmentNoise(x, noise, min_size, segment_half(min_size)))
    bounds = _prune_by_effect(series, bounds, settings, beta * lrv)
    bounds = _refine_l1(x, bounds, min_size)
    trends = find_trends(
        x / sigma,
        bounds,
        beta=beta,
        penalty=beta * lrv,
        min_effect=settings.min_effect_sigma,
        reach=_KINK_REACH * min_size,
    )
    bounds = walk_jumps(x, trends.bounds, min_size) if trends.wandering else trends.bounds
    window = EFFECT_WINDOW * min_size
    effects = [
        (trends.jump_at(a, b, c) if noise > 0 else math.inf)
        if trends.sloped(a, b) or trends.sloped(b, c)
        else series.step_at(a, b, c, window).effect
        for a, b, c in _triples(bounds)
    ]
    fits = trends.fits if noise > 0 else None
    return Detection(bounds[1:-1], effects, noise, fits, trends.slope_penalty, trends.wandering)


def detect_changepoints(
    values: ArrayLike, settings: RegimeSettings = RegimeSettings()
) -> list[int]:
    """Indices where a new regime of one metric starts (finite values, oldest first).

    Each returned index ``i`` means ``values[i]`` is the first value of a new segment;
    segments hold at least ``settings.min_regime_runs`` values.
    """
    return detect(values, settings).changepoints


def _triples(bounds: Sequence[int]) -> list[tuple[int, int, int]]:
    """Each interior boundary with its neighbours."""
    return list(zip(bounds, bounds[1:], bounds[2:], strict=False))


def _tiny_scale(x: FloatArray) -> float:
    """A scale far below any level difference of a piecewise-constant series."""
    return float(np.max(np.abs(x))) * 1e-9
