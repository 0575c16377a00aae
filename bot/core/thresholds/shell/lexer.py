"""A small position-keeping shell lexer: words (with their quoted parts), operators, heredocs.

It recognises just enough of POSIX/bash syntax to find assignments and quoted strings
with their exact offsets: quoting, escapes, line continuations, comments, ``$(...)``,
``${...}``, backticks and here-documents.  It never executes or expands anything, and it
fails on one thing only: quotes and substitutions (``"``, ``$(``, ``${``, a backtick) nested
more than ``MAX_NESTING`` levels deep raise ``NestingError``.  Unterminated constructs run to
the end of the text.  Runs of ordinary characters are skipped with regular expressions, so
the cost is linear in the text and small per character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.core.thresholds.shell.quoting import Part, unquote_part

# longest first, so that ``<<-`` wins over ``<<`` and ``<``
OPERATORS: tuple[str, ...] = ("<<-", "<<<", "&&", "||", ";;", ";&", "|&", "<<", ">>", "<&")
OPERATORS += (">&", "&>", ">|", "<>", *";&|()<>")
_OPERATOR = re.compile("|".join(re.escape(o) for o in OPERATORS))  # first alternative wins
_WORD_END = frozenset(" \t\r\n;&|()<>")
_WORD_SPECIAL = re.compile(r"[ \t\r\n;&|()<>\\$'\"`]")  # where a word ends or quoting starts
_DOUBLE_SPECIAL = re.compile(r"[\\\"$`]")
_NESTED_SPECIAL = {
    "(": re.compile(r"[\\'\"()]"),
    "{": re.compile(r"[\\'\"{}]"),
    "`": re.compile(r"[\\`]"),
}
_ANSI_SPECIAL = re.compile(r"[\\']")
MAX_NESTING = 32
"""Quotes and substitutions nested deeper than this raise ``NestingError``."""


class NestingError(ValueError):
    """Quotes and substitutions nested more than ``MAX_NESTING`` levels; ``offset``: where."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        super().__init__(f"quotes and substitutions nested more than {MAX_NESTING} levels deep")


def _deeper(depth: int, offset: int) -> int:
    """One more level of nesting, opened at ``offset``; ``NestingError`` past the limit."""
    if depth >= MAX_NESTING:
        raise NestingError(offset)
    return depth + 1


@dataclass(slots=True)
class Word:
    """One shell word as a sequence of parts, with its source span."""

    start: int
    end: int = 0
    parts: list[Part] = field(default_factory=list)

    def unquoted(self) -> str:
        """The word as the shell passes it on: quotes removed, escapes applied, adjacent
        parts joined (``a"b"'c'$'\\x64'`` is ``abcd``); nothing is expanded."""
        return "".join(unquote_part(p) for p in self.parts)


@dataclass(frozen=True, slots=True)
class Operator:
    """A control or redirection operator, or a newline (``"\\n"``)."""

    text: str
    start: int


@dataclass(frozen=True, slots=True)
class Heredoc:
    """The body of a here-document; ``expands`` is False for a quoted delimiter."""

    text: str
    start: int
    expands: bool


Token = Word | Operator


@dataclass
class Lexed:
    """The tokens of a script, in order, its here-document bodies and its comments
    (offset of the ``#``, text up to the end of the line).

    A run of newlines (blank lines, comment lines) gives one newline operator."""

    tokens: list[Token]
    heredocs: list[Heredoc]
    comments: list[tuple[int, str]] = field(default_factory=list)


def skip_nested(text: str, i: int, opener: str, closer: str, depth: int = 1) -> int:
    """Given ``text[i]`` just after an opener, return the index after its matching closer.

    ``depth``: the nesting level of this construct (quotes inside it go one deeper).
    """
    count = 1  # unquoted openers and closers balance, as in ``$( (a) )``
    n = len(text)
    special = _NESTED_SPECIAL[opener]
    while (found := special.search(text, i)) is not None:
        i = found.start()
        c = text[i]
        if c == "\\":
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif c == '"':
            i = _close_double(text, i + 1, _deeper(depth, i)) + 1
        elif c == closer and (opener == "`" or count == 1):
            return i + 1
        else:
            count += -1 if c == closer else 1
            i += 1
    return n


def _skip_substitution(text: str, i: int, depth: int) -> int | None:
    """At ``$`` or a backtick, return the index after ``$(...)``, ``${...}`` or ``` `...` ```.

    ``depth``: the nesting level around it; the substitution is one level deeper.
    """
    if text.startswith("$(", i):
        return skip_nested(text, i + 2, "(", ")", _deeper(depth, i))
    if text.startswith("${", i):
        return skip_nested(text, i + 2, "{", "}", _deeper(depth, i))
    if text[i] == "`":
        return skip_nested(text, i + 1, "`", "`", _deeper(depth, i))
    return None


