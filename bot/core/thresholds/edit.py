"""Rewrite literals in place: only the literal's characters change (for ``/rebaseline``).

A gate's own literal, its tolerance's, a coupled literal or a golden curve's step: each is a
``Span`` of the file text, rewritten by :func:`replace_spans`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

from bot.core.models import Gate, Span
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


class SpanEdit(NamedTuple):
    """Write ``new`` in place of the literal at ``span``; ``label`` names it in errors
    (``EVAL_MIN``, ``EVAL_MIN tolerance``)."""

    span: Span
    new: str
    label: str


def replace_spans(path: str, text: str, edits: Sequence[SpanEdit]) -> str:
    """Replace each span's literal with the new text; every other character stays as it was.

    Raises ``ThresholdFileError`` (naming ``path`` and the literal's line) when the file no
    longer has a literal at its span (the file changed since it was parsed), when a new
    literal is not a plain decimal number, or when two edits overlap (edits of one literal
    must have the same text).
    """
    by_span: dict[tuple[int, int], SpanEdit] = {}
    for edit in edits:
        span, new, label = edit
        if text[span.start : span.end] != span.literal:
            reason = f"{label}: expected {span.literal!r} here; the file changed"
            raise ThresholdFileError(path, span.line, reason)
        if not _DECIMAL.fullmatch(new):
            raise ThresholdFileError(path, span.line, f"{label}: {new!r} is not a number")
        key = (span.start, span.end)
        if key in by_span and by_span[key].new != new:
            other = by_span[key].new
            reason = f"{label}: conflicting new values {other!r} and {new!r} for one literal"
            raise ThresholdFileError(path, span.line, reason)
        by_span[key] = edit
    result = text
    previous_start = len(text) + 1
    for (start, end), edit in sorted(by_span.items(), reverse=True):
        if end > previous_start:
            raise ThresholdFileError(path, edit.span.line, f"{edit.label}: overlapping edits")
        result = result[:start] + edit.new + result[end:]
        previous_start = start
    return result


def replace_literals(text: str, edits: Sequence[tuple[Gate, str]]) -> str:
    """Replace each gate's literal with the new text (:func:`replace_spans` over the gates'
    own literals, errors naming the gate and its file)."""
    if not edits:
        return text
    path = edits[0][0].file
    return replace_spans(path, text, [SpanEdit(gate.span, new, gate.name) for gate, new in edits])
