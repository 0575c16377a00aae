"""Literals inside expression strings (``'median(data["train/loss"]) < 1.1'``).

PLACEHOLDER: being written (issue 12, part 5).
"""

from __future__ import annotations

from bot.core.models import ThresholdFile


def structured_expressions(path: str, text: str) -> ThresholdFile:
    """Gates in the expression strings of a YAML / JSON file's string values."""
    return ThresholdFile(path=path)
