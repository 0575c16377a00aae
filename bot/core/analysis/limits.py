"""The limit rule (docs/limit-rule.md): the rule's model on the window (by default the
allowance below the min, above the max), rounded toward the permissive side at the precision
of the gate's literal (or 2 significant digits), within the model's absolute bounds.

Every model's arithmetic is done in ``Decimal`` on the shortest decimal form of each float
(``exact_models``), so values read from JSON as ``0.29`` are rounded as 0.29 and not as the
binary 0.28999999999999998, and ``percentile p=0`` rounds exactly as ``minmax``.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np
import numpy.typing as npt

from bot.core.analysis.exact_models import EXACT, exact_decimal, exact_limit
from bot.core.analysis.limit_models import model_limits
from bot.core.limit_model import LimitModel
from bot.core.models import COMPARISONS, LOWER_BOUND_OPS, Op, RuleSettings, passes

__all__ = [
    "EXACT",
    "decimals_of",
    "exact_decimal",
    "limit_decimals",
    "looser_by",
    "looser_than_rule",
    "recompute_limit",
    "recompute_limits",
    "rounding_step",
    "to_float",
    "unit",
]


def to_float(value: Decimal) -> float:
    """``value`` as a float, with negative zero folded to zero."""
    return float(value) + 0.0


def decimals_of(literal: str) -> int:
    """Decimals written in a numeric literal: ``"0.56"`` → 2, ``"283"`` → 0, ``"1e-3"`` → 3."""
    try:
        exponent = Decimal(literal.strip()).as_tuple().exponent
    except InvalidOperation as exc:
        raise ValueError(f"not a numeric literal: {literal!r}") from exc
    if not isinstance(exponent, int):  # NaN / infinity
        raise ValueError(f"not a finite numeric literal: {literal!r}")
    return max(0, -exponent)


def limit_decimals(unrounded: float, literal: str, significant_digits: int = 2) -> int:
    """Decimals ``p`` of a limit: those of ``literal``, or more to show ``significant_digits``."""
    written = decimals_of(literal)
    if unrounded == 0 or not np.isfinite(unrounded):
        return written
    needed = significant_digits - 1 - exact_decimal(unrounded).adjusted()
    return max(written, needed)


def unit(decimals: int) -> Decimal:
    """One unit in the last place at ``decimals`` decimals, exactly."""
    return Decimal(1).scaleb(-decimals)


def rounding_step(decimals: int) -> float:
    """One unit in the last place at ``decimals`` decimals: 2 → 0.01, 0 → 1."""
    return float(unit(decimals))


def _quantize(value: Decimal, decimals: int, rounding: str) -> Decimal:
    return value.quantize(unit(decimals), rounding=rounding, context=EXACT)


def _finite(values: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    finite: npt.NDArray[np.float64] = array[np.isfinite(array)]
    return finite


FLOAT_SLACK = 1e-9
"""Relative to the largest term, how near a rounding point (or a power of ten) a float limit
must lie for :func:`recompute_limits` to recompute it in decimal."""


def _bound_decimals(bound: float) -> int:
    """Decimals an absolute bound is written with: ``0.5`` → 1, ``300`` (read as 300.0) → 0."""
    exponent = exact_decimal(bound).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _bounded(limit: float, decimals: int, model: LimitModel) -> tuple[float, int]:
    """``limit`` within the model's ``min_limit``/``max_limit``, at the decimals a bound
    it lands on is written with."""
    low, high = model.min_limit, model.max_limit
    if low is not None and limit < low:
        return low + 0.0, max(decimals, _bound_decimals(low))
    if high is not None and limit > high:
        return high + 0.0, max(decimals, _bound_decimals(high))
    return limit, decimals


def _side_bound(model: LimitModel, lower: bool) -> float | None:
    """The bound that *is* the limit of an ``absolute`` model on this side, if it has one."""
    if model.name != "absolute":
        return None
    return model.min_limit if lower else model.max_limit


def recompute_limit(
    values: Sequence[float] | npt.NDArray[np.float64], op: Op, literal: str, rule: RuleSettings
) -> tuple[float, int] | None:
    """The rule's model on a window: ``(limit, decimals)``, or None when the window is empty.

    The result never fails a run of the window, also for strict operators and all-zero windows:
    if rounding lands exactly on the extreme value of a strict gate, it moves one step further;
    only an absolute bound (``min_limit``/``max_limit``) may, as written.  Non-finite values
    are ignored.  Exact: decimal arithmetic on the shortest form of each value.
    """
    array = _finite(values)
    if array.size == 0:
        return None
    lower = op in LOWER_BOUND_OPS
    model = rule.model
    bound = _side_bound(model, lower)
    if bound is not None:
        return bound + 0.0, max(decimals_of(literal), _bound_decimals(bound))
    extreme = float(array.min() if lower else array.max())
    exact = exact_limit(array.tolist(), model, lower, rule.allowance)
    decimals = limit_decimals(to_float(exact), literal, rule.significant_digits)
    limit = _quantize(exact, decimals, ROUND_FLOOR if lower else ROUND_CEILING)
    if not passes(extreme, op, to_float(limit)):  # a strict gate exactly on the extreme
        step = unit(decimals)
        limit = EXACT.subtract(limit, step) if lower else EXACT.add(limit, step)
    result = to_float(limit)
    if not passes(extreme, op, result):  # only with more decimals than a float holds
        result = float(np.nextafter(extreme, -np.inf if lower else np.inf))
    return _bounded(result, decimals, model)


def recompute_limits(
    windows: npt.NDArray[np.float64], op: Op, literal: str, rule: RuleSettings
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """:func:`recompute_limit` of each row of ``windows`` (rows of finite values, a shorter
    window padded at its end with NaN): the same limits and decimals, in float arithmetic
    where it cannot differ from the decimal one, by :func:`recompute_limit` where it could."""
    lower = op in LOWER_BOUND_OPS
    model = rule.model
    rows = windows.shape[0]
    written = decimals_of(literal)
    bound = _side_bound(model, lower)
    if bound is not None:
        places = max(written, _bound_decimals(bound))
        return np.full(rows, bound + 0.0), np.full(rows, places, dtype=np.int64)
    raw = model_limits(windows, model, lower, rule.allowance)
    extreme = np.nanmin(windows, axis=1) if lower else np.nanmax(windows, axis=1)
    # how far float arithmetic may stray from the decimal one: a billionth of the largest
    # term (the runs, the limit, its distance from the extreme), far above float error
    size = np.maximum(np.abs(raw), np.nanmax(np.abs(windows), axis=1))
    err = FLOAT_SLACK * np.maximum(size, np.abs(raw - extreme))
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.log10(np.abs(raw))
        needed = rule.significant_digits - 1 - np.floor(magnitude)
        slack = np.maximum(FLOAT_SLACK, err / np.abs(raw))
        near_power = (np.abs(magnitude - np.rint(magnitude)) <= slack) | (np.abs(raw) <= err)
    decimals = np.where(raw != 0, np.maximum(written, needed), written).astype(np.int64)
    # a tiny limit's scale overflows a float: such rows are doubtful, recomputed exactly below
    with np.errstate(over="ignore", invalid="ignore"):
        scale = 10.0 ** decimals.astype(np.float64)
        scaled = raw * scale
        rounded = np.floor(scaled) if lower else np.ceil(scaled)
        limits = rounded / scale
        failing = ~COMPARISONS[op](extreme, limits)
        limits = np.where(failing, (rounded + (-1 if lower else 1)) / scale, limits)
        doubtful = (
            (np.abs(scaled - np.rint(scaled)) <= np.maximum(FLOAT_SLACK, err * scale))
            | near_power
            | (decimals > 15)
            | (np.abs(rounded) >= 2.0**52)
            | ~COMPARISONS[op](extreme, limits)
        )
    for row in np.flatnonzero(doubtful):
        found = recompute_limit(windows[row], op, literal, rule)
        assert found is not None  # a row holds values
        limits[row], decimals[row] = found
    if model.min_limit is not None or model.max_limit is not None:
        for row in np.flatnonzero(~doubtful):
            limits[row], decimals[row] = _bounded(float(limits[row]), int(decimals[row]), model)
    return limits, decimals


def _looseness(proposed: float, recomputed: float, op: Op) -> Decimal:
    delta = EXACT.subtract(exact_decimal(recomputed), exact_decimal(proposed))
    return delta if op in LOWER_BOUND_OPS else -delta


def looser_by(proposed: float, recomputed: float, op: Op) -> float:
    """How much more permissive ``proposed`` is than ``recomputed`` (negative: stricter)."""
    return to_float(_looseness(proposed, recomputed, op))


def looser_than_rule(proposed: float, recomputed: float, decimals: int, op: Op) -> bool:
    """Whether ``proposed`` is looser than ``recomputed`` by more than one rounding step."""
    return _looseness(proposed, recomputed, op) > unit(decimals)
