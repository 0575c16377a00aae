"""CSV threshold tables: a gate per row.

Declared in the config (``csv: {key: benchmark, value: expected, tolerance: noise_margin}``,
``bot.core.config.CsvDecl``): each row is a gate named by its ``key`` cell, on the metric
the ``metric`` template makes of the row (``{key}``, or ``{COLUMN}`` for any column's cell),
with the value cell's literal and exact span, the tolerance of the ``tolerance`` column
(relative unless ``absolute``; ``5%`` is 0.05, its span including the ``%``) and the kind,
op and sides the declaration gives (a reference is two-sided unless ``sides`` says
otherwise).  A table without a header row names its columns with ``columns``.

Without a declaration a table is recognised by its header only when that is unambiguous
(``bot.core.thresholds.tables.header``); any other table with numbers gives one hint
with the config lines that would declare it, never a guessed gate.

Spans: the ``csv`` module reads the records from the file's physical lines (``\\n``,
``\\r\\n`` or ``\\r``; a leading BOM is skipped), and each record's cells are located in its
text by the same quoting rules (a quoted cell's span is inside its quotes).
"""

from __future__ import annotations

import csv
import math
import re
from bisect import bisect_right
from dataclasses import dataclass

from bot.core.bounded import MAX_DIGITS
from bot.core.config import CsvDecl
from bot.core.models import Gate, Span, ThresholdFile, Tolerance, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.tables.header import (
    Layout,
    Lines,
    declared_layout,
    detected_layout,
    hint,
)

TABLE_SUFFIXES = frozenset({".csv"})
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_MISSING = frozenset({"", "nan", "-", "n/a", "na", "none", "null"})


