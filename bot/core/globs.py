"""Globs of repository paths (``ci/**/*.yaml``), matched in time linear in the path by RE2:
the config's file globs and the rule's per-gate overrides."""

from __future__ import annotations

import re
from functools import lru_cache

from bot.core.bounded import MAX_PATTERN, LinearPattern, compile_linear

__all__ = ["CONTROL", "glob_match", "repo_path"]

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 (NUL too), DEL, C1


def _char_class(body: str) -> str | None:
    """``[body]`` of a glob as a regex class; None when it is not a valid one (``[z-a]``):
    the ``[`` is then literal."""
    body = "^" + body[1:] if body.startswith("!") else body
    klass = "[" + body.replace("\\", "\\\\").replace("[", "\\[") + "]"
    try:
        compile_linear(klass)
    except ValueError:
        return None
    return klass


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> LinearPattern:
    """The glob as an RE2 pattern: matching takes time linear in the path, however many
    ``*`` the glob has (a backtracking regex took minutes on ``*a*a*a*a*a*a*b.sh``)."""
    out, i = [], 0
    pattern = pattern.removeprefix("./")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif (
            pattern[i] == "["
            and (close := pattern.find("]", i + 2)) > 0
            and (klass := _char_class(pattern[i + 1 : close]))
        ):
            out.append(klass)
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return compile_linear("".join(out))


def glob_match(pattern: str, path: str) -> bool:
    """Match a repository-relative path: ``*`` within a directory, ``**`` across them.

    Time O(len(pattern) x len(path)) at worst.  ``ValueError`` for a glob too long for
    RE2 to compile (the config refuses globs of more than ``MAX_PATTERN`` characters).
    """
    return _glob_regex(pattern).fullmatch(path.removeprefix("./")) is not None


def repo_path(value: str) -> str:
    """A path or glob relative to the repository root, normalised (``./a//b/`` is ``a/b``).

    ``ValueError`` for one that is absolute, has a ``..`` segment, a backslash or a
    control character (NUL included), names nothing, or is longer than ``MAX_PATTERN``.
    """
    parts = [p for p in value.split("/") if p not in ("", ".")]
    problems = (
        (len(value) > MAX_PATTERN, f"longer than {MAX_PATTERN} characters"),
        (CONTROL.search(value) is not None, "control characters are not allowed"),
        ("\\" in value, "backslashes are not allowed (separate directories with /)"),
        (value.startswith("/"), "must be relative to the repository root, not absolute"),
        (".." in parts, "'..' is not allowed: paths stay inside the repository"),
        (not parts, "names no file"),
    )
    reason = next((reason for found, reason in problems if found), None)
    if reason is not None:
        shown = value if len(value) <= 60 else value[:60] + "…"
        raise ValueError(f"{shown!r}: {reason}")
    return "/".join(parts)
