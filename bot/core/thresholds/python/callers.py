"""A helper's parameters bound at each of its call sites in the file.

``def check(actual, expected, tol=0.01): assert abs(actual - expected) <= tol`` called as
``check(results["acc"], 0.85)`` from ``test_acc`` checks ``acc`` against 0.85: each call
site is one iteration of a ``Group`` whose context is the calling test.  An argument with
a value (a literal, a constant) is that value; any other (the metric) stands for its
expression, read in the caller's scope.  A default fills a parameter a call leaves out.
A helper imported from another module of the repository is read the same way at its call
sites in the file under review (``python.project``).
"""

from __future__ import annotations

import ast

from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import Module, Scope
from bot.core.thresholds.python.values import Alias, At, Binding, Group, Value

MAX_CALL_SITES = 200


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    return names[1:] if method and not static else names


def _defaults(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> dict[str, ast.expr]:
    positional = _parameters(node, method)
    found = dict(
        zip(
            positional[len(positional) - len(node.args.defaults) :], node.args.defaults, strict=True
        )
    )
    for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
        if default is not None:
            found[arg.arg] = default
    return found


def callers(
    scope: Scope,
    module: Module,
    resolver: Resolver,
    calls: list[tuple[ast.Call, Scope]] | None = None,
) -> dict[str, Binding]:
    """The bindings of ``scope``'s parameters, one iteration per call site in the module
    (``calls``: the sites of a helper of another module, ``python.project``)."""
    node = scope.node
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or scope.parent is None:
        return {}
    method = scope.parent.kind == "class"
    if calls is None:
        kind = ast.Attribute if method else ast.Name
        calls = [c for c in module.calls.get(node.name, []) if isinstance(c[0].func, kind)]
    sites = [
        (call, caller)
        for call, caller in calls
        if not any(isinstance(a, ast.Starred) for a in call.args)
        and all(k.arg for k in call.keywords)
    ][:MAX_CALL_SITES]
    if not sites:
        return {}
    positional = _parameters(node, method)
    names = [*positional, *(a.arg for a in node.args.kwonlyargs)]
    defaults = _defaults(node, method)
    values: dict[str, list[Value | Alias | None]] = {name: [] for name in names}
    for call, caller in sites:
        given = dict(zip(positional, call.args, strict=False))
        given |= {k.arg: k.value for k in call.keywords if k.arg in values}
        for name in names:
            argument, where = given.get(name), caller
            if argument is None and name in defaults:
                argument, where = defaults[name], scope.parent
            value = resolver.value(argument, At(where)) if argument is not None else None
            if value is None and argument is not None:
                values[name].append(Alias(argument, where))
            else:
                values[name].append(value)
    contexts = tuple(caller.name for _, caller in sites)
    group = Group(
        contexts, (None,) * len(sites), {n: tuple(v) for n, v in values.items()}, "", contexts
    )
    return dict.fromkeys(names, group)