@dataclass(frozen=True)
class Cell:
    """One cell: its text as ``csv`` reads it, and the span of its content in the file."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Row:
    """One record of the table (blank lines and ``#`` comment lines are not records)."""

    line: int
    cells: tuple[Cell, ...]


class _NotATable(Exception):
    """A recognised header over rows that are not a threshold table's (no declaration)."""


def _cell_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The content span of each cell of the record ``text[start:end]`` (excel dialect)."""
    if text.endswith("\r\n", start, end):
        end -= 2
    elif end > start and text[end - 1] in "\r\n":
        end -= 1
    spans, i = [], start
    while True:
        if i < end and text[i] == '"':
            j = i + 1
            while (j := text.find('"', j, end)) >= 0 and text.startswith('""', j):
                j += 2
            j = end if j < 0 else j
            spans.append((i + 1, j))
            comma = text.find(",", min(j + 1, end), end)
        else:
            comma = text.find(",", i, end)
            spans.append((i, comma if comma >= 0 else end))
        if comma < 0:
            return spans
        i = comma + 1


def read_rows(path: str, text: str) -> list[Row]:
    """The table's records with their cells' spans; ``ThresholdFileError`` for bad CSV."""
    begin = 1 if text.startswith("\ufeff") else 0
    lines = [(m.start(), m.end()) for m in _LINE.finditer(text, begin)]
    reader = csv.reader(text[s:e] for s, e in lines)
    rows, consumed = [], 0
    try:
        for values in reader:
            first, consumed = consumed, reader.line_num
            if not values or values[0].lstrip().startswith("#"):
                continue
            spans = _cell_spans(text, lines[first][0], lines[consumed - 1][1])
            if len(spans) != len(values):
                raise ThresholdFileError(path, first + 1, "cannot locate the cells of this row")
            cells = tuple(Cell(v, s, e) for v, (s, e) in zip(values, spans, strict=True))
            rows.append(Row(first + 1, cells))
    except csv.Error as exc:
        raise ThresholdFileError(path, reader.line_num or 1, f"not valid CSV: {exc}") from None
    return rows


class _Table:
    """Builds the gates and hints of one table from its layout."""

    def __init__(self, path: str, text: str, layout: Layout, declared: bool) -> None:
        self.path, self.text, self.layout, self.declared = path, text, layout, declared
        self._breaks = [m.start() for m in re.finditer("\r\n|\r|\n", text)]
        self.gates: list[Gate] = []
        self.unbound: list[UnboundVariable] = []
        self._seen: dict[tuple[str, str, str], int] = {}

    def fail(self, line: int, message: str) -> ThresholdFileError | _NotATable:
        return ThresholdFileError(self.path, line, message) if self.declared else _NotATable()

    def span(self, cell: Cell, *, percent: bool) -> Span | None:
        """The number in a cell (whitespace and, unless ``percent``, a ``%`` left out);
        None for an empty or nan cell; an error for anything else."""
        raw = self.text[cell.start : cell.end]
        stripped = raw.strip()
        if stripped.lower() in _MISSING:
            return None
        start = cell.start + raw.index(stripped)
        line = bisect_right(self._breaks, start - 1) + 1
        body = stripped.removesuffix("%")
        if stripped != cell.text.strip():  # stray quotes: csv reads other text than the span
            raise self.fail(line, f"{cell.text.strip()[:40]!r} is not a plainly written number")
        if not _NUMBER.fullmatch(body) or sum(c.isdigit() for c in body) > MAX_DIGITS:
            raise self.fail(line, f"{stripped[:40]!r} is not a number")
        if not math.isfinite(float(body)):
            raise self.fail(line, f"{stripped[:40]!r} is not a finite number")
        literal = stripped if percent else body
        return Span(literal=literal, start=start, end=start + len(literal), line=line)

    def tolerance(self, row: Row) -> Tolerance | None:
        found: dict[str, tuple[float, Span]] = {}
        for part, column in (("rel", self.layout.rel), ("abs", self.layout.abs)):
            span = self.span(row.cells[column], percent=True) if column is not None else None
            if span is not None:
                percent = span.literal.endswith("%")
                value = float(span.literal.removesuffix("%")) / (100 if percent else 1)
                found[part] = (value, span)
        if not found:
            return None
        rel, absolute = found.get("rel"), found.get("abs")
        return Tolerance(
            rel=rel[0] if rel else None,
            abs=absolute[0] if absolute else None,
            rel_span=rel[1] if rel else None,
            abs_span=absolute[1] if absolute else None,
        )

    def metric(self, row: Row, name: str) -> str:
        """The metric template with ``{key}`` and ``{COLUMN}`` filled from the row (the
        declaration's columns were checked: an unknown one is left as written)."""
        if self.layout.metric == "{key}":
            return name
        folded = [n.casefold() for n in self.layout.names]

        def cell(match: re.Match[str]) -> str:
            if match[1] == "key":
                return name
            if match[1].casefold() not in folded:
                return match[0]
            return row.cells[folded.index(match[1].casefold())].text.strip()

        return _PLACEHOLDER.sub(cell, self.layout.metric)

    def row(self, row: Row) -> None:
        if len(row.cells) <= self.layout.widest:
            need = self.layout.widest + 1
            raise self.fail(row.line, f"the row has {len(row.cells)} cells; {need} are needed")
        name = "/".join(row.cells[k].text.strip() for k in self.layout.key)
        if not name.strip("/"):
            raise self.fail(row.line, "the row has no name in its key column")
        metric, tolerance = self.metric(row, name), self.tolerance(row)
        for target in self.layout.targets:
            op = target.op or self.layout.row_op(tuple(c.text for c in row.cells))
            if op is None:
                shown = row.cells[self.layout.op_column or 0].text.strip()[:20]
                raise self.fail(row.line, f"{shown!r} is not an operator (>=, >, <=, <)")
            gate_name = f"{name}{target.suffix}"
            span = self.span(row.cells[target.column], percent=False)
            if span is None and len(self.layout.targets) > 1:
                continue  # a min / max table: no bound on this side
            if span is None:
                reason = f"no value in column {self.layout.names[target.column]!r}"
                self.hint(gate_name, row.line, row.cells[target.column].text.strip(), reason)
                continue
            first = self._seen.setdefault((gate_name, metric, op), row.line)
            if first != row.line:
                reason = f"listed twice: the row on line {first} is the gate"
                self.hint(gate_name, row.line, span.literal, reason)
                continue
            self.gates.append(
                Gate(
                    name=gate_name,
                    file=self.path,
                    line=span.line,
                    metric=metric,
                    op=op,
                    value=float(span.literal),
                    literal=span.literal,
                    start=span.start,
                    end=span.end,
                    kind=target.kind,
                    tolerance=tolerance if target.kind == "reference" else None,
                )
            )

    def hint(self, name: str, line: int, literal: str, reason: str) -> None:
        self.unbound.append(
            UnboundVariable(name=name, file=self.path, line=line, literal=literal, reason=reason)
        )


def _lines(rows: list[Row]) -> Lines:
    return [(row.line, tuple(c.text for c in row.cells)) for row in rows]


def parse_table(path: str, text: str, decl: CsvDecl | None) -> ThresholdFile | None:
    """The gates of a CSV table as ``decl`` declares it (None: recognised by its header).

    ``ThresholdFileError`` (naming the line) for a declared column the header lacks, a value
    or tolerance cell that is not a number, a row too short for the declared columns, or
    CSV that cannot be read.  Without ``decl``: None for a table that is not recognisably a
    threshold table and has no number, else its gates or a hint.
    """
    rows = read_rows(path, text)
    if not rows and not decl:
        return None
    lines = _lines(rows)
    if decl is not None:
        layout = declared_layout(path, lines, decl)
    elif (detected := detected_layout(lines)) is not None:
        layout = detected
    else:
        found = hint(path, lines)
        return ThresholdFile(path=path, unbound=(found,)) if found else None
    table = _Table(path, text, layout, declared=decl is not None)
    try:
        for row in rows if layout.headerless else rows[1:]:
            table.row(row)
    except _NotATable:
        found = hint(path, lines)
        return ThresholdFile(path=path, unbound=(found,)) if found else None
    if decl is None and not table.gates and not table.unbound:
        return None
    return ThresholdFile(path=path, gates=tuple(table.gates), unbound=tuple(table.unbound))
