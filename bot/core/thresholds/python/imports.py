"""The repository modules a Python file imports, as candidate repository paths.

Read with ``ast`` from the module's top level (also inside a top-level ``if`` / ``try``),
never imported.  ``from tests.utils import f``, ``import tests.thresholds as t`` and
``from tests import thresholds`` name ``tests/utils.py`` (or ``tests/utils/__init__.py``)
looked up beside the file and in each directory above it up to the repository root, as
``sys.path`` holds the test's directory or the root (and ``src/`` at the root, a ``src``
layout); ``from .utils import f`` is relative to the file's package.  A path never leaves
the repository (no ``..``, never absolute).

Bounds: at most ``MAX_IMPORTS`` import names read, ``MAX_LEVELS`` directories above the file,
dotted names of at most ``MAX_PARTS`` parts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

MAX_IMPORTS = 64
MAX_LEVELS = 8
MAX_PARTS = 8


@dataclass(frozen=True, slots=True)
class Import:
    """A name a module's top level binds by importing: ``module`` (dotted, ``level`` dots
    before it) and, for ``from module import attr``, the ``attr``; ``bare``: ``import a.b``
    without ``as`` (the name is ``a``, the whole dotted name is reachable as attributes)."""

    module: str
    attr: str | None = None
    level: int = 0
    bare: bool = False


def _top_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from _top_level([*stmt.body, *stmt.orelse])
        elif isinstance(stmt, ast.Try):
            yield from _top_level([*stmt.body, *(s for h in stmt.handlers for s in h.body)])


def module_imports(tree: ast.Module) -> dict[str, Import]:
    """The names the module's top level imports (the first binding of a name wins)."""
    found: dict[str, Import] = {}
    for stmt in _top_level(tree.body):
        for alias in stmt.names:
            if len(found) >= MAX_IMPORTS:
                return found
            if isinstance(stmt, ast.ImportFrom):
                if alias.name != "*":
                    entry = Import(stmt.module or "", alias.name, stmt.level)
                    found.setdefault(alias.asname or alias.name, entry)
            elif alias.asname:
                found.setdefault(alias.asname, Import(alias.name))
            else:
                found.setdefault(alias.name.split(".")[0], Import(alias.name, bare=True))
    return found


def _bases(path: str, level: int) -> list[PurePosixPath]:
    """The directories a module is looked up in: relative imports from the file's package,
    absolute ones from the file's directory and each directory above it."""
    directory = PurePosixPath(path).parent
    if level:
        ups = level - 1
        if ups > len(directory.parts) - (1 if directory.is_absolute() else 0):
            return []
        for _ in range(ups):
            directory = directory.parent
        return [directory]
    found = [directory]
    while directory != directory.parent and len(found) <= MAX_LEVELS:
        directory = directory.parent
        found.append(directory)
    return [*found, found[-1] / "src"]  # a ``src/`` layout at the root


def module_paths(path: str, module: str, level: int = 0) -> tuple[str, ...]:
    """The repository paths dotted ``module`` may be, imported from ``path``, nearest first."""
    parts = [p for p in module.split(".") if p]
    if len(parts) > MAX_PARTS or not (parts or level):
        return ()
    if any(not p.isidentifier() for p in parts):
        return ()
    found: list[str] = []
    for base in _bases(path, level):
        inside = base.joinpath(*parts) if parts else base
        if not parts:
            found.append((inside / "__init__.py").as_posix())
            continue
        found += [
            inside.with_name(inside.name + ".py").as_posix(),
            (inside / "__init__.py").as_posix(),
        ]
    return tuple(dict.fromkeys(p.removeprefix("./") for p in found if ".." not in p.split("/")))


def import_paths(path: str, imported: Import) -> tuple[str, ...]:
    """The paths one import may read: its module, and for ``from pkg import name`` also the
    submodule ``pkg.name``."""
    found = module_paths(path, imported.module, imported.level)
    if imported.attr is not None:
        dotted = f"{imported.module}.{imported.attr}" if imported.module else imported.attr
        found = module_paths(path, dotted, imported.level) + found
    return found


def imported_paths(path: str, text: str) -> tuple[str, ...]:
    """Every candidate path of the repository modules ``text`` (the file at ``path``)
    imports; () for text that is not Python."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found: list[str] = []
    for imported in module_imports(tree).values():
        found += import_paths(path, imported)
    return tuple(dict.fromkeys(p for p in found if p != path and not p.startswith("/")))
