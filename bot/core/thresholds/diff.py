"""Pair each gate of a threshold file at the PR head with the same gate at its base."""

from __future__ import annotations

from bot.core.models import Gate, GateChange, ThresholdFile


def _identity(gate: Gate) -> tuple[str, str, str]:
    """What makes a gate the same gate at base and head: its name, metric and operator."""
    return gate.name, gate.metric, gate.op


def diff_gates(base: ThresholdFile | None, head: ThresholdFile) -> list[GateChange]:
    """One ``GateChange`` per head gate, in head order.

    A head gate matches the base gate with the same (name, metric, op); failing that, the
    only base gate of that name whose (metric, op) the head does not keep (the PR changed
    the metric or operator); otherwise it is new (``base`` None).  ``base`` None: a new file.
    """
    if base is None:
        return [GateChange(head=g) for g in head.gates]
    exact = {_identity(g): g for g in base.gates}
    head_keys = {_identity(g) for g in head.gates}
    leftover: dict[str, list[Gate]] = {}
    for gate in base.gates:
        if _identity(gate) not in head_keys:
            leftover.setdefault(gate.name, []).append(gate)
    changes = []
    for gate in head.gates:
        match = exact.get(_identity(gate))
        if match is None:
            candidates = leftover.get(gate.name, [])
            heads_of_name = [
                g for g in head.gates if g.name == gate.name and _identity(g) not in exact
            ]
            match = candidates[0] if len(candidates) == 1 and len(heads_of_name) == 1 else None
        changes.append(GateChange(head=gate, base=match))
    return changes


def removed_gates(base: ThresholdFile | None, head: ThresholdFile | None) -> list[Gate]:
    """Base gates that no head gate matches (the PR deleted them)."""
    if base is None:
        return []
    changes = diff_gates(base, head) if head else []
    matched = {_identity(c.base) for c in changes if c.base is not None}
    return [g for g in base.gates if _identity(g) not in matched]
