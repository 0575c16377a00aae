"""How a shell script uses numeric variables that no comparison binds, in words.

``LOSS_THRESHOLD=2.5`` then ``python tests/check.py logs "$LOSS_THRESHOLD"`` is "passed to
check.py as a positional argument on line 12".  The review shows it with the config lines
that would declare the variable a gate (``hints.config_lines``): a program reading it is
a comparison this file does not show.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from bot.core.thresholds.shell.lexer import Heredoc, Word
from bot.core.thresholds.shell.scan import ASSIGN, Scan, shown

_REFERENCE = re.compile(r"\$\{?(?P<name>[A-Za-z_]\w*)")
_SCRIPT = (".py", ".sh", ".bash")
_TESTS = frozenset({"[", "[[", "test"})


def _program(words: list[str], upto: int) -> str:
    """The program a command runs: the first script among its words (``python x/check.py``,
    ``uv run tests/check.py``), a ``-m`` module, else its first word's base name."""
    names = [w for w in words[:upto] if not ASSIGN.match(w)] or words[:1]
    for i, word in enumerate(names):
        if word.endswith(_SCRIPT):
            return PurePosixPath(word).name
        if word == "-m" and i + 1 < len(names):
            return names[i + 1]
    return PurePosixPath(names[0]).name if names else "a command"


def _role(command: list[Word], index: int, name: str) -> str:
    """How ``command[index]`` passes ``$name`` on: as an option's value, ``key=…``, a
    positional argument, or inside a longer argument."""
    reference = re.compile(rf"\$(?:{name}|\{{{name}\}})")
    word = command[index].unquoted()
    if reference.fullmatch(word):
        before = command[index - 1].unquoted() if index > 0 else ""
        if before.startswith("-") and "=" not in before and len(before) > 1:
            return f"as {before}"
        return "as a positional argument"
    key, eq, rest = word.partition("=")
    if eq and reference.fullmatch(rest) and "$" not in key:
        return f"as {key}=…"
    return f"inside the argument {shown(word)}"


def _described(found: Scan, command: list[Word], index: int, name: str) -> str:
    words = [w.unquoted() for w in command]
    line = found.line(command[index].start)
    first = next((i for i, w in enumerate(words) if not ASSIGN.match(w)), None)
    if first is None:
        return f"copied into another variable on line {line}"
    if words[first] in _TESTS:
        return f"used in a shell test on line {line}"
    if index == first:
        return f"run as a command on line {line}"
    program = _program(words, index)
    return f"passed to {program} {_role(command, index, name)} on line {line}"


def variable_uses(found: Scan, names: set[str]) -> dict[str, str]:
    """The first use of each of ``names`` in a command or here-document, in words (one pass
    over the script); a name without such a use is absent."""
    uses: dict[str, str] = {}
    for command in found.commands:
        for index, word in enumerate(command):
            for part in word.parts:
                for match in _REFERENCE.finditer(part.text):
                    name = match["name"]
                    if name in names and name not in uses:
                        uses[name] = _described(found, command, index, name)
    for string in found.strings:
        if isinstance(string, Heredoc):
            for match in _REFERENCE.finditer(string.text):
                if match["name"] in names and match["name"] not in uses:
                    line = found.line(string.start + match.start())
                    uses[match["name"]] = f"used in a here-document on line {line}"
    return uses
