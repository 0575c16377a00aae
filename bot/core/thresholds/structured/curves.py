"""Per-step golden curves in JSON: a reference gate per curve.

The shapes training functional tests write (one object per metric at the top level)::

    {"lm loss": {"start_step": 1, "end_step": 50, "step_interval": 5,
                 "values": {"1": 10.85, "6": 10.79, "11": "nan", ...}},
     "num-zeros": {...}}
    {"lm loss": {"start_step": 0, "end_step": 50, "step_interval": 5,
                 "values": [10.85, 10.79, ...]}}       # step = start_step + i * step_interval

A top-level object with an integer ``start_step`` and ``values`` (an object keyed by step,
or a list) whose values are numbers or ``"nan"`` is a curve; a JSON file with no curve is
not a golden-curve file (``None``), so a config that merely has a ``start_step`` is never
claimed.  Each curve is a reference gate (op ``==``, both sides) named and bound by its key,
with a ``CurvePoint`` per step (``"nan"``, ``NaN`` or ``null``: value None, the span of that
text); ``value`` / ``literal`` / span are the last step that has a value.  A curve whose
every value is nan is a hint in ``unbound``, as is a single number beside the curves
(``"iteration_timing_avg": 0.41``).  The tolerance is read from ``rtol`` / ``atol`` (or
``tolerance``, absolute) numbers in the curve's object or at the file's top level (with
their spans); otherwise the config's default applies (``discover``).

The file is hostile: nesting deeper than ``MAX_DEPTH`` and numbers of more than
``MAX_DIGITS`` digits are refused before ``json.loads`` (``bot.core.bounded``); the spans
come from a walk over text ``json.loads`` accepted, linear in its length.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from bot.core.config import CONFIG_PATH
from bot.core.models import Gate, Span, ThresholdFile, Tolerance, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.located import check_json

CURVE_SUFFIXES = frozenset({".json"})
# a string, a bracket, or an atom (number, true, NaN ...); commas and colons are skipped
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|[^\s{}\[\],:"]+')
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"-?\d{1,18}")
_STEP = re.compile(r"\d{1,18}")
_NAN_WORDS = frozenset({"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity"})
_NAN_ATOMS = frozenset({"NaN", "Infinity", "-Infinity", "null"})
_TOLERANCE_KEYS = {"rtol": "rel", "atol": "abs", "tolerance": "abs"}  # key -> side


@dataclass(frozen=True)
class _Leaf:
    """A JSON scalar as written: its span and text (quotes included for a string)."""

    start: int
    end: int
    raw: str


class _Lines:
    """1-based line numbers of offsets, in O(log n) each."""

    def __init__(self, text: str) -> None:
        self._breaks = [m.start() for m in re.finditer("\n", text)]

    def of(self, offset: int) -> int:
        return bisect_right(self._breaks, offset - 1) + 1


def _nodes(text: str) -> Any:
    """Text ``json.loads`` accepted as dicts, lists and ``_Leaf``s, in one pass over its
    tokens (no recursion: the stack holds the open containers and their pending keys)."""
    stack: list[tuple[dict[str, Any] | list[Any], list[str]]] = []
    root: Any = None
    for token in _TOKEN.finditer(text):
        first = token[0][0]
        if first in "{[":
            stack.append(({} if first == "{" else [], []))
            continue
        if first in "}]":
            value: Any = stack.pop()[0]
        elif first == '"' and stack and isinstance(stack[-1][0], dict) and not stack[-1][1]:
            raw = token[0]
            stack[-1][1].append(json.loads(raw) if "\\" in raw else raw[1:-1])
            continue  # a key: its value comes next
        else:
            value = _Leaf(token.start(), token.end(), token[0])
        if not stack:
            root = value
            continue
        container, pending = stack[-1]
        if isinstance(container, dict):
            container[pending.pop()] = value
        else:
            container.append(value)
    return root


def _tree(path: str, text: str) -> Any:
    """The file as nodes; ``ThresholdFileError`` for JSON that is invalid or out of bounds."""
    check_json(path, text)
    return _nodes(text)


def _golden(leaf: _Leaf) -> tuple[float | None, int, int] | None:
    """A golden value's number (None for nan) and the span of its text; None if it is
    neither a number nor a nan."""
    raw, start, end = leaf.raw, leaf.start, leaf.end
    if raw.startswith('"'):
        raw, start, end = raw[1:-1], start + 1, end - 1
        if raw.lower() in _NAN_WORDS:
            return None, start, end
    elif raw in _NAN_ATOMS:
        return None, start, end
    if not _NUMBER.fullmatch(raw):
        return None
    number = float(raw)
    return (number if math.isfinite(number) else None), start, end


def _integer(node: Any) -> int | None:
    if isinstance(node, _Leaf) and _INTEGER.fullmatch(node.raw):
        return int(node.raw)
    return None


def _steps(curve: dict[str, Any]) -> list[tuple[int, _Leaf]] | None:
    """The (step, value) pairs of a curve object, sorted by step; None if it is not one."""
    start, values = _integer(curve.get("start_step")), curve.get("values")
    if start is None or not values:
        return None
    if isinstance(values, dict):
        if not all(_STEP.fullmatch(k) and isinstance(v, _Leaf) for k, v in values.items()):
            return None
        return sorted(((int(k), v) for k, v in values.items()), key=lambda pair: pair[0])
    given = curve.get("step_interval")
    interval = 1 if given is None else _integer(given)
    if not isinstance(values, list) or interval is None or interval < 1:
        return None
    if not all(isinstance(v, _Leaf) for v in values):
        return None
    return [(start + i * interval, v) for i, v in enumerate(values)]


class _Reader:
    """Builds the gates and hints of one golden-curve file."""

    def __init__(self, path: str, text: str, tree: dict[str, Any]) -> None:
        self.path, self.text, self.tree, self.lines = path, text, tree, _Lines(text)
        self.gates: list[Gate] = []
        self.unbound: list[UnboundVariable] = []

    def span(self, start: int, end: int) -> dict[str, Any]:
        """A ``Span``'s fields (a file holds many: the gate validates them in one call)."""
        return {
            "literal": self.text[start:end],
            "start": start,
            "end": end,
            "line": self.lines.of(start),
        }

    def points(self, name: str, steps: list[tuple[int, _Leaf]]) -> list[dict[str, Any]] | None:
        """The curve's points (``CurvePoint`` fields); None when no value is a number or nan
        (not a curve); ``ThresholdFileError`` for a value that is neither in a curve that
        has numbers."""
        read = [(step, leaf, _golden(leaf)) for step, leaf in steps]
        if all(golden is None for _, _, golden in read):
            return None
        points = []
        for step, leaf, golden in read:
            if golden is None:
                line = self.lines.of(leaf.start)
                reason = f"{name}: the golden value of step {step} is {leaf.raw[:40]}, not a number"
                raise ThresholdFileError(self.path, line, reason)
            value, start, end = golden
            points.append({"step": step, "value": value, "span": self.span(start, end)})
        return points

    def tolerance(self, curve: dict[str, Any]) -> Tolerance | None:
        """``rtol`` / ``atol`` (or ``tolerance``: absolute) numbers in the curve's object,
        else at the file's top level."""
        found: dict[str, tuple[float, Span]] = {}
        for key, side in _TOLERANCE_KEYS.items():
            leaf = curve.get(key, self.tree.get(key))
            if leaf is None or side in found:
                continue
            golden = _golden(leaf) if isinstance(leaf, _Leaf) else None
            if golden is None or golden[0] is None:
                line = self.lines.of(leaf.start) if isinstance(leaf, _Leaf) else None
                raise ThresholdFileError(self.path, line, f"{key}: not a number")
            found[side] = (golden[0], Span(**self.span(golden[1], golden[2])))
        if not found:
            return None
        rel, absolute = found.get("rel"), found.get("abs")
        return Tolerance(
            rel=rel[0] if rel else None,
            abs=absolute[0] if absolute else None,
            rel_span=rel[1] if rel else None,
            abs_span=absolute[1] if absolute else None,
        )

    def curve(self, name: str, curve: dict[str, Any], points: list[dict[str, Any]]) -> None:
        checked = [p for p in points if p["value"] is not None]
        if not checked:
            reason = "every golden value is nan: no step can be compared"
            first = points[0]["span"]
            self.unbound.append(
                UnboundVariable(
                    name=name,
                    file=self.path,
                    line=first["line"],
                    literal=first["literal"],
                    reason=reason,
                )
            )
            return
        last = checked[-1]
        fields = {"name": name, "file": self.path, "metric": name, "value": last["value"]}
        gate = {**fields, **last["span"], "op": "==", "kind": "reference", "points": points}
        self.gates.append(Gate.model_validate({**gate, "tolerance": self.tolerance(curve)}))

    def single(self, name: str, leaf: _Leaf) -> None:
        """A number beside the curves: a hint, with the config lines that declare it."""
        golden = _golden(leaf)
        if golden is None or golden[0] is None:
            return
        span = Span(**self.span(golden[1], golden[2]))
        reason = "a single golden value beside the curves: only the curves are read as gates"
        self.unbound.append(
            UnboundVariable(
                name=name,
                file=self.path,
                line=span.line,
                literal=span.literal,
                reason=reason,
                config=_reference_lines(self.path, name),
            )
        )


