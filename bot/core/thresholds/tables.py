"""CSV threshold tables: a gate per row.

PLACEHOLDER: being written (issue 12, part 6).
"""

from __future__ import annotations

from bot.core.config import CsvDecl
from bot.core.models import ThresholdFile

TABLE_SUFFIXES = frozenset({".csv"})


def parse_table(path: str, text: str, decl: CsvDecl | None) -> ThresholdFile | None:
    """The gates of a CSV table as ``decl`` declares it (None: recognised by its header)."""
    return None
