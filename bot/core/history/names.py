"""Run-name filters (``SourceSpec.name_regex`` of file and MLflow sources), in linear time.

The pattern comes from a repository's config, so it is hostile: Python's ``re`` backtracks,
and ``(a+)+$`` takes exponential time on a name of thirty "a" and one "b".  The pattern
is matched by RE2 (``bot.core.bounded.compile_linear``), whose time is linear in the name;
its syntax is Python's minus backreferences and lookaround.  A pattern RE2 refuses, or one
longer than ``MAX_PATTERN`` characters, is refused with ``ValueError``.  W&B sources are
filtered by W&B's server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from bot.core.bounded import MAX_PATTERN, compile_linear


@lru_cache(maxsize=64)
def name_filter(pattern: str) -> Callable[[str], bool]:
    """A predicate: whether ``pattern`` is found in a run name (``re.search`` semantics).

    ``ValueError`` with the reason for a pattern that is invalid, too long, or not
    supported by RE2.
    """
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"longer than {MAX_PATTERN} characters")
    try:
        compiled = compile_linear(pattern)
    except ValueError as exc:
        raise ValueError(_reason(pattern, exc)) from None
    return lambda name: compiled.search(name) is not None


def _reason(pattern: str, refused: ValueError) -> str:
    """Python's reason when ``re`` rejects the pattern too (users know its messages),
    else RE2's."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    except RecursionError:  # nested too deeply for Python's parser as well
        pass
    return f"not supported by linear-time matching (RE2): {refused}"