def _reference_lines(path: str, key: str) -> str:
    """The ``files:`` entry declaring top-level ``key`` of ``path`` as a two-sided reference."""
    entry = f"{{key: {json.dumps(key)}, metric: {json.dumps(key)}, kind: reference, sides: both}}"
    lines = (f"# {CONFIG_PATH}", "files:", f"  - path: {json.dumps(path)}", "    gates:")
    return "\n".join((*lines, f"      - {entry}"))


def parse_curves(path: str, text: str) -> ThresholdFile | None:
    """The golden curves of a JSON file, or None when it is not one.

    ``ThresholdFileError`` for a file that names curves (``start_step`` and ``values``) but
    is not valid JSON, or whose curve holds a value that is neither a number nor nan.
    """
    if PurePosixPath(path).suffix.lower() not in CURVE_SUFFIXES:
        return None
    if '"start_step"' not in text or '"values"' not in text:
        return None  # cheap: most JSON files are not curves
    tree = _tree(path, text)
    if not isinstance(tree, dict):
        return None
    reader = _Reader(path, text, tree)
    curves = 0
    for name, node in tree.items():
        steps = _steps(node) if isinstance(node, dict) else None
        points = reader.points(name, steps) if steps else None
        if points is not None:
            curves += 1
            reader.curve(name, node, points)
    if not curves:
        return None
    for name, node in tree.items():
        if isinstance(node, _Leaf) and name not in _TOLERANCE_KEYS:
            reader.single(name, node)
    return ThresholdFile(path=path, gates=tuple(reader.gates), unbound=tuple(reader.unbound))
