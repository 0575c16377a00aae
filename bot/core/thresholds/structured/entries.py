"""A key whose value is an entry: a mapping holding the number and how it is compared.

``fid: {value: 14.2, rtol: 0.05}``, ``wer: {expected: 0.081, atol: 0.004}``,
``tokens_per_s: {value: 950, kind: limit, op: ">="}``: one gate on the entry's ``value``
(else ``expected``, else ``reference``) with the entry's own ``kind``, ``op`` and tolerance
(``rtol`` / ``rel_tol`` relative; ``atol`` / ``abs_tol`` / ``tolerance`` / ``tol``
absolute).  Pure reads of one mapping: no recursion, bounded by the mapping's size.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.models import GateKind, Op
from bot.core.thresholds.structured.key_words import GOAL_FIELDS, OP_FIELDS, parse_op
from bot.core.thresholds.structured.patterns import leaf_value
from bot.core.thresholds.structured.tree import Node

VALUE_KEYS = ("value", "expected", "reference")
"""The fields holding an entry's number, in order of preference."""
TOLERANCE_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rel", ("rtol", "rel_tol", "relative_tolerance")),
    ("abs", ("atol", "abs_tol", "absolute_tolerance", "tolerance", "tol")),
)
"""Per side of a tolerance, the fields that give it, in order of preference."""
_KINDS: dict[str, GateKind] = {
    "reference": "reference",
    "golden": "reference",
    "expected": "reference",
    "limit": "limit",
    "bound": "limit",
    "threshold": "limit",
}


@dataclass(frozen=True)
class Entry:
    """What an entry says: the field of its number, its kind and operator (None: not said)
    and the fields of its tolerance (``{"rel": "rtol"}``)."""

    value_key: str
    kind: GateKind | None
    op: Op | None
    tolerance: dict[str, str]


def entry_of(mapping: dict[str, Node]) -> Entry | None:
    """The entry a mapping is, or None when no value field holds a single value (a leaf)."""
    value_key = next((k for k in VALUE_KEYS if leaf_value(mapping.get(k)) is not None), None)
    if value_key is None:
        return None
    kind_text = leaf_value(mapping.get("kind"))
    kind = _KINDS.get(kind_text.strip().lower()) if kind_text is not None else None
    op = None
    for field in (*OP_FIELDS, *GOAL_FIELDS):
        text = leaf_value(mapping.get(field))
        if text is not None and (op := parse_op(field, text)) is not None:
            break
    tolerance = {}
    for side, names in TOLERANCE_KEYS:
        found = next((n for n in names if leaf_value(mapping.get(n)) is not None), None)
        if found is not None:
            tolerance[side] = found
    return Entry(value_key, kind, op, tolerance)
