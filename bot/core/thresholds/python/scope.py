"""The scopes of a Python module and what each assigns, found in one pass over the tree.

A name is a constant of its scope when the scope assigns it exactly once, as ``NAME = expr``
(or ``NAME: T = expr``); any other store (a second assignment, ``+=``, a ``for`` target, an
import, ``global NAME`` in a function) makes it a variable.  For classes the pass also records
``self.NAME = expr`` in their methods, and for every scope the functions whose body is one
``return <expr>`` (``def expected_losses(self): return [10.5, 10.4]``) and the fixtures
whose one exit is a ``return`` or ``yield`` at the top of their body.  Uses of names
(passed to a call, compared, used otherwise) are kept, a few per name, to explain hints.

The traversal is iterative: a deeply nested expression cannot exhaust the Python stack.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

ScopeNode = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_USES_KEPT = 8
_DEFINITIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_LEAVES = frozenset(
    {ast.Constant, type(None)}
    | {
        t
        for base in (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
        for t in base.__subclasses__()
    }
)


@dataclass(frozen=True, slots=True)
class Use:
    """How a name is used: ``how`` is ``call`` (with ``detail`` ``positional`` or the
    keyword), ``compare`` or ``other``; ``callee`` the function it is passed to."""

    line: int
    how: Literal["call", "compare", "other"]
    callee: str = ""
    detail: str = ""


@dataclass(eq=False)
class Scope:
    """A module, class or function: its qualified name (``TestAcc.test_gsm8k``) and stores."""

    kind: Literal["module", "class", "function"]
    name: str
    node: ScopeNode
    parent: Scope | None = None
    assigned: dict[str, list[ast.expr | None]] = field(default_factory=dict)
    lines: dict[str, list[int]] = field(default_factory=dict)
    attrs: dict[str, list[ast.expr | None]] = field(default_factory=dict)  # self.X (classes)
    attr_lines: dict[str, list[int]] = field(default_factory=dict)
    returns: dict[str, ast.expr] = field(default_factory=dict)
    children: dict[str, Scope] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    self_name: str = ""  # a method's first parameter (``self`` / ``cls``)
    unpacked: set[str] = field(default_factory=set)  # ``loss, acc = evaluate(m)``: from a call

    def qualify(self, name: str) -> str:
        """``name`` as assigned in this scope: ``ACC_MIN``, ``TestAcc.ACC_MIN``."""
        return f"{self.name}.{name}" if self.name else name

    @property
    def owner(self) -> Scope | None:
        """The class whose method this is (or the class itself)."""
        scope: Scope | None = self
        while scope is not None and scope.kind != "class":
            scope = scope.parent
        return scope

    def store(self, name: str, value: ast.expr | None, line: int) -> None:
        self.assigned.setdefault(name, []).append(value)
        self.lines.setdefault(name, []).append(line)


@dataclass
class Module:
    """Every scope of the module (the module first) and the uses of names."""

    scopes: list[Scope]
    uses: dict[str, list[Use]]
    calls: dict[str, list[tuple[ast.Call, Scope]]]  # by the function's name: f(), self.f()

    @property
    def module(self) -> Scope:
        return self.scopes[0]


def dotted(node: ast.expr) -> str:
    """``np.testing.assert_allclose`` for the expression naming a function ("" otherwise)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute) and len(parts) < 8:
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif parts:
        parts.append("?")
    return ".".join(reversed(parts))


