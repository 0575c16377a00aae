"""Which literals ``/rebaseline`` rewrites for a gate, and their new text.

Pure.  A limit's or a reference's own literal gets the rule's value (``GateReview
.recomputed``, at its decimals); a golden curve gets one value per step (the analysis'
``recompute_points``); a coupled literal (``min_al`` = 0.95 x ``ref_al``) follows the
gate's new value; a tolerance (``--tolerance``) is widened to the one the window needs,
where the file writes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Literal

from bot.core.analysis.limits import EXACT, decimals_of, limit_decimals, unit
from bot.core.models import CurvePoint, Frozen, Gate, GateReview, Span, Tolerance
from bot.core.render.conditions import tolerance_text, tolerance_too_tight
from bot.core.thresholds.edit import SpanEdit, format_literal

PointValues = Sequence[tuple[CurvePoint, float | None]]
"""Each step of a golden curve with the rule's value for it (None: left as written)."""


class GateEdit(Frozen):
    """One literal to rewrite: the gate's own (``span`` None), or another of the gate's
    literals, which ``part`` names (``step 45``, ``tolerance``, ``coupled min_al``)."""

    gate: Gate
    new_literal: str
    new: float
    span: Span | None = None
    part: str = ""

    @property
    def target(self) -> Span:
        """The literal rewritten."""
        return self.span or self.gate.span

    @property
    def old_literal(self) -> str:
        """The literal's text before the edit."""
        return self.target.literal

    @property
    def is_reference(self) -> bool:
        """Whether the literal belongs to a reference gate or a golden curve."""
        return self.gate.kind == "reference" or bool(self.gate.points)

    @property
    def label(self) -> str:
        """``NAME``, or ``NAME tolerance``, ``NAME step 45``."""
        return f"{self.gate.name} {self.part}" if self.part else self.gate.name

    @property
    def summary(self) -> str:
        """``NAME: 0.56 → 0.50`` for replies and commit messages."""
        return f"{self.label}: {self.old_literal} → {self.new_literal}"

    def span_edit(self) -> SpanEdit:
        """The edit of the file text."""
        return SpanEdit(self.target, self.new_literal, self.label)


ToleranceReason = Literal["not_asked", "config", "unwritable"]


class ToleranceNote(Frozen):
    """A reference gate's tolerance the window's runs do not fit, left as it is: not asked
    for (no ``--tolerance``), not written in the file (the config sets it), or written in a
    form that cannot be rewritten."""

    gate: str
    needed: str  # ``±12%``
    reason: ToleranceReason


def _edit(gate: Gate, value: float, span: Span, decimals: int, part: str) -> GateEdit | None:
    """``span`` rewritten to ``value`` at ``decimals``; None when it already reads so."""
    text = format_literal(value, decimals)
    if text == span.literal or float(text) == float(span.literal):
        return None
    return GateEdit(gate=gate, new_literal=text, new=float(text), span=span, part=part)


def point_edits(gate: Gate, points: PointValues, digits: int) -> list[GateEdit]:
    """A golden curve's steps rewritten to the rule's values, each at its literal's decimals
    (or more for ``digits`` significant digits); ``nan`` steps and steps without a value kept."""
    edits: list[GateEdit] = []
    for point, value in points:
        if value is None or point.value is None:
            continue
        decimals = limit_decimals(value, point.span.literal, digits)
        edit = _edit(gate, value, point.span, decimals, f"step {point.step}")
        if edit is not None:
            edits.append(edit)
    return edits


def coupled_edits(gate: Gate, new_value: float) -> list[GateEdit]:
    """The literals derived from ``gate``'s: ``factor x new_value`` at each one's decimals."""
    edits: list[GateEdit] = []
    for coupled in gate.coupled:
        value = coupled.factor * new_value
        edit = _edit(
            gate, value, coupled.span, decimals_of(coupled.span.literal), f"coupled {coupled.name}"
        )
        if edit is not None:
            edits.append(edit)
    return edits


def limit_edit(gates: Sequence[Gate], found: Sequence[GateReview | None]) -> GateEdit | None:
    """One literal bounding one or more metrics: the most permissive of their rule values;
    None when it already has it, or it is a lower bound of one and an upper of another."""
    gate = gates[0]
    literals = [
        format_literal(r.recomputed, r.decimals)
        for r in found
        if r is not None and r.recomputed is not None
    ]
    if len({g.is_lower_bound for g in gates}) > 1:
        return None
    # the most permissive value passes every window of the literal's gates
    new_literal = (min if gate.is_lower_bound else max)(literals, key=float)
    if new_literal == gate.literal or float(new_literal) == gate.value:
        return None
    return GateEdit(gate=gate, new_literal=new_literal, new=float(new_literal))


