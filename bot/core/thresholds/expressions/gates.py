"""Gates from expression strings found in a file, with their spans in the file.

Each ``Located`` string is read with the expression grammar (``expression_grammar``;
nothing is evaluated) and each comparison of a metric's value with a numeric literal
becomes a gate (``expression_checks`` says which).  The gate's span is the literal's place
in the FILE: the string's characters carry the offsets where they are written (through
quoting and escapes), and a literal is accepted only when exactly its text is written there.

A gate is named by the compared side as written and the operator, without the literal
(``median(data["train/loss"]) <``), so that it pairs with itself at base and head when only
the literal changes; a name repeated in one file gets `` #2``, `` #3`` in file order.
A metric taken from the mapping key prefixes it (``val/loss: v['value'] <=``).
``context`` holds the whole expression.  Comparisons with ``==`` are reference gates with
no tolerance (``Tolerance(abs=0)``: exact); a step subscript (``data["x"]["10"]``) is a
one-point curve (``Gate.points``) at that step.  A generic ``value`` key takes the metric
from the mapping key holding the string (``val/loss: "v['value'] <= 3.3"``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.core.models import CurvePoint, Gate, Span, Tolerance, UnboundVariable
from bot.core.thresholds.expressions.checks import Check, read_checks
from bot.core.thresholds.expressions.grammar import MAX_EXPRESSION_CHARS, ExpressionError

MAY_COMPARE = re.compile(r"(?:[<>]=?|==)\s*[-+]?\.?\d")
"""A comparison with a number: only text with one is parsed."""
_METRIC_SIGN = re.compile(r"[\"']\s*\]|\w/\w|\w\s*\(")
_LOOKS_CHECKED = re.compile(
    r"\[\s*(?P<q>[\"'])(?P<metric>[^\"'\[\]\n]{1,200})(?P=q)\s*\]"
    r"[^\n]{0,200}?(?:[<>]=?|==)\s*(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?![\w.])"
)
_IGNORED = re.compile(r"[ \t]#[^\n]*threshold-bot:\s*ignore\b")
_GENERIC = frozenset({"value"})
_STRUCTURAL = frozenset(
    {"check", "checks", "condition", "conditions", "assert", "asserts", "assertion"}
    | {"assertions", "expr", "expression", "expressions", "criteria", "rule", "rules", "test"}
)
_CONTEXT_CHARS = 120


@dataclass(frozen=True, slots=True)
class Located:
    """A string as the program reading it sees it, with per character the file offset
    where it is written; ``key``: the mapping key holding it (YAML / JSON)."""

    text: str
    offsets: Sequence[int]
    key: str = ""
    hint: bool = True  # False: a command holding quoted checks, read one level down instead


def any_plausible(text: str) -> bool:
    """Whether some line of ``text`` has a comparison with a number and a metric's sign (a
    file without one is not parsed for expressions at all)."""
    for match in MAY_COMPARE.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        if _METRIC_SIGN.search(text, start, len(text) if end < 0 else end):
            return True
    return False


def plausible(text: str) -> bool:
    """Worth parsing: short enough, a comparison with a number, and something that may name
    a metric (a quoted subscript, a path with a slash, a call)."""
    return (
        len(text) <= MAX_EXPRESSION_CHARS
        and MAY_COMPARE.search(text) is not None
        and _METRIC_SIGN.search(text) is not None
    )


def _context(text: str, check: Check) -> str:
    shown = " ".join(text.split())
    shown = shown if len(shown) <= _CONTEXT_CHARS else shown[: _CONTEXT_CHARS - 1] + "…"
    if check.alternative:
        return f"{shown} (one side of an 'or': the check may pass on the other)"
    return shown


def _keyed(check: Check, key: str) -> bool:
    """Whether the check's metric is the mapping key holding it (a generic ``v['value']``)."""
    return check.metric in _GENERIC and bool(key) and key.lower() not in _STRUCTURAL


