"""Noise scales, cleaning and steps of one metric series (the statistics under the segmentation)."""

from __future__ import annotations

import numpy as np
import pytest

from bot.core.analysis.noise import (
    MAD_TO_SIGMA,
    FloatArray,
    SegmentNoise,
    Step,
    clean,
    noise_sigma,
    pooled_sigma,
    segment_half,
    step_between,
    step_margin,
)
from bot.core.models import RegimeSettings


def _whole(values: FloatArray, prior: float, prior_runs: int, half: int) -> float:
    """The noise of ``values`` as one segment."""
    return SegmentNoise(values, prior, prior_runs, half)(0, values.size)


def test_noise_sigma_ignores_steps_outliers_and_flat_stretches() -> None:
    rng = np.random.default_rng(9)
    noisy = rng.normal(0.0, 2.0, 4000)
    assert noise_sigma(noisy) == pytest.approx(2.0, rel=0.08)
    with_steps = noisy + np.repeat([0.0, 50.0, -30.0, 10.0], 1000)
    with_steps[::97] = 1e5
    assert noise_sigma(with_steps) == pytest.approx(2.0, rel=0.1)
    half_flat = np.concatenate([np.zeros(2000), noisy[:2000]])
    assert noise_sigma(half_flat) == pytest.approx(2.0, rel=0.1)
    assert noise_sigma(np.repeat([1.0, 3.0], 50)) == 0.0
    assert noise_sigma(np.zeros(20)) == 0.0


def test_step_reports_medians_and_effect() -> None:
    left = np.array([1.0, 2.0, 3.0, 2.0, 2.0, 100.0])
    right = np.array([5.0, 6.0, 6.0, 7.0, 6.0])
    s = step_between(left, right, 1.0, 2.0)
    assert (s.before, s.after) == (float(np.median(left)), float(np.median(right)))
    assert s.sigma == pytest.approx(np.sqrt((6 * 1.0 + 5 * 4.0) / 11))
    assert s.sigma == pooled_sigma(6, 1.0, 5, 2.0)
    assert s.relative == pytest.approx((s.after - s.before) / abs(s.before))
    assert s.effect == pytest.approx(abs(s.after - s.before) / s.sigma)
    flat = step_between(np.zeros(6), np.ones(6), 0.0, 0.0)
    assert flat.effect == float("inf") and flat.relative is None
    assert step_between(np.ones(6), np.ones(6), 0.0, 0.0).effect == 0.0


def test_segment_noise_is_measured_inside_each_segment() -> None:
    rng = np.random.default_rng(4)
    half = segment_half(5)
    assert _whole(np.zeros(60), 0.002, 5, half) == pytest.approx(
        np.sqrt(5 * 0.002**2 / 65)  # no noise of its own: only the shrinkage to the prior
    )
    noisy = np.asarray(0.01 + rng.normal(0.0, 0.002, 400), dtype=np.float64)
    assert _whole(noisy, 0.0, 0, half) == pytest.approx(0.002, rel=0.15)
    drifting = np.asarray(np.linspace(0.0, 0.05, 400) + rng.normal(0.0, 0.002, 400), np.float64)
    spread = MAD_TO_SIGMA * np.median(np.abs(drifting - np.median(drifting)))
    assert spread > 5 * 0.002  # spread around the median counts the drift
    assert _whole(drifting, 0.0, 0, half) == pytest.approx(0.002, rel=0.15)


def test_clean_removes_bad_runs_but_keeps_a_new_regime() -> None:
    x = np.concatenate([np.zeros(30), np.full(30, 10.0)]) + 0.1 * np.sin(np.arange(60))
    bad = x.copy()
    bad[[10, 40, 41]] = [50.0, -20.0, -20.0]  # a bad run, then two in a row
    cleaned = clean(bad, sigma=0.1, outlier_sigma=3.0, min_size=5)
    assert np.abs(cleaned[[10, 40, 41]] - x[[10, 40, 41]]).max() < 0.5
    assert np.array_equal(np.delete(cleaned, [10, 40, 41]), np.delete(bad, [10, 40, 41]))
    # the first runs after the step are far from the centred median, yet kept
    assert np.array_equal(clean(x, 0.1, 3.0, 5), x)


def test_step_margin_is_the_weakest_of_effect_significance_and_relative_change() -> None:
    s = Step(before=10.0, after=13.0, sigma=1.0, runs_before=8, runs_after=8)
    # effect 3 sigma over 2.0 -> 1.5; significance 8*8/16 * 3^2 = 36 over beta 9 -> sqrt 4 = 2
    assert step_margin(s, RegimeSettings(min_effect_sigma=2.0), beta=9.0) == 1.5
    assert step_margin(s, RegimeSettings(min_effect_sigma=1.0), beta=9.0) == 2.0
    # relative change 0.3 over 0.6 -> 0.5: too small a move, whatever its effect
    relative = RegimeSettings(min_effect_sigma=1.0, min_relative_change=0.6)
    assert step_margin(s, relative, beta=9.0) == 0.5
    assert step_margin(s, RegimeSettings(min_effect_sigma=1.0), beta=0.0) == 3.0