def reference_edits(
    gate: Gate, review: GateReview, points: PointValues | None, digits: int
) -> list[GateEdit] | None:
    """A reference's literal (a curve's steps) set to the rule's reference, then the coupled
    literals; None without data (a curve without its steps' values)."""
    if review.recomputed is None:
        return None
    if gate.points:
        if points is None:
            return None
        own = point_edits(gate, points, digits)
        last = [e for e in own if e.target == gate.span]
        new = last[0].new if last else None
    else:
        text = format_literal(review.recomputed, review.decimals)
        changed = text != gate.literal and float(text) != gate.value
        own = [GateEdit(gate=gate, new_literal=text, new=float(text))] if changed else []
        new = float(text) if changed else None
    return own + (coupled_edits(gate, new) if new is not None else [])


def agree(gates: Sequence[Gate], found: Sequence[GateReview | None]) -> bool:
    """Whether the reference gates sharing one literal get the same new text (never for a
    curve, nor a limit and a reference)."""
    if any(g.points or g.kind != "reference" for g in gates):
        return False
    texts = {
        format_literal(r.recomputed, r.decimals)
        for r in found
        if r is not None and r.recomputed is not None
    }
    return len(texts) == 1


# --------------------------------------------------------------------------- tolerances


@dataclass
class ToleranceNeed:
    """A tolerance literal to widen: the widest component value its gates need."""

    gate: Gate  # the first gate that needs it (the edit is named after it)
    component: Literal["rel", "abs"]
    span: Span
    old: float  # the component as the gates read it (``rel`` 0.08 for a literal ``8``)
    new: float
    count: int = 1  # gates that need it widened (a file-level ``rtol`` several gates read)


def tolerance_needs(
    gate: Gate, review: GateReview
) -> tuple[list[ToleranceNeed], ToleranceNote | None]:
    """What widening ``gate``'s tolerance takes (``--tolerance``): the literals to rewrite,
    or a note when the tolerance the window needs cannot be written in the file."""
    needed = review.recomputed_tolerance
    if not tolerance_too_tight(review) or needed is None:
        return [], None
    note = ToleranceNote(gate=gate.name, needed=tolerance_text(needed), reason="config")
    have = gate.tolerance or Tolerance()
    needs: list[ToleranceNeed] = []
    components: tuple[tuple[Literal["rel", "abs"], float | None, float | None, Span | None], ...]
    components = (
        ("rel", needed.rel, have.rel, have.rel_span),
        ("abs", needed.abs, have.abs, have.abs_span),
    )
    for component, new, old, span in components:
        if new is None or (old is not None and new <= old):
            continue
        if span is None or old is None:
            return [], note
        needs.append(ToleranceNeed(gate, component, span, old, new))
    return needs, None


def merge_needs(needs: Sequence[ToleranceNeed]) -> list[ToleranceNeed]:
    """One need per literal: the widest, when gates share a tolerance literal."""
    merged: dict[tuple[int, int], ToleranceNeed] = {}
    for need in needs:
        key = (need.span.start, need.span.end)
        if key in merged:
            kept = merged[key]
            kept.new, kept.count = max(kept.new, need.new), kept.count + 1
        else:
            merged[key] = ToleranceNeed(need.gate, need.component, need.span, need.old, need.new)
    return list(merged.values())


def tolerance_literal(span: Span, old: float, new: float, digits: int) -> str | None:
    """The text that writes the tolerance component ``new`` where ``span`` writes ``old``:
    as the value itself (``0.08``), a percentage (``8``) or a factor (``0.92`` = 1 - 0.08,
    ``1.08``); rounded toward the wider band at the literal's decimals (or more for
    ``digits`` significant digits).  None when the literal is none of these forms."""
    try:
        written = float(span.literal)
    except ValueError:
        return None
    one, hundred, value = Decimal(1), Decimal(100), Decimal(repr(new))
    forms = (
        (old, value, ROUND_CEILING),
        (old * 100, EXACT.multiply(value, hundred), ROUND_CEILING),
        (1 - old, EXACT.subtract(one, value), ROUND_FLOOR),
        (1 + old, EXACT.add(one, value), ROUND_CEILING),
    )
    for shown, text_value, rounding in forms:
        if math.isclose(written, shown, rel_tol=1e-9, abs_tol=1e-12):
            decimals = limit_decimals(float(text_value), span.literal, digits)
            rounded = text_value.quantize(unit(decimals), rounding=rounding, context=EXACT)
            return f"{rounded:f}"
    return None


def tolerance_edit(need: ToleranceNeed, digits: int) -> GateEdit | ToleranceNote | None:
    """The edit that widens one tolerance literal; a note when its form is unknown; None
    when it already reads so."""
    text = tolerance_literal(need.span, need.old, need.new, digits)
    if text is None:
        needed = tolerance_text(Tolerance.model_validate({need.component: need.new}))
        return ToleranceNote(gate=need.gate.name, needed=needed, reason="unwritable")
    if text == need.span.literal:
        return None
    part = "tolerance" if need.count == 1 else f"tolerance (for {need.count} gates)"
    return GateEdit(gate=need.gate, new_literal=text, new=float(text), span=need.span, part=part)
