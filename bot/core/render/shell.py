"""Shell commands shown for copying: quoted once, and laid out so that pasted they run as
one command — on one line, or broken with a POSIX line continuation (a backslash ending the
line) wherever a line ends.

Pure text over argument vectors; the renderers choose where a command goes (a fenced block
in Markdown, its own lines on a terminal).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

__all__ = ["Argv", "continued", "one_line"]

Argv = tuple[str, ...]
"""A command as its arguments, unquoted: ``("threshold-bot", "rebaseline", "--file", …)``."""

CONTINUATION = " \\"  # ends every line of a command but its last
HANG = 2  # columns the lines after a command's first are indented by


def one_line(argv: Sequence[str]) -> str:
    """``argv`` as one line of shell, each argument quoted as it needs (``shlex.join``)."""
    return shlex.join(argv)


def _pieces(word: str, room: int) -> list[str]:
    """``word`` (unquoted) cut into pieces quoted alone, each at most ``room`` columns
    (where one character allows): written one after the other with nothing between, the
    shell reads them back as ``word``."""
    pieces: list[str] = []
    rest = word
    while rest:
        size = len(rest)
        while size > 1 and len(shlex.quote(rest[:size])) > room:
            size -= 1
        pieces.append(shlex.quote(rest[:size]))
        rest = rest[size:]
    return pieces


def continued(argv: Sequence[str], width: int, indent: int = 0) -> list[str]:
    """``argv`` as lines of at most ``width`` columns (where the width allows), the first
    indented by ``indent``, the others by ``HANG`` more; each line but the last ends with
    a backslash.  Lines break between arguments (`` \\``); an argument wider than a whole
    line is cut into pieces quoted alone, each line but its last ending with a bare ``\\``
    and the next starting at column 0 (a space there would end the argument).  Pasted into a
    POSIX shell, the lines are one command whose arguments are ``argv``."""
    lines: list[str] = []
    line, fresh = " " * indent, True  # fresh: nothing on the line but its indentation
    for i, word in enumerate(argv):
        quoted = shlex.quote(word)
        tail = 0 if i == len(argv) - 1 else len(CONTINUATION)
        if not fresh and len(line) + 1 + len(quoted) + tail > width:
            lines.append(line + CONTINUATION)
            line, fresh = " " * (indent + HANG), True
        if len(line) + len(quoted) + tail <= width or not fresh:
            line += quoted if fresh else " " + quoted
        else:  # wider than a whole line
            pieces = _pieces(word, max(1, width - len(line) - len(CONTINUATION)))
            for piece in pieces[:-1]:
                lines.append(line + piece + "\\")
                line = ""
            line += pieces[-1]
        fresh = False
    lines.append(line)
    return lines
