"""What the review does per kind of gate (docs/limit-rule.md): how a run fails, what the rule
recomputes and how the proposed gate compares with it, and what the review adds for reference
gates (bands, the tolerance the window needs), golden curves (the worst step) and gates on an
aggregation of per-step series."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from bot.core.analysis.curves import curve_failures, curve_warnings, worst_step
from bot.core.analysis.explain import (
    aggregation_warning,
    describe_reference,
    tighten_note,
    tolerance_warning,
)
from bot.core.analysis.failures import gate_failing_mask, tally
from bot.core.analysis.limits import looser_by, looser_than_rule, recompute_limit, unit
from bot.core.analysis.references import (
    band_mask,
    band_of,
    finite,
    needed_tolerance,
    recompute_reference,
)
from bot.core.analysis.values import aggregation_words, checked_points
from bot.core.analysis.windows import BoolArray, Series
from bot.core.formatting import at_decimals, plural, significant
from bot.core.models import Band, Gate, GateKind, RuleSettings, Sides, Tolerance, passes

__all__ = [
    "KindFields",
    "KindReading",
    "Ruling",
    "failing",
    "proposed_words",
    "read_kind",
    "rule_of",
    "tighten",
]


def failing(gate: Gate, series: Series) -> BoolArray:
    """True for each run of ``series`` (extracted for ``gate``) that fails ``gate``."""
    if gate.points:
        return curve_failures(gate, series)
    return gate_failing_mask(gate, series.values, gate.value)


@dataclass(frozen=True)
class Ruling:
    """The rule's value over a gate's window, and how the proposed gate compares with it."""

    recomputed: float  # a limit, or a reference (a curve's: at its last checked step)
    decimals: int
    looser: float  # how much more permissive the proposed gate is (negative: stricter)
    is_looser: bool  # ... by more than one rounding step
    words: str  # the rule's value as the explanation writes it
    band: Band | None = None  # reference gates: the band around ``recomputed``


def _at_step(gate: Gate) -> str:
    points = checked_points(gate)
    return f" at step {points[-1].step}" if points else ""


def rule_of(head: Gate, window: Series, literal: str, rule: RuleSettings) -> Ruling | None:
    """The rule on ``head``'s ``window`` (``literal``: the gate's literal before the PR, whose
    decimals the result keeps); None when the window has no finite value."""
    if head.kind == "limit":
        limit = recompute_limit(window.values, head.op, literal, rule)
        if limit is None:
            return None
        value, decimals = limit
        return Ruling(
            value,
            decimals,
            looser_by(head.value, value, head.op),
            looser_than_rule(head.value, value, decimals, head.op),
            significant(value, 6),
        )
    found = recompute_reference(window.values, literal, rule)
    if found is None:
        return None
    reference, decimals = found
    exact = band_of(reference, head.tolerance, head.sides)
    looser = band_of(head.value, head.tolerance, head.sides).looser_than(exact)
    words = describe_reference(at_decimals(reference, decimals), head.tolerance, exact.band)
    return Ruling(
        reference,
        decimals,
        float(looser),
        looser > unit(decimals),
        words + (_at_step(head) if head.points else ""),
        exact.band,
    )


def proposed_words(gate: Gate) -> str:
    """The proposed gate as the explanation writes it: its literal (a limit), ``0.95 ±8%
    (≥ 0.874)`` (a reference), ``the golden curve (40 steps, ±5%)``."""
    if gate.kind == "limit":
        return gate.literal
    if gate.points:
        tolerance = gate.tolerance.describe() if gate.tolerance is not None else "±0"
        return f"the golden curve ({plural(len(checked_points(gate)), 'step')}, {tolerance})"
    band = band_of(gate.value, gate.tolerance, gate.sides).band
    return describe_reference(gate.literal, gate.tolerance, band)


class KindFields(TypedDict):
    """``GateReview``'s fields that depend on the gate's kind."""

    kind: GateKind
    reference: float | None
    tolerance: Tolerance | None
    sides: Sides
    old_band: Band | None
    proposed_band: Band | None
    recomputed_band: Band | None
    recomputed_tolerance: Tolerance | None
    worst_step: int | None
    aggregation: str
    context: str
    ignored: str


@dataclass(frozen=True)
class KindReading:
    """What the review shows beyond a limit's fields (``GateReview``'s of the same names)."""

    reference: float | None = None
    tolerance: Tolerance | None = None
    old_band: Band | None = None
    proposed_band: Band | None = None
    recomputed_band: Band | None = None
    recomputed_tolerance: Tolerance | None = None
    worst_step: int | None = None
    aggregation: str = ""
    warnings: tuple[str, ...] = ()

    def fields(self, head: Gate) -> KindFields:
        """The review's fields of ``head`` (the gate as proposed) for this reading."""
        return KindFields(
            kind=head.kind,
            reference=self.reference,
            tolerance=self.tolerance,
            sides=head.sides,
            old_band=self.old_band,
            proposed_band=self.proposed_band,
            recomputed_band=self.recomputed_band,
            recomputed_tolerance=self.recomputed_tolerance,
            worst_step=self.worst_step,
            aggregation=self.aggregation,
            context=head.context,
            ignored=head.ignored,
        )


