"""Reference gates (docs/limit-rule.md#reference-gates): the band ``reference ± margin``,
open on the side that does not fail, and the rule that recomputes the reference.

A run passes when ``band_low <= x <= band_high`` (bounds inclusive, an open side always
passes). Band arithmetic is decimal on the shortest form of each float, as for limits, so
``0.95 ±8%`` has its floor at 0.874 and not at 0.87399999….
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

import numpy as np

from bot.core.analysis.limits import (
    EXACT,
    decimals_of,
    exact_decimal,
    limit_decimals,
    to_float,
    unit,
)
from bot.core.analysis.windows import BoolArray, FloatArray
from bot.core.models import Band, RuleSettings, Sides, Tolerance

__all__ = [
    "ExactBand",
    "band_mask",
    "band_of",
    "finite",
    "needed_tolerance",
    "recompute_reference",
]


@dataclass(frozen=True)
class ExactBand:
    """A band in exact decimals (None: the open side)."""

    low: Decimal | None
    high: Decimal | None

    @property
    def band(self) -> Band:
        """As floats, for the review."""
        return Band(
            band_low=None if self.low is None else to_float(self.low),
            band_high=None if self.high is None else to_float(self.high),
        )

    def looser_than(self, other: ExactBand) -> Decimal:
        """How far this band extends beyond ``other`` on its closed sides (the larger of
        the two for a two-sided band; negative: it is narrower)."""
        parts: list[Decimal] = []
        if self.low is not None and other.low is not None:
            parts.append(EXACT.subtract(other.low, self.low))
        if self.high is not None and other.high is not None:
            parts.append(EXACT.subtract(self.high, other.high))
        return max(parts, default=Decimal(0))


def _margin(reference: Decimal, tolerance: Tolerance | None) -> Decimal:
    """``abs + rel·|reference|`` exactly (no tolerance: 0)."""
    if tolerance is None:
        return Decimal(0)
    absolute = exact_decimal(tolerance.abs) if tolerance.abs is not None else Decimal(0)
    rel = exact_decimal(tolerance.rel) if tolerance.rel is not None else Decimal(0)
    return EXACT.add(absolute, EXACT.multiply(rel, abs(reference)))


def band_of(reference: float, tolerance: Tolerance | None, sides: Sides) -> ExactBand:
    """The band of a reference gate: ``[reference − margin, reference + margin]``, with only
    the failing sides closed (``lower``: only the floor; ``upper``: only the ceiling)."""
    ref = exact_decimal(reference)
    margin = _margin(ref, tolerance)
    low = EXACT.subtract(ref, margin) if sides in ("lower", "both") else None
    high = EXACT.add(ref, margin) if sides in ("upper", "both") else None
    return ExactBand(low, high)


def band_mask(values: FloatArray, band: Band) -> BoolArray:
    """True where a value lies outside ``band`` (NaN lies outside every band)."""
    inside = np.ones(values.shape, dtype=np.bool_)
    if band.band_low is not None:
        inside &= values >= band.band_low
    if band.band_high is not None:
        inside &= values <= band.band_high
    return ~inside


def finite(values: FloatArray) -> FloatArray:
    """The finite values of ``values``."""
    kept: FloatArray = values[np.isfinite(values)]
    return kept


def recompute_reference(
    values: FloatArray, literal: str, rule: RuleSettings
) -> tuple[float, int] | None:
    """The rule's reference over a window: its median (``rule.reference`` ``mean``: its mean),
    rounded to the nearest (halves away from zero) at ``literal``'s decimals, or more to show
    ``rule.significant_digits``; ``(reference, decimals)``, None when no value is finite."""
    kept = finite(values)
    if kept.size == 0:
        return None
    center = float(np.mean(kept) if rule.reference == "mean" else np.median(kept))
    decimals = limit_decimals(center, literal, rule.significant_digits)
    rounded = exact_decimal(center).quantize(unit(decimals), rounding=ROUND_HALF_UP, context=EXACT)
    return to_float(rounded), decimals


def _written_decimals(literal: str | None, value: float | None) -> int:
    """Decimals a tolerance is written with: its literal's, when the literal is the value as
    read (``8`` read as 8% is not), else those of the value's shortest form."""
    if literal is not None and value is not None:
        try:
            if float(literal) == value:
                return decimals_of(literal)
        except ValueError:
            pass
    return decimals_of(repr(value)) if value is not None and np.isfinite(value) else 0


def needed_tolerance(
    reference: float,
    values: FloatArray,
    tolerance: Tolerance | None,
    sides: Sides,
    significant_digits: int = 2,
) -> Tolerance | None:
    """The smallest tolerance of ``tolerance``'s form for which the band around ``reference``
    holds every finite value of ``values``: relative when it has a ``rel`` (its ``abs`` kept),
    else absolute; rounded up at the decimals of its literal, or more to show
    ``significant_digits``. None without a finite value."""
    kept = finite(values)
    if kept.size == 0:
        return None
    ref = exact_decimal(reference)
    need = Decimal(0)
    if sides in ("lower", "both"):
        need = max(need, EXACT.subtract(ref, exact_decimal(float(kept.min()))))
    if sides in ("upper", "both"):
        need = max(need, EXACT.subtract(exact_decimal(float(kept.max())), ref))
    if tolerance is not None and tolerance.rel is not None and ref != 0:
        fixed = exact_decimal(tolerance.abs) if tolerance.abs is not None else Decimal(0)
        rel = max(Decimal(0), EXACT.divide(EXACT.subtract(need, fixed), abs(ref)))
        span = tolerance.rel_span.literal if tolerance.rel_span else None
        return Tolerance(
            rel=_round_up(rel, span, tolerance.rel, significant_digits), abs=tolerance.abs
        )
    current = tolerance.abs if tolerance is not None else None
    span = tolerance.abs_span.literal if tolerance is not None and tolerance.abs_span else None
    return Tolerance(abs=_round_up(need, span, current, significant_digits))


def _round_up(value: Decimal, literal: str | None, current: float | None, digits: int) -> float:
    """``value`` rounded up at the decimals of the tolerance as written, or more for ``digits``
    significant digits."""
    written = _written_decimals(literal, current)
    decimals = max(written, digits - 1 - value.adjusted()) if value != 0 else written
    return to_float(value.quantize(unit(decimals), rounding=ROUND_CEILING, context=EXACT))
