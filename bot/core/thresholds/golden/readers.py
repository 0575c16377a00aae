"""What the script that reads a text golden compares it with: metric, tolerance, steps.

The reader is a related file (``related``: repository path -> text, handed over by the
shell) whose text mentions the golden's file name.  Followed as far as it can be, never
imported or executed:

* Python (``ast``): the names bound to the file (a string holding its name, or an expression
  holding one: ``Path(__file__).parent / "golden" / "loss.txt"``) and every name assigned
  from them (``golden = np.loadtxt(GOLDEN)``, ``for i, ref in enumerate(expected)``) carry
  the golden.  The first comparison with such a name as an operand gives the reading:
  ``assert_allclose`` / ``allclose`` / ``isclose`` / ``assert_close`` (``rtol`` / ``atol``),
  ``assertAlmostEqual`` (``delta``), ``x == pytest.approx(ref, rel=…, abs=…)``,
  ``abs(a - b) <= TOL`` (absolute; relative when the difference is divided; also inside a
  reduction, ``np.max(np.abs(a - b))``, or through a name assigned one).  The other operand
  names the metric: the one string key it (or a name it is assigned from, up to
  ``MAX_HOPS`` assignments back) reads, ``logs["lm_loss"]`` -> ``lm_loss``.
  ``for i, ref in enumerate(<golden>)`` with ``step = START + i * INTERVAL``, or
  ``zip(range(START, STOP, INTERVAL), <golden>)``, gives a list's first step and interval.
  Numbers are literals or module-level constants.
* Shell (the project's lexer): a number assigned to a variable, or passed as ``-v tol=…``,
  ``--rtol=0.01`` or ``--tol 0.03``, whose name says tolerance (``TOL``, ``LOSS_ATOL``,
  ``--tol``: absolute; ``RTOL``, ``--rtol``: relative).

Bounds: readers of more than ``MAX_READER_CHARS`` characters are skipped, at most
``MAX_READERS`` are looked at, name propagation runs at most ``MAX_ROUNDS`` rounds over the
assignments, and a metric is followed ``MAX_HOPS`` assignments back, each assignment once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import PurePosixPath

from bot.core.models import Tolerance
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.golden.text import Reading
from bot.core.thresholds.shell.lexer import Word
from bot.core.thresholds.shell.scan import ASSIGN, NUMBER, scan

MAX_READER_CHARS = 256 * 1024
MAX_READERS = 16
MAX_ROUNDS = 8
MAX_HOPS = 4
_CLOSE = frozenset(
    {"assert_allclose", "allclose", "isclose", "assert_close", "assert_array_almost_equal"}
    | {"assertAlmostEqual", "assert_almost_equal"}
)
_REL = frozenset({"rtol", "rel", "rel_tol"})
_ABS = frozenset({"atol", "abs", "abs_tol", "delta"})
_KEY = re.compile(r"[A-Za-z_][\w./-]{0,99}")
_NUMBER = re.compile(NUMBER)
_SHELL_ABS = frozenset({"tol", "tolerance", "atol", "abstol"})
_SHELL_REL = frozenset({"rtol", "reltol"})


def follow_readers(path: str, related: Mapping[str, str]) -> Reading | None:
    """The reading of the first related file (in path order) that mentions the golden's file
    name; None when none does.  A reader whose comparison with a tolerance cannot be
    followed gives a ``Reading`` that is not ``compared`` (the file is then a hint)."""
    name = PurePosixPath(path).name
    readers = [p for p in sorted(related) if p != path and len(related[p]) <= MAX_READER_CHARS]
    for other in readers[:MAX_READERS]:
        text = related[other]
        if name not in text:
            continue
        if PurePosixPath(other).suffix.lower() in (".py", ".pyi"):
            reading = _python(text, name)
        else:
            reading = _shell(other, text)
        return replace(reading, reader=other)
    return None


# --------------------------------------------------------------------------- Python


@dataclass
class _Module:
    """One parsed reader: its module-level constants and its assignments."""

    tree: ast.Module
    constants: dict[str, ast.expr]
    assigned: dict[str, list[ast.expr]]
    flows: list[tuple[set[str], set[str], ast.expr]]  # names assigned, the names read, from


def _targets(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _module(text: str) -> _Module | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    constants: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            constants[stmt.targets[0].id] = stmt.value
    assigned: dict[str, list[ast.expr]] = {}
    flows: list[tuple[set[str], set[str], ast.expr]] = []
    for node in ast.walk(tree):
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.For | ast.comprehension):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, node.context_expr)]
        for target, value in pairs:
            names = _targets(target)
            flows.append((names, _targets(value), value))
            if isinstance(target, ast.Name):
                assigned.setdefault(target.id, []).append(value)
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for t, v in zip(target.elts, value.elts, strict=False):
                    if isinstance(t, ast.Name):
                        assigned.setdefault(t.id, []).append(v)
    return _Module(tree, constants, assigned, flows)


def _mentions(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and name in n.value
        for n in ast.walk(node)
    )


def _carriers(module: _Module, name: str) -> set[str]:
    """The names that carry the golden: bound to its file, or assigned from such a name."""
    carrying = {t for names, _, value in module.flows if _mentions(value, name) for t in names}
    for _ in range(MAX_ROUNDS):  # a round follows a chain written in order to its end
        grew = False
        for names, read, _ in module.flows:
            if read & carrying and not names <= carrying:
                carrying |= names
                grew = True
        if not grew:
            break
    return carrying


def _number(module: _Module, node: ast.expr | None) -> float | None:
    """A numeric literal, a negated one, or a module-level constant holding one."""
    if isinstance(node, ast.Name) and node.id in module.constants:
        node = module.constants[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(module, node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else float(node.value)
    return None


def _int(module: _Module, node: ast.expr | None) -> int | None:
    value = _number(module, node)
    return int(value) if value is not None and value == int(value) else None


def _keys(module: _Module, node: ast.expr) -> set[str]:
    """The string keys an operand reads (``logs["lm_loss"]``, ``.get("acc")``), following
    the names it uses back through their assignments, ``MAX_HOPS`` deep; each assigned
    expression is read once (linear in the file)."""
    found: set[str] = set()
    seen: set[int] = set()
    work: list[tuple[ast.expr, int]] = [(node, 0)]
    while work:
        expr, hops = work.pop()
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        for sub in ast.walk(expr):
            key = None
            if isinstance(sub, ast.Subscript):
                key = sub.slice
            elif isinstance(sub, ast.Call) and _name(sub.func) == "get" and sub.args:
                key = sub.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if _KEY.fullmatch(key.value):
                    found.add(key.value)
            elif isinstance(sub, ast.Name) and hops < MAX_HOPS:
                work += [(v, hops + 1) for v in module.assigned.get(sub.id, ())[:4]]
    return found


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _tolerance(module: _Module, keywords: list[ast.keyword]) -> Tolerance | None:
    rel = next((_number(module, k.value) for k in keywords if k.arg in _REL), None)
    absolute = next((_number(module, k.value) for k in keywords if k.arg in _ABS), None)
    if rel is None and absolute is None:
        return None
    return Tolerance(rel=rel, abs=absolute)


def _comparisons(
    module: _Module,
) -> Iterator[tuple[ast.expr, ast.expr, Tolerance | None]]:
    """Every comparison of two operands with its tolerance, in the file's order."""
    nodes = sorted(
        (n for n in ast.walk(module.tree) if isinstance(n, ast.Call | ast.Compare)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in nodes:
        if isinstance(node, ast.Call) and _name(node.func) in _CLOSE and len(node.args) >= 2:
            yield node.args[0], node.args[1], _tolerance(module, node.keywords)
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left, right = node.left, node.comparators[0]
            for one, other in ((left, right), (right, left)):
                if isinstance(other, ast.Call) and _name(other.func) == "approx" and other.args:
                    yield one, other.args[0], _tolerance(module, other.keywords)
            if isinstance(node.ops[0], ast.Lt | ast.LtE):
                difference = _difference(module, left)
                bound = _number(module, right)
                if difference is not None and bound is not None:
                    a, b, relative = difference
                    tolerance = Tolerance(rel=bound) if relative else Tolerance(abs=bound)
                    yield a, b, tolerance


def _difference(
    module: _Module, node: ast.expr, hops: int = 0
) -> tuple[ast.expr, ast.expr, bool] | None:
    """``abs(a - b)`` (absolute) or ``abs(a - b) / b`` (relative), also inside a reduction
    (``np.max(np.abs(a - b))``) or through a name assigned one (``worst``): a, b and which."""
    if isinstance(node, ast.Name) and hops < MAX_HOPS:
        values = module.assigned.get(node.id, [])
        return _difference(module, values[-1], hops + 1) if len(values) == 1 else None
    relative = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
    inner = node.left if isinstance(node, ast.BinOp) and relative else node
    for call in ast.walk(inner):
        if isinstance(call, ast.Call) and _name(call.func) in ("abs", "fabs") and call.args:
            sub = call.args[0]
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub):
                return sub.left, sub.right, relative
    return None


def _range(module: _Module, node: ast.expr) -> tuple[int, int] | None:
    """(start, step) of ``range(stop)``, ``range(start, stop)``, ``range(start, stop, step)``
    with numbers the reader writes."""
    if not isinstance(node, ast.Call) or _name(node.func) != "range" or not node.args:
        return None
    args = [_int(module, a) for a in node.args]
    if any(a is None for a in args) or len(args) > 3:
        return None
    start = args[0] if len(args) > 1 else 0
    step = args[2] if len(args) == 3 else 1
    return (start, step) if start is not None and step is not None and step > 0 else None


def _steps(module: _Module, carrying: set[str]) -> tuple[int | None, int | None]:
    """``for i, ref in enumerate(<golden>)`` and ``START + i * INTERVAL`` in the loop, or
    ``for step, ref in zip(range(START, STOP, INTERVAL), <golden>)``."""
    for loop in ast.walk(module.tree):
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            continue
        if _name(loop.iter.func) == "zip" and any(_targets(a) & carrying for a in loop.iter.args):
            ranged = next((r for a in loop.iter.args if (r := _range(module, a))), None)
            if ranged is not None:
                return ranged
        if _name(loop.iter.func) != "enumerate" or not loop.iter.args:
            continue
        if not _targets(loop.iter.args[0]) & carrying or not isinstance(loop.target, ast.Tuple):
            continue
        index = loop.target.elts[0]
        if not isinstance(index, ast.Name):
            continue
        for stmt in loop.body:
            for node in ast.walk(stmt):
                found = _step_of(module, node, index.id)
                if found is not None:
                    return found
    return None, None


def _step_of(module: _Module, node: ast.AST, index: str) -> tuple[int, int] | None:
    """(start, interval) of ``START + i * INTERVAL`` (or ``i * INTERVAL + START``)."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Add):
        return None
    for start_node, product in ((node.left, node.right), (node.right, node.left)):
        start = _int(module, start_node)
        interval = _times(module, product, index)
        if start is not None and interval is not None:
            return start, interval
    return None


def _times(module: _Module, node: ast.expr, index: str) -> int | None:
    if isinstance(node, ast.Name) and node.id == index:
        return 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for one, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(one, ast.Name) and one.id == index:
                return _int(module, other)
    return None


def _python(text: str, name: str) -> Reading:
    module = _module(text)
    if module is None:
        return Reading()
    carrying = _carriers(module, name)
    start, interval = _steps(module, carrying)
    for one, other, tolerance in _comparisons(module):
        sides = [(_targets(x) & carrying) or _mentions(x, name) for x in (one, other)]
        if not any(sides):
            continue
        keys = [_keys(module, x) for x in (one, other)]
        metrics = [k for k in keys if len(k) == 1]
        metric = next(iter(metrics[0])) if len(metrics) == 1 else None
        return Reading(metric, tolerance, start, interval, compared=True)
    return Reading(start=start, interval=interval)


# --------------------------------------------------------------------------- shell


def _shell(path: str, text: str) -> Reading:
    """A tolerance the script sets in a variable (or an ``awk -v``) named for one."""
    try:
        found = scan(path, text)
    except ThresholdFileError:
        return Reading()
    pairs = [(a.name, a.literal) for a in found.assignments if a.literal is not None]
    for command in found.commands:
        pairs += [pair for word in command if (pair := _assigned(word)) is not None]
        texts = [word.unquoted() for word in command]
        pairs += [
            (flag, value)
            for flag, value in pairwise(texts)
            if flag.startswith("-") and _NUMBER.fullmatch(value)
        ]
    rel = absolute = None
    for variable, literal in pairs:
        words = set(re.split(r"[^a-z]+", variable.lower()))
        if words & _SHELL_REL and rel is None:
            rel = float(literal)
        elif words & _SHELL_ABS and absolute is None:
            absolute = float(literal)
    if rel is None and absolute is None:
        return Reading()
    return Reading(tolerance=Tolerance(rel=rel, abs=absolute), compared=True)


def _assigned(word: Word) -> tuple[str, str] | None:
    """``name=number`` as one word (``awk -v tol=0.03``)."""
    text = word.unquoted().lstrip("-")  # -v tol=0.03, --rtol=0.01
    match = ASSIGN.match(text)
    if match is None or not _NUMBER.fullmatch(text[match.end() :]):
        return None
    return match["name"], text[match.end() :]
