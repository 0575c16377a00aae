"""Hints: module- and class-level numeric constants with a threshold's or a metric's name
(``LOSS_THRESHOLD``, ``MMLU_MIN``, ``EXPECTED_LOSSES``) that no gate binds.

Each is reported with why it was not bound (how the file uses it: passed to a function,
compared with something that is no metric, not used, assigned twice) and, for a number,
the config lines that declare it (``files: - path: … gates: - {key: NAME, metric: …,
op: …}``).  Constants without such a name are not reported (a test file has many numbers
that are no thresholds), nor are tolerances given config lines (``RTOL`` is not a limit).

A literal compared with something whose name says nothing (``res[0] < 0.31``) is a hint too
(``unnamed_hints``), with the ``metrics:`` lines that name it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable

from bot.core.config import CONFIG_PATH
from bot.core.models import UnboundVariable
from bot.core.thresholds.hints import config_lines
from bot.core.thresholds.python.gates import Hit, unnamed
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import Module, Scope, Use
from bot.core.thresholds.python.values import Choice, Num, Table, flatten
from bot.core.thresholds.python.words import hint_worthy, metric_guess, tolerance_like


def _reason(uses: list[Use]) -> str:
    for how in ("call", "compare", "other"):
        use = next((u for u in uses if u.how == how), None)
        if use is None:
            continue
        if how == "call" and use.detail == "positional":
            where = f"passed to {use.callee}() as a positional argument on line {use.line}"
            return f"{where}, not compared in this file"
        if how == "call":
            where = f"passed to {use.callee}() as {use.detail}= on line {use.line}"
            return f"{where}, not compared in this file"
        if how == "compare":
            return f"compared on line {use.line}, but not with a metric the bot recognises"
        return f"used on line {use.line}, not in a comparison the bot reads"
    return "not used in this file"


def _constants(scope: Scope) -> list[tuple[str, list[ast.expr | None], list[int]]]:
    """(name, assignments, lines) of a module or class scope (``self.X`` included)."""
    found = [(n, w, scope.lines.get(n, [])) for n, w in scope.assigned.items()]
    found += [
        (n, w, scope.attr_lines.get(n, []))
        for n, w in scope.attrs.items()
        if n not in scope.assigned
    ]
    return found


def _hint(
    path: str, key: str, value: Num | Table, uses: list[Use], used: set[int]
) -> UnboundVariable | None:
    """The hint for a constant's value, None when a gate binds (part of) it."""
    if isinstance(value, Num):
        if value.value is None or value.span.start in used:
            return None
        name = key.rsplit(".", 1)[-1]
        config = "" if tolerance_like(name) else config_lines(path, key, metric_guess(name))
        span, reason = value.span, _reason(uses)
    else:
        entries = flatten(value)
        if not entries or any(num.span.start in used for _, num in entries):
            return None
        span, reason, config = entries[0][1].span, f"{len(entries)} values, {_reason(uses)}", ""
    return UnboundVariable(
        name=key, file=path, line=span.line, literal=span.literal, reason=reason, config=config
    )


_KEY_NOTE = "  # a guess: the history key it is checked against"


def unnamed_hints(path: str, hits: Iterable[Hit], used: set[int]) -> list[UnboundVariable]:
    """A hint per literal compared with a metric whose name says nothing (``res[0] < 0.31``),
    once per literal no gate binds: the config lines map the name to a history key, which
    binds it."""
    hints: dict[int, UnboundVariable] = {}
    for hit in hits:
        span = hit.num.span
        if span.start in used or span.start in hints or not unnamed(hit):
            continue
        name = hit.metric.name
        reason = (
            f"compared with {name} on line {hit.lines[0]}, whose name does not say it is a "
            "metric: map it to the history key it is checked against"
        )
        config = "\n".join(
            (
                f"# {CONFIG_PATH}",
                "files:",
                f"  - path: {json.dumps(path)}",
                "    metrics:",
                f"      {json.dumps(name)}: {json.dumps(name)}{_KEY_NOTE}",
            )
        )
        gate = hit.num.name or f"{hit.context or '<module>'}[{name}]"
        gate = f"{gate} if {hit.condition}" if hit.condition else gate
        hints[span.start] = UnboundVariable(
            name=gate,
            file=path,
            line=span.line,
            literal=span.literal,
            reason=reason,
            config=config,
            compared=True,
        )
    return list(hints.values())


def python_hints(
    path: str, module: Module, resolver: Resolver, used: set[int], skip: set[str]
) -> list[UnboundVariable]:
    """The hints of the module (module docstring); ``used``: literal offsets gates bind;
    ``skip``: names already reported or declared."""
    hints: list[UnboundVariable] = []
    for scope in module.scopes:
        if scope.kind == "function":
            continue
        for name, written, lines in _constants(scope):
            key = scope.qualify(name)
            if not hint_worthy(name) or key in skip or name in skip or not lines:
                continue
            if len(written) > 1 and resolver.constant(name, scope, 0) is None:
                if any(w is not None and resolver.source.number(w) for w in written):
                    shown = ", ".join(str(n) for n in lines[:5])
                    reason = (
                        f"assigned {len(written)} times (lines {shown}): its value is not known"
                    )
                    hints.append(
                        UnboundVariable(
                            name=key, file=path, line=lines[0], literal="", reason=reason
                        )
                    )
                continue
            value = resolver.constant(name, scope, 0)
            uses = module.uses.get("." + name if scope.kind == "class" else name, [])
            if isinstance(value, Choice):  # a conditional: each branch no gate binds
                for condition, branch in value.branches:
                    hint = _hint(path, key, branch, uses, used) if isinstance(branch, Num) else None
                    if hint is not None:
                        named = f"{key} if {condition}"
                        hints.append(hint.model_copy(update={"name": named, "config": ""}))
                continue
            hint = _hint(path, key, value, uses, used) if isinstance(value, Num | Table) else None
            if hint is not None:
                hints.append(hint)
    return hints
