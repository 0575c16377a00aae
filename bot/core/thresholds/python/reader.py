"""Gates in Python test files, read with ``ast`` (never imported or run).

The file is parsed (``python_source``), its scopes, constants and calls collected
(``python_scope``), every ``assert``, unittest / numpy / torch assertion and ``if …: fail``
statement read as checks (``python_shapes``, ``python_compare``) at each iteration of its
loops and parametrizations (``python_loops``), at each call site of a helper
(``python_callers``) and with the module's fixtures that return a value, the compared
metric named (``python_metric``) and the threshold's value resolved (``python_resolver``,
``python_values``); checks that bind a literal become gates
(``python_gates``, ``python_assemble``), numeric constants with a threshold's name that
none binds become hints (``python_hints``), and a config may declare gates on constants
(``python_declared``).  With ``related`` files the checks of other modules that bind this
file's literals count too (``python_project``: imported helpers, tests importing it).
docs/threshold-files.md lists the shapes.

Each check's operands are followed back through locals holding arithmetic or a difference
(``python_inline``), conditional expressions (one gate per branch), elements of a result,
``.get()`` and windows of a series (``python_metric``).

Bounds: the parser's own depth limits (a deeper file is reported unreadable), expression
reading capped at ``MAX_DEPTH`` levels, tables at ``MAX_ENTRIES`` entries, conditionals at
``MAX_BRANCHES`` branches, locals followed ``MAX_INLINE_DEPTH`` deep (``MAX_INLINED`` per
check), at most ``MAX_WORK`` checks and literals read (loops times checks; the related
modules' share it), at most ``python_project.MAX_MODULES`` related modules parsed, and
``MAX_GATES`` gates
reported per file (each with a note).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from bot.core.bounded import collector_paused
from bot.core.config import FileDecl
from bot.core.models import ThresholdFile
from bot.core.thresholds.python.assemble import assemble, used_spans
from bot.core.thresholds.python.callers import callers
from bot.core.thresholds.python.declared import Declared
from bot.core.thresholds.python.gates import MAX_WORK, Evaluator, Hit
from bot.core.thresholds.python.hints import python_hints, unnamed_hints
from bot.core.thresholds.python.loops import Loops
from bot.core.thresholds.python.metric import Metrics
from bot.core.thresholds.python.project import MAX_MODULES, Project, Site
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import Module, Scope, build_module, dotted
from bot.core.thresholds.python.source import Source, parse_module
from bot.core.thresholds.python.values import Alias, At, Binding

PYTHON_SUFFIXES = frozenset({".py"})
MAX_GATES = 1000
_CHECKING = (ast.Assert, ast.Expr, ast.If)


def is_test_file(path: str) -> bool:
    """A Python test file by its name: ``test_*.py``, ``*_test.py`` or ``conftest.py``."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (
        name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
    )


class _Walker:
    def __init__(self, evaluator: Evaluator, loops: Loops, module: Module) -> None:
        self.evaluator = evaluator
        self.loops = loops
        self.module = module

    def scope(self, scope: Scope, calls: list[Site] | None = None) -> None:
        """Read the checks of ``scope`` (``calls``: a helper of another module, bound at
        these call sites of this module)."""
        env: dict[str, Binding] = {}
        if scope.kind == "function" and scope.parent is not None:
            assert isinstance(scope.node, ast.FunctionDef | ast.AsyncFunctionDef)
            env = self.fixtures(scope) if calls is None else {}
            env |= callers(scope, self.module, self.loops.resolver, calls)
            env |= self.loops.parametrize(scope.node, At(scope.parent), scope.name)
        context = scope.name
        self.body(scope.node.body, At(scope, env), context)

    def fixtures(self, scope: Scope) -> dict[str, Binding]:
        """A test's parameters that name a fixture of its class or of the module returning
        (or yielding) a value (``@pytest.fixture def tolerance(): return 0.015``): that
        value, named after it."""
        assert isinstance(scope.node, ast.FunctionDef | ast.AsyncFunctionDef)
        module = self.module.module
        parent = scope.parent
        owner = (
            parent if parent is not None and parent.kind == "class" and scope.self_name else None
        )
        found: dict[str, Binding] = {}
        for arg in scope.node.args.args:
            for holder in (owner, module):
                fixture = holder.children.get(arg.arg) if holder else None
                if holder is None or fixture is None or arg.arg not in holder.returns:
                    continue
                decorators = getattr(fixture.node, "decorator_list", [])
                if any(
                    dotted(d.func if isinstance(d, ast.Call) else d).endswith("fixture")
                    for d in decorators
                ):
                    func: ast.expr = ast.Name(arg.arg, ast.Load())
                    if holder is owner:  # a method: self.fixture(), read in the test
                        func = ast.Attribute(ast.Name(scope.self_name, ast.Load()), arg.arg)
                    call = ast.Call(func, [], [])
                    found[arg.arg] = Alias(call, scope if holder is owner else module)
                break
        return found

    def body(self, statements: Sequence[ast.stmt], at: At, context: str) -> None:
        for stmt in statements:
            if isinstance(stmt, _CHECKING):
                self.evaluator.statement(stmt, at, context)
            if isinstance(stmt, ast.For | ast.AsyncFor):
                bound = self.loops.loop(stmt, at, context)
                self.body(stmt.body, At(at.scope, {**at.env, **bound}), context)
                self.body(stmt.orelse, at, context)
            elif isinstance(stmt, ast.If | ast.While):
                self.body(stmt.body, at, context)
                self.body(stmt.orelse, at, context)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                self.body(stmt.body, at, context)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                for block in (stmt.body, stmt.orelse, stmt.finalbody):
                    self.body(block, at, context)
                for handler in stmt.handlers:
                    self.body(handler.body, at, context)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    self.body(case.body, at, context)


