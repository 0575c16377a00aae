"""A series as a line of Unicode block glyphs, for the terminal review: ``▁▂▄█▆``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

GLYPHS = "▁▂▃▄▅▆▇█"
FLAT = GLYPHS[3]  # a constant series: every glyph at mid height


def _buckets(values: Sequence[float], width: int) -> list[float]:
    """``values`` as at most ``width`` values: one each when they fit, else the means of
    ``width`` consecutive buckets of (nearly) equal size, oldest first."""
    if len(values) <= width:
        return list(values)
    edges = [len(values) * i // width for i in range(width + 1)]
    return [math.fsum(values[a:b]) / (b - a) for a, b in pairwise(edges)]


def sparkline(values: Sequence[float], width: int) -> str:
    """``values`` (oldest first) as at most ``width`` glyphs: the lowest ``▁``, the highest
    ``█``, the others at the nearest of the eight heights between; more values than
    ``width`` are averaged in buckets.  Non-finite values are left out; none left, or
    ``width`` < 1: the empty string.  A constant series is a flat line of ``▄``."""
    finite = [v for v in values if math.isfinite(v)]
    if width < 1 or not finite:
        return ""
    shown = _buckets(finite, width)
    low, high = min(shown), max(shown)
    if high == low:
        return FLAT * len(shown)
    top = len(GLYPHS) - 1
    span = high / 2 - low / 2  # halves: no overflow between huge values of opposite signs
    return "".join(GLYPHS[round((v / 2 - low / 2) / span * top)] for v in shown)
