"""Per-step golden curves in JSON: a reference gate per curve.

PLACEHOLDER: being written (issue 12, part 4).
"""

from __future__ import annotations

from bot.core.models import ThresholdFile


def parse_curves(path: str, text: str) -> ThresholdFile | None:
    """The golden curves of a JSON file, or None when it is not one."""
    return None
