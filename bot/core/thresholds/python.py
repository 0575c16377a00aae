"""Gates in Python test files, read with ``ast`` (never imported or run).

PLACEHOLDER: being written (issue 12, part 2).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from bot.core.models import ThresholdFile

PYTHON_SUFFIXES = frozenset({".py"})


def is_test_file(path: str) -> bool:
    """A Python test file by its name: ``test_*.py``, ``*_test.py`` or ``conftest.py``."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (
        name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
    )


def parse_python(path: str, text: str) -> ThresholdFile:
    """The gates of a Python test file (asserts, unittest asserts, golden constants)."""
    return ThresholdFile(path=path)
