"""Reads Python expressions into values (``python_values``), never running them.

Literals are read where they are written; names resolve through the scope rules of
``python_scope`` (a constant is assigned exactly once); ``self.X`` through the class;
``T["k"]`` / ``T[0]`` through tables; ``f()`` through a function that only returns a value;
variables of loops, parametrizations and helpers through their ``Group``; ``a if c else b``
and a name assigned in each branch of an ``if`` statement (``python_branches``) into a
``Choice`` of its branches; with a ``Linker`` (``python.project``), names imported from other
modules of the repository through those modules (``from tests.thresholds import ACC_MIN``,
``thresholds.ACC_MIN``), and an expression of another module read by that module's resolver.
Work is bounded: expressions deeper than ``MAX_DEPTH`` (import hops included), tables over
``MAX_ENTRIES`` entries and conditionals over ``MAX_BRANCHES`` branches are unknown.
"""

from __future__ import annotations

import ast
from typing import Protocol

from bot.core.thresholds.python.branches import branches, condition
from bot.core.thresholds.python.scope import Module, Scope, dotted
from bot.core.thresholds.python.source import Source
from bot.core.thresholds.python.values import (
    MAX_BRANCHES,
    MAX_ENTRIES,
    Alias,
    At,
    Choice,
    Group,
    Num,
    Record,
    Table,
    Value,
    entry_of,
    field_of,
    named,
)

MAX_DEPTH = 40
MAX_BASES = 16  # classes of a hierarchy searched for an attribute
_CONVERSIONS = frozenset(
    {"tensor", "array", "asarray", "as_tensor", "list", "tuple", "float", "Tensor", "float64"}
)


class Linker(Protocol):
    """The modules of the repository read with the file under review (``python.project``)."""

    def owner(self, scope: Scope) -> Resolver | None:
        """The resolver of the module ``scope`` belongs to."""
        ...

    def resolve(self, scope: Scope, name: str) -> tuple[Resolver, str | None] | None:
        """The module a dotted ``name`` imported in module ``scope`` names, and the
        attribute of it named (None: the module itself); None when not a repository module."""
        ...


