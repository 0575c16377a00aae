"""Checks read at each iteration: the literals they bind, and whether each is a gate.

A literal becomes a gate only when the compared expression is a metric (not a count such as
``len(x)`` or ``num_steps``), the literal is not 0, and either the metric's name says it is
one (``accuracy``, ``results["gsm8k"]``, ``wer``) or the threshold's name names a metric
(``MMLU_MIN``, ``EXPECTED_LOSS``; ``expected`` alone does not).  An error or a difference
held under a tiny bound (``max_err < 1e-5``) is a numerical check, and a limit written as a
power of ten (``loss < 1e6``) a sanity bound, and a limit at the end of the metric's own
range (``accuracy <= 1.0``, ``perplexity > 1``) trivial: none is a gate.  A threshold named but not
known (assigned twice, a parameter, imported from a module not read) gives a hint instead, as
does one written in another file of the repository (``python.project``: its gate is that
file's) and a literal compared with an element of a result whose name says nothing
(``res[0] < 0.31``), unless the config's ``metrics:`` maps that name to a history key (a
mapped name is a metric).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass, replace

from bot.core.models import GateKind, Op, Tolerance, UnboundVariable
from bot.core.thresholds.python.compare import Check, Tol
from bot.core.thresholds.python.inline import Inliner
from bot.core.thresholds.python.metric import Metric, Metrics
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.shapes import Shapes, exit_codes, recorders
from bot.core.thresholds.python.values import (
    FREE,
    MAX_BRANCHES,
    Alias,
    At,
    Choice,
    Group,
    Num,
    Table,
    Value,
    flatten,
)
from bot.core.thresholds.python.words import (
    count_like,
    metric_like,
    numeric_check,
    sanity_bound,
    threshold_like,
    trivial_bound,
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
    condition: str = ""  # the branch of a conditional bound (``on_tpu()``, ``not on_tpu()``)


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
    if kind == "limit" and trivial_bound(metric.name, hit_op, num.value):
        return False
    return names_a_metric(metric, (num.name, num.const, threshold))


def unnamed(hit: Hit) -> bool:
    """Whether ``hit`` compares an element of a result (``res[0]``) or a value a call returned
    (``a, b = evaluate(m)``, ``out = run()``) that would be a gate but for its name, which
    says nothing, or a keyed value (``report["drift"]``): the config can name it (a hint,
    not a gate).  A floor of 1 (``>= 1``) is a sanity check, not a threshold."""
    if hit.curve or hit.metric.like or hit.metric.count or not hit.metric.element:
        return False
    if hit.op in (">=", ">") and hit.num.value == 1 and hit.num.span.literal == "1":
        return False
    metric = replace(hit.metric, like=True)
    return not bindable(hit.metric, hit.num, hit.op, hit.kind, hit.threshold) and bindable(
        metric, hit.num, hit.op, hit.kind, hit.threshold
    )


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

    def __init__(
        self, path: str, resolver: Resolver, metrics: Metrics, named: Collection[str] = ()
    ) -> None:
        self.path = path
        self.resolver = resolver
        self.metrics = metrics
        self.named = frozenset(named)  # names the config maps to history keys: metrics
        self.recorded: dict[int, frozenset[str]] = {}
        self.exits: frozenset[str] | None = None  # functions whose result is the exit status
        self.definitions: dict[tuple[int, str], tuple[ast.expr, frozenset[str]] | None] = {}
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

        shapes = Shapes(is_known, self._recorders(at.scope.node))
        lines = (stmt.lineno, stmt.end_lineno or stmt.lineno)
        followed = Inliner(self.resolver, at, is_known, self.definitions).statement(stmt)
        for check in shapes.statement(followed):
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

    def _recorders(self, function: ast.AST) -> frozenset[str]:
        """The names ``function`` fails on after gathering failures in them (cached)."""
        key = id(function)
        if key not in self.recorded:
            if self.exits is None:
                self.exits = exit_codes(self.resolver.module.module.node)
            self.recorded[key] = recorders(function, self.exits)
        return self.recorded[key]

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

    def _tolerances(
        self, rel: Tol, absolute: Tol, at: At
    ) -> list[tuple[str, Tolerance | None]] | None:
        """The check's tolerance, per branch when a conditional gives it (``tol = 0.02 if
        fast else 0.01``: the condition of each); None when one is written but not known."""
        parts: list[list[tuple[str, float | None, Num | None]]] = []
        for tol in (rel, absolute):
            if tol is None or isinstance(tol, float):
                parts.append([("", tol, None)])
                continue
            value = self.resolver.value(tol, at)
            branches = value.branches if isinstance(value, Choice) else (("", value),)
            part: list[tuple[str, float | None, Num | None]] = []
            for condition, branch in branches:
                if not isinstance(branch, Num) or branch.value is None or branch.value < 0:
                    return None
                part.append((condition, branch.value, branch))
            parts.append(part)
        found: list[tuple[str, Tolerance | None]] = []
        for r_condition, r, r_num in parts[0]:
            for a_condition, a, a_num in parts[1]:
                condition = " and ".join(c for c in (r_condition, a_condition) if c)
                tolerance = Tolerance(
                    rel=r,
                    abs=a,
                    rel_span=r_num.span if r_num and not r_num.origin else None,  # not this file's
                    abs_span=a_num.span if a_num and not a_num.origin else None,
                )
                found.append((condition, None if r is None and a is None else tolerance))
        return found if len(found) <= MAX_BRANCHES else None

    def _read(self, check: Check, at: At, context: str, lines: tuple[int, ...]) -> list[Hit]:
        hits = self._hits(check, at, context, lines)
        self.work += max(1, len(hits))
        return hits

    def _hits(self, check: Check, at: At, context: str, lines: tuple[int, ...]) -> list[Hit]:
        metric = self.metrics.of(check.metric, at)
        target = self.resolver.value(check.target, at)
        if metric is not None and metric.name in self.named:
            metric = replace(metric, like=True, count=False)
        if metric is None or metric.count:
            return []
        if target is None:
            self._unknown(check, metric, at, lines[0])
            return []
        tolerances = (
            self._tolerances(check.rel, check.abs, at)
            if check.kind == "reference"
            else [("", None)]
        )
        if tolerances is None:
            return []
        targets = target.branches if isinstance(target, Choice) else (("", target),)
        if len(targets) * len(tolerances) > MAX_BRANCHES:
            return []
        hits: list[Hit] = []  # a conditional bound or tolerance: the hits of each branch
        for condition, value in targets:
            for tolerance_condition, tolerance in tolerances:
                where = " and ".join(c for c in (condition, tolerance_condition) if c)
                found = self._of_target(check, metric, value, tolerance, context, lines)
                hits += [replace(h, condition=where) for h in found] if where else found
        return hits

    def _of_target(
        self,
        check: Check,
        metric: Metric,
        target: Value,
        tolerance: Tolerance | None,
        context: str,
        lines: tuple[int, ...],
    ) -> list[Hit]:
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
            name=name,
            file=self.path,
            line=line,
            literal=target.span.literal,
            reason=reason,
            compared=True,
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
            name=name, file=self.path, line=line, literal="", reason=reason, compared=True
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