def _returned(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    """What a function that only returns a value returns; for a pytest fixture, the value
    of its one ``return`` or ``yield`` at the top of its body (what a test receives)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return body[0].value
    if not any(
        dotted(d.func if isinstance(d, ast.Call) else d).endswith("fixture")
        for d in node.decorator_list
    ):
        return None
    given = [
        s.value.value if isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield) else s.value
        for s in body
        if isinstance(s, ast.Return) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield))
    ]
    exits = sum(isinstance(n, ast.Return | ast.Yield | ast.YieldFrom) for n in ast.walk(node))
    return given[0] if len(given) == exits == 1 else None


class _Builder:
    def __init__(self, tree: ast.Module) -> None:
        self.module = Scope("module", "", tree)
        self.scopes = [self.module]
        self.uses: dict[str, list[Use]] = {}
        self.other: dict[str, int] = {}  # name -> first line it is read on
        self.calls: dict[str, list[tuple[ast.Call, Scope]]] = {}
        self.stack: list[tuple[ast.AST, Scope]] = [(n, self.module) for n in tree.body]

    def use(self, name: str, use: Use) -> None:
        kept = self.uses.setdefault(name, [])
        if len(kept) < _USES_KEPT:
            kept.append(use)

    def used_name(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return "." + node.attr
        return None

    def define(self, node: ScopeNode, scope: Scope) -> None:
        assert not isinstance(node, ast.Module)
        kind: Literal["class", "function"] = (
            "class" if isinstance(node, ast.ClassDef) else "function"
        )
        child = Scope(kind, scope.qualify(node.name), node, scope)
        scope.store(node.name, None, node.lineno)
        scope.children.setdefault(node.name, child)
        self.scopes.append(child)
        self.stack += [(d, scope) for d in node.decorator_list]
        if isinstance(node, _FUNCTIONS):
            if (value := _returned(node)) is not None:
                scope.returns.setdefault(node.name, value)
            params = [*node.args.posonlyargs, *node.args.args]
            if scope.kind == "class" and params:
                child.self_name = params[0].arg
            for arg in (*params, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg):
                if arg is not None:
                    child.store(arg.arg, None, node.lineno)
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            self.stack += [(d, scope) for d in defaults]
        else:
            self.stack += [(b, scope) for b in node.bases]
        self.stack += [(n, child) for n in node.body]

    def children(self, node: ast.AST, scope: Scope) -> None:
        stack = self.stack
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                stack += [
                    (v, scope) for v in value if type(v) not in _LEAVES and isinstance(v, ast.AST)
                ]
            elif type(value) not in _LEAVES and isinstance(value, ast.AST):
                stack.append((value, scope))

    def visit(self, node: ast.AST, scope: Scope) -> None:
        kind = type(node)
        if kind is ast.Name:
            assert isinstance(node, ast.Name)
            if type(node.ctx) is ast.Load:
                self.other.setdefault(node.id, node.lineno)
            else:
                scope.store(node.id, None, node.lineno)
            return
        if kind is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            if type(node.ctx) is ast.Load:
                self.other.setdefault("." + node.attr, node.lineno)
            else:
                self.attribute_store(node, None, scope, node.lineno)
            self.stack.append((node.value, scope))
            return
        line = getattr(node, "lineno", 0)
        if kind in _DEFINITIONS:
            self.define(node, scope)  # type: ignore[arg-type]
            return
        if kind is ast.Lambda:
            return
        if isinstance(node, _COMPREHENSIONS):
            for generator in node.generators:
                self.stack += [(generator.iter, scope), *((i, scope) for i in generator.ifs)]
            elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            self.stack += [(e, scope) for e in elts]
            return
        if isinstance(node, ast.Global | ast.Nonlocal):
            scope.declared_global.update(node.names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            if self.assign(node.targets[0], node.value, scope, line):
                self.stack.append((node.value, scope))
                return
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if self.assign(node.target, node.value, scope, line):
                self.stack.append((node.value, scope))
                return
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                scope.store((alias.asname or alias.name).split(".")[0], None, line)
        elif kind is ast.Call:
            self.call(node, scope, line)  # type: ignore[arg-type]
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if (name := self.used_name(operand)) is not None:
                    self.use(name, Use(line, "compare"))
        self.children(node, scope)

    def assign(self, target: ast.expr, value: ast.expr, scope: Scope, line: int) -> bool:
        if isinstance(target, ast.Name):
            scope.store(target.id, value, line)
            return True
        if (
            isinstance(target, ast.Tuple | ast.List)
            and isinstance(value, ast.Tuple | ast.List)
            and len(target.elts) == len(value.elts)
            and all(isinstance(t, ast.Name) for t in target.elts)
            and not any(isinstance(v, ast.Starred) for v in value.elts)
        ):  # lo, hi = 0.7, 0.95: each name its element
            for name, element in zip(target.elts, value.elts, strict=True):
                self.assign(name, element, scope, line)
            return True
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Call):
            scope.unpacked.update(t.id for t in target.elts if isinstance(t, ast.Name))
        return isinstance(target, ast.Attribute) and self.attribute_store(
            target, value, scope, line
        )

    def attribute_store(
        self, node: ast.Attribute, value: ast.expr | None, scope: Scope, line: int
    ) -> bool:
        owner = scope.owner
        if not (isinstance(node.value, ast.Name) and scope.self_name and owner):
            return False
        if node.value.id != scope.self_name:
            return False
        owner.attrs.setdefault(node.attr, []).append(value)
        owner.attr_lines.setdefault(node.attr, []).append(line)
        return True

    def call(self, node: ast.Call, scope: Scope, line: int) -> None:
        callee = dotted(node.func).rsplit(".", 1)[-1] or "a function"
        func = node.func
        if isinstance(func, ast.Name) or (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        ):
            sites = self.calls.setdefault(callee, [])
            if len(sites) < _USES_KEPT * 25:
                sites.append((node, scope))
        for arg in node.args:
            if (name := self.used_name(arg)) is not None:
                self.use(name, Use(line, "call", callee, "positional"))
        for keyword in node.keywords:
            if keyword.arg and (name := self.used_name(keyword.value)) is not None:
                self.use(name, Use(line, "call", callee, keyword.arg))

    def build(self) -> Module:
        while self.stack:
            node, scope = self.stack.pop()
            self.visit(node, scope)
        for scope in self.scopes:
            for name in scope.declared_global & set(scope.assigned):
                if scope.kind == "function":  # global NAME; NAME = ...: a module variable
                    for line in scope.lines.pop(name):
                        self.module.store(name, None, line)
                    del scope.assigned[name]
        for scope in self.scopes:
            for lines in (*scope.lines.values(), *scope.attr_lines.values()):
                lines.sort()
        self.scopes[1:] = sorted(self.scopes[1:], key=lambda s: _position(s.node))
        for name, line in self.other.items():
            self.use(name, Use(line, "other"))
        return Module(self.scopes, self.uses, self.calls)


def _position(node: ScopeNode) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def build_module(tree: ast.Module) -> Module:
    """The module's scopes (module first, then classes and functions as found)."""
    return _Builder(tree).build()
