"""The checking statements of Python tests, each turned into ``Check``s (``python_compare``).

* ``assert <test>``: comparisons (``0.6 <= m <= 0.9`` is two; ``0 <= p <= 1`` is a range
  check, none), ``and`` of several, ``not``, ``math.isclose`` / ``np.isclose`` /
  ``torch.allclose`` (also under ``.all()`` / ``all()``), ``m == pytest.approx(R, rel=, abs=)``;
* ``if <test>: errors.append(…)`` (or ``failed = True``, ``errors += 1``) in a function that
  later fails on ``errors`` (``if errors: sys.exit(1)``, ``assert not errors``): the negation;
* ``if <test>: pytest.fail()`` / ``raise`` / ``sys.exit(1)`` / ``self.fail()``: the negation
  (``or`` of several is several; so is ``and``, whose parts that compare no threshold,
  ``x is not None``, read as nothing);
* calls: ``self.assertGreater`` / ``GreaterEqual`` / ``Less`` / ``LessEqual`` (either argument
  may be the threshold: ``assertGreater(0.9, m)`` is ``m < 0.9``), ``assertTrue``,
  ``assertFalse``, ``assertAlmostEqual(m, R, delta= | places=)``, ``assertEqual(m,
  pytest.approx(R))``, ``torch.testing.assert_close``, ``numpy.testing.assert_allclose``,
  ``assert_almost_equal``, ``assert_array_almost_equal``, ``assert_array_less``.

Tolerance defaults when a call gives none (each function's documented ones):
``pytest.approx`` rel 1e-6 / abs 1e-12 (only the given one when one is given, as pytest
does), ``torch.testing.assert_close`` rtol 1.3e-6 / atol 1e-5 (float32),
``torch.testing.assert_allclose`` rtol 1e-4 / atol 1e-5, ``numpy.testing.assert_allclose``
rtol 1e-7 / atol 0, ``numpy``/``torch`` ``isclose`` and ``allclose`` rtol 1e-5 / atol 1e-8,
``math.isclose`` rel_tol 1e-9 / abs_tol 0, ``assertAlmostEqual`` places 7 (abs 0.5e-7),
``assert_almost_equal`` decimal 7 (abs 1.5e-7), ``assert_array_almost_equal`` decimal 6.
(``pytest.approx`` and ``math.isclose`` take the larger of the two tolerances, the bot
their sum: the same band when one of them is given.)
"""

from __future__ import annotations

import ast

from bot.core.models import Op
from bot.core.thresholds.python.compare import Check, Comparison, Known, Tol
from bot.core.thresholds.python.scope import dotted

