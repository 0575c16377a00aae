"""The threshold models' statistics over windows of runs (docs/limit-rule.md#models).

Pure numpy over a 2-D array, one window per row (finite values; a shorter window padded at
its end with NaN), so the backtest computes thousands of limits at once and the review one;
rounding, the guarantee never to fail a run of the window, and the absolute bounds are
``limits``'.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from bot.core.analysis.numeric import NORMAL_MAD, t_quantile
from bot.core.limit_model import LimitModel

__all__ = ["model_limits", "statistic"]

Windows = npt.NDArray[np.float64]
Column = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _Rows:
    """A stack of windows and the reductions over each row: numpy's plain ones, or its
    NaN-ignoring ones when shorter windows are padded with NaN (the start of a history)."""

    values: Windows

    @cached_property
    def ragged(self) -> bool:
        return bool(np.isnan(self.values).any())

    @cached_property
    def count(self) -> Column:
        count: Column = np.isfinite(self.values).sum(axis=1).astype(np.float64)
        return count

    def reduce(self, name: str, **kwargs: object) -> Column:
        """``np.NAME`` over each row (``np.nanNAME`` when ragged)."""
        function = getattr(np, f"nan{name}" if self.ragged else name)
        out: Column = function(self.values, axis=1, **kwargs)
        return out

    def extreme(self, lower: bool) -> Column:
        return self.reduce("min" if lower else "max")

    def percentile(self, q: float | list[float]) -> Column:
        return self.reduce("percentile", q=q)


def _relative(level: Column, rows: _Rows, allowance: float) -> Column:
    """``allowance·|level|``, or ``allowance·(max − min)`` where the level is 0 (a relative
    allowance of 0 would be none)."""
    spread = rows.extreme(lower=False) - rows.extreme(lower=True)
    margin: Column = allowance * np.where(level != 0, np.abs(level), spread)
    return margin


def _std(rows: _Rows) -> Column:
    """The sample standard deviation of each row (0 for a single run)."""
    if not rows.ragged:
        if rows.values.shape[1] < 2:
            return np.zeros(rows.values.shape[0])
        plain: Column = rows.values.std(axis=1, ddof=1)
        return plain
    deviations = rows.values - rows.reduce("mean", keepdims=True)
    squares = np.nansum(deviations * deviations, axis=1)
    std: Column = np.sqrt(squares / np.maximum(rows.count - 1, 1))
    return std


def _sigma(rows: _Rows, robust: bool) -> Column:
    """The window's noise: ``1.4826·MAD`` (robust) or the sample standard deviation.

    The MAD of every row at once, over the NaN-padded rows (``numeric.mad`` is one series')."""
    if not robust:
        return _std(rows)
    center = rows.reduce("median", keepdims=True)
    mad: Column = NORMAL_MAD * _Rows(np.abs(rows.values - center)).reduce("median")
    return mad


def _prediction(rows: _Rows, confidence: float) -> Column:
    """Half-width of the one-sided t prediction interval for one more run (0 for one run)."""
    n = rows.count
    t = np.array([t_quantile(confidence, int(k) - 1) if k >= 2 else 0.0 for k in n])
    half: Column = t * _std(rows) * np.sqrt(1 + 1 / n)
    return half


def statistic(windows: Windows, model: LimitModel, lower: bool, allowance: float) -> Column:
    """Each row's limit by ``model`` alone, unrounded and unbounded (the bound on its side
    for ``absolute``, NaN when it has none there).  Rows may end in NaN padding."""
    rows = _Rows(windows)
    sign = -1.0 if lower else 1.0
    if model.name == "minmax":
        extreme = rows.extreme(lower)
        out: Column = extreme + sign * _relative(extreme, rows, allowance)
    elif model.name == "percentile":
        q = rows.percentile(model.p if lower else 100 - model.p)
        out = q + sign * _relative(q, rows, allowance)
    elif model.name == "zscore":
        sigma = _sigma(rows, robust=model.sigma == "mad")
        out = rows.reduce("mean") + sign * model.spread * sigma
    elif model.name == "prediction":
        out = rows.reduce("mean") + sign * _prediction(rows, model.confidence)
    elif model.name == "iqr":
        q1, q3 = rows.percentile([25, 75])
        out = (q1 if lower else q3) + sign * model.spread * (q3 - q1)
    else:  # absolute
        bound = model.min_limit if lower else model.max_limit
        out = np.full(windows.shape[0], np.nan if bound is None else bound)
    return out


def model_limits(windows: Windows, model: LimitModel, lower: bool, allowance: float) -> Column:
    """Each row's unrounded limit, never stricter than the row's extreme (the guarantee),
    except an ``absolute`` bound, kept as written (a side without one: the extreme)."""
    extreme = _Rows(windows).extreme(lower)
    raw = statistic(windows, model, lower, allowance)
    if model.name == "absolute":
        limits: Column = np.where(np.isnan(raw), extreme, raw)
        return limits
    limits = np.minimum(raw, extreme) if lower else np.maximum(raw, extreme)
    return limits
