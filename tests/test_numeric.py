"""The analysis' numerical kernels give what SciPy's functions give (SciPy is the tests' oracle:
a dev dependency, not a dependency of the package)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage, stats

from bot.core.analysis.numeric import (
    NORMAL_MAD,
    _t_cdf,
    mad,
    moving_max,
    moving_median,
    t_quantile,
)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
series = arrays(np.float64, st.integers(1, 80), elements=finite)
# values that repeat, as metrics logged with few decimals do (ties inside windows)
coarse = arrays(np.float64, st.integers(1, 80), elements=st.integers(-5, 5).map(float))


@settings(max_examples=300, deadline=None)
@given(values=st.one_of(series, coarse), size=st.integers(1, 90))
def test_moving_max_is_scipys_maximum_filter(values: np.ndarray, size: int) -> None:
    nonnegative = np.abs(values)  # the change-point statistic is |z|: fill 0 is below it
    expected = ndimage.maximum_filter1d(nonnegative, size=size, mode="constant")
    assert np.array_equal(moving_max(nonnegative, size), expected)


@settings(max_examples=300, deadline=None)
@given(values=st.one_of(series, coarse), size=st.integers(1, 90))
def test_moving_median_is_scipys_median_filter(values: np.ndarray, size: int) -> None:
    expected = ndimage.median_filter(values, size=size, mode="nearest")
    assert np.array_equal(moving_median(values, size), expected)


@settings(max_examples=300, deadline=None)
@given(values=st.one_of(series, coarse))
def test_mad_is_scipys_normal_scaled_mad(values: np.ndarray) -> None:
    expected = stats.median_abs_deviation(values, scale="normal")
    assert mad(values) == pytest.approx(expected, rel=1e-15, abs=1e-300)


def test_normal_mad_is_one_over_the_normal_quartile() -> None:
    assert pytest.approx(1 / stats.norm.ppf(0.75), rel=1e-15) == NORMAL_MAD


@pytest.mark.parametrize("freedom", [*range(1, 41), 59, 99, 100, 257, 1000, 4999, 10_000])
def test_t_quantile_is_scipys_for_the_confidences_models_take(freedom: int) -> None:
    for p in (0.51, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9999):
        assert t_quantile(p, freedom) == pytest.approx(stats.t.ppf(p, freedom), rel=1e-10)
        assert t_quantile(1 - p, freedom) == pytest.approx(stats.t.ppf(1 - p, freedom), rel=1e-9)


def test_t_quantile_refuses_what_has_no_quantile() -> None:
    for p, freedom in ((0.0, 5), (1.0, 5), (0.9, 0), (float("nan"), 3)):
        with pytest.raises(ValueError):
            t_quantile(p, freedom)


def _series_sum(x: float, freedom: int) -> float:
    """The t distribution function's closed form (A&S 26.7.3-4), summed term by term."""
    theta = math.atan(x / math.sqrt(freedom))
    cosine2, total, term = math.cos(theta) ** 2, 1.0, 1.0
    odd = freedom % 2
    for k in range(1, (freedom - 1) // 2 if odd else freedom // 2):
        term *= cosine2 * (2 * k) / (2 * k + 1) if odd else cosine2 * (2 * k - 1) / (2 * k)
        total += term
    if odd:
        inside = theta + (math.sin(theta) * math.cos(theta) * total if freedom > 1 else 0.0)
        return 0.5 + 0.5 * (2.0 / math.pi * inside)
    return 0.5 + 0.5 * (math.sin(theta) * total)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0, 50), freedom=st.integers(1, 1200))
def test_the_t_distribution_function_is_its_series_to_the_bit(x: float, freedom: int) -> None:
    assert _t_cdf(x, freedom) == _series_sum(x, freedom)
