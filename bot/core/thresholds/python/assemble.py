"""Hits into gates: names stable between a PR's base and head, contexts, merged sides.

Naming rule (no line numbers, so inserting unrelated lines never renames a gate):

* a literal read through a constant takes the constant's name: ``ACC_MIN``,
  ``TestAccuracy.ACC_MIN`` (class level), ``test_gsm8k.expected`` (function local),
  ``THRESHOLDS[gsm8k]`` (an entry), ``CASES[gsm8k]`` / ``test_acc[gsm8k]`` (a parametrized
  case, by its id or first string), ``EXPECTED_LOSS`` (a golden curve);
* a literal written in the check itself: ``<test>[<metric>]``, e.g.
  ``TestAccuracy.test_gsm8k[accuracy]`` (``<module>[accuracy]`` outside any function);
* a branch of a conditional bound adds its condition: ``TOP1_MIN if ON_TPU``,
  ``TOP1_MIN if not ON_TPU``, ``test_speed[tokens_per_sec] if fp16()`` (the condition as
  written, so a PR changing one branch's value changes that gate only);
* when two different literals would share a name, metric and operator, the later ones get
  `` #2``, `` #3`` in file order.

A constant compared in several tests is one gate whose ``context`` lists them.  A lower
and an upper reference band around the same literal with the same tolerance
(``m - T < R and m + T > R``) are one two-sided gate.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.models import CurvePoint, Gate, Span
from bot.core.thresholds.python.gates import Hit, bindable, names_a_metric
from bot.core.thresholds.python.source import Source


def _ignored(source: Source, lines: Iterable[int]) -> str:
    line = source.is_ignored(*lines)
    return f"marked '# threshold-bot: ignore' on line {line}" if line else ""


def _gate(hit: Hit, path: str, source: Source) -> Gate | None:
    num = hit.num
    if num.value is None or not bindable(hit.metric, num, hit.op, hit.kind, hit.threshold):
        return None
    steps = hit.metric.steps
    name = num.name or f"{hit.context or '<module>'}[{hit.metric.name}]"
    if steps and not num.name:
        name = f"{name}[{steps}]"
    return Gate(
        name=f"{name} if {hit.condition}" if hit.condition else name,
        file=path,
        line=num.span.line,
        metric=hit.metric.name,
        op=hit.op,
        value=num.value,
        literal=num.span.literal,
        start=num.span.start,
        end=num.span.end,
        kind=hit.kind,
        tolerance=hit.tolerance,
        aggregation=hit.metric.aggregation,
        last_steps=hit.metric.last_steps,
        context=f"{hit.context} ({steps})" if steps and num.name else hit.context,
        ignored=_ignored(source, (*hit.lines, num.span.line)),
    )


def _curve(hits: list[Hit], path: str, source: Source) -> Gate | None:
    first = hits[0]
    if first.metric.count or not names_a_metric(first.metric, (first.curve, first.threshold)):
        return None
    by_step = {h.step: h.num for h in hits if h.step is not None}
    points = tuple(
        CurvePoint(step=step, value=num.value, span=num.span)
        for step, num in sorted(by_step.items())
    )
    last = next((p for p in reversed(points) if p.value is not None), None)
    if last is None or last.value is None:
        return None
    spans = [p.span.line for p in points]
    return Gate(
        name=first.curve,
        file=path,
        line=last.span.line,
        metric=first.metric.name,
        op=first.op,
        value=last.value,
        literal=last.span.literal,
        start=last.span.start,
        end=last.span.end,
        kind="reference",
        tolerance=first.tolerance,
        points=points,
        context=first.context,
        ignored=_ignored(source, (*first.lines, spans[0], spans[-1])),
    )


def _sides_merged(gates: list[Gate]) -> list[Gate]:
    """A lower and an upper band around one literal with one tolerance: a two-sided gate."""
    bands: dict[tuple[object, ...], list[int]] = {}
    for index, gate in enumerate(gates):
        if gate.kind == "reference" and gate.op in (">=", "<=") and gate.tolerance is not None:
            key = (gate.name, gate.metric, gate.start, gate.tolerance.rel, gate.tolerance.abs)
            bands.setdefault(key, []).append(index)
    dropped: set[int] = set()
    merged = list(gates)
    for indices in bands.values():
        ops = {gates[i].op for i in indices}
        if ops == {">=", "<="}:
            merged[indices[0]] = gates[indices[0]].model_copy(update={"op": "=="})
            dropped.update(indices[1:])
    return [g for i, g in enumerate(merged) if i not in dropped]


def _unique(gates: list[Gate]) -> list[Gate]:
    """One gate per literal, name, metric and operator (contexts joined); later literals
    sharing a name, metric and operator numbered."""
    by_literal: dict[tuple[str, str, str, int], Gate] = {}
    for gate in gates:
        key = (gate.name, gate.metric, gate.op, gate.start)
        seen = by_literal.get(key)
        if seen is None:
            by_literal[key] = gate
        elif gate.context and gate.context not in seen.context.split(", "):
            context = ", ".join(c for c in (seen.context, gate.context) if c)
            ignored = seen.ignored or gate.ignored
            by_literal[key] = seen.model_copy(update={"context": context, "ignored": ignored})
    counts: dict[tuple[str, str, str], int] = {}
    named: list[Gate] = []
    for gate in sorted(by_literal.values(), key=lambda g: (g.start, g.name, g.op)):
        identity = (gate.name, gate.metric, gate.op)
        counts[identity] = counts.get(identity, 0) + 1
        if counts[identity] > 1:
            gate = gate.model_copy(update={"name": f"{gate.name} #{counts[identity]}"})
        named.append(gate)
    return named


def assemble(groups: list[list[Hit]], path: str, source: Source) -> list[Gate]:
    """The gates of all checks' hits, named, merged and in file order."""
    gates: list[Gate] = []
    for group in groups:
        curves: dict[str, list[Hit]] = {}
        hits = [h for h in group if not h.num.origin]  # a literal of another file: its own
        if len(hits) < len(group) and any(h.curve for h in group):
            continue  # a curve with points in another file
        for hit in hits:
            if hit.curve:
                curves.setdefault(hit.curve, []).append(hit)
            elif (gate := _gate(hit, path, source)) is not None:
                gates.append(gate)
        gates += [g for c in curves.values() if (g := _curve(c, path, source)) is not None]
    return _unique(_sides_merged(gates))


def used_spans(gates: Iterable[Gate]) -> set[int]:
    """The start offsets of every literal the gates bind (value, tolerance, curve steps)."""
    used: set[int] = set()
    for gate in gates:
        used.add(gate.start)
        used.update(p.span.start for p in gate.points)
        if gate.tolerance is not None:
            spans: list[Span | None] = [gate.tolerance.rel_span, gate.tolerance.abs_span]
            used.update(s.start for s in spans if s is not None)
    return used