_OPS: dict[type[ast.cmpop], Op] = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}
_NEGATE: dict[Op, Op] = {">": "<=", ">=": "<", "<": ">=", "<=": ">", "==": "=="}
_UNITTEST: dict[str, Op] = {
    "assertGreater": ">", "assertGreaterEqual": ">=", "assertLess": "<", "assertLessEqual": "<=",
}  # fmt: skip
_CLOSE: dict[str, tuple[tuple[str, str], int | None, tuple[float | None, float | None]]] = {
    "assert_close": (("rtol", "atol"), None, (1.3e-6, 1e-5)),
    "assert_allclose": (("rtol", "atol"), 2, (1e-7, None)),
    "allclose": (("rtol", "atol"), 2, (1e-5, 1e-8)),
    "isclose": (("rtol", "atol"), 2, (1e-5, 1e-8)),
}
_MATH_ISCLOSE = (("rel_tol", "abs_tol"), None, (1e-9, None))
_TORCH_ALLCLOSE = (("rtol", "atol"), None, (1e-4, 1e-5))  # torch.testing.assert_allclose
_DECIMALS = {"assert_almost_equal": 7, "assert_array_almost_equal": 6}
_FAILING = frozenset({"fail", "exit", "_exit", "abort"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class Shapes(Comparison):
    """Finds the checks of statements, given which expressions have known values and the
    names the function records failures in (``recorders``)."""

    def __init__(self, known: Known, recorders: frozenset[str] = frozenset()) -> None:
        super().__init__(known)
        self.recorders = recorders

    def statement(self, stmt: ast.stmt) -> list[Check]:
        if isinstance(stmt, ast.Assert):
            return self.test(stmt.test)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return self.call(stmt.value)
        if isinstance(stmt, ast.If) and stmt.body and _fails(stmt.body[-1]):
            return self.negated(stmt.test)
        if isinstance(stmt, ast.If) and any(_recorded(s) & self.recorders for s in stmt.body):
            return self.negated(stmt.test)
        return []

    def test(self, node: ast.expr) -> list[Check]:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return [c for value in node.values for c in self.test(value)]
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.negated(node.operand)
        if isinstance(node, ast.Call):
            return self.call(_unwrap_all(node))
        return []

    def negated(self, node: ast.expr) -> list[Check]:
        if isinstance(node, ast.BoolOp):  # ``or``: each fails; ``and``: each guarded part does
            return [c for value in node.values for c in self.negated(value)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.test(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            op = _NEGATE[_OPS[type(node.ops[0])]]
            return self.pair(node.left, op, node.comparators[0])
        return []

    def compare(self, node: ast.Compare) -> list[Check]:
        operands = [node.left, *node.comparators]
        ends = (operands[0], operands[-1])
        if len(operands) == 3 and {getattr(e, "value", None) for e in ends} == {0, 1}:
            return []  # 0 <= p <= 1: a range check, not a threshold
        checks: list[Check] = []
        for a, cmpop, b in zip(operands, node.ops, operands[1:], strict=False):
            if isinstance(cmpop, ast.Eq):
                checks += self.approx(a, b) or self.approx(b, a)
            elif type(cmpop) in _OPS:
                checks += self.pair(a, _OPS[type(cmpop)], b)
        return checks

    def approx(self, metric: ast.expr, other: ast.expr) -> list[Check]:
        if not (isinstance(other, ast.Call) and dotted(other.func).endswith("approx")):
            return []
        if not other.args or self.known(metric):
            return []
        kw = {k.arg: k.value for k in other.keywords if k.arg}
        rel: Tol = kw.get("rel", other.args[1] if len(other.args) > 1 else None)
        absolute: Tol = kw.get("abs", other.args[2] if len(other.args) > 2 else None)
        if rel is None and absolute is None:
            rel, absolute = 1e-6, 1e-12
        return [Check(metric, "==", other.args[0], "reference", rel, absolute)]

    def call(self, node: ast.Call) -> list[Check]:
        name = dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        args = node.args
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if last in _UNITTEST and len(args) >= 2:
            return self.pair(args[0], _UNITTEST[last], args[1])
        if last == "assertTrue" and args:
            return self.test(args[0])
        if last == "assertFalse" and args:
            return self.negated(args[0])
        if last == "assertEqual" and len(args) >= 2:
            return self.approx(args[0], args[1]) or self.approx(args[1], args[0])
        if last == "assert_array_less" and len(args) >= 2:
            return self.pair(args[0], "<", args[1])
        if last in ("assertAlmostEqual", "assertAlmostEquals") and len(args) >= 2:
            places = kw.get("places", args[2] if len(args) > 2 else None)
            absolute: Tol = kw.get("delta") or _decimals(places, 0.5, 7)
            return self._close(args[0], args[1], None, absolute)
        if last in _DECIMALS and len(args) >= 2:
            decimal = kw.get("decimal", args[2] if len(args) > 2 else None)
            return self._close(args[0], args[1], None, _decimals(decimal, 1.5, _DECIMALS[last]))
        spec = _CLOSE.get(last)
        if spec is None or len(args) < 2:
            return []
        if name.startswith("math.") or "rel_tol" in kw or "abs_tol" in kw:
            spec = _MATH_ISCLOSE
        elif "torch" in name and last == "assert_allclose":
            spec = _TORCH_ALLCLOSE
        (rel_kw, abs_kw), position, (rel_default, abs_default) = spec
        positional = args[position:] if position is not None else []
        rel: Tol = kw.get(rel_kw, positional[0] if positional else None)
        absolute = kw.get(abs_kw, positional[1] if len(positional) > 1 else None)
        return self._close(
            args[0],
            args[1],
            rel if rel is not None else rel_default,
            absolute if absolute is not None else abs_default,
        )

    def _close(self, a: ast.expr, b: ast.expr, rel: Tol, absolute: Tol) -> list[Check]:
        if self.known(b) and not self.known(a):
            return [Check(a, "==", b, "reference", rel, absolute)]
        if self.known(a) and not self.known(b):
            return [Check(b, "==", a, "reference", rel, absolute)]
        return []

    # ------------------------------------------------------------------ one comparison


def _decimals(node: ast.expr | None, scale: float, default: int) -> float | None:
    if node is None:
        return scale * 10.0**-default
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return scale * 10.0 ** -min(max(node.value, 0), 300)
    return None


def _unwrap_all(node: ast.Call) -> ast.Call:
    """``torch.isclose(...).all()``, ``all(np.isclose(...))``, ``bool(...)`` -> the inner call."""
    for _ in range(4):
        name = dotted(node.func).rsplit(".", 1)[-1]
        if name in ("all", "item") and not node.args and isinstance(node.func, ast.Attribute):
            inner = node.func.value
        elif name in ("all", "bool") and len(node.args) == 1:
            inner = node.args[0]
        else:
            return node
        if not isinstance(inner, ast.Call):
            return node
        node = inner
    return node


def _recorded(stmt: ast.stmt) -> set[str]:
    """The names a statement records a failure in: ``errors.append(…)`` (``add``,
    ``extend``), ``errors += …``, ``errors[k] = …``, ``failed = True`` / ``ok = False``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in ("append", "add", "extend"):
            return {func.value.id} if isinstance(func.value, ast.Name) else set()
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return {target.value.id}
        if isinstance(target, ast.Name) and isinstance(stmt.value, ast.Constant):
            return {target.id} if isinstance(stmt.value.value, bool) else set()
    return set()


def _flag(node: ast.expr) -> str | None:
    """``errors``, ``not errors``, ``len(errors)``, ``bool(errors)``, ``len(errors) > 0``,
    ``errors == []`` -> ``errors``."""
    for _ in range(4):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node = node.operand
        elif isinstance(node, ast.Call) and dotted(node.func) in ("len", "bool", "int", "any"):
            if len(node.args) != 1:
                return None
            node = node.args[0]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            node = node.left
        elif isinstance(node, ast.IfExp):
            node = node.test
        else:
            break
    return node.id if isinstance(node, ast.Name) else None


def exit_codes(module: ast.AST, limit: int = 50_000) -> frozenset[str]:
    """The functions whose result is the process's exit status: ``sys.exit(main())``,
    ``raise SystemExit(main())``; reads at most ``limit`` nodes."""
    found: set[str] = set()
    for count, node in enumerate(ast.walk(module)):
        if count > limit:
            break
        if not (isinstance(node, ast.Call) and len(node.args) == 1):
            continue
        name = dotted(node.func).rsplit(".", 1)[-1]
        inner = node.args[0]
        if name in ("exit", "SystemExit") and isinstance(inner, ast.Call):
            found.add(dotted(inner.func))
    return frozenset(found)


def recorders(
    function: ast.AST, exits: frozenset[str] = frozenset(), limit: int = 5_000
) -> frozenset[str]:
    """The names a function fails on once it has gathered them (``if errors: sys.exit(1)``,
    ``assert not errors``, ``assert ok``, ``sys.exit(1 if failed else 0)``, ``return 1 if
    errors else 0`` in a function named in ``exits``), nested functions and classes left
    out; reads at most ``limit`` nodes."""
    returns = isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) and (
        function.name in exits
    )
    found: set[str] = set()
    pending: list[ast.AST] = list(ast.iter_child_nodes(function))
    count = 0
    while pending and count < limit:
        node = pending.pop()
        count += 1
        if isinstance(node, _DEFINITIONS):
            continue  # another scope's names
        pending += ast.iter_child_nodes(node)
        name: str | None = None
        failing = isinstance(node, ast.If) and node.body and _fails(node.body[-1])
        if isinstance(node, ast.Assert | ast.If) and (failing or isinstance(node, ast.Assert)):
            name = _flag(node.test)
        elif isinstance(node, ast.Call) and dotted(node.func).rsplit(".", 1)[-1] == "exit":
            name = _flag(node.args[0]) if len(node.args) == 1 else None
        elif isinstance(node, ast.Return) and returns and node.value is not None:
            name = _flag(node.value)
        if name is not None:
            found.add(name)
    return frozenset(found)


def _fails(stmt: ast.stmt) -> bool:
    """``raise``, ``pytest.fail(...)``, ``sys.exit(1)``, ``self.fail()``, ``assert False``."""
    if isinstance(stmt, ast.Raise):
        return True
    if isinstance(stmt, ast.Assert):
        return isinstance(stmt.test, ast.Constant) and not stmt.test.value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        name = dotted(call.func).rsplit(".", 1)[-1]
        if name in ("exit", "_exit"):
            code = call.args[0] if call.args else None
            return not (
                code is None or (isinstance(code, ast.Constant) and code.value in (0, None))
            )
        return name in _FAILING
    return False
