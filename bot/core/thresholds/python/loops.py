"""Loops and ``pytest.mark.parametrize``: the values their variables take, per iteration.

``for task, minimum in THRESHOLDS.items()``, ``for step in EXPECTED_LOSS``,
``for i, ref in enumerate(GOLDEN)``, ``for name, ref, tol in CASES`` and
``@pytest.mark.parametrize("task,minimum", [("gsm8k", 0.56), ...])`` each give a ``Group``:
one label per iteration (the key, the case's id or first string, else its position), the
integer step when keys are integers or positions (a golden curve), and each variable's
value.  A case read from a constant list is named after it (``CASES[gsm8k]``); one written
in the decorator after the test (``test_accuracy[gsm8k]``).
"""

from __future__ import annotations

import ast

from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import dotted
from bot.core.thresholds.python.values import (
    FREE,
    MAX_ENTRIES,
    Alias,
    At,
    Binding,
    Group,
    Num,
    Record,
    Table,
    Value,
    named,
)

Item = tuple[str, int | None, list[Value | None]]  # label, step, the parts a target unpacks
_ORDERING = frozenset({"sorted", "list", "tuple", "reversed"})


def _unwrap(node: ast.expr) -> ast.expr:
    while (
        isinstance(node, ast.Call)
        and dotted(node.func) in _ORDERING
        and len(node.args) == 1
        and not node.keywords
    ):
        node = node.args[0]
    return node


