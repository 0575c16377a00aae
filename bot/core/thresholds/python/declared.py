"""Gates a config declares on a Python file's constants (when the file's own checks do not
show them, e.g. ``LOSS_THRESHOLD = 2.5`` passed to a helper)::

    files:
      - path: tests/test_convergence.py
        gates:
          - {key: LOSS_THRESHOLD, metric: train/loss, op: "<="}
          - {key: EXPECTED_LOSS, metric: train/loss, kind: reference, tolerance: {abs: ATOL}}
          - {key: THRESHOLDS, metric: "eval/{key}", op: ">="}

``key`` names a constant assigned a number (or a list / dict of numbers) exactly once:
``NAME`` (module), ``Class.NAME`` (class, or ``self.NAME`` set once in its methods),
``test_fn.name`` (function; ``TestCls.test_fn.name`` or, when one method has that name,
``test_fn.name``), or an entry ``NAME.gsm8k`` / ``NAME[gsm8k]``.  A dict declared
whole gives a gate per entry (``{key}`` in the metric is the entry's key), a list or a dict
with integer keys declared as a reference a golden curve.  A tolerance given by name is a
constant of the file.  A key that names nothing is an error naming the declaration.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.core.config import FileDecl, GateDecl
from bot.core.models import SIDES_OPS, Coupled, CurvePoint, Gate, Op, Span, Tolerance
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.python.resolver import Resolver
from bot.core.thresholds.python.scope import Module, Scope
from bot.core.thresholds.python.source import Source
from bot.core.thresholds.python.values import Num, Table, Value, flatten

_BRACKET = re.compile(r"\[([^\]]*)\]")


class Declared:
    """Reads a config's declarations against one module."""

    def __init__(self, path: str, module: Module, resolver: Resolver, source: Source) -> None:
        self.path = path
        self.module = module
        self.resolver = resolver
        self.source = source

    def _scopes(self, qualified: str) -> list[Scope]:
        """The scopes assigning the constant ``qualified`` names: the one named exactly,
        else every one whose qualified name ends with it (``test_x`` for ``TestCls.test_x``)."""
        head, _, name = qualified.rpartition(".")
        writing = [s for s in self.module.scopes if name in s.assigned or name in s.attrs]
        exact = [s for s in writing if s.name == head]
        return exact or [s for s in writing if head and s.name.endswith(f".{head}")]

    def find(self, key: str) -> Value | None:
        """The constant (or entry) ``key`` names, None when there is none (or several)."""
        parts = _BRACKET.sub(r".\1", key).split(".")
        for split in range(len(parts), 0, -1):
            qualified, rest = ".".join(parts[:split]), parts[split:]
            scopes = self._scopes(qualified)
            if len(scopes) == 1:
                value = self.resolver.constant(parts[split - 1], scopes[0], 0)
                return _entry(value, rest) if value is not None else None
            if scopes:
                return None
        return None

    def _why(self, key: str) -> str:
        parts = _BRACKET.sub(r".\1", key).split(".")
        for split in range(len(parts), 1, -1):
            scopes = self._scopes(".".join(parts[:split]))
            if len(scopes) > 1:
                names = ", ".join(s.name for s in scopes)
                return f"{len(scopes)} functions or classes have it ({names}): name the class too"
        name = parts[-1]
        for scope in self.module.scopes:
            written = [*scope.assigned.get(name, []), *scope.attrs.get(name, [])]
            if len(written) > 1:
                return f"{name} is assigned {len(written)} times in this file"
        return "no constant assigned a number exactly once has that name in this file"

    def _number(self, value: float | str | None, where: str) -> tuple[float | None, Num | None]:
        if value is None or isinstance(value, float | int):
            return value, None
        found = self.find(value)
        if not isinstance(found, Num) or found.value is None:
            raise ThresholdFileError(
                self.path, None, f"{where}: tolerance {value!r}: {self._why(value)}"
            )
        return found.value, found

    def _tolerance(self, gate: GateDecl, decl: FileDecl, where: str) -> Tolerance | None:
        chosen = gate.tolerance or decl.tolerance
        if chosen is None:
            return None
        rel, rel_num = self._number(chosen.rel, where)
        absolute, abs_num = self._number(chosen.abs, where)
        return Tolerance(
            rel=rel,
            abs=absolute,
            rel_span=rel_num.span if rel_num else None,
            abs_span=abs_num.span if abs_num else None,
        )

    def _coupled(self, gate: GateDecl, where: str) -> tuple[Coupled, ...]:
        """The constants ``coupled`` names: each assigned a number exactly once in the file."""
        found = []
        for item in gate.coupled:
            value = self.find(item.key)
            if not isinstance(value, Num) or value.value is None:
                reason = f"coupled {item.key!r}: {self._why(item.key)}"
                raise ThresholdFileError(self.path, None, f"{where}: {reason}")
            found.append(Coupled(name=item.key, factor=item.factor, span=value.span))
        return tuple(found)

    def gates(self, decls: Sequence[tuple[int, FileDecl]], found: Sequence[Gate]) -> list[Gate]:
        """Every declared gate of the file (``ThresholdFileError`` for a key naming nothing)."""
        contexts: dict[int, str] = {}
        for seen in found:
            if seen.context:
                contexts.setdefault(seen.start, seen.context)
        gates: list[Gate] = []
        for index, decl in decls:
            for number, gate in enumerate(decl.gates):
                where = f"files.{index}.gates.{number}"
                value = self.find(gate.key)
                if not isinstance(value, Num | Table) or (
                    isinstance(value, Num) and value.value is None
                ):
                    raise ThresholdFileError(
                        self.path, None, f"{where}: key {gate.key!r}: {self._why(gate.key)}"
                    )
                gates += self._gates(gate, decl, where, value, contexts)
        return gates

    def _gates(
        self,
        gate: GateDecl,
        decl: FileDecl,
        where: str,
        value: Num | Table,
        contexts: dict[int, str],
    ) -> list[Gate]:
        kind = gate.kind or decl.kind or "limit"
        sides = gate.sides or decl.sides or "both"
        op: Op = gate.op or (SIDES_OPS[sides] if kind == "reference" else ">=")
        if gate.metric is None:
            raise ThresholdFileError(self.path, None, f"{where}: give 'metric' for a constant")
        like = Gate(
            name=gate.name or gate.key,
            file=self.path,
            line=1,
            metric=gate.metric,
            op=op,
            value=0.0,
            literal="",
            start=0,
            end=0,
            kind=kind,
            tolerance=self._tolerance(gate, decl, where) if kind == "reference" else None,
            ignored="declared with 'ignore: true' in the config" if gate.ignore else "",
            pattern=where,
            coupled=self._coupled(gate, where),
        )
        if isinstance(value, Num):
            metric = gate.metric.replace("{key}", _BRACKET.sub(r".\1", gate.key).split(".")[-1])
            return [_at(like, value.span, value.value, contexts, metric=metric)]
        entries = flatten(value)
        steps = all(len(p) == 1 and isinstance(p[0], int) for p, _ in entries)
        if value.listed or steps:
            if kind != "reference":
                reason = "a list of values is a golden curve: declare it with kind: reference"
                raise ThresholdFileError(self.path, None, f"{where}: key {gate.key!r}: {reason}")
            points = tuple(
                CurvePoint(step=int(p[0]), value=n.value, span=n.span) for p, n in entries
            )
            last = next((p for p in reversed(points) if p.value is not None), None)
            if last is None:
                reason = "every golden value is nan"
                raise ThresholdFileError(self.path, None, f"{where}: key {gate.key!r}: {reason}")
            return [_at(like, last.span, last.value, contexts, points=points)]
        gates = []
        for path, num in entries:
            if num.value is None:
                continue
            keyed = "/".join(str(p) for p in path)
            metric = (
                gate.metric.replace("{key}", keyed)
                if "{key}" in gate.metric
                else f"{gate.metric}/{keyed}"
            )
            named = f"{like.name}[{keyed}]"
            gates.append(_at(like, num.span, num.value, contexts, metric=metric, name=named))
        return gates


def _at(
    like: Gate,
    span: Span,
    value: float | None,
    contexts: dict[int, str],
    **update: object,
) -> Gate:
    """``like`` bound to the literal at ``span``."""
    where = {"line": span.line, "literal": span.literal, "start": span.start, "end": span.end}
    context = contexts.get(span.start, "")
    return like.model_copy(update={**where, "value": value, "context": context, **update})


def _entry(value: Value, rest: list[str]) -> Value | None:
    for part in rest:
        if not isinstance(value, Table):
            return None
        key: str | int = int(part) if part.lstrip("-").isdigit() else part
        found = next((v for k, v in value.entries if k == key or str(k) == part), None)
        if found is None:
            return None
        value = found
    return value
