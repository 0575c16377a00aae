"""A name assigned in the branches of an ``if`` statement: one value per branch, each with its
condition (``python_resolver`` reads them into a ``Choice``), as a conditional expression is:

* ``if on_gpu: floor = 0.9`` / ``elif fast: floor = 0.85`` / ``else: floor = 0.8``;
* ``floor = 0.8`` directly followed by ``if on_gpu: floor = 0.9`` (no ``else``).

Only when these are all the assignments of the name in its scope (``written``).  Bounds: at
most ``MAX_STATEMENTS`` statements of the scope are looked at, ``MAX_ELIFS`` ``elif``s.
"""

from __future__ import annotations

import ast

MAX_STATEMENTS = 5_000
MAX_ELIFS = 15
_BLOCKS = ("body", "orelse", "finalbody", "handlers")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Branches = list[tuple[str, ast.expr]]


def condition(node: ast.expr, limit: int = 60) -> str:
    """A condition's text as written (normalised by ``ast.unparse``), shortened."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _assigned(block: list[ast.stmt], name: str) -> ast.expr | None:
    """The value of the one ``name = …`` among a block's own statements."""
    found = [
        s.value
        for s in block
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id == name
    ]
    return found[0] if len(found) == 1 else None


def _chain(node: ast.If, name: str, depth: int = 0) -> Branches | None:
    """``if``/``elif``/``else`` each assigning ``name`` once."""
    value = _assigned(node.body, name)
    if value is None or not node.orelse or depth > MAX_ELIFS:
        return None
    test = condition(node.test)
    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        rest = _chain(node.orelse[0], name, depth + 1)
    else:
        other = _assigned(node.orelse, name)
        rest = [("", other)] if other is not None else None
    if rest is None:
        return None
    tail = [(f"not {test} and {c}" if c else f"not {test}", v) for c, v in rest]
    return [(test, value), *tail]


def _blocks(scope: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists of a scope (its nested functions and classes left out)."""
    found: list[list[ast.stmt]] = []
    pending: list[ast.AST] = [scope]
    seen = 0
    while pending and seen < MAX_STATEMENTS:
        node = pending.pop()
        seen += 1
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            statements = [s for s in block if isinstance(s, ast.stmt)]
            if statements:
                found.append(statements)
            pending += [s for s in block if not isinstance(s, _SCOPES)]
    return found


def branches(scope: ast.AST, name: str, written: int) -> Branches | None:
    """The values ``name`` takes in an ``if`` statement of ``scope`` with their conditions,
    when that statement (and a default just before it) holds all ``written`` assignments."""
    for block in _blocks(scope):
        for index, stmt in enumerate(block):
            if not isinstance(stmt, ast.If):
                continue
            chain = _chain(stmt, name)
            if chain is not None and len(chain) == written:
                return chain
            before = _assigned(block[index - 1 : index], name) if index else None
            after = _assigned(stmt.body, name)
            if before is not None and after is not None and not stmt.orelse and written == 2:
                test = condition(stmt.test)
                return [(test, after), (f"not {test}", before)]
    return None
