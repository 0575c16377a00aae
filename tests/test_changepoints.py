"""Per-metric change points on small, hand-checked series: one test per robustness case."""

from __future__ import annotations

import numpy as np
import pytest

from bot.core.analysis.changepoints import detect, detect_changepoints
from bot.core.analysis.noise import FloatArray
from bot.core.models import RegimeSettings


def _steps(levels: list[float], lengths: list[int], sigma: float, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    parts = [
        level + rng.normal(0.0, sigma, size) for level, size in zip(levels, lengths, strict=True)
    ]
    return np.asarray(np.concatenate(parts), dtype=np.float64)


def _near(found: list[int], expected: list[int], tolerance: int = 2) -> bool:
    return len(found) == len(expected) and all(
        abs(f - e) <= tolerance for f, e in zip(found, expected, strict=True)
    )


@pytest.mark.parametrize("seed", range(5))
def test_single_step_is_found_where_it_is(seed: int) -> None:
    x = _steps([0.0, 8.0], [40, 40], 1.0, seed)
    assert _near(detect_changepoints(x), [40], tolerance=1)


@pytest.mark.parametrize("seed", range(5))
def test_pure_noise_has_no_change_point(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    assert detect_changepoints(rng.normal(5.0, 2.0, 300)) == []


def test_too_short_series_has_no_change_point() -> None:
    assert detect_changepoints([0.0, 0.0, 0.0, 9.0, 9.0, 9.0]) == []
    assert detect_changepoints([]) == []


@pytest.mark.parametrize("seed", range(5))
def test_single_bad_runs_are_not_change_points(seed: int) -> None:
    x = _steps([0.0], [120], 1.0, seed)
    x[[17, 60, 61, 100]] = [40.0, -35.0, -35.0, 1e6]  # one, two in a row, absurd
    assert detect_changepoints(x) == []


def test_outlier_next_to_a_step_does_not_move_it() -> None:
    x = _steps([0.0, 10.0], [50, 50], 1.0, 7)
    x[49] = 60.0  # a crashed-looking value on the last run before the step
    assert _near(detect_changepoints(x), [50], tolerance=1)


def test_constant_stretch_then_noisy_level() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([np.zeros(60), 0.01 + rng.normal(0.0, 0.002, 60)])
    assert detect_changepoints(x) == [60]


def test_piecewise_constant_metric_with_a_blip() -> None:
    x = np.array([0.0] * 30 + [0.25] + [0.0] * 29 + [1.0] * 30)
    assert detect_changepoints(x) == [60]


def test_constant_metric_has_no_change_point() -> None:
    assert detect_changepoints(np.full(200, 0.1234)) == []


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
def test_result_does_not_depend_on_the_scale(scale: float) -> None:
    x = _steps([1.0, 1.5, 0.8], [50, 30, 50], 0.1, 11)
    assert detect_changepoints(x * scale) == detect_changepoints(x)
    assert _near(detect_changepoints(x * scale), [50, 80])


@pytest.mark.parametrize("seed", range(5))
def test_heavy_tailed_noise_does_not_over_segment(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    x = rng.standard_t(2, 300)
    x[150:] += 8.0
    assert _near(detect_changepoints(x), [150])


def test_short_regime_of_five_runs() -> None:
    x = _steps([0.0, 6.0, 0.0], [40, 5, 40], 1.0, 5)
    assert _near(detect_changepoints(x), [40, 45], tolerance=1)


def test_regimes_shorter_than_the_minimum_are_not_reported() -> None:
    x = _steps([0.0, 20.0, 0.0], [40, 3, 40], 1.0, 5)
    assert detect_changepoints(x) == []
    assert _near(detect_changepoints(x, RegimeSettings(min_regime_runs=3)), [40, 43], 0)


@pytest.mark.parametrize("seed", range(5))
def test_small_real_step_of_three_sigma(seed: int) -> None:
    x = _steps([0.0, 3.0], [60, 60], 1.0, 300 + seed)
    assert _near(detect_changepoints(x), [60])


def test_min_effect_sigma_filters_small_steps() -> None:
    x = _steps([0.0, 3.0], [100, 100], 1.0, 1)
    assert detect_changepoints(x, RegimeSettings(min_effect_sigma=6.0)) == []


def test_min_relative_change_filters_small_relative_steps() -> None:
    x = _steps([100.0, 101.0], [60, 60], 0.1, 2)  # 10 sigma, but 1 %
    assert _near(detect_changepoints(x), [60])
    assert detect_changepoints(x, RegimeSettings(min_relative_change=0.05)) == []


@pytest.mark.parametrize("seed", range(3))
def test_autocorrelated_noise_does_not_over_segment(seed: int) -> None:
    rng = np.random.default_rng(400 + seed)
    e = rng.normal(0.0, 1.0, 400)
    x = np.empty_like(e)
    x[0] = e[0]
    for t in range(1, e.size):  # AR(1), rho 0.6, marginal sd 1
        x[t] = 0.6 * x[t - 1] + 0.8 * e[t]
    x[200:] += 6.0
    assert _near(detect_changepoints(x), [200])


@pytest.mark.parametrize("seed", range(3))
def test_slow_drift_is_not_a_change_point(seed: int) -> None:
    rng = np.random.default_rng(500 + seed)
    x = np.linspace(0.0, 2.0, 300) + rng.normal(0.0, 1.0, 300)  # 2 sigma over 300 runs
    assert detect_changepoints(x) == []
    x[150:] += 5.0
    assert _near(detect_changepoints(x), [150])


def test_detection_reports_effects_and_noise() -> None:
    x = _steps([10.0, 16.0, 13.0], [80, 80, 80], 1.0, 21)
    found = detect(x)
    assert _near(found.changepoints, [80, 160], tolerance=1)
    assert found.sigma == pytest.approx(1.0, rel=0.15)
    assert found.effects == pytest.approx([6.0, 3.0], rel=0.25)
    flat = detect(np.repeat([0.0, 1.0, 0.5], 40))
    assert flat.changepoints == [40, 80] and flat.effects == [np.inf, np.inf]
    assert flat.sigma == 0.0