def _method(node: ast.expr) -> tuple[ast.expr, str] | None:
    """``X.items()`` -> (X, "items")."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("items", "keys", "values")
        and not node.args
    ):
        return node.func.value, node.func.attr
    return None


def _mapping_items(value: Value, how: str) -> list[Item] | None:
    if isinstance(value, Table):
        pairs: list[tuple[str | int, Value]] = list(value.entries)
    elif isinstance(value, Record):
        pairs = [(k, v) for k, v in value.fields]
    else:
        return None
    items: list[Item] = []
    for key, entry in pairs:
        step = key if isinstance(key, int) else None
        parts: list[Value | None] = (
            [key, entry] if how == "items" else [entry] if how == "values" else [key]
        )
        items.append((str(key), step, parts))
    return items


class Loops:
    """Builds the bindings of loops and parametrizations of one module."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def _raw_list(self, node: ast.expr, at: At) -> tuple[list[ast.expr], str] | None:
        """The elements of a list literal, or of one assigned to a constant (and its name)."""
        if isinstance(node, ast.List | ast.Tuple):
            return node.elts, ""
        if isinstance(node, ast.Name) and node.id not in at.env:
            scope = self.resolver.lookup(node.id, at.scope)
            written = scope.assigned.get(node.id, []) if scope else []
            if scope and len(written) == 1 and isinstance(written[0], ast.List | ast.Tuple):
                return written[0].elts, scope.qualify(node.id)
        return None

    def _cases(self, elts: list[ast.expr], at: At, width: int | None) -> list[Item]:
        """Elements of a list of cases: tuples (unpacked), ``pytest.param``, single values."""
        items: list[Item] = []
        for position, elt in enumerate(elts[:MAX_ENTRIES]):
            label: str | None = None
            if isinstance(elt, ast.Call) and dotted(elt.func).endswith("param"):
                ids = [k.value for k in elt.keywords if k.arg == "id"]
                given = ids[0].value if ids and isinstance(ids[0], ast.Constant) else None
                label = str(given) if given is not None else None
                parts_nodes = list(elt.args)
            elif isinstance(elt, ast.Tuple | ast.List) and width != 1:
                parts_nodes = list(elt.elts)
            else:
                parts_nodes = [elt]
            parts = [self.resolver.value(p, at) for p in parts_nodes]
            if label is None:
                texts = [p for p in parts if isinstance(p, str)]
                records = [p.label() for p in parts if isinstance(p, Record)]
                label = next((t for t in (*texts, *records) if t), str(position))
            items.append((str(label), None, parts))
        return items

    def _items(self, node: ast.expr, at: At, width: int | None) -> tuple[list[Item], str] | None:
        """The iterations of ``for ... in node`` (or of a parametrization's values)."""
        node = _unwrap(node)
        method = _method(node)
        base, how = method if method else (node, "keys")
        if isinstance(base, ast.Call) and dotted(base.func) == "enumerate" and base.args:
            inner = self.resolver.value(_unwrap(base.args[0]), at)
            if isinstance(inner, Table) and inner.listed:
                items: list[Item] = [(str(k), int(k), [int(k), v]) for k, v in inner.entries]
                return items, inner.name
            return None
        value = self.resolver.value(_unwrap(base), at)
        if isinstance(value, Table) and value.listed and method is None:
            return [(str(k), int(k), [v]) for k, v in value.entries], value.name
        if isinstance(value, Record) or (isinstance(value, Table) and (method or not value.listed)):
            found = _mapping_items(value, how)
            return (found, value.name) if found is not None else None
        raw = self._raw_list(node, at) if method is None else None
        if raw is None:
            return None
        return self._cases(raw[0], at, width), raw[1]

    def _bind(
        self, targets: list[str], items: list[Item], prefix: str, const: str
    ) -> dict[str, Binding]:
        if not items or any(len(parts) != len(targets) for _, _, parts in items):
            if len(targets) != 1:
                return {}
            items = [(label, step, [_as_one(parts)]) for label, step, parts in items]
        values: dict[str, tuple[Value | None, ...]] = {}
        for position, target in enumerate(targets):
            column: list[Value | None] = []
            for label, _, parts in items:
                part = parts[position]
                if prefix and part is not None and not isinstance(part, str):
                    part = named(part, f"{prefix}[{label}]", const)
                column.append(part)
            values[target] = tuple(column)
        labels = tuple(label for label, _, _ in items)
        group = Group(labels, tuple(s for _, s, _ in items), values, const)
        return dict.fromkeys(targets, group)

    def loop(self, node: ast.For | ast.AsyncFor, at: At, context: str) -> dict[str, Binding]:
        """The bindings of a ``for`` loop's target in its body."""
        names = _target_names(node.target)
        unknown: dict[str, Binding] = dict.fromkeys(
            (n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)), None
        )
        if names is None:
            return unknown
        outer = _outer(node.iter, at)
        if outer is not None:
            return unknown | self._nested(names, node.iter, at, outer)
        found = self._items(node.iter, at, len(names))
        if found is not None:
            items, table = found
            prefix = table or context
            bound = self._bind(names, items, prefix, table)
            return unknown | bound if bound else unknown
        method = _method(_unwrap(node.iter))
        if method is not None and method[1] == "items" and len(names) == 2:
            key = ast.Name(id=names[0], ctx=ast.Load())
            return {names[0]: FREE, names[1]: Alias(ast.Subscript(method[0], key, ast.Load()))}
        if len(names) == 1 and (method is None or method[1] == "keys"):
            return {names[0]: FREE}
        return unknown

    def _nested(
        self, names: list[str], iterable: ast.expr, at: At, outer: Group
    ) -> dict[str, Binding]:
        """A loop over what an enclosing loop's variable names (``for task, ref in
        EXPECTED[model].items()``): one group over both, outer iteration by outer iteration."""
        carried = [name for name, binding in at.env.items() if binding is outer]
        items: list[Item] = []
        for index, label in enumerate(outer.labels):
            found = self._items(iterable, At(at.scope, at.env, outer, index), len(names))
            for inner, _, parts in found[0] if found else []:
                if len(parts) == len(names) and len(items) < MAX_ENTRIES:
                    kept = [_plain(outer.values[name][index]) for name in carried]
                    items.append((f"{label}/{inner}", None, [*parts, *kept]))
        return self._bind([*names, *carried], items, "", "") if items else {}

    def parametrize(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef, at: At, test: str
    ) -> dict[str, Binding]:
        """The bindings of a test's ``pytest.mark.parametrize`` decorators (read at ``at``,
        where the test is defined; ``test`` its qualified name)."""
        env: dict[str, Binding] = {}
        for decorator in function.decorator_list:
            if not (
                isinstance(decorator, ast.Call)
                and dotted(decorator.func).endswith("parametrize")
                and len(decorator.args) >= 2
            ):
                continue
            names = _argnames(decorator.args[0])
            found = self._items(decorator.args[1], at, len(names)) if names else None
            if not names or found is None:
                continue
            items, table = found
            ids = next((k.value for k in decorator.keywords if k.arg == "ids"), None)
            if isinstance(ids, ast.List | ast.Tuple) and len(ids.elts) == len(items):
                labels = [e.value if isinstance(e, ast.Constant) else None for e in ids.elts]
                items = [
                    (str(lbl) if lbl is not None else label, step, parts)
                    for lbl, (label, step, parts) in zip(labels, items, strict=True)
                ]
            prefix = table or test
            env |= self._bind(names, items, prefix, table)
        return env


def _plain(value: Value | Alias | None) -> Value | None:
    return None if isinstance(value, Alias) else value


def _outer(iterable: ast.expr, at: At) -> Group | None:
    """The enclosing loop or parametrization a loop's iterable reads, if one."""
    found = {
        id(b): b
        for n in ast.walk(iterable)
        if isinstance(n, ast.Name) and isinstance(b := at.env.get(n.id), Group)
    }
    return next(iter(found.values())) if len(found) == 1 else None


def _as_one(parts: list[Value | None]) -> Value | None:
    if len(parts) == 1:
        return parts[0]
    known = [p for p in parts if p is not None]
    if len(known) == len(parts) and all(isinstance(p, Num | Table) for p in known):
        return Table(tuple(enumerate(known)), True)  # type: ignore[arg-type]
    return Record(tuple((str(i), p) for i, p in enumerate(known)))


def _target_names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List) and all(
        isinstance(e, ast.Name) for e in target.elts
    ):
        return [e.id for e in target.elts if isinstance(e, ast.Name)]
    return None


def _argnames(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [n.strip() for n in node.value.split(",") if n.strip()]
    if isinstance(node, ast.List | ast.Tuple):
        names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(names) == len(node.elts) and all(isinstance(n, str) for n in names):
            return [str(n) for n in names]
    return []
