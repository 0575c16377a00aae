"""Gates the config declares on a shell script's variables (``files: - gates: - key: NAME``),
for comparisons the script does not show (``bc``, a checker taking the value as an argument).

Each declared variable, and each variable a declaration names as a tolerance (``tolerance:
{rel: ACC_RTOL}``) or as ``coupled``, must be assigned a numeric literal exactly once;
otherwise ``ThresholdFileError`` names the declaration.  The declaration's ``kind``,
``sides``, ``tolerance`` and ``ignore`` apply as for YAML files (docs/threshold-files.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.config import FileDecl, GateDecl, ToleranceDecl
from bot.core.models import SIDES_OPS, Coupled, Gate, Op, Span, Tolerance
from bot.core.thresholds.shell.script import declared_gate


def _variable(path: str, text: str, where: str, variable: str) -> tuple[float, Span]:
    """The number a variable is assigned, and where (the error names the declaration)."""
    gate = declared_gate(path, text, where, variable, variable, ">=")
    return gate.value, gate.span


def _tolerance(path: str, text: str, where: str, chosen: ToleranceDecl | None) -> Tolerance | None:
    if chosen is None:
        return None
    parts: dict[str, object] = {}
    for part in ("rel", "abs"):
        value = getattr(chosen, part)
        if isinstance(value, str):  # a variable of the script
            number, span = _variable(path, text, where, value)
            parts |= {part: number, f"{part}_span": span}
        elif value is not None:
            parts[part] = float(value)
    return Tolerance.model_validate(parts)


def _gate(path: str, text: str, decl: FileDecl, gate: GateDecl, where: str) -> Gate:
    kind = gate.kind or decl.kind or "limit"
    sides = gate.sides or decl.sides or "both"
    op: Op = gate.op or (SIDES_OPS[sides] if kind == "reference" else ">=")
    if kind == "reference" and gate.sides:
        op = SIDES_OPS[gate.sides]
    metric = gate.metric or gate.key
    found = declared_gate(path, text, gate.name or gate.key, gate.key, metric, op)
    coupled = tuple(
        Coupled(name=c.key, factor=c.factor, span=_variable(path, text, where, c.key)[1])
        for c in gate.coupled
    )
    tolerance = _tolerance(path, text, where, gate.tolerance or decl.tolerance)
    ignored = found.ignored or ("declared with 'ignore: true' in the config" if gate.ignore else "")
    return found.model_copy(
        update={
            "pattern": where,
            "kind": kind,
            "tolerance": tolerance if kind == "reference" else None,
            "coupled": coupled,
            "ignored": ignored,
        }
    )


def declared_gates(path: str, text: str, decls: Sequence[tuple[int, FileDecl]]) -> list[Gate]:
    """The gates ``decls`` (the config's ``files:`` entries matching the script, with their
    indices) declare, each tagged with its ``files.N.gates.M``."""
    return [
        _gate(path, text, decl, gate, f"files.{index}.gates.{number}")
        for index, decl in decls
        for number, gate in enumerate(decl.gates)
    ]
