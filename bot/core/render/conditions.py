"""What CI checks of a gate, in words: a limit's operator, a reference's band.

A limit gate reads ``metric ≥``; a reference gate reads as its CI checks it,
``metric ≈ 0.95 ±8% (≥ 0.874)`` (below the reference only), ``(≤ 1.026)`` (above it
only) or ``(0.874 – 1.026)`` (both sides).  Pure text over ``GateReview``; the numbers
are the bot's own, outside names are formatted by the caller.
"""

from __future__ import annotations

from bot.core.formatting import at_decimals
from bot.core.models import Band, GateReview, Tolerance

OP_SIGNS = {">=": "≥", ">": ">", "<=": "≤", "<": "<", "==": "="}
BAND_EXTRA_DECIMALS = 3  # a band edge shows up to this many decimals beyond the reference's


def band_number(value: float, decimals: int) -> str:
    """A band edge: at least ``decimals`` decimals, up to ``BAND_EXTRA_DECIMALS`` more to
    show it as computed: ``band_number(0.874, 2) == "0.874"``, ``(297.15, 0) == "297.15"``,
    ``(0.8740000000000001, 2) == "0.874"``."""
    text = f"{value:.{decimals + BAND_EXTRA_DECIMALS}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0").ljust(decimals, "0")
    text = f"{whole}.{fraction}" if fraction else whole
    return text.lstrip("-") if float(text) == 0 else text


def band_of(g: GateReview) -> Band | None:
    """The band around the proposed reference: the review's, else from the tolerance."""
    if g.proposed_band is not None:
        return g.proposed_band
    margin = g.tolerance.margin(g.proposed) if g.tolerance else 0.0
    return Band(
        band_low=None if g.sides == "upper" else g.proposed - margin,
        band_high=None if g.sides == "lower" else g.proposed + margin,
    )


def band_text(band: Band | None, decimals: int) -> str:
    """``≥ 0.874``, ``≤ 1.026`` or ``0.874 – 1.026`` (``—`` without a band)."""
    if band is None or (band.band_low is None and band.band_high is None):
        return "—"
    if band.band_high is None:
        return f"≥ {band_number(band.band_low or 0.0, decimals)}"
    if band.band_low is None:
        return f"≤ {band_number(band.band_high, decimals)}"
    low, high = band_number(band.band_low, decimals), band_number(band.band_high, decimals)
    return f"{low} – {high}"


def tolerance_text(tolerance: Tolerance | None) -> str:
    """``±8%``, ``±0.01``, ``±(0.01 + 8%)``; ``±0`` without a tolerance (an exact value)."""
    return tolerance.describe() if tolerance is not None else "±0"


def condition(g: GateReview, proposed: str) -> str:
    """What CI checks, after the metric: ``≥`` for a limit (its value is in its own
    column), ``≈ 0.95 ±8% (≥ 0.874)`` for a reference whose proposed value reads
    ``proposed``."""
    if g.kind != "reference":
        return OP_SIGNS[g.op]
    band = band_text(band_of(g), g.decimals)
    return f"≈ {proposed} {tolerance_text(g.tolerance)} ({band})"


def tolerance_too_tight(g: GateReview) -> bool:
    """Whether a reference gate's band, however centred, cannot hold the window: the rule
    needs a wider tolerance than the gate's (``recomputed_tolerance``)."""
    needed = g.recomputed_tolerance
    if g.kind != "reference" or needed is None:
        return False
    at = g.recomputed if g.recomputed is not None else g.proposed
    have = g.tolerance.margin(at) if g.tolerance else 0.0
    return needed.margin(at) > have


def rule_text(g: GateReview) -> str:
    """What the rule says: the limit, or the reference (with the tolerance it needs when
    the gate's is too tight: ``0.93 ±12%``); ``—`` without data."""
    value = at_decimals(g.recomputed, g.decimals)
    if tolerance_too_tight(g) and g.recomputed is not None:
        return f"{value} {tolerance_text(g.recomputed_tolerance)}"
    return value
