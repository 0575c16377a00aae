"""How a Python script a shell script runs compares its command-line arguments.

``python tests/eval_assert.py "$RESULTS" throughput 100.0``: the script reads ``sys.argv[3]``
(or an ``argparse`` option / positional), compares it with the value at ``results[sys.argv[2]]``
(or ``data["score"]``), and fails when the comparison says so (``assert``, ``if …:``
``return 1`` / ``sys.exit(…)`` / ``exit(…)`` / ``raise``, ``sys.exit(0 if … else 1)``).
``argument_checks`` says which argument is the bound, which names the metric, and the
operator a run must pass.  The text is parsed with ``ast`` (at most ``MAX_CHARS``), never
imported or run; names are followed one assignment deep.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import cast

from bot.core.models import Op

MAX_CHARS = 64 * 1024
_OPS: dict[type[ast.cmpop], Op] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_FLIP: dict[Op, Op] = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}
NEGATED: dict[Op, Op] = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "=="}


@dataclass(frozen=True, slots=True)
class Positional:
    """The ``index``-th (1-based) positional argument of ``argparse``: options skipped."""

    index: int


Arg = int | Positional | tuple[str, ...]
"""``sys.argv[i]``, an argparse positional, or an option by its spellings."""


@dataclass(frozen=True, slots=True)
class ArgCheck:
    """A run passes when ``value op bound``; ``bound`` an argument; the value is read at the
    argument ``metric`` or at the literal key ``key``."""

    bound: Arg
    op: Op
    metric: Arg | None = None
    key: str | None = None


def _argparse(tree: ast.Module) -> dict[str, Arg]:
    """``dest`` -> the argument, for ``add_argument`` calls."""
    found: dict[str, Arg] = {}
    positional = 0
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if not names or not all(isinstance(n, str) for n in names):
            continue
        spellings = cast(list[str], names)
        dest = next(
            (
                k.value.value
                for k in node.keywords
                if k.arg == "dest" and isinstance(k.value, ast.Constant)
            ),
            None,
        )
        if spellings[0].startswith("-"):
            longest = max(spellings, key=len).lstrip("-").replace("-", "_")
            found[str(dest or longest)] = tuple(spellings)
        else:
            positional += 1
            found[str(dest or spellings[0])] = Positional(positional)
    return found


class _Reader:
    def __init__(self, tree: ast.Module) -> None:
        self.options = _argparse(tree)
        self.names: dict[str, ast.expr] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                self._bind(node.targets[0], node.value)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value if target.id not in self.names else ast.Constant(None)
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts, strict=False):
                self._bind(t, v)

    def _follow(self, node: ast.expr) -> ast.expr:
        seen = 0
        while isinstance(node, ast.Name) and node.id in self.names and seen < 4:
            node, seen = self.names[node.id], seen + 1
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("float", "int")
            and len(node.args) == 1
        ):
            return self._follow(node.args[0])
        return node

    def arg(self, node: ast.expr) -> Arg | None:
        node = self._follow(node)
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.argv":
            index = node.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                return index.value if index.value > 0 else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self.options.get(node.attr)
        return None

    def value(self, node: ast.expr) -> tuple[Arg | None, str | None] | None:
        """The argument or literal key a value is read at: ``x[key]``, ``x.get(key)``."""
        node = self._follow(node)
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            key = node.args[0]
        if key is None:
            return None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return None, key.value
        arg = self.arg(key)
        return (arg, None) if arg is not None else None

    def check(self, test: ast.expr, passes: bool) -> ArgCheck | None:
        """``test`` true means the run passes (``passes``) or fails."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.check(test.operand, not passes)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        op = _OPS.get(type(test.ops[0]))
        if op is None:
            return None
        left, right = test.left, test.comparators[0]
        bound, value = self.arg(right), self.value(left)
        if bound is None or value is None:
            bound, value, op = self.arg(left), self.value(right), _FLIP[op]
        if bound is None or value is None:
            return None
        return ArgCheck(bound, op if passes else NEGATED[op], value[0], value[1])


def _exits(node: ast.expr | None) -> bool | None:
    """Whether ``sys.exit(node)`` / ``return node`` fails: None when not a constant."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return node.value not in (0, None, False)
    if isinstance(node, ast.JoinedStr):
        return True
    return None


def _is_exit(node: ast.AST) -> ast.Call | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        name = ast.unparse(node.value.func)
        if name in ("sys.exit", "exit", "quit", "os._exit", "pytest.fail"):
            return node.value
    return None


def _fails(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.Return) and _exits(stmt.value):
            return True
        call = _is_exit(stmt)
        if call is not None:
            return bool(_exits(call.args[0] if call.args else None))
    return False


def argument_checks(text: str) -> tuple[ArgCheck, ...]:
    """The comparisons of command-line arguments with values that fail the script."""
    if len(text) > MAX_CHARS:
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return ()
    reader = _Reader(tree)
    found: list[ArgCheck | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            found.append(reader.check(node.test, True))
        elif isinstance(node, ast.If) and _fails(node.body):
            found.append(reader.check(node.test, False))
        elif (call := _is_exit(node)) is not None and call.args:
            code = call.args[0]
            if isinstance(code, ast.IfExp):
                failing = _exits(code.body)
                if failing is not None:
                    found.append(reader.check(code.test, not failing))
    return tuple(dict.fromkeys(c for c in found if c is not None))
