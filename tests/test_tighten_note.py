"""The note that a passing limit could be tightened: it appears exactly when a harmful move
of the metric (``rule.harm`` of its window's median, the gate's bad way) would still pass
the proposed limit while the rule's limit is stricter; information only (the verdict and the
conclusion stay), and shown in the comment, the terminal and the JSON review."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import pytest
from rich.console import Console

from bot.core.analysis.review import build_review
from bot.core.formatting import significant
from bot.core.models import (
    BacktestSettings,
    Gate,
    GateChange,
    History,
    Op,
    RuleSettings,
)
from bot.core.render.review import render_comment, render_json
from bot.core.render.terminal import review_table
from tests.builders import history_of, limit_gate, runs_of

T0 = datetime(2026, 6, 1, tzinfo=UTC)
RUNS = 20
HARM = 0.10
RULE = RuleSettings(backtest=BacktestSettings(harm=HARM))  # 5% allowance, 10% harm


def _history() -> History:
    """``acc`` around 0.70 and ``tokens`` around 250, with a little noise."""
    rng = np.random.default_rng(5)
    summaries = [
        {"acc": 0.70 + rng.normal(0, 0.003), "tokens": 250 + rng.normal(0, 1.0)}
        for _ in range(RUNS)
    ]
    return history_of(runs_of(summaries, start=T0, every=timedelta(hours=1)))


HISTORY = _history()


def _gate(metric: str, op: Op, literal: str) -> Gate:
    return limit_gate(metric, op, literal)


def _values(metric: str) -> list[float]:
    return [r.summary[metric] for r in HISTORY.finished]


def _rule(values: list[float], lower: bool, decimals: int) -> Decimal:
    """minmax with a 5% allowance, rounded outwards at ``decimals`` (2 significant digits
    are fewer here)."""
    edge = Decimal(repr(min(values) if lower else max(values)))
    raw = edge - Decimal("0.05") * abs(edge) if lower else edge + Decimal("0.05") * abs(edge)
    step = Decimal(1).scaleb(-decimals)
    return raw.quantize(step, rounding=ROUND_FLOOR if lower else ROUND_CEILING)


def _expected(metric: str, op: Op, literal: str) -> str | None:
    """The note when the moved median passes the literal and the rule is stricter by more
    than one step of the literal's decimals; None otherwise."""
    values = _values(metric)
    lower = op == ">="
    decimals = -int(Decimal(literal).as_tuple().exponent)
    median = float(np.median(values))
    moved = median * (1 - HARM) if lower else median * (1 + HARM)
    rule = _rule(values, lower, decimals)
    limit = Decimal(literal)
    stricter = (rule - limit if lower else limit - rule) > Decimal(1).scaleb(-decimals)
    passes = moved >= float(literal) if lower else moved <= float(literal)
    if not (passes and stricter):
        return None
    way = "drop" if lower else "rise"
    return (
        f"`{metric}` is well inside its limit: a 10% {way} from its median {significant(median)}"
        f" (to {significant(moved)}) would still pass `{metric} {op} {literal}`;"
        f" the rule gives {rule}, the limit could be tightened (information only)"
    )


CASES: list[tuple[str, Op, str]] = [
    ("acc", ">=", literal) for literal in ("0.55", "0.60", "0.62", "0.64", "0.65", "0.66")
] + [("tokens", "<=", literal) for literal in ("300", "285", "276", "274", "270", "265")]


@pytest.mark.parametrize(("metric", "op", "literal"), CASES)
def test_the_note_appears_exactly_when_the_harmful_move_passes(
    metric: str, op: Op, literal: str
) -> None:
    gate = _gate(metric, op, literal)
    review = build_review([GateChange(head=gate, base=gate)], HISTORY, rule=RULE)
    g = review.gates[0]
    expected = _expected(metric, op, literal)
    assert g.verdict == "unchanged"  # information only
    assert review.conclusion == "success"
    if expected is None:
        assert g.tighten_to is None
        assert g.notes == ()
    else:
        assert g.notes == (expected,)
        lower = op == ">="
        decimals = -int(Decimal(literal).as_tuple().exponent)
        assert g.tighten_to == float(_rule(_values(metric), lower, decimals))
        assert g.tighten_to == g.recomputed


def test_the_cases_cover_both_outcomes_on_each_side() -> None:
    for metric in ("acc", "tokens"):
        outcomes = {_expected(m, op, lit) is None for m, op, lit in CASES if m == metric}
        assert outcomes == {True, False}
    # a case where the rule is stricter but the harmful move fails the limit: no note
    values = _values("acc")
    assert float(np.median(values)) * (1 - HARM) < 0.64 < float(_rule(values, True, 2)) - 0.01


def test_no_note_when_the_gate_fails_its_window_or_is_looser_than_the_rule() -> None:
    too_tight = _gate("acc", ">=", "0.71")  # above the window's runs
    base = _gate("acc", ">=", "0.66")
    looser = base.model_copy(update={"literal": "0.55", "value": 0.55})
    review = build_review(
        [GateChange(head=too_tight, base=too_tight), GateChange(head=looser, base=base)],
        HISTORY,
        rule=RULE,
    )
    failing, loose = review.gates
    assert failing.proposed_failures.failed > 0
    assert loose.verdict == "looser_than_rule"  # the explanation says it already
    assert [g.tighten_to for g in review.gates] == [None, None]
    assert [g.notes for g in review.gates] == [(), ()]


def test_the_note_is_shown_in_the_comment_terminal_and_json() -> None:
    gate = _gate("acc", ">=", "0.55")
    review = build_review([GateChange(head=gate, base=gate)], HISTORY, rule=RULE)
    note = _expected("acc", ">=", "0.55")
    assert note is not None
    comment = render_comment(review)
    shown = note.replace("`acc >= 0.55`", "<code>acc \\>= 0.55</code>").replace(
        "`acc`", "<code>acc</code>"
    )
    assert f"  - ℹ️ {shown}\n" in comment
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(review_table(review))
    assert isinstance(console.file, io.StringIO)
    assert f"note: {note}" in " ".join(console.file.getvalue().split())
    data = json.loads(render_json(review))["gates"][0]
    assert data["notes"] == [note]
    assert math.isclose(data["tighten_to"], float(_rule(_values("acc"), True, 2)))
