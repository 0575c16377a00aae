"""Checks read at each iteration: the literals they bind, and whether each is a gate.

A literal becomes a gate only when the compared expression is a metric (not a count such as
``len(x)`` or ``num_steps``), the literal is not 0, and either the metric's name says it is
one (``accuracy``, ``results["gsm8k"]``, ``wer``) or the threshold's name names a metric
(``MMLU_MIN``, ``EXPECTED_LOSS``; ``expected`` alone does not).  An error or a difference
held under a tiny bound (``max_err < 1e-5``) is a numerical check, and a limit written as a
power of ten (``loss < 1e6``) a sanity bound: neither is a gate.  A threshold named but not
known (assigned twice, a parameter, imported from a module not read) gives a hint instead,
and so does one written in another file of the repository (``python.project``): its gate is
that file's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from bot.core.models import GateKind, Op, Tolerance, UnboundVariable
from bot.core.thresholds.python.compare import Check, Tol
from bot.core.thresholds.python.metric import Metric, Metrics
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.shapes import Shapes
from bot.core.thresholds.python.values import FREE, Alias, At, Group, Num, Table, flatten
from bot.core.thresholds.python.words import (
    count_like,
    metric_like,
    numeric_check,
    sanity_bound,
    threshold_like,
)

MAX_WORK = 10_000  # literals read per file (a loop's iterations times its checks): bounded time


@dataclass(frozen=True, slots=True)
class Hit:
    """One literal a check binds, at one iteration."""

    metric: Metric
    op: Op
    kind: GateKind
    num: Num
    tolerance: Tolerance | None
    context: str
    lines: tuple[int, ...]  # the checking statement's first and last line
    step: int | None = None  # a golden curve's step
    curve: str = ""  # the curve's name, when this is one of its steps
    threshold: str = ""  # the name the threshold is read through (``EXPECTED_VALUE``)


def short(name: str) -> str:
    """``TestAcc.ACC_MIN`` -> ``ACC_MIN``; ``THRESHOLDS[gsm8k]`` -> ``THRESHOLDS``."""
    return name.split("[", 1)[0].rsplit(".", 1)[-1]


def bindable(metric: Metric, num: Num, hit_op: Op, kind: GateKind, threshold: str) -> bool:
    """Whether a literal compared with ``metric`` is a gate (module docstring)."""
    if metric.count or num.value is None or num.value == 0:
        return False
    if kind == "limit" and sanity_bound(num.span.literal):
        return False
    if kind == "limit" and hit_op in ("<", "<=") and numeric_check(metric.name, num.value):
        return False
    return names_a_metric(metric, (num.name, num.const, threshold))


def names_a_metric(metric: Metric, thresholds: tuple[str, ...]) -> bool:
    """The metric's name says it is one, or the threshold's does (``MMLU_MIN``,
    ``EXPECTED_LOSS``); a threshold named as a count (``TIMEOUT``, ``MAX_STEPS``) never."""
    names = [short(n) for n in thresholds if n]
    if any(count_like(n) for n in names):
        return False
    return metric.like or any(threshold_like(n) and metric_like(n) for n in names)


def _threshold_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _threshold_name(node.value)
    return ""


class Evaluator:
    """Collects the hits and the hints of one module's checking statements."""

    def __init__(self, path: str, resolver: Resolver, metrics: Metrics) -> None:
        self.path = path
        self.resolver = resolver
        self.metrics = metrics
        self.hits: list[list[Hit]] = []  # per check and iteration group
        self.unbound: dict[str, UnboundVariable] = {}
        self.work = 0  # checks read and literals bound so far (``MAX_WORK`` at most)

    @property
    def exhausted(self) -> bool:
        """Whether the reading stopped at ``MAX_WORK``."""
        return self.work >= MAX_WORK

    def statement(self, stmt: ast.stmt, at: At, context: str) -> None:
        if self.exhausted:
            return
        first = self._group(stmt, at)
        probe = At(at.scope, at.env, first, 0) if first else at
        known: dict[int, bool] = {}

        def is_known(node: ast.expr) -> bool:
            if id(node) not in known:
                known[id(node)] = self.resolver.value(node, probe) is not None
            return known[id(node)]

        shapes = Shapes(is_known)
        lines = (stmt.lineno, stmt.end_lineno or stmt.lineno)
        for check in shapes.statement(stmt):
            group = self._group(check, at)
            if group is None:
                self.hits.append(self._read(check, at, context, lines))
                continue
            hits: list[Hit] = []
            for index, step in enumerate(group.steps):
                if self.exhausted:
                    break
                at_step = At(at.scope, at.env, group, index)
                here = group.contexts[index] if group.contexts else context
                for hit in self._read(check, at_step, here, lines):
                    hits.append(replace(hit, step=step) if hit.step is None else hit)
            self.hits.append(_as_curve(hits, group, context))

    def _group(self, node: ast.AST | Check, at: At) -> Group | None:
        """The one loop or parametrization a statement or check reads (None: none, or
        more than one); a free key variable indexing a known table iterates its keys."""
        if not at.env:
            return None
        nodes = [node] if isinstance(node, ast.AST) else [node.metric, node.target]
        if isinstance(node, Check):
            nodes += [t for t in (node.rel, node.abs) if isinstance(t, ast.AST)]
        groups: dict[int, Group] = {}
        free: Group | None = None
        for root in nodes:
            for sub in ast.walk(root):
                if isinstance(sub, ast.Name) and sub.id in at.env:
                    binding = at.env[sub.id]
                    if isinstance(binding, Alias):
                        names = [n for n in ast.walk(binding.node) if isinstance(n, ast.Name)]
                        found = [at.env.get(n.id) for n in names]
                        groups |= {id(g): g for g in found if isinstance(g, Group)}
                    elif isinstance(binding, Group):
                        groups[id(binding)] = binding
                elif isinstance(sub, ast.Subscript) and free is None:
                    free = self._free(sub, at)
        if len(groups) == 1:
            return next(iter(groups.values()))
        return free if not groups else None

    def _free(self, node: ast.Subscript, at: At) -> Group | None:
        key = node.slice
        if not (isinstance(key, ast.Name) and at.env.get(key.id) == FREE):
            return None
        table = self.resolver.value(node.value, at)
        if not isinstance(table, Table) or table.listed:
            return None
        keys = tuple(k for k, _ in table.entries)
        steps = tuple(k if isinstance(k, int) else None for k in keys)
        group = Group(tuple(str(k) for k in keys), steps, {key.id: keys}, table.name)
        at.env[key.id] = group
        return group

    def _tolerance(self, rel: Tol, absolute: Tol, at: At) -> Tolerance | bool | None:
        """The check's tolerance; False when a tolerance is written but not known."""
        parts: list[tuple[float | None, Num | None]] = []
        for tol in (rel, absolute):
            if tol is None or isinstance(tol, float):
                parts.append((tol, None))
                continue
            value = self.resolver.value(tol, at)
            if not isinstance(value, Num) or value.value is None or value.value < 0:
                return False
            parts.append((value.value, value))
        (r, r_num), (a, a_num) = parts
        if r is None and a is None:
            return None
        return Tolerance(
            rel=r,
            abs=a,
            rel_span=r_num.span if r_num and not r_num.origin else None,  # not this file's
            abs_span=a_num.span if a_num and not a_num.origin else None,
        )

    def _read(self, check: Check, at: At, context: str, lines: tuple[int, ...]) -> list[Hit]:
        hits = self._hits(check, at, context, lines)
        self.work += max(1, len(hits))
        return hits

    def _hits(self, check: Check, at: At, context: str, lines: tuple[int, ...]) -> list[Hit]:
        metric = self.metrics.of(check.metric, at)
        target = self.resolver.value(check.target, at)
        if metric is None or metric.count:
            return []
        if target is None:
            self._unknown(check, metric, at, lines[0])
            return []
        tolerance = self._tolerance(check.rel, check.abs, at) if check.kind == "reference" else None
        if isinstance(tolerance, bool):
            return []
        threshold = _threshold_name(check.target)

        def hit(num: Num, named: Metric = metric, step: int | None = None, curve: str = "") -> Hit:
            return Hit(
                named, check.op, check.kind, num, tolerance, context, lines, step, curve, threshold
            )

        if isinstance(target, Num) and target.origin:
            self._elsewhere(check, metric, target, lines[0])
            return []
        if isinstance(target, Num):
            return [hit(target)]
        if not isinstance(target, Table) or check.kind != "reference":
            return []
        entries = flatten(target)
        if target.listed or all(len(path) == 1 and isinstance(path[0], int) for path, _ in entries):
            curve = target.name or f"{context or '<module>'}[{metric.name}]"
            return [hit(num, step=int(path[0]), curve=curve) for path, num in entries]
        hits = []
        for path, num in entries:  # a dict compared whole: a gate per key
            keyed = "/".join(str(k) for k in path)
            name = f"{metric.name}/{keyed}" if metric.derived else keyed
            hits.append(hit(num, replace(metric, name=name, derived=True)))
        return hits

    def _elsewhere(self, check: Check, metric: Metric, target: Num, line: int) -> None:
        """A hint for a threshold written in another file (an imported constant): its gate
        is that file's, reviewed when a PR changes it."""
        name = _threshold_name(check.target) or short(target.name)
        if not name or name in self.unbound or not (metric.like or threshold_like(name)):
            return
        reason = (
            f"compared with {metric.name} on line {line}; written in {target.origin}"
            f" (line {target.span.line}): a gate of that file, reviewed when it changes"
        )
        self.unbound[name] = UnboundVariable(
            name=name, file=self.path, line=line, literal=target.span.literal, reason=reason
        )

    def _unknown(self, check: Check, metric: Metric, at: At, line: int) -> None:
        name = _threshold_name(check.target)
        if not name or name in self.unbound or not (metric.like or threshold_like(name)):
            return
        why = self.resolver.why_not(check.target, at)
        if why is None:
            return
        reason = f"compared with {metric.name} on line {line}, but {why}"
        self.unbound[name] = UnboundVariable(
            name=name, file=self.path, line=line, literal="", reason=reason
        )


def _as_curve(hits: list[Hit], group: Group, context: str) -> list[Hit]:
    """The hits of a loop over integer steps checking one metric: one golden curve."""
    steps = [h.step for h in hits]
    metrics = {h.metric.name for h in hits}
    if not hits or None in steps or len(metrics) != 1 or any(h.curve for h in hits):
        return hits
    if any(h.kind != "reference" for h in hits):
        return []  # a limit per step of a series: not a shape the review can judge
    name = group.table or f"{context or '<module>'}[{hits[0].metric.name}]"
    return [replace(h, curve=name) for h in hits]
