"""One walk over a shell script's tokens: assignments, commands, quoted strings, comments.

Shared by the gate finder (``shell``), the W&B project finder (``shell_source``) and the
hints (``shell_hints``).  Nothing is executed or expanded.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, field

from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.shell.lexer import Heredoc, NestingError, Operator, Token, Word, lex
from bot.core.thresholds.shell.quoting import Part, unquote_part

NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_NUMBER = re.compile(NUMBER)
_DEFAULT = re.compile(rf"\$\{{(?P<var>[A-Za-z_]\w*):?[-=](?P<num>{NUMBER})\}}")
ASSIGN = re.compile(r"(?P<name>[A-Za-z_]\w*)(?P<append>\+?)=")
_NEWLINE = re.compile("\n")
_IGNORE = re.compile(r"threshold-bot:\s*ignore\b")
_SHOWN = 60  # characters of a value quoted in a reason
DECLARATIONS = frozenset({"export", "readonly", "declare", "local", "typeset"})
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac", "!", "{", "}"}
    | {"time", "function", "in", "for", "case", "select"}
)
_SEPARATORS = frozenset({"\n", ";", "&&", "||", "|", "&", "|&", "(", ")", ";;", ";&"})


@dataclass(frozen=True, slots=True)
class Assignment:
    """``NAME=value`` at command position; ``literal`` and its span when the value is a number."""

    name: str
    line: int
    value: str  # unquoted value text
    literal: str | None = None
    start: int = 0
    end: int = 0


@dataclass(slots=True)
class Scan:
    """What the walk found; ``marked``: lines with a ``# threshold-bot: ignore`` comment."""

    newlines: list[int]
    assignments: list[Assignment] = field(default_factory=list)
    commands: list[list[Word]] = field(default_factory=list)
    strings: list[Part | Heredoc] = field(default_factory=list)
    marked: set[int] = field(default_factory=set)
    tokens: list[Token] = field(default_factory=list)  # the lexer's, for ``follow``

    def line(self, offset: int) -> int:
        """The 1-based line of a file offset."""
        return line_of(self.newlines, offset)


def newline_offsets(text: str) -> list[int]:
    return [m.start() for m in _NEWLINE.finditer(text)]


def line_of(newlines: list[int], offset: int) -> int:
    return bisect_left(newlines, offset) + 1


def shown(value: str) -> str:
    """A value as a reason quotes it: ``repr``, cut to ``_SHOWN`` characters."""
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def marked(found: Scan, *lines: int) -> str:
    """Why a gate on ``lines`` is a placeholder: the first marked one (``""``: none)."""
    line = next((n for n in lines if n in found.marked), None)
    return f"marked '# threshold-bot: ignore' on line {line}" if line is not None else ""


def _assignment(word: Word, newlines: list[int]) -> Assignment | None:
    """``NAME=value`` as a word; the numeric literal's span when the value is one."""
    first = word.parts[0]
    match = ASSIGN.match(first.text) if first.kind == "plain" else None
    if match is None:
        return None
    name, rest = match["name"], first.text[match.end() :]
    value = ([Part("plain", rest, first.start + match.end())] if rest else []) + word.parts[1:]
    text = "".join(unquote_part(p) for p in value)
    if match["append"] or len(value) != 1:
        return Assignment(name, line_of(newlines, word.start), text)
    part = value[0]
    default = _DEFAULT.fullmatch(part.text) if part.kind != "single" else None
    if _NUMBER.fullmatch(part.text):
        start, end = part.start, part.start + len(part.text)
    elif default and default["var"] == name:  # NAME=${NAME:-0.56}
        start, end = part.start + default.start("num"), part.start + default.end("num")
    else:
        return Assignment(name, line_of(newlines, word.start), text)
    literal = part.text[start - part.start : end - part.start]
    if not math.isfinite(float(literal)):  # 1e999: no usable threshold
        return Assignment(name, line_of(newlines, word.start), text)
    return Assignment(name, line_of(newlines, start), text, literal, start, end)


def scan(path: str, text: str) -> Scan:
    """Walk the tokens: assignments at command position, command words, quoted strings,
    ignore markers.  ``ThresholdFileError`` when quotes and substitutions nest too deeply."""
    newlines = newline_offsets(text)
    try:
        lexed = lex(text)
    except NestingError as exc:
        raise ThresholdFileError(path, line_of(newlines, exc.offset), str(exc)) from None
    found = Scan(newlines, strings=list(lexed.heredocs), tokens=lexed.tokens)
    found.marked = {line_of(newlines, at) for at, note in lexed.comments if _IGNORE.search(note)}
    state, redirect = "start", False
    command: list[Word] = []
    for token in lexed.tokens:
        if isinstance(token, Operator):
            if token.text in _SEPARATORS:
                state, redirect = "start", False
                if command:
                    found.commands.append(command)
                    command = []
            elif not (token.text in ("<", ">") and command and command[0].unquoted() == "[["):
                redirect = token.text not in ("<<", "<<-")  # the lexer took the delimiter
            continue
        found.strings += [p for p in token.parts if p.kind != "plain"]
        if redirect or not token.parts:
            redirect = False
            continue
        assignment = _assignment(token, newlines) if state != "args" else None
        if assignment is not None:
            found.assignments.append(assignment)
            command.append(token)
        elif state == "decl" or (state == "start" and token.unquoted() in _KEYWORDS):
            pass
        elif state == "start" and token.unquoted() in DECLARATIONS:
            state = "decl"
        else:
            state = "args"
            command.append(token)
    if command:
        found.commands.append(command)
    return found
