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
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray
from scipy.ndimage import maximum_filter1d, median_filter

from bot.core.models import RegimeSettings

FloatArray = NDArray[np.float64]

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample -> its standard deviation
_CANDIDATE_Z = 2.5  # liberal threshold for candidate positions (noise units)
EFFECT_WINDOW = 3  # effect sizes compare up to this many regime lengths on each side
_SHORT_PENALTY = 4.0  # extra penalty per log(n / length of the shorter side)
_NOISE_REACH = 2  # segment noise looks this many effect windows from a boundary
_COARSE = 3.0  # penalty factor of the segmentation the autocorrelation is measured on
_MAX_RHO = 0.9  # cap of the lag-1 autocorrelation used to inflate the penalty


def robust_sigma(values: FloatArray) -> float:
    """MAD-based standard deviation of one homogeneous stretch (0 when constant)."""
    if values.size < 2:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))))


def local_residuals(values: FloatArray, half_window: int) -> FloatArray:
    """Each value minus the median of its ``2 * half_window`` neighbours (itself left out).

    A step or a slow drift disturbs only a few of these; inside an exactly constant
    stretch they are exactly 0.
    """
    n = values.size
    if n < 3:
        return np.zeros(n)
    half = max(1, min(half_window, (n - 1) // 2))
    padded = np.pad(values, half, mode="edge")
    windows = sliding_window_view(padded, 2 * half + 1)
    neighbours = np.delete(windows, half, axis=1)  # scipy's median_filter ignores holes
    return np.asarray(values - np.median(neighbours, axis=1), dtype=np.float64)


def residual_sigma(residuals: FloatArray, half_window: int, skip_zeros: bool = True) -> float:
    """Noise scale from local residuals (MAD-based; 0 when they are all 0).

    With ``skip_zeros`` exact zeros — runs inside a constant stretch — are left out, so
    a metric that is flat in one regime and noisy in another is scaled by its real noise.
    """
    moving = residuals[residuals != 0.0] if skip_zeros else residuals
    if moving.size == 0:
        return 0.0
    # the neighbours' median varies too: Var(x - med) ~ (1 + pi / (4 * half)) * sigma^2
    inflation = math.sqrt(1.0 + math.pi / (4.0 * max(1, half_window)))
    return float(MAD_TO_SIGMA * np.median(np.abs(moving)) / inflation)


def noise_sigma(values: FloatArray, half_window: int = 5) -> float:
    """Robust noise scale of a series with level shifts, outliers and constant stretches.

    Runs inside (or at the edge of) an exactly constant stretch — equal to the median
    of the ``half_window`` runs before or after them — are left out, so a metric
    flat in one regime and noisy in another is scaled by its real noise.  Returns 0
    when fewer than ``2 * half_window`` runs move (a piecewise-constant series with
    a few bad runs).
    """
    n = values.size
    half = max(1, min(half_window, (n - 1) // 2))
    if n < 3:
        return 0.0
    residuals = local_residuals(values, half)
    side = np.median(sliding_window_view(values, half), axis=1)
    before = np.full(n, np.nan)
    after = np.full(n, np.nan)
    before[half:] = side[:-1]
    after[: n - half] = side[1:]
    moving = residuals[(values != before) & (values != after)]
    if moving.size < 2 * half:
        return 0.0
    return residual_sigma(moving, half, skip_zeros=False)


def clean(values: FloatArray, sigma: float, outlier_sigma: float, min_size: int) -> FloatArray:
    """Hampel filter: replace bad runs by the running median of ``2 * min_size - 1`` runs.

    That median follows every regime of at least ``min_size`` runs and ignores shorter
    excursions.  A value is bad when it is further than ``outlier_sigma * sigma`` from
    it and also from the medians of the ``min_size - 1`` runs just before and just
    after it (so the first runs of a new regime, where the centred median lags, stay).
    """
    n = values.size
    size = min(2 * min_size - 1, n)
    reference = median_filter(values, size=size, mode="nearest")
    bound = outlier_sigma * sigma
    outlier = np.abs(values - reference) > bound
    side = min_size - 1
    if side >= 1 and n > side:
        window = np.median(sliding_window_view(values, side), axis=1)
        before = np.full(n, np.inf)
        after = np.full(n, np.inf)
        before[side:] = window[:-1]
        after[: n - side] = window[1:]
        outlier &= np.abs(values - before) > bound
        outlier &= np.abs(values - after) > bound
    return np.where(outlier, reference, values).astype(np.float64)


def candidates(cumsum: FloatArray, sigma: float, min_size: int) -> NDArray[np.int64]:
    """Positions where a moving two-sample statistic peaks, at scales min_size * 2^k."""
    n = cumsum.size - 1
    found: list[NDArray[np.int64]] = []
    h = min_size
    while 2 * h <= n:
        t = np.arange(h, n - h + 1)
        diff = (cumsum[t + h] - 2.0 * cumsum[t] + cumsum[t - h]) / h
        z = np.abs(diff) * math.sqrt(h / 2.0) / sigma
        peaks = (z >= maximum_filter1d(z, size=h, mode="constant")) & (z > _CANDIDATE_Z)
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
        a, b, c = bounds[prev[i]], bounds[i], bounds[nxt[i]]
        delta = (cs[b] - cs[a]) / (b - a) - (cs[c] - cs[b]) / (c - b)
        version[i] += 1
        entry = ((b - a) * (c - b) / (c - a) * delta * delta, i, version[i])
        heapq.heappush(weakest, entry)
        if b - a < min_size or c - b < min_size:
            heapq.heappush(forced, entry)

    def top(heap: list[tuple[float, int, int]]) -> tuple[float, int, int] | None:
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


@dataclass(frozen=True)
class Step:
    """How a metric moves across one boundary: medians, noise and effect size."""

    before: float
    after: float
    sigma: float  # pooled in-regime noise of the two sides (0: both constant)
    runs_before: int
    runs_after: int

    @property
    def delta(self) -> float:
        """``after - before``."""
        return self.after - self.before

    @property
    def effect(self) -> float:
        """|after - before| in noise units; infinite for a move between constant stretches."""
        if self.delta == 0:
            return 0.0
        return abs(self.delta) / self.sigma if self.sigma > 0 else math.inf

    @property
    def relative(self) -> float | None:
        """(after - before) / |before|; None when before is 0."""
        return self.delta / abs(self.before) if self.before != 0 else None

    def significance(self) -> float:
        """Squared two-sample statistic of the step (noise units)."""
        weight = self.runs_before * self.runs_after / (self.runs_before + self.runs_after)
        return weight * self.effect**2


class SegmentNoise:
    """In-segment noise of any stretch [a, b) of one series (cached).

    Measured from residuals to a running median inside the segment, so neither a
    neighbouring regime nor a slow drift counts as noise (an exactly constant segment
    has none of its own), then shrunk toward the series' noise ``prior`` as if it
    had been seen on ``prior_runs`` more runs.
    """

    def __init__(self, values: FloatArray, prior: float, prior_runs: int, half: int) -> None:
        self.values, self.prior, self.prior_runs, self.half = values, prior, prior_runs, half
        self.residuals = local_residuals(values, half)
        self._cache: dict[tuple[int, int], float] = {}

    def __call__(self, a: int, b: int) -> float:
        """Noise of the stretch [a, b)."""
        key = (a, b)
        if key not in self._cache:
            h = self.half
            if b - a >= 4 * h + 8:  # interior residuals never see a neighbouring segment
                inside = self.residuals[a + h : b - h]
            else:
                inside = local_residuals(self.values[a:b], h)
            own = residual_sigma(inside, h, skip_zeros=False)
            n, k = b - a, self.prior_runs
            self._cache[key] = math.sqrt((n * own * own + k * self.prior**2) / (n + k))
        return self._cache[key]


def segment_sigma(values: FloatArray, prior: float, prior_runs: int, half: int) -> float:
    """Noise of one whole segment (see ``SegmentNoise``)."""
    return SegmentNoise(values, prior, prior_runs, half)(0, values.size)


def step(left: FloatArray, right: FloatArray, sigma_left: float, sigma_right: float) -> Step:
    """The step between two stretches of values, each with its noise scale."""
    nl, nr = left.size, right.size
    pooled = math.sqrt((nl * sigma_left**2 + nr * sigma_right**2) / (nl + nr))
    return Step(float(np.median(left)), float(np.median(right)), pooled, nl, nr)


def segment_half(min_size: int) -> int:
    """Half-window of the running median inside segments (fits a minimal regime)."""
    return min_size // 2 + 1


def passes(s: Step, settings: RegimeSettings, beta: float) -> float:
    """Margin of a step over the thresholds: >= 1 keeps it, lower is weaker."""
    margin = s.effect / settings.min_effect_sigma
    margin = min(margin, math.sqrt(s.significance() / beta) if beta > 0 else math.inf)
    if settings.min_relative_change > 0:
        rel = s.relative
        rel_margin = math.inf if rel is None else abs(rel) / settings.min_relative_change
        margin = min(margin, rel_margin)
    return margin


@dataclass
class _Series:
    """A cleaned series with the noise of its segments."""

    values: FloatArray
    noise: SegmentNoise

    def step_at(self, a: int, b: int, c: int, window: int) -> Step:
        """The step at b between up to ``window`` runs of [a, b) and of [b, c)."""
        lo, hi = max(a, b - window), min(c, b + window)
        reach = _NOISE_REACH * window
        left = self.noise(max(a, b - reach), b)
        right = self.noise(b, min(c, b + reach))
        return step(self.values[lo:b], self.values[b:hi], left, right)


def _prune_by_effect(
    series: _Series, bounds: list[int], settings: RegimeSettings, beta: float
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
                margins[t] = passes(series.step_at(a, b, c, window), settings, beta + extra)
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
    rho = min(max(_autocorrelation(y, coarse), 0.0), _MAX_RHO)
    lrv = (1.0 + rho) / (1.0 - rho)
    bounds = _prune_by_gain(cumsum, initial, beta * lrv, min_size)
    bounds = _split_missed(cumsum, bounds, beta * lrv, min_size)
    bounds = _refine(cumsum, bounds, min_size)
    series = _Series(x, SegmentNoise(x, noise, min_size, segment_half(min_size)))
    bounds = _prune_by_effect(series, bounds, settings, beta * lrv)
    bounds = _refine_l1(x, bounds, min_size)
    window = EFFECT_WINDOW * min_size
    effects = [series.step_at(a, b, c, window).effect for a, b, c in _triples(bounds)]
    return Detection(bounds[1:-1], effects, noise)


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
