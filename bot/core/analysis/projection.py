"""Where a metric's trend line meets a gate: how many runs until, at its present slope, a limit
fails (docs/limit-rule.md#under-a-trend).

Pure: a regime's :class:`~bot.core.models.Trend` is a least-squares line whose value at the
regime's newest run is ``last`` and which moves ``slope`` per run; run ``n`` after it lies at
``last + n * slope``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bot.core.analysis.references import band_of
from bot.core.models import Gate, Trend

__all__ = ["Bound", "gate_bounds", "runs_until", "runs_until_fails", "toward_failing"]

Bound = tuple[float, bool]
"""A limit and whether it is a lower bound (runs must stay above it) or an upper one."""


def runs_until(trend: Trend, limit: float, *, lower: bool) -> int | None:
    """Runs after the trend's newest until its line reaches ``limit`` (falling to it for a
    ``lower`` bound, rising to it for an upper one): 0 when the line is there already; None
    when the line is flat or moves away from the limit's failing side."""
    gap = trend.last - limit if lower else limit - trend.last
    if gap <= 0:
        return 0
    toward = -trend.slope if lower else trend.slope
    if toward <= 0:
        return None
    return math.ceil(gap / toward)


def gate_bounds(gate: Gate) -> list[Bound]:
    """The limits ``gate`` fails beyond: its value for a limit gate; the closed edges of its
    band for a reference gate."""
    if gate.kind != "reference":
        return [(gate.value, gate.is_lower_bound)]
    band = band_of(gate.value, gate.tolerance, gate.sides).band
    bounds: list[Bound] = []
    if band.band_low is not None:
        bounds.append((band.band_low, True))
    if band.band_high is not None:
        bounds.append((band.band_high, False))
    return bounds


def toward_failing(trend: Trend, gate: Gate) -> bool:
    """Whether the trend moves toward a side on which ``gate`` fails (down for a lower bound,
    up for an upper one, either way for a two-sided band)."""
    if trend.slope == 0:
        return False
    if gate.sides == "both":
        return True
    return (trend.slope < 0) == (gate.sides == "lower")


def runs_until_fails(trend: Trend, bounds: Sequence[Bound]) -> int | None:
    """The fewest runs until the trend line reaches any of ``bounds`` (None: it reaches none)."""
    found = [runs_until(trend, limit, lower=lower) for limit, lower in bounds]
    return min((n for n in found if n is not None), default=None)