def _close_double(text: str, i: int, depth: int) -> int:
    """Given the index after an opening ``"`` (at nesting level ``depth``), return the
    closing one's (``len(text)`` if none)."""
    n = len(text)
    while (found := _DOUBLE_SPECIAL.search(text, i)) is not None:
        i = found.start()
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i
        elif (after := _skip_substitution(text, i, depth)) is not None:
            i = after
        else:
            i += 1
    return n


def _close_ansi(text: str, i: int) -> int:
    """Given the index after ``$'``, return the closing quote's (``len(text)`` if none)."""
    n = len(text)
    while (found := _ANSI_SPECIAL.search(text, i)) is not None and text[found.start()] == "\\":
        i = found.start() + 2
    return n if found is None else found.start()


def _read_word(text: str, i: int) -> tuple[Word, int]:
    word = Word(start=i)
    n = len(text)
    plain = i

    def flush(upto: int) -> None:
        if upto > plain:
            word.parts.append(Part("plain", text[plain:upto], plain))

    while i < n:
        found = _WORD_SPECIAL.search(text, i)  # skip ordinary characters at once
        i = n if found is None else found.start()
        if i == n or text[i] in _WORD_END:
            break
        c = text[i]
        if c == "\\" and text.startswith("\\\n", i):
            flush(i)
            i += 2
            plain = i
        elif c == "\\":
            i += 2
        elif c == "$" and text.startswith(("$'", '$"'), i):  # ANSI-C / locale quoting
            flush(i)
            quote = text[i + 1]
            end = _close_ansi(text, i + 2) if quote == "'" else _close_double(text, i + 2, 1)
            end = min(end, n)
            word.parts.append(Part("ansi" if quote == "'" else "double", text[i + 2 : end], i + 2))
            i = plain = min(end + 1, n)
        elif c in "'\"":
            flush(i)
            end = text.find("'", i + 1) if c == "'" else _close_double(text, i + 1, 1)
            end = n if end < 0 else min(end, n)
            word.parts.append(Part("single" if c == "'" else "double", text[i + 1 : end], i + 1))
            i = plain = min(end + 1, n)
        elif (after := _skip_substitution(text, i, 0)) is not None:
            i = after
        else:
            i += 1
    flush(min(i, n))
    word.end = min(i, n)
    return word, word.end


def _read_heredocs(
    text: str, i: int, pending: list[tuple[str, bool, bool]]
) -> tuple[list[Heredoc], int]:
    """Read the bodies of the pending here-documents starting at line offset ``i``."""
    bodies = []
    n = len(text)
    for delimiter, strip_tabs, expands in pending:
        start = i
        while i < n:
            end = text.find("\n", i)
            end = n if end < 0 else end
            line = text[i:end]
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                bodies.append(Heredoc(text[start:i], start, expands))
                i = min(end + 1, n)
                break
            i = end + 1
        else:
            bodies.append(Heredoc(text[start:n], start, expands))
            i = n
    return bodies, i


def lex(text: str) -> Lexed:
    """Split a shell script into words and operators, keeping every offset."""
    tokens: list[Token] = []
    heredocs: list[Heredoc] = []
    comments: list[tuple[int, str]] = []
    pending: list[tuple[str, bool, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("\\\n", i):
            i += 2
        elif c in " \t\r":
            i += 1
        elif c == "\n":
            last = tokens[-1] if tokens else None
            if not (isinstance(last, Operator) and last.text == "\n"):  # one per run
                tokens.append(Operator("\n", i))
            i += 1
            if pending:
                bodies, i = _read_heredocs(text, i, pending)
                heredocs += bodies
                pending = []
        elif c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append((i, text[i:end]))
            i = end
        elif c in ";&|()<>":
            op = m[0] if (m := _OPERATOR.match(text, i)) else c
            tokens.append(Operator(op, i))
            i += len(op)
            if op in ("<<", "<<-"):
                while i < n and text[i] in " \t":
                    i += 1
                word, i = _read_word(text, i)
                quoted = any(p.kind != "plain" or "\\" in p.text for p in word.parts)
                pending.append((word.unquoted(), op == "<<-", not quoted))
        else:
            word, i = _read_word(text, i)
            tokens.append(word)
    return Lexed(tokens, heredocs, comments)