def parse_python(
    path: str,
    text: str,
    decls: Sequence[tuple[int, FileDecl]] = (),
    metrics: Collection[str] = (),
    related: Mapping[str, str] | None = None,
) -> ThresholdFile:
    """The gates of a Python file, its hints, and the gates ``decls`` (the config's
    ``files:`` entries matching it, with their indices) declare on its constants;
    ``metrics``: the names the config maps to history keys (compared, they are metrics);
    ``related``: other files of the repository by path (``python.project``: helpers it
    imports, tests that import it).

    Raises ``ThresholdFileError`` for a file that is not valid Python (with its line) or
    too deeply nested to parse, and for a declared key that names no constant.
    """
    with collector_paused():  # bot.core.bounded: a large acyclic tree
        return _parse(path, text, decls, metrics, related or {})


def _linked_hits(
    project: Project, resolver: Resolver, module: Module, work: int, metrics: Collection[str]
) -> tuple[list[list[Hit]], int]:
    """The checks that bind this file's literals in other modules: helpers it calls (read
    at its call sites, in its tests' contexts) and the modules importing it (contexts
    ``path::test``).  Only this file's literals are kept (``assemble``).  The reading
    shares the file's ``MAX_WORK`` (``work``: spent so far; returned with what it spent)."""
    found: list[list[Hit]] = []
    readers: list[tuple[Evaluator, _Walker, list[tuple[Scope, list[Site] | None]], str]] = []
    for helper, sites in project.helper_calls(resolver):
        evaluator = Evaluator(project.path, resolver, Metrics(resolver), metrics)
        walker = _Walker(evaluator, Loops(resolver), module)
        readers.append((evaluator, walker, [(helper, sites)], ""))
    for other in project.importers():
        evaluator = Evaluator(project.path_of(other), other, Metrics(other), metrics)
        walker = _Walker(evaluator, Loops(other), other.module)
        scopes: list[tuple[Scope, list[Site] | None]] = [(s, None) for s in other.module.scopes]
        scopes += [(helper, sites) for helper, sites in project.helper_calls(other)]
        readers.append((evaluator, walker, scopes, project.path_of(other)))
    for evaluator, walker, scopes, where in readers:
        evaluator.work = work
        for scope, calls in scopes:
            walker.scope(scope, calls)
        work = evaluator.work
        for hits in evaluator.hits:
            if where:
                hits = [replace(h, context=f"{where}::{h.context or '<module>'}") for h in hits]
            found.append([replace(h, lines=()) for h in hits])
        if evaluator.exhausted:
            break
    return found, work


def _parse(
    path: str,
    text: str,
    decls: Sequence[tuple[int, FileDecl]],
    metrics: Collection[str],
    related: Mapping[str, str],
) -> ThresholdFile:
    tree = parse_module(path, text)
    source = Source(text)
    module = build_module(tree)
    resolver = Resolver(source, module)
    project = Project(path, related) if related else None
    if project is not None:
        project.add(path, resolver, tree)  # before reading: imported names resolve
    evaluator = Evaluator(path, resolver, Metrics(resolver), metrics)
    walker = _Walker(evaluator, Loops(resolver), module)
    for scope in module.scopes:
        walker.scope(scope)
    hits, work = evaluator.hits, evaluator.work
    if project is not None and not evaluator.exhausted:
        linked, work = _linked_hits(project, resolver, module, work, metrics)
        hits = [*hits, *linked]
    found = assemble(hits, path, source)
    declared = Declared(path, module, resolver, source).gates(decls, found)
    overridden = {g.start for g in declared}
    gates = sorted(
        [*declared, *(g for g in found if g.start not in overridden)],
        key=lambda g: (g.start, g.name, g.op),
    )
    unbound = [u for u in evaluator.unbound.values() if u.name not in {g.name for g in gates}]
    skip = {u.name for u in unbound} | {d.name for d in declared}
    used = used_spans(gates)
    hints = python_hints(path, module, resolver, used, skip)
    shown = {(u.line, u.literal) for u in (*unbound, *hints)}
    hints += [
        u
        for u in unnamed_hints(path, (h for hits in evaluator.hits for h in hits), used)
        if (u.line, u.literal) not in shown
    ]
    notes: tuple[str, ...] = ()
    if work >= MAX_WORK:
        notes = (
            f"reading stopped after {MAX_WORK:,} checks and literals: later gates are not reviewed",
        )
    if project is not None and project.unread:
        notes += (
            f"{len(project.unread)} related modules not read (over {MAX_MODULES}):"
            f" {', '.join(project.unread[:3])}{', …' if len(project.unread) > 3 else ''}",
        )
    if len(gates) > MAX_GATES:
        notes += (f"{len(gates)} gates found; only the first {MAX_GATES} are reviewed",)
        gates = gates[:MAX_GATES]
    return ThresholdFile(path=path, gates=tuple(gates), unbound=(*unbound, *hints), notes=notes)
