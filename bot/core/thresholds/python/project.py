"""The file under review read with the other Python modules of its repository (``related``).

Two flows cross a module's border, both read like their one-file forms:

* **helpers**: a test calls ``check_loss(logs, 3.2, max_final=2.9)`` imported from
  ``tests/utils.py`` (or ``self.check_loss(...)`` inherited from a class there): the
  helper's body is read at each call site of the file under review (``python.callers``),
  its literals stay the test's.
* **constants**: the file under review is a constants module (``tests/thresholds.py``); a
  related module that imports it (``from tests.thresholds import MMLU_MIN``,
  ``thresholds.MMLU_MIN``) is read whole, and each of its checks that binds a literal of the
  file under review gives a gate there.

Only literals written in the file under review become its gates (``Num.origin`` marks the
others).  Modules are found by ``python.imports``'s candidate paths among ``related`` (the
shell read them: at most two import hops from the file, bounded in bytes); at most
``MAX_MODULES`` are parsed, one that is not Python is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.python.imports import Import, import_paths, module_imports, module_paths
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import Scope, build_module, dotted
from bot.core.thresholds.python.source import Source, parse_module

MAX_MODULES = 32
Site = tuple[ast.Call, Scope]  # a call and the scope it is written in


def _root(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


class Project:
    """The modules read, by path; each module's resolver is linked to the others."""

    def __init__(self, path: str, related: Mapping[str, str]) -> None:
        self.path = path
        self.texts = {p: t for p, t in related.items() if p.endswith(".py") and p != path}
        self._loaded: dict[str, Resolver | None] = {}
        self._roots: dict[int, tuple[str, Resolver, dict[str, Import]]] = {}
        self.unread: list[str] = []  # modules over ``MAX_MODULES``, not read

    def add(self, path: str, resolver: Resolver, tree: ast.Module) -> None:
        """Link ``resolver`` (the module at ``path``, parsed as ``tree``) to the others."""
        resolver.linker = self
        self._loaded[path] = resolver
        self._roots[id(resolver.module.module)] = (path, resolver, module_imports(tree))

    def load(self, path: str) -> Resolver | None:
        """The resolver of the module at ``path`` (None: not read, or not Python)."""
        if path in self._loaded:
            return self._loaded[path]
        text = self.texts.get(path)
        self._loaded[path] = None
        if text is None:
            return None
        if len(self._roots) >= MAX_MODULES:
            self.unread.append(path)
            return None
        try:
            tree = parse_module(path, text)
        except ThresholdFileError:
            return None
        resolver = Resolver(Source(text), build_module(tree), origin=path)
        self.add(path, resolver, tree)
        return resolver

    def owner(self, scope: Scope) -> Resolver | None:
        entry = self._roots.get(id(_root(scope)))
        return entry[1] if entry else None

    def path_of(self, resolver: Resolver) -> str:
        entry = self._roots.get(id(resolver.module.module))
        return entry[0] if entry else ""

    def imports(self, resolver: Resolver) -> dict[str, Import]:
        entry = self._roots.get(id(resolver.module.module))
        return entry[2] if entry else {}

    def find(self, importer: str, module: str, level: int) -> Resolver | None:
        """The module dotted ``module`` names, imported from ``importer``, if read."""
        for candidate in module_paths(importer, module, level):
            if candidate == self.path or candidate in self.texts:
                return self.load(candidate)
        return None

    def resolve(self, scope: Scope, name: str) -> tuple[Resolver, str | None] | None:
        entry = self._roots.get(id(_root(scope)))
        parts = name.split(".")
        imported = entry[2].get(parts[0]) if entry else None
        if entry is None or imported is None:
            return None
        if imported.bare:
            full = parts
        else:
            head = [p for p in imported.module.split(".") if p]
            full = [*head, *([imported.attr] if imported.attr else []), *parts[1:]]
        lowest = 0 if imported.level else 1  # ``from . import x``: the package itself
        for cut in range(len(full), lowest - 1, -1):
            found = self.find(entry[0], ".".join(full[:cut]), imported.level)
            if found is not None:
                return found, ".".join(full[cut:]) or None
        return None

    def helper_calls(self, resolver: Resolver) -> list[tuple[Scope, list[Site]]]:
        """The functions of other modules that ``resolver``'s module calls (imported by
        name, ``check_loss(...)``, or through their module, ``utils.check_loss(...)``),
        and the methods its test classes inherit from a class of another module
        (``self.assert_metric(...)`` in ``class TestEval(EvalCase)``), each with its call
        sites there."""
        found: dict[int, tuple[Scope, list[Site]]] = {}
        for sites in resolver.module.calls.values():
            for call, caller in sites:
                helper = self._callee(resolver, call, caller)
                if helper is not None:
                    found.setdefault(id(helper), (helper, []))[1].append((call, caller))
        return list(found.values())

    def _callee(self, resolver: Resolver, call: ast.Call, caller: Scope) -> Scope | None:
        root = resolver.module.module
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = caller.owner
            if owner is not None and func.value.id == caller.self_name:
                return self._inherited(resolver, owner, func.attr)
        name = dotted(func)
        if not name or name.startswith("?"):
            return None
        if resolver.lookup(name.split(".", 1)[0], caller) is not root:
            return None  # a local of the caller, or a name the module assigns itself
        target = self._function(root, name)
        return target if target is not None and target.kind == "function" else None

    def _function(self, root: Scope, name: str) -> Scope | None:
        """The top-level function or class of another module that ``name`` names."""
        target = self.resolve(root, name)
        if target is None or not target[1] or "." in target[1]:
            return None
        if target[0].module.module is root:
            return None
        return target[0].module.module.children.get(target[1])

    def _inherited(self, resolver: Resolver, owner: Scope, method: str) -> Scope | None:
        """``method`` of a base class of ``owner`` defined in another module, when
        ``owner`` does not define it itself (one level of inheritance)."""
        if method in owner.children or not isinstance(owner.node, ast.ClassDef):
            return None
        root = resolver.module.module
        for base in owner.node.bases:
            name = dotted(base)
            if not name or name.startswith("?"):
                continue
            if resolver.lookup(name.split(".", 1)[0], owner) is not root:
                continue
            cls = self._function(root, name)
            found = cls.children.get(method) if cls is not None and cls.kind == "class" else None
            if found is not None and found.kind == "function":
                return found
        return None

    def importers(self) -> list[Resolver]:
        """The related modules that import the file under review."""
        found: list[Resolver] = []
        for path in self.texts:
            resolver = self.load(path)
            if resolver is None:
                continue
            if any(self.path in import_paths(path, i) for i in self.imports(resolver).values()):
                found.append(resolver)
        return found
