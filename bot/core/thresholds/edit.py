"""Rewrite gate literals in place: only the literal's characters change (for ``/rebaseline``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from bot.core.models import Gate
from bot.core.thresholds.errors import ThresholdFileError

_DECIMAL = re.compile(r"-?\d+(?:\.\d+)?")


def format_literal(value: float, decimals: int) -> str:
    """``value`` with exactly ``decimals`` decimals, never in exponent notation.

    ``format_literal(0.5, 2) == "0.50"``, ``format_literal(283, 0) == "283"``; a rounded
    negative zero is written ``0``.
    """
    if not math.isfinite(value):
        raise ValueError(f"cannot write {value} as a threshold literal")
    if decimals < 0:
        raise ValueError(f"decimals must be >= 0, not {decimals}")
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def replace_literals(text: str, edits: Sequence[tuple[Gate, str]]) -> str:
    """Replace each gate's literal with the new text; every other character stays as it was.

    Raises ``ThresholdFileError`` when the file no longer has a gate's literal at its span
    (the file changed since it was parsed), when a new literal is not a plain decimal
    number, or when two edits overlap (gates sharing one literal must get the same text).
    """
    by_span: dict[tuple[int, int], tuple[Gate, str]] = {}
    for gate, new in edits:
        if text[gate.start : gate.end] != gate.literal:
            reason = f"{gate.name}: expected {gate.literal!r} here; the file changed"
            raise ThresholdFileError(gate.file, gate.line, reason)
        if not _DECIMAL.fullmatch(new):
            raise ThresholdFileError(gate.file, gate.line, f"{gate.name}: {new!r} is not a number")
        span = (gate.start, gate.end)
        if span in by_span and by_span[span][1] != new:
            other = by_span[span][1]
            reason = f"{gate.name}: conflicting new values {other!r} and {new!r} for one literal"
            raise ThresholdFileError(gate.file, gate.line, reason)
        by_span[span] = (gate, new)
    result = text
    previous_start = len(text) + 1
    for (start, end), (gate, new) in sorted(by_span.items(), reverse=True):
        if end > previous_start:
            raise ThresholdFileError(gate.file, gate.line, f"{gate.name}: overlapping edits")
        result = result[:start] + new + result[end:]
        previous_start = start
    return result
