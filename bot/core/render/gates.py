"""One gate in words: its label, what CI checks of it, where it is written, and which
gates the review judges (placeholders are shown apart); the hints' config blocks.

Pure text over ``GateReview``; outside text is escaped or fenced here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core.analysis.verdicts import needs_action
from bot.core.formatting import at_decimals
from bot.core.models import GateReview, Review, UnboundVariable
from bot.core.render.conditions import condition
from bot.core.render.markdown import Markdown, code, escape, fenced


def judged(review: Review) -> tuple[GateReview, ...]:
    """The gates the review judges: every gate but the placeholders (``ignored``)."""
    return tuple(g for g in review.gates if not g.ignored)


def placeholders(review: Review) -> tuple[GateReview, ...]:
    """The placeholder gates, shown apart with why they are not judged."""
    return tuple(g for g in review.gates if g.ignored)


def flagged(review: Review) -> list[GateReview]:
    """The judged gates that need action (a placeholder never does)."""
    return [g for g in judged(review) if needs_action(g)]


_NUMERIC_LITERAL = re.compile(r"[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?")


def value_text(literal: str, value: float, decimals: int) -> str:
    """A gate's value as its file writes it (``0.50``, ``0.040``); the float at ``decimals``
    when the literal is unknown."""
    text = literal.strip()
    return text if _NUMERIC_LITERAL.fullmatch(text) else at_decimals(value, decimals)


def proposed_text(g: GateReview) -> str:
    """The proposed value of ``g`` as written."""
    return value_text(g.proposed_literal, g.proposed, g.decimals)


def _context(g: GateReview) -> str:
    """Where the gate is checked, unless its name says it already."""
    return "" if g.name.startswith(g.context) else g.context


def gate_label(g: GateReview) -> Markdown:
    """The gate's name, and the test it is checked in: ``NAME`` in ``TestAcc.test_gsm8k``."""
    name, context = code(g.name), _context(g)
    return Markdown(f"{name} in {code(context)}") if context else name


def label_plain(g: GateReview) -> str:
    """:func:`gate_label` as plain text (on two lines)."""
    context = _context(g)
    return f"{g.name}\nin {context}" if context else g.name


def metric_cell(g: GateReview) -> Markdown:
    """What CI checks: ``metric ≥``, ``median of the last 5 steps of metric <``,
    ``metric ≈ 0.95 ±8% (≥ 0.874)``."""
    metric = code(g.metric)
    if g.aggregation:
        metric = Markdown(f"{escape(g.aggregation)} of {metric}")
    return Markdown(f"{metric} {escape(condition(g, proposed_text(g)))}")


def metric_plain(g: GateReview) -> str:
    """:func:`metric_cell` as plain text."""
    metric = f"{g.aggregation} of {g.metric}" if g.aggregation else g.metric
    return f"{metric} {condition(g, proposed_text(g))}"


def where(g: GateReview) -> Markdown:
    """Where the gate is written, and a curve's worst step: ``f.json line 4; worst at step 45``."""
    text = f"{escape(g.file)} line {g.line}"
    if g.worst_step is not None:
        text += f"; worst at step {g.worst_step}"
    return Markdown(text)


@dataclass(frozen=True)
class PlaceholderRow:
    """A placeholder gate, listed apart with why it is not judged."""

    gate: GateReview
    label: Markdown
    value: str
    where: Markdown


def placeholder_rows(review: Review) -> list[PlaceholderRow]:
    """The placeholders, in file order: name, value as written, where."""
    return [
        PlaceholderRow(gate=g, label=gate_label(g), value=proposed_text(g), where=where(g))
        for g in placeholders(review)
    ]


def hints(review: Review) -> list[tuple[UnboundVariable, Markdown]]:
    """The unbound literals that come with config lines declaring them, each with those
    lines as a ``yaml`` code block (outside text: fenced, never interpreted)."""
    return [(u, fenced(u.config, "yaml")) for u in review.hints if u.config.strip()]