class Resolver:
    """Reads expressions of one module (cached per constant); ``origin``: the module's
    path when it is not the file under review (its literals are marked with it)."""

    def __init__(self, source: Source, module: Module, origin: str = "") -> None:
        self.source = source
        self.module = module
        self.origin = origin
        self.linker: Linker | None = None
        self._constants: dict[tuple[int, str], Value | None] = {}
        self._busy: set[tuple[int, str]] = set()

    # ------------------------------------------------------------------ names

    def lookup(self, name: str, scope: Scope) -> Scope | None:
        """The scope a plain name read in ``scope`` resolves to (Python's rules)."""
        current: Scope | None = scope
        while current is not None:
            if name in current.assigned and (current is scope or current.kind != "class"):
                return current
            current = current.parent
        return None

    def constant(self, name: str, scope: Scope, depth: int) -> Value | None:
        """The value of ``name`` assigned once in ``scope`` (a class: also ``self.name``)."""
        key = (id(scope), name)
        if key in self._constants:
            return self._constants[key]
        if key in self._busy:
            return None
        self._busy.add(key)
        found: Value | None = None
        written = [*scope.assigned.get(name, []), *scope.attrs.get(name, [])]
        if len(written) == 1 and written[0] is not None:
            inner = self.value(written[0], At(scope), depth + 1)
            qualified = scope.qualify(name)
            keep = scope.kind != "function"
            found = None if inner is None else named(inner, qualified, qualified if keep else "")
        elif 1 < len(written) <= MAX_BRANCHES and name in scope.assigned:
            choice = self._branches(name, scope, len(written), depth)  # if: a = 1 / else: a = 2
            qualified = scope.qualify(name)
            keep = scope.kind != "function"
            found = None if choice is None else named(choice, qualified, qualified if keep else "")
        self._busy.discard(key)
        self._constants[key] = found
        return found

    def member(self, owner: Scope, name: str) -> Scope:
        """The class that writes ``name`` for ``owner``: itself, else the first of its bases
        defined in this file that does (depth first, ``MAX_BASES`` classes at most)."""
        seen: set[int] = set()
        stack = [owner]
        while stack and len(seen) < MAX_BASES:
            scope = stack.pop()
            if id(scope) in seen:
                continue
            seen.add(id(scope))
            if name in scope.assigned or name in scope.attrs or name in scope.returns:
                return scope
            assert isinstance(scope.node, ast.ClassDef)
            bases = [self._class(b, At(scope.parent or scope), MAX_DEPTH) for b in scope.node.bases]
            stack += [b for b in reversed(bases) if b is not None and b is not scope]
        return owner

    def _class(self, node: ast.expr, at: At, depth: int = 0) -> Scope | None:
        """The class of this file ``node`` names (``self``, ``cls``, ``TestX``) or holds an
        instance of (``Limits()``, a fixture returning one, ``self.limits = Limits()``)."""
        if isinstance(node, ast.Name) and (
            node.id in ("self", "cls") or node.id == at.scope.self_name
        ):
            return at.scope.owner
        if isinstance(node, ast.Name):
            found = self.lookup(node.id, at.scope)
            child = found.children.get(node.id) if found else None
            if child is not None and child.kind == "class":
                return child
        return self._instance(node, at, depth + 1)

    def _instance(self, node: ast.expr, at: At, depth: int) -> Scope | None:
        """The class of this file whose instance ``node`` holds, followed through names and
        attributes assigned once, a binding and functions that only return a value."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            scope = self.lookup(node.func.id, at.scope)
            child = scope.children.get(node.func.id) if scope else None
            if scope is None or child is None:
                return None
            if child.kind == "class":  # built with arguments: a field may be one of them
                plain = not node.args and not node.keywords
                return child if plain or "__init__" in child.children else None
            returned = scope.returns.get(node.func.id)
            return self._instance(returned, At(child), depth + 1) if returned else None
        written: list[ast.expr | None] = []
        if isinstance(node, ast.Name):
            binding = at.env.get(node.id)
            if isinstance(binding, Alias):
                where = At(binding.scope) if binding.scope is not None else at
                return self._instance(binding.node, where, depth + 1)
            scope = None if node.id in at.env else self.lookup(node.id, at.scope)
            written = scope.assigned.get(node.id, []) if scope else []
        elif isinstance(node, ast.Attribute):
            owner = self._class(node.value, at, depth + 1)
            scope = self.member(owner, node.attr) if owner else None
            written = (
                (scope.assigned.get(node.attr) or scope.attrs.get(node.attr) or []) if scope else []
            )
        else:
            return None
        if scope is None or len(written) != 1 or written[0] is None:
            return None
        return self._instance(written[0], At(scope), depth + 1)

    def why_not(self, node: ast.expr, at: At) -> str | None:
        """Why a threshold named by ``node`` has no value here; None when not a name."""
        if isinstance(node, ast.Name):
            scope, name = self.lookup(node.id, at.scope), node.id
            written = scope.assigned.get(name, []) if scope else []
            lines = scope.lines.get(name, []) if scope else []
        elif isinstance(node, ast.Attribute) and (owner := self._class(node.value, at)):
            owner = self.member(owner, node.attr)
            scope, name = owner, node.attr
            written = [*owner.assigned.get(name, []), *owner.attrs.get(name, [])]
            lines = sorted([*owner.lines.get(name, []), *owner.attr_lines.get(name, [])])
        else:
            return None
        if scope is None or not written:
            return "not assigned in this file"
        function = (
            scope.node if isinstance(scope.node, ast.FunctionDef | ast.AsyncFunctionDef) else None
        )
        if function and written == [None] and name in (a.arg for a in function.args.args):
            return f"a parameter of {scope.name}(): its value comes from the callers"
        if len(written) > 1:
            shown = ", ".join(str(n) for n in lines[:5])
            return f"assigned {len(written)} times (lines {shown}): its value is not known"
        return f"assigned something other than a number (line {lines[0]})"

    # ------------------------------------------------------------------ values

    def _other(self, at: At) -> Resolver | None:
        """The resolver of another module when ``at`` is in one (None: this module's)."""
        if self.linker is None:
            return None
        owner = self.linker.owner(at.scope)
        return owner if owner is not None and owner is not self else None

    def key(self, node: ast.expr, at: At, depth: int = 0) -> str | int | None:
        """A subscript key: a string or an integer (names resolved)."""
        if (other := self._other(at)) is not None:
            return other.key(node, at, depth)
        found = self.source.number(node)
        if found is not None:
            return int(found[0]) if found[0].is_integer() and "." not in found[1].literal else None
        value = self.value(node, at, depth + 1)
        return value if isinstance(value, str | int) else None

    def value(self, node: ast.expr, at: At, depth: int = 0) -> Value | None:
        """What ``node`` is worth at ``at`` (None: unknown)."""
        if depth > MAX_DEPTH:
            return None
        if (other := self._other(at)) is not None:
            return other.value(node, at, depth)
        number = self.source.number(node)
        if number is not None:
            return Num(number[0], number[1], origin=self.origin)
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self._name(node.id, at, depth)
        if isinstance(node, ast.Attribute) and node.attr != "nan":
            owner = self._class(node.value, at)
            if owner is not None:
                return self.constant(node.attr, self.member(owner, node.attr), depth)
            if (linked := self._linked(node, at, depth)) is not None:
                return linked
            base = self.value(node.value, at, depth + 1)
            return field_of(base, node.attr) if isinstance(base, Record) else None
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, at, depth + 1)
            key = self.key(node.slice, at, depth) if isinstance(base, Table | Record) else None
            return entry_of(base, key) if key is not None else None
        if isinstance(node, ast.List | ast.Tuple):
            return self._list(node.elts, at, depth)
        if isinstance(node, ast.Dict):
            return self._dict(node.keys, node.values, at, depth)
        if isinstance(node, ast.IfExp):
            return self._ifexp(node, at, depth)
        nan = self.source.nan(node)
        if nan is not None:
            return Num(None, nan)
        return self._call(node, at, depth) if isinstance(node, ast.Call) else None

    def _name(self, name: str, at: At, depth: int) -> Value | None:
        if name in at.env:
            binding = at.env[name]
            found: Value | Alias | None = None
            if isinstance(binding, Group) and binding is at.group:
                found = binding.values[name][at.index]
            elif isinstance(binding, Alias):
                found = binding
            if isinstance(found, Alias):
                where = At(found.scope) if found.scope is not None else at
                return self.value(found.node, where, depth + 1)
            return found
        scope = self.lookup(name, at.scope)
        if scope is not None and self._imported(scope, name):
            assert self.linker is not None
            linked = self.linker.resolve(scope, name)
            if linked is not None:
                other, attr = linked
                return other.top_level(attr, depth + 1) if attr else None
        return self.constant(name, scope, depth) if scope is not None else None

    def _branches(self, name: str, scope: Scope, written: int, depth: int) -> Value | None:
        """A name assigned in the branches of an ``if`` statement (``python_branches``)."""
        found = branches(scope.node, name, written)
        return self._choice(found, At(scope), depth) if found is not None else None

    def _ifexp(self, node: ast.IfExp, at: At, depth: int) -> Value | None:
        test = condition(node.test)
        return self._choice([(test, node.body), (f"not {test}", node.orelse)], at, depth)

    def _choice(self, alternatives: list[tuple[str, ast.expr]], at: At, depth: int) -> Value | None:
        """A ``Choice`` of the alternatives' values, each with its condition (nested
        conditionals flattened); None when one is unknown or there are too many."""
        found: list[tuple[str, Value]] = []
        for prefix, branch in alternatives:
            value = self.value(branch, at, depth + 1)
            if value is None:
                return None
            if isinstance(value, Choice):
                found += [(f"{prefix} and {c}", v) for c, v in value.branches]
            else:
                found.append((prefix, value))
        return Choice(tuple(found)) if len(found) <= MAX_BRANCHES else None

    def _imported(self, scope: Scope, name: str) -> bool:
        """Whether ``name`` may be read through an import: bound once, at the top level
        (a module that also assigns it, or imports it twice, keeps it unknown)."""
        return (
            self.linker is not None
            and scope.kind == "module"
            and scope.assigned.get(name) == [None]
        )

    def top_level(self, name: str, depth: int) -> Value | None:
        """The value of the module-level ``name`` (a constant, or imported in turn)."""
        return self._name(name, At(self.module.module), depth)

    def _linked(self, node: ast.Attribute, at: At, depth: int) -> Value | None:
        """``thresholds.ACC_MIN`` / ``tests.thresholds.ACC_MIN``: a constant of an
        imported repository module."""
        name = dotted(node)
        if self.linker is None or not name or name.startswith("?"):
            return None
        scope = self.lookup(name.split(".", 1)[0], at.scope)
        if scope is None or not self._imported(scope, name.split(".", 1)[0]):
            return None
        found = self.linker.resolve(scope, name)
        if found is None or not found[1] or "." in found[1]:
            return None
        return found[0].top_level(found[1], depth + 1)

    def _list(self, elts: list[ast.expr], at: At, depth: int) -> Value | None:
        if len(elts) > MAX_ENTRIES:
            return None
        values = [self.value(e, at, depth + 1) for e in elts]
        if values and all(isinstance(v, Num | Table) for v in values):
            return Table(tuple((i, v) for i, v in enumerate(values) if v is not None), True)
        return None

    def _dict(
        self, keys: list[ast.expr | None], values: list[ast.expr], at: At, depth: int
    ) -> Value | None:
        if len(keys) > MAX_ENTRIES or not keys:
            return None
        pairs: list[tuple[str | int, Value]] = []
        for key_node, value_node in zip(keys, values, strict=True):
            key = self.key(key_node, at, depth) if key_node is not None else None
            value = self.value(value_node, at, depth + 1)
            if key is None or value is None:
                continue
            pairs.append((key, value))
        if not pairs:
            return None
        pairs = list(dict(pairs).items())  # a repeated key: its last value, as Python
        if all(isinstance(v, Num | Table) for _, v in pairs):
            return Table(tuple(pairs))
        return Record(tuple((str(k), v) for k, v in pairs))

    def _call(self, node: ast.Call, at: At, depth: int) -> Value | None:
        name = dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if last in _CONVERSIONS and len(node.args) == 1:
            return self.value(node.args[0], at, depth + 1)
        if not node.args and not node.keywords:
            if isinstance(node.func, ast.Name) and (scope := self.lookup(last, at.scope)):
                returned = scope.returns.get(last)
            else:
                owner = (
                    self._class(node.func.value, at)
                    if isinstance(node.func, ast.Attribute)
                    else None
                )
                owner = self.member(owner, last) if owner else None
                returned = owner.returns.get(last) if owner else None
            if returned is not None:
                where = (scope if isinstance(node.func, ast.Name) else owner) or at.scope
                inside = At(where.children.get(last, at.scope))  # its locals, then outward
                value = self.value(returned, inside, depth + 1)
                return named(value, where.qualify(last), "") if value is not None else None
        if node.keywords and (last[:1].isupper() or last == "dict") and not node.args:
            fields = [(k.arg, self.value(k.value, at, depth + 1)) for k in node.keywords if k.arg]
            kept = tuple((k, v) for k, v in fields if v is not None)
            if kept and last == "dict" and all(isinstance(v, Num | Table) for _, v in kept):
                return Table(tuple((k, v) for k, v in kept))
            return Record(kept) if kept else None
        return None
