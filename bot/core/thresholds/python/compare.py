"""Comparisons of a metric with a limit or a reference band, as Python tests write them.

``R``, ``T`` are expressions with a known value, ``m`` the metric:

* limits: ``m >= 0.7``, ``0.7 <= m`` (flipped);
* references, two-sided: ``abs(m - R) <= T`` (absolute), ``abs(m - R) / R < T``,
  ``abs((m - R) / R) < T``, ``abs(m / R - 1) < T`` (relative), ``abs(m - R) <= T * abs(R)``,
  ``abs(m - R) <= A + T * abs(R)``;
* references, one-sided: ``m >= R * (1 - T)``, ``m <= R * (1 + T)``, ``m >= R - T``,
  ``m <= R + T``, ``m >= R - T * R``, ``m >= R * 0.95`` (rel 0.05, ``R`` a name),
  ``(R - m) / R <= T``, ``(m - R) / R <= T``, ``R - m <= T``; ``m <= 0.212 * 1.05`` (a
  literal reference: the factor is the one scale near 1); ``m - T < R`` and
  ``m + T > R`` when ``T``'s name says it is a tolerance (``RTOL``, ``margin``), ``m - R <= T``
  when ``T``'s or ``R``'s name says which is which.

Anything else is not a gate: a shape whose meaning is not certain is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.models import GateKind, Op
from bot.core.thresholds.python.scope import dotted
from bot.core.thresholds.python.words import bound_like, tolerance_like, words

Known = Callable[[ast.expr], bool]  # whether an expression has a value (a threshold's side)
Tol = ast.expr | float | None


@dataclass(frozen=True, slots=True)
class Check:
    """``metric op target`` (a limit) or ``metric`` within ``rel``/``abs`` of ``target``."""

    metric: ast.expr
    op: Op
    target: ast.expr
    kind: GateKind = "limit"
    rel: Tol = None
    abs: Tol = None


FLIP: dict[Op, Op] = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "=="}
_REFERENCE_WORDS = frozenset({"expected", "expect", "ref", "reference", "baseline", "golden"})


def _one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in (1, 1.0) and node.value is not True


def _factor(value: object, lower: bool) -> bool:
    """A scale a reference is multiplied by to give a band: 0.5 to 1 below, 1 to 2 above."""
    if not isinstance(value, float):
        return False
    return 0.5 <= value < 1 if lower else 1 < value <= 2


def _abs_of(node: ast.expr) -> ast.expr | None:
    """``abs(x)`` / ``np.abs(x)`` / ``math.fabs(x)`` / ``x.abs()`` -> ``x``."""
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func).rsplit(".", 1)[-1]
    if name in ("abs", "fabs", "absolute") and len(node.args) == 1:
        return node.args[0]
    if name == "abs" and not node.args and isinstance(node.func, ast.Attribute):
        return node.func.value
    return None


def _same(a: ast.expr, b: ast.expr) -> bool:
    inner = _abs_of(b)
    return ast.dump(a) == ast.dump(b) or (inner is not None and ast.dump(a) == ast.dump(inner))


def _product(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return node.left, node.right
    return None


def _named(node: ast.expr, vocabulary: frozenset[str] | None) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    if vocabulary is None:
        return bool(name) and tolerance_like(name)
    return any(w in vocabulary for w in words(name))


def _threshold_named(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return isinstance(node, ast.Name | ast.Attribute) and bound_like(name)


class Comparison:
    """Reads ``a op b`` comparisons, given which expressions have known values."""

    def __init__(self, known: Known) -> None:
        self.known = known

    def pair(self, a: ast.expr, op: Op, b: ast.expr) -> list[Check]:
        """``a op b`` in whichever orientation has a metric side."""
        found = self._oriented(a, op, b) or self._oriented(b, FLIP[op], a)
        if found is None and _threshold_named(b) and not _threshold_named(a):
            found = Check(a, op, b)  # a threshold of unknown value: a hint, not a gate
        elif found is None and _threshold_named(a) and not _threshold_named(b):
            found = Check(b, FLIP[op], a)
        return [found] if found is not None else []

    def difference(self, x: ast.expr) -> bool:
        """Whether ``x`` is a metric's difference from a reference: ``abs(m - R)``,
        ``abs(m - R) / R`` and the other relative forms."""
        return self._abs_diff(x) is not None or self._relative_diff(x) is not None

    def _oriented(self, x: ast.expr, op: Op, t: ast.expr) -> Check | None:
        """``x op t`` with ``x`` the metric side."""
        known = self.known
        if known(x):
            return None
        lower = op in (">", ">=")
        relative = self._relative_diff(x)
        if relative is not None:
            m, ref = relative
            return Check(m, "==", ref, "reference", rel=t) if not lower and known(t) else None
        difference = self._abs_diff(x)
        if difference is not None:
            m, ref = difference
            tolerance = self._tolerance(t, ref) if not lower else None
            return Check(m, "==", ref, "reference", *tolerance) if tolerance else None
        shifted = self._shifted(x, lower, t)
        if shifted is not None:
            return shifted
        if known(t):
            return Check(x, op, t)
        band = self._band(t, lower)
        if band is None:
            return None
        ref, rel, absolute = band
        return Check(x, ">=" if lower else "<=", ref, "reference", rel, absolute)

    def _abs_diff(self, x: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        """``abs(m - R)`` / ``abs(R - m)`` -> (m, R)."""
        inner = _abs_of(x)
        if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub)):
            return None
        a, b = inner.left, inner.right
        if self.known(b) and not self.known(a):
            return a, b
        if self.known(a) and not self.known(b):
            return b, a
        return None

    def _relative_diff(self, x: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        """``abs(m - R) / R``, ``abs((m - R) / R)``, ``abs(m / R - 1)`` -> (m, R)."""
        if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Div):
            found = self._abs_diff(x.left)
            return found if found and _same(found[1], x.right) else None
        inner = _abs_of(x)
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div):
            found = self._abs_diff(ast.Call(ast.Name("abs"), [inner.left], []))
            return found if found and _same(found[1], inner.right) else None
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
            ratio, one = (
                (inner.left, inner.right) if _one(inner.right) else (inner.right, inner.left)
            )
            if (
                _one(one)
                and isinstance(ratio, ast.BinOp)
                and isinstance(ratio.op, ast.Div)
                and self.known(ratio.right)
                and not self.known(ratio.left)
            ):
                return ratio.left, ratio.right
        return None

    def _tolerance(self, t: ast.expr, ref: ast.expr) -> tuple[Tol, Tol] | None:
        """The tolerance of ``abs(m - R) <= t``: (rel, abs)."""
        if self.known(t):
            return None, t
        parts = _product(t)
        if parts is not None:
            for factor, other in (parts, parts[::-1]):
                if _same(ref, other) and self.known(factor):
                    return factor, None
        if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Add):
            for absolute, scaled in ((t.left, t.right), (t.right, t.left)):
                rel = self._tolerance(scaled, ref) if self.known(absolute) else None
                if rel is not None and rel[0] is not None:
                    return rel[0], absolute
        return None

    def _shifted(self, x: ast.expr, lower: bool, t: ast.expr) -> Check | None:
        """``m - T < R``, ``m + T > R``, ``m - R <= T``, ``R - m <= T``, ``(R - m) / R <= T``."""
        known = self.known
        if not isinstance(x, ast.BinOp) or not known(t):
            return None
        a, b = x.left, x.right
        if isinstance(x.op, ast.Div) and isinstance(a, ast.BinOp):
            if isinstance(a.op, ast.Sub) and not lower and _same(a.right, b) and known(b):
                return None if known(a.left) else Check(a.left, "<=", a.right, "reference", t)
            if isinstance(a.op, ast.Sub) and not lower and _same(a.left, b) and known(b):
                return None if known(a.right) else Check(a.right, ">=", a.left, "reference", t)
            return None
        if isinstance(x.op, ast.Sub) and known(b) and not known(a) and not lower:
            if _named(b, None) and not _named(t, None):  # m - T < R: m <= R + T
                return Check(a, "<=", t, "reference", None, b)
            if _named(t, None) or _named(b, _REFERENCE_WORDS):  # m - R <= T
                return Check(a, "<=", b, "reference", None, t)
            return None
        if isinstance(x.op, ast.Sub) and known(a) and not known(b) and not lower:
            return Check(b, ">=", a, "reference", None, t)  # R - m <= T: m >= R - T
        if isinstance(x.op, ast.Add) and lower:
            for m, tol in ((a, b), (b, a)):
                if known(tol) and not known(m) and _named(tol, None):
                    return Check(m, ">=", t, "reference", None, tol)  # m + T > R
        return None

    def _band(self, t: ast.expr, lower: bool) -> tuple[ast.expr, Tol, Tol] | None:
        """``R * (1 - T)``, ``R * (1 + T)``, ``R - T``, ``R + T``, ``R * 0.95`` -> (R, rel, abs)."""
        known = self.known
        parts = _product(t)
        if parts is not None:
            for ref, factor in (parts, parts[::-1]):
                if not known(ref):
                    continue
                if isinstance(factor, ast.BinOp) and _one(factor.left) and known(factor.right):
                    if isinstance(factor.op, ast.Sub) and lower:
                        return ref, factor.right, None
                    if isinstance(factor.op, ast.Add) and not lower:
                        return ref, factor.right, None
                scale = factor.value if isinstance(factor, ast.Constant) else None
                if isinstance(scale, float) and _factor(scale, lower):
                    if isinstance(ref, ast.Constant) and _factor(ref.value, lower):
                        continue  # 0.9 * 0.95: which is the reference?
                    return ref, round(1 - scale if lower else scale - 1, 12), None
            return None
        wanted = ast.Sub if lower else ast.Add
        if isinstance(t, ast.BinOp) and isinstance(t.op, wanted) and known(t.left):
            scaled = _product(t.right)
            if scaled is not None:
                for factor, other in (scaled, scaled[::-1]):
                    if _same(t.left, other) and known(factor):
                        return t.left, factor, None
            if known(t.right):
                return t.left, None, t.right
        return None
