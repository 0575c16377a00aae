"""Shell quoting: what a word's parts stand for once the shell removed quotes and escapes,
and where each resulting character is written in the file (to edit a literal in place).

Nothing is expanded: ``$VAR`` and ``$(...)`` stay as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

PartKind = Literal["plain", "single", "double", "ansi"]  # ansi: ``$'...'``
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Part:
    """A run of a word's source: unquoted text or the content of one quoted string."""

    kind: PartKind
    text: str  # source text of the content, quotes excluded
    start: int  # offset of ``text`` in the file


_DOUBLE_ESCAPE = re.compile(r"\\([$`\"\\\n])")  # the only escapes inside "..."
_ANSI_ESCAPE = re.compile(
    r"\\(?:(?P<simple>[abeEfnrtv\\'\"?])|(?P<oct>[0-7]{1,3})|x(?P<hex>[0-9A-Fa-f]{1,2})"
    r"|u(?P<u4>[0-9A-Fa-f]{1,4})|U(?P<u8>[0-9A-Fa-f]{1,8})|c(?P<ctrl>.))",
    re.DOTALL,
)
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n"}
_ANSI_SIMPLE |= {"r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_char(match: re.Match[str]) -> str:
    """One escape of ``$'...'`` (bash's ANSI-C quoting) as the character it stands for."""
    if match["simple"]:
        return _ANSI_SIMPLE[match["simple"]]
    if match["ctrl"]:
        return chr(ord(match["ctrl"]) & 0x1F)
    code = (
        int(match["oct"], 8)
        if match["oct"]
        else int(match["hex"] or match["u4"] or match["u8"], 16)
    )
    return chr(code) if code <= 0x10FFFF else ""


def _double_char(match: re.Match[str]) -> str:
    return "" if match[1] == "\n" else match[1]  # backslash-newline continues the line


def unquote_part(part: Part) -> str:
    """The text a part stands for once the shell removed its quotes and escapes."""
    if part.kind == "single" or "\\" not in part.text:
        return part.text
    if part.kind == "double":
        return _DOUBLE_ESCAPE.sub(_double_char, part.text)
    if part.kind == "ansi":
        return _ANSI_ESCAPE.sub(_ansi_char, part.text)
    return _ESCAPE.sub(r"\1", part.text)


def _plain_char(match: re.Match[str]) -> str:
    return match[1]


_ESCAPES: dict[PartKind, tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = {
    "double": (_DOUBLE_ESCAPE, _double_char),
    "ansi": (_ANSI_ESCAPE, _ansi_char),
    "plain": (_ESCAPE, _plain_char),
}
_HEREDOC_ESCAPE = re.compile(r"\\([$`\\\n])")  # the only escapes in an unquoted-delimiter body


def decode(
    text: str, start: int, escape: re.Pattern[str], char: Callable[[re.Match[str]], str]
) -> tuple[str, list[int]]:
    """``text`` (written at offset ``start``) with each ``escape`` replaced by ``char(match)``,
    and per character of the result the offset where it is written (an escape's first)."""
    out: list[str] = []
    offsets: list[int] = []
    pos = 0
    for match in escape.finditer(text):
        out.append(text[pos : match.start()])
        offsets += range(start + pos, start + match.start())
        decoded = char(match)
        out.append(decoded)
        offsets += [start + match.start()] * len(decoded)
        pos = match.end()
    out.append(text[pos:])
    offsets += range(start + pos, start + len(text))
    return "".join(out), offsets


def unquote_offsets(part: Part) -> tuple[str, Sequence[int]]:
    """``unquote_part(part)`` and, per character, the file offset where it is written."""
    if part.kind == "single" or "\\" not in part.text:
        return part.text, range(part.start, part.start + len(part.text))
    escape, char = _ESCAPES[part.kind]
    return decode(part.text, part.start, escape, char)


def heredoc_offsets(text: str, start: int, expands: bool) -> tuple[str, Sequence[int]]:
    """A here-document's body (written at ``start``) as the command reads it: escapes
    removed when its delimiter is unquoted (``expands``), nothing expanded; and per
    character the file offset where it is written."""
    if not expands or "\\" not in text:
        return text, range(start, start + len(text))
    return decode(text, start, _HEREDOC_ESCAPE, _double_char)
