"""The threshold models' statistics over one window in decimal arithmetic
(docs/limit-rule.md#rounding): the review's limit, and the backtest's wherever its float
arithmetic could round otherwise (``limits.recompute_limits``).

Each run's value is taken in its shortest decimal form (``0.29``, not the binary
0.28999999999999998), so a statistic that is an order statistic or a linear combination of
the runs (the extreme, a percentile, the quartiles, the mean, the MAD, with the allowance) is
exact, and every model rounds from the same number ``minmax`` does. Square roots and the
models' constants (1.4826, Student's t) are taken at 40 and 17 significant digits (an
exact square root stays exact). The definitions are ``limit_models``' (numpy's, over many
windows at once): linear percentiles, the sample standard deviation, the guarantee never to
be stricter than the window's extreme.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Context, Decimal, localcontext

from bot.core.analysis.numeric import NORMAL_MAD, t_quantile
from bot.core.limit_model import LimitModel

__all__ = ["EXACT", "exact_decimal", "exact_limit"]

# exact arithmetic for any float: 17 significant digits, exponents within ±324
EXACT = Context(prec=2000)
# square roots (irrational but for perfect squares, which come out exact): 40 digits, far
# beyond a float's 17, at a fraction of EXACT's cost
ROOTS = Context(prec=40)


def exact_decimal(value: float) -> Decimal:
    """The shortest decimal that round-trips to ``value``."""
    return Decimal(repr(float(value)))


def _percentile(ordered: Sequence[Decimal], q: Decimal) -> Decimal:
    """The ``q``-th percentile of ``ordered`` (ascending), linear between runs (numpy's
    default)."""
    at = (len(ordered) - 1) * q / 100
    below = int(at)  # at >= 0
    if below + 1 >= len(ordered):
        return ordered[-1]
    low, high = ordered[below], ordered[below + 1]
    return low + (high - low) * (at - below)


def _median(ordered: Sequence[Decimal]) -> Decimal:
    return _percentile(ordered, Decimal(50))


def _mean(values: Sequence[Decimal]) -> Decimal:
    return sum(values, Decimal(0)) / len(values)


def _std(values: Sequence[Decimal]) -> Decimal:
    """The sample standard deviation (0 for one run)."""
    if len(values) < 2:
        return Decimal(0)
    mean = _mean(values)
    variance = sum(((v - mean) ** 2 for v in values), Decimal(0)) / (len(values) - 1)
    return variance.sqrt(context=ROOTS)


def _relative(level: Decimal, ordered: Sequence[Decimal], allowance: Decimal) -> Decimal:
    """``allowance·|level|``, or ``allowance·(max − min)`` where the level is 0."""
    return allowance * (abs(level) if level != 0 else ordered[-1] - ordered[0])


def _statistic(
    ordered: Sequence[Decimal], model: LimitModel, lower: bool, allowance: Decimal
) -> Decimal:
    """The model's unclamped limit of a lower (``lower``) or upper bound."""
    sign = -1 if lower else 1
    if model.name == "absolute":  # a side without a bound: the window's extreme
        return ordered[0] if lower else ordered[-1]
    if model.name in ("minmax", "percentile"):
        p = exact_decimal(model.p) if model.name == "percentile" else Decimal(0)
        level = _percentile(ordered, p if lower else 100 - p)
        return level + sign * _relative(level, ordered, allowance)
    if model.name == "iqr":
        q1, q3 = _percentile(ordered, Decimal(25)), _percentile(ordered, Decimal(75))
        return (q1 if lower else q3) + sign * exact_decimal(model.spread) * (q3 - q1)
    mean = _mean(ordered)
    if model.name == "zscore":
        if model.sigma == "mad":
            center = _median(ordered)
            sigma = exact_decimal(NORMAL_MAD) * _median(sorted(abs(v - center) for v in ordered))
        else:
            sigma = _std(ordered)
        return mean + sign * exact_decimal(model.spread) * sigma
    # prediction: the one-sided t interval for one more run
    n = len(ordered)
    if n < 2:
        return mean
    t = exact_decimal(t_quantile(model.confidence, n - 1))
    return mean + sign * t * _std(ordered) * (1 + Decimal(1) / n).sqrt(context=ROOTS)


def exact_limit(
    values: Sequence[float], model: LimitModel, lower: bool, allowance: float
) -> Decimal:
    """The model's unrounded limit of ``values`` (finite, at least one), never stricter than
    their extreme (``absolute``: the extreme; a bound on this side is the limit instead, the
    caller's), in decimal arithmetic on each value's shortest form."""
    with localcontext(EXACT):
        ordered = sorted(exact_decimal(v) for v in values)
        raw = _statistic(ordered, model, lower, exact_decimal(allowance))
        return min(raw, ordered[0]) if lower else max(raw, ordered[-1])
