"""Noise scales and steps of one metric series: the statistics the segmentation rests on.

Noise is measured robustly (MAD of residuals to a running median), so level shifts,
slow drift, outliers and exactly constant stretches do not inflate it.  A ``Step`` is
the move between two stretches in units of their pooled noise; ``step_margin`` says
by how much it clears the regime thresholds of ``RegimeSettings``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from bot.core.analysis.numeric import moving_median
from bot.core.models import RegimeSettings

FloatArray = NDArray[np.float64]

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample -> its standard deviation


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
    neighbours = np.delete(windows, half, axis=1)  # itself left out of its median
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
    reference = moving_median(values, size)
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


def pooled_sigma(runs_a: int, sigma_a: float, runs_b: int, sigma_b: float) -> float:
    """Noise of two stretches together: the run-weighted quadratic mean of their noises."""
    return math.sqrt((runs_a * sigma_a**2 + runs_b * sigma_b**2) / (runs_a + runs_b))


def step_between(
    left: FloatArray, right: FloatArray, sigma_left: float, sigma_right: float
) -> Step:
    """The step between two stretches of values (medians), each with its noise scale."""
    nl, nr = left.size, right.size
    pooled = pooled_sigma(nl, sigma_left, nr, sigma_right)
    return Step(float(np.median(left)), float(np.median(right)), pooled, nl, nr)


def segment_half(min_size: int) -> int:
    """Half-window of the running median inside segments (fits a minimal regime)."""
    return min_size // 2 + 1


def step_margin(s: Step, settings: RegimeSettings, beta: float) -> float:
    """How far a step clears the regime thresholds: the least of its effect over
    ``min_effect_sigma``, the root of its significance over the penalty ``beta`` and
    its relative change over ``min_relative_change``; >= 1 keeps it, lower is weaker."""
    margin = s.effect / settings.min_effect_sigma
    margin = min(margin, math.sqrt(s.significance() / beta) if beta > 0 else math.inf)
    if settings.min_relative_change > 0:
        rel = s.relative
        rel_margin = math.inf if rel is None else abs(rel) / settings.min_relative_change
        margin = min(margin, rel_margin)
    return margin
