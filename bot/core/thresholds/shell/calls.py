"""The repository scripts a shell script runs: forward references for ``related`` files.

``python x.py``, ``python3 -m pkg.mod``, ``bash x.sh`` / ``sh x.sh``, ``./x.sh``,
``uv run [python] x.py``: each command's script, as repository-relative POSIX paths (as
written, ``./`` removed; also relative to the script's own directory when that differs;
a module as ``pkg/mod.py`` and ``pkg/mod/__main__.py``).  Lexed, never run; at most
``MAX_CALLS`` paths.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from bot.core.thresholds.shell.lexer import NestingError, Word
from bot.core.thresholds.shell.scan import ASSIGN, Scan, scan

MAX_CALLS = 32
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SCRIPT = (".py", ".sh", ".bash")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(frozen=True, slots=True)
class Call:
    """A command running a repository script: its candidate paths and its arguments."""

    paths: tuple[str, ...]
    args: list[Word]
    command: list[Word]


def _clean(path: str, here: str) -> tuple[str, ...]:
    if path.startswith("/") or "$" in path or ".." in path.split("/"):
        return ()
    path = posixpath.normpath(path)
    joined = posixpath.normpath(posixpath.join(here, path)) if here else path
    return tuple(dict.fromkeys((path, joined)))


def script_call(command: list[Word], here: str) -> Call | None:
    """The repository script ``command`` runs (paths relative to ``here`` too), if any."""
    words = [w.unquoted() for w in command]
    i = next((k for k, w in enumerate(words) if not ASSIGN.match(w)), len(words))
    if words[i : i + 2] == ["uv", "run"]:
        i += 2
        while i < len(words) and words[i].startswith("-"):
            i += 1
    if i >= len(words):
        return None
    first = posixpath.basename(words[i])
    if _PYTHON.fullmatch(first) or first in _SHELLS:
        i += 1
        while i < len(words) and words[i].startswith("-") and words[i] not in ("-m", "-c"):
            i += 1
        if words[i : i + 1] == ["-c"]:
            return None
        if words[i : i + 1] == ["-m"] and i + 1 < len(words) and _MODULE.fullmatch(words[i + 1]):
            module = words[i + 1].replace(".", "/")
            return Call((f"{module}.py", f"{module}/__main__.py"), command[i + 2 :], command)
    elif "/" not in words[i] and not words[i].endswith(".py"):
        return None
    if i < len(words) and words[i].endswith(_SCRIPT):
        paths = _clean(words[i], here)
        return Call(paths, command[i + 1 :], command) if paths else None
    return None


def calls(found: Scan, path: str) -> Iterator[tuple[int, Call]]:
    """Each command (by index in ``found.commands``) that runs a repository script."""
    here = posixpath.dirname(path)
    for index, command in enumerate(found.commands):
        call = script_call(command, here)
        if call is not None:
            yield index, call


def called_scripts(path: str, text: str) -> tuple[str, ...]:
    """The repository scripts ``text`` (the shell script at ``path``) runs."""
    try:
        found = scan(path, text)
    except (NestingError, ValueError):
        return ()
    paths = (p for _, call in calls(found, path) for p in call.paths)
    return tuple(dict.fromkeys(p for p in paths if p != path))[:MAX_CALLS]
