"""YAML / JSON / TOML threshold files recognised without configuration.

PLACEHOLDER: being written (issue 12, part 3).
"""

from __future__ import annotations

from bot.core.models import ThresholdFile


def detect_structured(path: str, text: str, *, named: bool) -> ThresholdFile | None:
    """Gates in shapes recognised without configuration; ``named``: the config names the file
    (then hints are given for metric-like literals even when no gate is found)."""
    return None
