"""Which comparisons of an expression string are gates: a metric's value against a literal.

A comparison is read as ``metric op literal`` when one side is a numeric literal (a sign
written right before it belongs to it: ``> -1e-3``) and the other a metric's value:

* a bare metric path ``eval/all/avg_score`` (a plain name, ``acc``, is not: ``NR > 1`` in
  awk, ``python>=3.10`` in a requirements list);
* a subscript with a string key on a name: ``data["train/loss"]`` -> ``train/loss``,
  ``x['acc']`` -> ``acc``, ``metrics.get("f1")`` -> ``f1``; nested string keys join with
  ``/`` (``results["gsm8k"]["em"]`` -> ``gsm8k/em``, as nested history values are read);
* a step of it: ``data["train/loss"]["10"]`` (the value at step 10), ``[-1]`` (the last);
* an aggregation of it: ``mean`` / ``avg`` / ``average`` / ``median`` / ``min`` / ``max`` /
  ``last``, also as ``np.`` / ``numpy.`` / ``statistics.`` / ``torch.`` functions or as
  methods (``data["x"].mean()``), over all steps or the last N (``[-5:]``); further numeric
  or keyword arguments (``mean(data["x"], -6, -1)``, ``exclude_outliers=5``: a project's
  own helpers) are not interpreted: the aggregation is recorded over all steps;
* ``abs(...)``, ``float(...)``, ``round(...)`` around any of these are read through (a
  gate ``abs(median(x)) < 0.05`` is judged as ``median(x) < 0.05``).

The literal on the left flips the operator (``0.5 <= m`` is ``m >= 0.5``); ``not`` negates
it; a chain ``0.1 < m < 0.9`` gives two gates.  ``==`` gives an exact reference gate;
``!=``, ``in`` and ``is`` give none.  Comparisons under an ``or`` are gates marked
``alternative`` (the check may pass on the other side).  Counters are not gates: a
comparison on ``epoch``, ``step``, ``iteration``, ``global_step`` (and plurals) only says
when a check applies.  A comparison with a literal whose other side names a metric but is
computed (``len(data["x"]) > 3``, ``(a - b) / a > 0.2``) is returned as ``Unchecked``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import cast

from bot.core.bounded import MAX_DIGITS
from bot.core.models import Aggregation, Op
from bot.core.thresholds.expressions.grammar import Node, parse

COUNTERS = frozenset(
    {"epoch", "epochs", "step", "steps", "global_step", "iteration", "iterations", "iter"}
)
"""Subscript keys (last path segment) that count progress: comparisons on them are no gates."""
_AGGREGATIONS: dict[str, Aggregation] = {
    "mean": "mean",
    "avg": "mean",
    "average": "mean",
    "fmean": "mean",
    "nanmean": "mean",
    "median": "median",
    "nanmedian": "median",
    "min": "min",
    "amin": "min",
    "nanmin": "min",
    "max": "max",
    "amax": "max",
    "nanmax": "max",
    "last": "last",
}
_MODULES = frozenset({"", "np", "numpy", "statistics", "torch"})
_READ_THROUGH = frozenset({"abs", "float", "round"})
_MIRRORED: dict[str, Op] = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}
_NEGATED: dict[str, str] = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_SHOWN = 80


@dataclass(frozen=True, slots=True)
class Check:
    """One gate in an expression: ``metric op literal``; offsets into the expression text."""

    metric: str
    op: Op
    literal: str
    start: int
    end: int
    subject: str  # the compared side as written (whitespace collapsed), e.g. median(data["x"])
    aggregation: Aggregation | None = None
    last_steps: int | None = None
    step: int | None = None  # the value at this step (``data["x"]["10"]``)
    alternative: bool = False  # under an ``or``: the check may pass on the other side


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A literal compared with something computed from a metric: not a gate, and why."""

    metric: str
    literal: str
    start: int
    end: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Series:
    metric: str
    aggregation: Aggregation | None = None
    last_steps: int | None = None
    step: int | None = None
    many: bool = False  # still several values (a slice): only an aggregation makes it one


def read_checks(text: str) -> tuple[list[Check], list[Unchecked]]:
    """The gates of one expression and the literals compared with computed values.

    ``ExpressionError`` (from the grammar) when the text is not an expression.
    """
    checks: list[Check] = []
    unchecked: list[Unchecked] = []
    for left, op, right, alternative in _comparisons(parse(text), False, False):
        _read(text, left, op, right, alternative, checks, unchecked)
    return checks, unchecked


def _comparisons(
    node: Node, negated: bool, alternative: bool
) -> Iterator[tuple[Node, str, Node, bool]]:
    """Every comparison ``left op right`` with its effective operator (after ``not``)."""
    if node.kind == "not":
        yield from _comparisons(_child(node, 0), not negated, alternative)
    elif node.kind in ("and", "or"):
        either = (node.kind == "or") != negated  # De Morgan: not (a and b) = not a or not b
        for child in node.children:
            yield from _comparisons(cast(Node, child), negated, alternative or either)
    elif node.kind == "compare":
        operands = [cast(Node, c) for c in node.children]
        either = alternative or (negated and len(node.ops) > 1)
        for i, op in enumerate(node.ops):
            effective = _NEGATED.get(op, "") if negated else op
            yield operands[i], effective, operands[i + 1], either