def _gate(path: str, text: str, found: Located, check: Check, lines: list[int]) -> Gate | None:
    """The gate of one check, when its literal is written verbatim in the file."""
    start, end = found.offsets[check.start], found.offsets[check.end - 1] + 1
    if text[start:end] != check.literal:
        return None  # written through escapes: no exact span to edit
    line = _line(lines, start)
    value = float(check.literal)
    points: tuple[CurvePoint, ...] = ()
    if check.step is not None:
        span = Span(literal=check.literal, start=start, end=end, line=line)
        points = (CurvePoint(step=check.step, value=value, span=span),)
    reference = check.op == "=="
    keyed = _keyed(check, found.key)
    return Gate(
        name=f"{found.key}: {check.subject} {check.op}" if keyed else f"{check.subject} {check.op}",
        file=path,
        line=line,
        metric=found.key if keyed else check.metric,
        op=check.op,
        value=value,
        literal=check.literal,
        start=start,
        end=end,
        kind="reference" if reference else "limit",
        tolerance=Tolerance(abs=0.0) if reference else None,
        aggregation=check.aggregation,
        last_steps=check.last_steps,
        points=points,
        context=_context(found.text, check),
    )


def _line(lines: list[int], offset: int) -> int:
    return bisect_left(lines, offset) + 1


def expression_gates(
    path: str, text: str, strings: Iterable[Located]
) -> tuple[list[Gate], list[UnboundVariable]]:
    """The gates in ``strings`` of a file and hints for literals compared with computed
    values (or in checks the grammar cannot read), in file order, names numbered."""
    lines = [m.start() for m in re.finditer("\n", text)]
    gates: dict[tuple[int, int], Gate] = {}
    hints: dict[int, UnboundVariable] = {}  # by the literal's offset in the file
    for found in strings:
        if not plausible(found.text):
            continue
        try:
            checks, unchecked = read_checks(found.text)
        except ExpressionError as exc:
            if found.hint and (hint := _unreadable(path, found, str(exc), lines)) is not None:
                hints.setdefault(hint[0], hint[1])
            continue
        for check in checks:
            gate = _gate(path, text, found, check, lines)
            if gate is not None:
                gates.setdefault((gate.start, gate.end), gate)
        for item in unchecked:
            at = found.offsets[item.start]
            hints.setdefault(
                at,
                UnboundVariable(
                    name=item.metric,
                    file=path,
                    line=_line(lines, at),
                    literal=item.literal,
                    reason=item.reason,
                ),
            )
    ordered = sorted(gates.values(), key=lambda g: g.start)
    bound = {at for g in ordered for at in range(g.start, g.end)}
    kept = [hint for at, hint in sorted(hints.items()) if at not in bound]
    return _numbered(ordered), kept


def _numbered(gates: list[Gate]) -> list[Gate]:
    seen: Counter[str] = Counter()
    named = []
    for gate in gates:
        seen[gate.name] += 1
        count = seen[gate.name]
        named.append(
            gate if count == 1 else gate.model_copy(update={"name": f"{gate.name} #{count}"})
        )
    return named


def _unreadable(
    path: str, found: Located, problem: str, lines: list[int]
) -> tuple[int, UnboundVariable] | None:
    """A hint for a string that looks like a check on a metric but does not parse."""
    match = _LOOKS_CHECKED.search(found.text)
    if match is None:
        return None
    at = found.offsets[match.start("num")]
    reason = f"looks like a check on {match['metric']!r} but cannot be read ({problem})"
    hint = UnboundVariable(
        name=match["metric"], file=path, line=_line(lines, at), literal=match["num"], reason=reason
    )
    return at, hint


def mark_ignored(gates: list[Gate], text: str) -> list[Gate]:
    """Gates whose line ends with a ``# threshold-bot: ignore`` comment, marked ignored."""
    marked = []
    for gate in gates:
        end = text.find("\n", gate.end)
        rest = text[gate.end : len(text) if end < 0 else end]
        if _IGNORED.search(rest):
            why = f"marked '# threshold-bot: ignore' on line {gate.line}"
            gate = gate.model_copy(update={"ignored": why})
        marked.append(gate)
    return marked
