"""The few numerical kernels the analysis needs beyond numpy, written in numpy.

Each gives what SciPy's function of the same purpose gives (the tests compare them on random
data): a moving maximum (``scipy.ndimage.maximum_filter1d``, constant mode), a moving median
(``scipy.ndimage.median_filter``, nearest mode), the normal-scaled MAD
(``scipy.stats.median_abs_deviation(scale="normal")``) and Student's t quantile for whole
degrees of freedom (``scipy.stats.t.ppf``).  Why not SciPy itself: docs/stack.md ("Why the
analysis does not use SciPy").
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

__all__ = ["NORMAL_MAD", "mad", "moving_max", "moving_median", "t_quantile"]

FloatArray = NDArray[np.float64]

_MAD_QUARTILE = NormalDist().inv_cdf(0.75)  # the MAD of a standard normal: 0.6745
NORMAL_MAD = 1.0 / _MAD_QUARTILE  # σ per MAD of normal noise: 1.4826


def moving_max(values: FloatArray, size: int, fill: float = 0.0) -> FloatArray:
    """The maximum of each window of ``size`` values, the window of index ``i`` starting at
    ``i - size // 2``; outside the array the values are ``fill``.  O(n) whatever ``size``
    (van Herk / Gil-Werman: block prefix and suffix maxima)."""
    n = values.size
    if n == 0 or size <= 1:
        return np.array(values, dtype=np.float64)
    left = size // 2
    blocks = -(-(n + size - 1) // size) + 1
    padded = np.full(blocks * size, fill, dtype=np.float64)
    padded[left : left + n] = values
    rows = padded.reshape(blocks, size)
    prefix = np.maximum.accumulate(rows, axis=1).ravel()
    suffix = np.maximum.accumulate(rows[:, ::-1], axis=1)[:, ::-1].ravel()
    start = np.arange(n)
    result: FloatArray = np.maximum(suffix[start], prefix[start + size - 1])
    return result


def moving_median(values: FloatArray, size: int) -> FloatArray:
    """The median of each window of ``size`` values, the window of index ``i`` starting at
    ``i - size // 2``, the array extended by repeating its end values; an even window takes
    the upper of its two middle values (a rank filter, as SciPy's ``median_filter``)."""
    n = values.size
    if n == 0 or size <= 1:
        return np.array(values, dtype=np.float64)
    left = size // 2
    padded = np.pad(np.asarray(values, dtype=np.float64), (left, size - 1 - left), mode="edge")
    windows = np.sort(sliding_window_view(padded, size), axis=1)
    result: FloatArray = np.ascontiguousarray(windows[:, size // 2])
    return result


def mad(values: FloatArray) -> float:
    """The median absolute deviation scaled to a normal sample's standard deviation."""
    if values.size == 0:
        return math.nan
    center = float(np.median(values))
    return float(np.median(np.abs(values - center))) / _MAD_QUARTILE


@lru_cache(maxsize=1024)
def t_quantile(p: float, freedom: int) -> float:
    """Student's t quantile: the ``x`` with ``P(T <= x) = p`` for ``freedom`` ≥ 1 degrees of
    freedom, ``0 < p < 1``.  The distribution function is the closed form for whole degrees
    of freedom (Abramowitz & Stegun 26.7.3-4, sums of positive terms), inverted by bisection
    to the last bit; cached per ``(p, freedom)``."""
    if not 0.0 < p < 1.0 or freedom < 1:
        raise ValueError(f"t_quantile: p={p}, freedom={freedom}: need 0 < p < 1, freedom >= 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, freedom)
    if p == 0.5:
        return 0.0
    high = 1.0
    while _t_cdf(high, freedom) < p:
        high *= 2.0
    low = 0.0
    while True:
        middle = 0.5 * (low + high)
        if middle in (low, high):
            return high
        if _t_cdf(middle, freedom) < p:
            low = middle
        else:
            high = middle


def _t_cdf(x: float, freedom: int) -> float:
    """``P(T <= x)`` for ``x`` ≥ 0 and whole ``freedom``.

    The series' terms are running products and its sum a running sum (numpy's
    ``accumulate``: the same operations in the same order as a loop, so the same bits)."""
    theta = math.atan(x / math.sqrt(freedom))
    sine, cosine2 = math.sin(theta), math.cos(theta) ** 2
    if freedom % 2:  # odd: 2/π · (θ + sinθ cosθ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …))
        k = np.arange(1, (freedom - 1) // 2, dtype=np.float64)
        factors = cosine2 * (2 * k) / (2 * k + 1)
    else:  # even: sinθ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …)
        k = np.arange(1, freedom // 2, dtype=np.float64)
        factors = cosine2 * (2 * k - 1) / (2 * k)
    terms = np.multiply.accumulate(np.concatenate(([1.0], factors)))
    total = float(np.add.accumulate(terms)[-1])
    if freedom % 2:
        inside = theta + (sine * math.cos(theta) * total if freedom > 1 else 0.0)
        area = 2.0 / math.pi * inside
    else:
        area = sine * total
    return 0.5 + 0.5 * area