def _read(
    text: str,
    left: Node,
    op: str,
    right: Node,
    alternative: bool,
    checks: list[Check],
    unchecked: list[Unchecked],
) -> None:
    if op not in _MIRRORED:
        return
    literal, subject = _literal(text, right), left
    if literal is None:
        literal, subject, op = _literal(text, left), right, _MIRRORED[op]
    if literal is None or _literal(text, subject) is not None:
        return
    series = _series(subject)
    if series is None or series.many:
        named = _named_metric(subject)
        if named is not None and named.rsplit("/", 1)[-1] not in COUNTERS:
            shown = _shown(text[subject.start : subject.end])
            reason = f"compares {shown}, not a value the bot reads as a metric's"
            unchecked.append(Unchecked(named, literal[0], literal[1], literal[2], reason))
        return
    if series.metric.rsplit("/", 1)[-1].lower() in COUNTERS:
        return
    value, start, end = literal
    checks.append(
        Check(
            metric=series.metric,
            op=cast(Op, op),
            literal=value,
            start=start,
            end=end,
            subject=" ".join(text[subject.start : subject.end].split()),
            aggregation=series.aggregation,
            last_steps=series.last_steps,
            step=series.step,
            alternative=alternative,
        )
    )


def _child(node: Node, index: int) -> Node:
    return cast(Node, node.children[index])


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _literal(text: str, node: Node) -> tuple[str, int, int] | None:
    """A finite numeric literal as written, with a sign written right before it."""
    start = node.start
    if node.kind == "unary" and node.text in "+-" and _child(node, 0).start == start + 1:
        node = _child(node, 0)
    if node.kind != "num" or sum(c.isdigit() for c in node.text) > MAX_DIGITS:
        return None
    written = text[start : node.end]
    return (written, start, node.end) if math.isfinite(float(written)) else None


def _integer(node: Node | None) -> int | None:
    if node is not None and node.kind == "unary" and node.text == "-":
        inner = _integer(_child(node, 0))
        return -inner if inner is not None else None
    return (
        int(node.text) if node is not None and node.kind == "num" and node.text.isdigit() else None
    )


def _dotted(node: Node) -> str | None:
    """``np.mean`` -> "np.mean"; None for anything but names joined by dots."""
    if node.kind == "name":
        return node.text
    if node.kind == "attr":
        base = _dotted(_child(node, 0))
        return f"{base}.{node.text}" if base is not None else None
    return None


def _series(node: Node, in_call: bool = False) -> _Series | None:
    """What metric values ``node`` stands for, or None when it is not a metric's value."""
    if node.kind == "path" or (node.kind == "name" and in_call):
        return _Series(node.text)
    if node.kind == "subscript":
        return _subscripted(_child(node, 0), _child(node, 1))
    if node.kind == "call":
        return _called(node)
    return None


def _container(node: Node) -> bool:
    return node.kind in ("name", "attr") and _dotted(node) is not None


def _subscripted(base: Node, index: Node) -> _Series | None:
    if index.kind == "str" and _container(base):
        return _Series(index.text) if index.text else None
    inner = _series(base)
    if inner is None or inner.aggregation is not None or inner.step is not None:
        return None
    if index.kind == "slice":
        lower, upper, stride = index.children
        if inner.many:
            return None
        last = _integer(lower)
        if last is not None and last < 0 and upper is None and stride is None:
            return replace(inner, last_steps=-last, many=True)
        return replace(inner, many=True)  # another slice: aggregated over all steps
    if inner.many:
        return None
    if index.kind == "str" and index.text.isdigit():
        return replace(inner, step=int(index.text))
    if index.kind == "str" and index.text and not set("${}") & set(index.text):
        return replace(inner, metric=f"{inner.metric}/{index.text}")
    if index.kind == "str" or _integer(index) == -1:  # '${MAX_STEPS}', [-1]: the last step
        return replace(inner, aggregation="last")
    return None


def _called(node: Node) -> _Series | None:
    func, args = _child(node, 0), [cast(Node, a) for a in node.children[1:]]
    positional = [a for a in args if a.kind != "keyword"]
    if func.kind == "attr" and not _container(func):  # data["x"].mean(), metrics.get("x")
        inner = _series(_child(func, 0))
        aggregation = _AGGREGATIONS.get(func.text)
        if inner is None or aggregation is None or args or inner.aggregation or inner.step:
            return None
        return replace(inner, aggregation=aggregation, many=False)
    name = _dotted(func)
    if name is None or not positional:
        return None
    module, _, function = name.rpartition(".")
    if function == "get" and module and positional[0].kind == "str" and len(positional) <= 2:
        return _Series(positional[0].text) if positional[0].text else None
    if function in _READ_THROUGH and not module:
        inner = _series(positional[0])
        return inner if inner is not None and not inner.many and len(positional) <= 2 else None
    aggregation = _AGGREGATIONS.get(function)
    if aggregation is None or module not in _MODULES:
        return None
    inner = _series(positional[0], in_call=True)
    numeric = all(_number(a) for a in positional[1:])
    if inner is None or inner.aggregation or inner.step is not None or not numeric:
        return None
    return replace(inner, aggregation=aggregation, many=False)


def _number(node: Node) -> bool:
    if node.kind == "unary" and node.text in "+-":
        return _number(_child(node, 0))
    return node.kind == "num"


def _named_metric(node: Node) -> str | None:
    """The first metric key or path written anywhere in ``node``, if any."""
    if node.kind == "path":
        return node.text
    if node.kind == "subscript" and _container(_child(node, 0)) and _child(node, 1).kind == "str":
        return _child(node, 1).text or None
    for child in node.children:
        found = _named_metric(child) if child is not None else None
        if found is not None:
            return found
    return None
