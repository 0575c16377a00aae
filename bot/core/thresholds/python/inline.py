"""Locals followed into a check: a name assigned once from arithmetic on known values is read
as that arithmetic where it is compared (``allowed = ref * 1.05; assert m <= allowed`` is
``assert m <= ref * 1.05``: reference ``ref``, rel 0.05), as is a name holding a difference
from a reference (``err = abs(r["f1"] - expected); assert err < tol``).  ``python_compare``
then reads the shapes it knows; the literals keep their places (the assignment's line).

Names with a value of their own (``lower = 0.71``, ``floor = 0.9 if fast else 0.8``) are not
replaced: the resolver reads them, and the gate keeps their name.  A name is replaced only
when its definition reads the same names where it is compared (no shadowing, no loop
variable).  Bounds: ``MAX_INLINE_DEPTH`` nested replacements and ``MAX_INLINED`` replacements
per statement.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TypeVar

from bot.core.thresholds.python.compare import Comparison
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.values import At

MAX_INLINE_DEPTH = 8
MAX_INLINED = 32
_OPAQUE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_Node = TypeVar("_Node", bound=ast.AST)


class Inliner:
    """Replaces the names of one statement's check (``known``: whether a node has a value)."""

    def __init__(
        self,
        resolver: Resolver,
        at: At,
        known: Callable[[ast.expr], bool],
        cache: dict[tuple[int, str], tuple[ast.expr, frozenset[str]] | None],
    ) -> None:
        self.resolver = resolver
        self.at = at
        self.known = known
        self.left = MAX_INLINED
        self.cache = cache  # per scope and name: its definition and the names it reads

    def statement(self, stmt: ast.stmt) -> ast.stmt:
        """``stmt`` with its check's names replaced (the statement itself when none is)."""
        if isinstance(stmt, ast.Assert):
            test = self.expr(stmt.test, 0)
            return stmt if test is stmt.test else _with(stmt, test=test)
        if isinstance(stmt, ast.If):
            test = self.expr(stmt.test, 0)
            return stmt if test is stmt.test else _with(stmt, test=test)
        if isinstance(stmt, ast.Expr):
            value = self.expr(stmt.value, 0)
            return stmt if value is stmt.value else _with(stmt, value=value)
        return stmt

    def expr(self, node: ast.expr, depth: int) -> ast.expr:
        if depth == 0 and not any(
            isinstance(n, ast.Name) and self._definition(n) is not None for n in ast.walk(node)
        ):
            return node  # nothing to follow (most checks): the tree is not copied
        if depth > MAX_INLINE_DEPTH or isinstance(node, _OPAQUE):
            return node
        if isinstance(node, ast.Name):
            found = self._definition(node) if isinstance(node.ctx, ast.Load) else None
            if found is None or self.left <= 0:
                return node
            self.left -= 1
            return self.expr(found, depth + 1)
        changes: dict[str, object] = {}
        for name, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                new = self.expr(value, depth + 1)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, list) and any(isinstance(v, ast.expr) for v in value):
                items = [self.expr(v, depth + 1) if isinstance(v, ast.expr) else v for v in value]
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[name] = items
        return _with(node, **changes) if changes else node

    def _definition(self, node: ast.Name) -> ast.expr | None:
        """The expression ``node`` stands for, when it is arithmetic on known values or a
        difference from a reference; None otherwise."""
        at = self.at
        if node.id in at.env:
            return None
        key = (id(at.scope), node.id)
        if key not in self.cache:
            self.cache[key] = self._candidate(node.id)
        found = self.cache[key]
        if found is None or self.known(node) or found[1] & at.env.keys():
            return None  # the definition would read a loop's variable here
        definition = found[0]
        if _arithmetic(definition, self.known) or Comparison(self.known).difference(definition):
            return definition
        return None

    def _candidate(self, name: str) -> tuple[ast.expr, frozenset[str]] | None:
        """The one expression assigned to ``name`` when it may be arithmetic and reads the
        same names where it is compared, with the names it reads."""
        resolver, here = self.resolver, self.at.scope
        scope = resolver.lookup(name, here)
        written = scope.assigned.get(name, []) if scope else []
        if scope is None or len(written) != 1 or written[0] is None:
            return None
        definition = written[0]
        if not isinstance(definition, ast.BinOp | ast.UnaryOp | ast.Call):
            return None
        names = frozenset(n.id for n in ast.walk(definition) if isinstance(n, ast.Name))
        if any(resolver.lookup(n, here) is not resolver.lookup(n, scope) for n in names):
            return None  # the definition would read other names here
        return definition, names


def _arithmetic(node: ast.expr, known: Callable[[ast.expr], bool]) -> bool:
    """Arithmetic whose every operand has a value (``ref * 1.05``, ``BOUND * (1 + RTOL)``)."""
    if isinstance(node, ast.BinOp):
        return all(
            _arithmetic(side, known) if isinstance(side, ast.BinOp | ast.UnaryOp) else known(side)
            for side in (node.left, node.right)
        )
    if isinstance(node, ast.UnaryOp):
        return known(node) or _arithmetic(node.operand, known)
    return False


def _with(node: _Node, **changes: object) -> _Node:
    """A shallow copy of ``node`` with some fields replaced (the tree itself is not changed)."""
    new = copy.copy(node)
    for name, value in changes.items():
        setattr(new, name, value)
    return new
