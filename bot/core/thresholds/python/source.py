"""A Python file read for gates: parsed with bounds, and where each numeric literal is.

``ast`` reports columns in UTF-8 bytes; ``Source`` turns them into character offsets of
the text (what ``Span`` and ``/rebaseline`` use).  Nothing here imports or runs the file.
"""

from __future__ import annotations

import ast
import math
import re
from bisect import bisect_right

from bot.core.models import Span
from bot.core.thresholds.errors import ThresholdFileError

_NEWLINE = re.compile(r"\r\n?|\n")
_NUMBER = re.compile(r"-?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?")
_IGNORE = re.compile(r"#\s*threshold-bot:\s*ignore\b")
_NANS = frozenset({"nan", "NaN", "NAN"})
_BOM = "\ufeff"


def parse_module(path: str, text: str) -> ast.Module:
    """The module's syntax tree; ``ThresholdFileError`` for text that is not Python, or
    nested too deeply for the parser (its RecursionError / MemoryError)."""
    try:
        return ast.parse(text.removeprefix(_BOM), filename=path)
    except SyntaxError as exc:
        raise ThresholdFileError(path, exc.lineno, f"not valid Python: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ThresholdFileError(path, None, "not read: nested too deeply to parse") from None
    except ValueError as exc:  # NUL bytes
        raise ThresholdFileError(path, None, f"not valid Python: {exc}") from None


class Source:
    """The file's text with its line starts: spans of nodes, and ignore markers."""

    def __init__(self, text: str) -> None:
        self.text = text
        first = 1 if text.startswith(_BOM) else 0  # the parser never sees a byte-order mark
        self._starts = [first, *(m.end() for m in _NEWLINE.finditer(text))]
        self._numbers: dict[int, tuple[float, Span] | None] = {}
        self.ignored_lines = frozenset(
            bisect_right(self._starts, m.start()) for m in _IGNORE.finditer(text)
        )

    def _line(self, number: int) -> str:
        start = self._starts[number - 1]
        end = self._starts[number] if number < len(self._starts) else len(self.text)
        return self.text[start:end]

    def offset(self, line: int, column: int) -> int:
        """The character offset of ``ast``'s (line, byte column)."""
        if line < 1 or line > len(self._starts):
            return len(self.text)
        start = self._starts[line - 1]
        head = self.text[start : start + column]
        if head.isascii():
            return start + column
        encoded = self._line(line).encode("utf-8", "surrogatepass")[:column]
        return start + len(encoded.decode("utf-8", "ignore"))

    def segment(self, node: ast.AST) -> tuple[str, int, int, int] | None:
        """The node's text, its start and end offsets and its line."""
        line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if line is None or end_line is None or col is None or end_col is None:
            return None
        start, end = self.offset(line, col), self.offset(end_line, end_col)
        return self.text[start:end], start, end, line

    def number(self, node: ast.AST) -> tuple[float, Span] | None:
        """A numeric literal (``0.7``, ``-1e-3``, ``2``) as written, with its span; None for
        anything else (bools, complex, hexadecimal, ``- 0.5`` with a space)."""
        if not isinstance(node, ast.Constant | ast.UnaryOp):
            return None
        key = id(node)
        if key not in self._numbers:
            self._numbers[key] = self._number(node)
        return self._numbers[key]

    def _number(self, node: ast.AST) -> tuple[float, Span] | None:
        inner: ast.AST = node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = node.operand
        if not isinstance(inner, ast.Constant) or isinstance(inner.value, bool):
            return None
        if not isinstance(inner.value, int | float):
            return None
        found = self.segment(node)
        if found is None:
            return None
        literal, start, end, line = found
        if literal.startswith("+"):
            literal, start = literal[1:], start + 1
        if not _NUMBER.fullmatch(literal):
            return None
        value = float(literal)
        if not math.isfinite(value):
            return None
        return value, Span(literal=literal, start=start, end=end, line=line)

    def nan(self, node: ast.AST) -> Span | None:
        """A golden value written as not-a-number (``float("nan")``, ``math.nan``)."""
        is_nan = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in _NANS
        ) or (isinstance(node, ast.Attribute) and node.attr == "nan")
        found = self.segment(node) if is_nan else None
        if found is None:
            return None
        literal, start, end, line = found
        return Span(literal=literal, start=start, end=end, line=line)

    def is_ignored(self, *lines: int) -> int | None:
        """The first of ``lines`` that carries ``# threshold-bot: ignore``, if any."""
        return next((line for line in lines if line in self.ignored_lines), None)
