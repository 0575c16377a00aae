"""The numeric literals of a located YAML / JSON / TOML file: their exact spans, and the
placeholders marked in place.

A literal is a plain or quoted number (``0.56``, ``"283"``, ``1_000``, ``4.0e-2``), alone or
as the one item of a list (``[0.56]``); its span excludes the quotes and brackets, so that
``/rebaseline`` rewrites only the digits.  ``nan``, ``inf``,
numbers of more than ``MAX_DIGITS`` digits and anything else are refused with the line.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from bot.core.bounded import MAX_DIGITS
from bot.core.models import Span
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.located import Located
from bot.core.thresholds.structured.patterns import leaf_of, leaf_value
from bot.core.thresholds.structured.tree import Node, Scalar

NUMERIC = re.compile(r"[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?")
"""A number as the threshold files write it (no ``nan`` / ``inf``, no hexadecimal)."""
IGNORED_IN_CONFIG = "declared 'ignore' in the config"
IGNORED_IN_FILE = "marked '# threshold-bot: ignore' in the file"
_SHOWN = 60  # characters of a value quoted in an error


def is_number(node: Node | None) -> bool:
    """Whether a node is a leaf holding a number (plain or quoted)."""
    value = leaf_value(node)
    return value is not None and NUMERIC.fullmatch(value) is not None


class Literal(NamedTuple):
    """A numeric literal (unquoted) and where: a ``Span`` without its validation, for the
    many gates of a large file."""

    literal: str
    start: int
    end: int
    line: int

    def span(self) -> Span:
        """As a ``Span``."""
        return Span(literal=self.literal, start=self.start, end=self.end, line=self.line)


def literal_span(located: Located, node: Node, where: str) -> Span:
    """The numeric literal a node holds and where (``literal_at`` as a ``Span``)."""
    return literal_at(located, node, where).span()


def literal_at(located: Located, node: Node, where: str) -> Literal:
    """The numeric literal a node holds (unquoted) and where; ``ThresholdFileError`` naming
    ``where`` (its key path) and the line when it is a mapping, a list, or not a finite
    number."""
    if type(node) is list and len(node) == 1 and leaf_of(node[0]) is not None:
        node = node[0]  # [0.56]: the one number of a list
    if type(node) is Scalar:  # YAML and JSON: the common case, without a call
        start, end = node.start, node.end
    elif (leaf := leaf_of(node)) is not None:
        scalar = located.scalar(leaf, where)
        start, end = scalar.start, scalar.end
    else:
        kind = "mapping" if isinstance(node, dict) else "list"
        raise ThresholdFileError(located.path, None, f"{where} is a {kind}, not a number")
    raw = located.text[start:end]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        raw, start, end = raw[1:-1], start + 1, end - 1
    line = located.line(start)
    if len(raw) > MAX_DIGITS and sum(c.isdigit() for c in raw) > MAX_DIGITS:
        reason = f"{where}: {_shown(raw)} has more than {MAX_DIGITS} digits"
        raise ThresholdFileError(located.path, line, reason)
    if not NUMERIC.fullmatch(raw) or not math.isfinite(float(raw.replace("_", ""))):
        finite = raw.lower().strip(".+-") in ("nan", "inf", "infinity")
        what = "is not a finite number" if finite else "is not a number"
        raise ThresholdFileError(located.path, line, f"{where}: {_shown(raw)} {what}")
    return Literal(raw, start, end, line)


def _shown(raw: str) -> str:
    """A value quoted in an error, cut short."""
    return repr(raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "…")


def marked_ignore(located: Located, line: int) -> bool:
    """Whether the line carries ``# threshold-bot: ignore`` (YAML, TOML)."""
    return line in located.ignored_lines


def number(span: Span | Literal) -> float:
    """A literal's value (``1_000`` is 1000)."""
    return float(span.literal.replace("_", ""))