def _plain(tolerance: Tolerance | None) -> Tolerance | None:
    """``tolerance`` without where it is written (the review shows ``rel`` and ``abs``)."""
    return None if tolerance is None else Tolerance(rel=tolerance.rel, abs=tolerance.abs)


def _band(gate: Gate) -> Band | None:
    if gate.kind != "reference":
        return None
    return band_of(gate.value, gate.tolerance, gate.sides).band


def read_kind(
    head: Gate, old: Gate, window: Series | None, ruling: Ruling | None, rule: RuleSettings
) -> KindReading:
    """The kind's fields of ``head``'s review (``old``: the gate before the PR; ``window``:
    head's window, None when the history could not be read)."""
    warnings: list[str] = []
    words = aggregation_words(head)
    if window is not None and window.stepped is not None and not head.points and words:
        bare = int((~window.stepped).sum())
        if bare and (head.aggregation != "last" or head.last_steps is not None):
            warnings.append(aggregation_warning(words, window.metric, bare, len(window)))
    if window is not None and head.points:
        warnings.extend(curve_warnings(head, window))
    worst = worst_step(head, window) if window is not None and head.points else None
    if head.kind != "reference":
        return KindReading(worst_step=worst, aggregation=words, warnings=tuple(warnings))
    needed: Tolerance | None = None
    if window is not None and ruling is not None and ruling.band is not None:
        values = finite(window.values)
        held = tally(band_mask(values, ruling.band))
        if held.failed:
            needed = needed_tolerance(
                ruling.recomputed, values, head.tolerance, head.sides, rule.significant_digits
            )
            reference = at_decimals(ruling.recomputed, ruling.decimals)
            warnings.append(
                tolerance_warning(head.tolerance, rule.reference, reference, held, needed)
            )
    return KindReading(
        reference=head.value,
        tolerance=_plain(head.tolerance),
        old_band=_band(old),
        proposed_band=_band(head),
        recomputed_band=ruling.band if ruling is not None else None,
        recomputed_tolerance=needed,
        worst_step=worst,
        aggregation=words,
        warnings=tuple(warnings),
    )


def tighten(
    head: Gate, window: Series, ruling: Ruling | None, rule: RuleSettings, *, metric: str
) -> tuple[float, str] | None:
    """The rule's limit and the note saying ``head``'s limit could be tightened, when a
    harmful move (``rule.harm`` of the window's median, the gate's bad way) would still pass
    the proposed limit while the rule's is stricter by more than a rounding step; None
    otherwise, and for a gate that fails a run of its window, a reference, a curve or a
    placeholder.  ``metric``: the history key the sentence names.  Information only: for a
    gate the PR leaves as it is (a changed one so loose is ``looser_than_rule`` already)."""
    if head.kind != "limit" or head.points or head.ignored or ruling is None:
        return None
    values = finite(window.values)
    if values.size == 0 or not ruling.is_looser or failing(head, window).any():
        return None
    median = float(np.median(values))
    lower = head.is_lower_bound
    moved = median - rule.harm * abs(median) if lower else median + rule.harm * abs(median)
    if not passes(moved, head.op, head.value):
        return None
    words = tighten_note(
        metric,
        f"{metric} {head.op} {head.literal}",
        harm=rule.harm,
        median=median,
        moved=moved,
        lower=lower,
        rule_value=at_decimals(ruling.recomputed, ruling.decimals),
    )
    return ruling.recomputed, words
