"""A metric that drifts through its regime, in the review's words: the projection of its trend
line onto a gate's limit, the explanation of a gate it makes fail, and the warning that a limit
on a trending metric goes stale.  Regimes carry their trends directly (no detector)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core.analysis.projection import gate_bounds, runs_until, runs_until_fails, toward_failing
from bot.core.analysis.review import build_review
from bot.core.formatting import day_month, per_run, significant
from bot.core.models import (
    Gate,
    GateChange,
    History,
    HistoryStats,
    Op,
    Regime,
    Run,
    Tolerance,
    Trend,
)

T0 = datetime(2026, 5, 3, tzinfo=UTC)
N_RUNS = 60
TOP, SLOPE = 0.70, -0.002  # ``acc`` falls along a straight line: TOP + SLOPE * i
LOSS_TOP, LOSS_SLOPE = 2.0, -0.01  # ``loss`` falls too (an upper bound moves away from it)


def _acc(i: int) -> float:
    return TOP + SLOPE * i


def _history() -> History:
    runs = tuple(
        Run(
            id=f"r{i:02d}",
            created_at=T0 + timedelta(days=i),
            commit=f"{i:040x}",
            summary={"acc": _acc(i), "loss": LOSS_TOP + LOSS_SLOPE * i, "tokens": 260.0},
        )
        for i in range(N_RUNS)
    )
    stats = HistoryStats(total=N_RUNS, finished=N_RUNS, by_state={"finished": N_RUNS})
    return History(runs=runs, stats=stats, source="file:runs.jsonl")


def _trend(slope: float, top: float) -> Trend:
    return Trend(slope=slope, first=top, last=top + slope * (N_RUNS - 1), runs=N_RUNS)


ACC_TREND = _trend(SLOPE, TOP)
LOSS_TREND = _trend(LOSS_SLOPE, LOSS_TOP)


def _regime(trends: dict[str, Trend]) -> Regime:
    """One regime over the whole history (nothing detected) in which ``trends`` drift."""
    return Regime(
        start=T0,
        end=T0 + timedelta(days=N_RUNS - 1),
        runs=N_RUNS,
        medians={"acc": _acc(N_RUNS // 2), "loss": 1.7, "tokens": 260.0},
        first_index=0,
        last_index=N_RUNS - 1,
        slope=SLOPE,
        trends=trends,
    )


def _gate(metric: str, op: Op, literal: str, **kw: Any) -> Gate:
    return Gate(
        name=f"{metric.upper()}_LIMIT",
        file="ci/nightly.sh",
        line=3,
        metric=metric,
        op=op,
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
        **kw,
    )


def _changed(base: Gate, literal: str) -> GateChange:
    head = base.model_copy(update={"literal": literal, "value": float(literal)})
    return GateChange(head=head, base=base)


# --------------------------------------------------------------------------- projection


def test_runs_until_a_lower_bound_fails() -> None:
    trend = Trend(slope=-0.011, first=0.8, last=0.62, runs=30)
    assert runs_until(trend, 0.5, lower=True) == math.ceil((0.62 - 0.5) / 0.011)
    assert runs_until(trend, 0.62, lower=True) == 0  # the line is there already
    assert runs_until(trend, 0.7, lower=True) == 0  # ... or past it
    assert runs_until(trend, 0.9, lower=False) is None  # moving away from an upper bound


def test_runs_until_an_upper_bound_fails() -> None:
    trend = Trend(slope=3.5, first=100.0, last=200.0, runs=30)
    assert runs_until(trend, 250.0, lower=False) == math.ceil((250.0 - 200.0) / 3.5)
    assert runs_until(trend, 150.0, lower=True) is None
    flat = Trend(slope=0.0, first=200.0, last=200.0, runs=30)
    assert runs_until(flat, 250.0, lower=False) is None
    assert runs_until(flat, 150.0, lower=True) is None


def test_a_two_sided_band_fails_at_the_edge_the_line_moves_to() -> None:
    band = _gate("acc", "==", "0.60", kind="reference", tolerance=Tolerance(abs=0.05))
    bounds = gate_bounds(band)
    assert [lower for _, lower in bounds] == [True, False]
    assert [limit for limit, _ in bounds] == pytest.approx([0.55, 0.65])
    falling = Trend(slope=-0.004, first=0.7, last=0.61, runs=30)
    rising = Trend(slope=0.004, first=0.5, last=0.61, runs=30)
    low, high = bounds[0][0], bounds[1][0]
    assert runs_until_fails(falling, bounds) == math.ceil((0.61 - low) / 0.004)
    assert runs_until_fails(rising, bounds) == math.ceil((high - 0.61) / 0.004)
    assert toward_failing(falling, band) and toward_failing(rising, band)


def test_toward_failing_follows_the_side_of_the_gate() -> None:
    falling, rising = ACC_TREND, Trend(slope=0.01, first=0.5, last=0.6, runs=10)
    lower, upper = _gate("acc", ">=", "0.5"), _gate("acc", "<=", "0.9")
    assert toward_failing(falling, lower) and not toward_failing(rising, lower)
    assert toward_failing(rising, upper) and not toward_failing(falling, upper)
    assert not toward_failing(Trend(slope=0.0, first=1, last=1, runs=5), lower)


def test_per_run_rates() -> None:
    assert per_run(-0.002, -0.002 / 0.8) == "−0.25% per run"
    assert per_run(0.5, 0.5 / 200.0) == "+0.25% per run"
    assert per_run(-0.0012, None) == "−0.0012 per run"


# --------------------------------------------------------------------------- the review


def _review(gates: list[GateChange], trends: dict[str, Trend]) -> dict[str, tuple[str, ...]]:
    """Each gate's explanation and warnings."""
    review = build_review(gates, _history(), detected=([_regime(trends)], []))
    return {g.name: (g.explanation, *g.warnings) for g in review.gates}


def _rate(trend: Trend) -> str:
    """The rate as the review writes it, from the trend's numbers."""
    relative = trend.slope / abs(trend.last)
    sign = "−" if relative < 0 else "+"
    return f"{sign}{significant(abs(relative) * 100, 2)}% per run"


def test_a_gate_failing_from_a_trend_says_so_with_the_projection() -> None:
    # the line falls below the old 0.60 at run 50: the newest runs fail; 0.555 still passes
    base = _gate("acc", ">=", "0.60")
    words = _review([_changed(base, "0.555")], {"acc": ACC_TREND})[base.name]
    last = _acc(N_RUNS - 1)
    runs = math.ceil((last - 0.555) / -SLOPE)
    since = day_month(T0, T0 + timedelta(days=N_RUNS - 1))
    explanation, *warnings = words
    assert (
        f"acc has been drifting down since {since} ({_rate(ACC_TREND)});"
        f" at this rate 0.555 fails in ~{runs} runs"
    ) in explanation
    assert warnings == [
        f"acc drifts {_rate(ACC_TREND)}: 0.555 would fail in ~{runs} runs;"
        " a limit on a trending metric goes stale"
    ]


def test_a_proposed_value_already_past_the_line_is_said_so() -> None:
    base = _gate("acc", ">=", "0.60")
    explanation, warning = _review([_changed(base, "0.59")], {"acc": ACC_TREND})[base.name]
    assert f"({_rate(ACC_TREND)}); its trend line is already past 0.59;" in explanation
    assert warning.startswith(f"acc drifts {_rate(ACC_TREND)}: its trend line is already past")


def test_a_trend_away_from_the_limit_is_no_cause_but_still_a_warning() -> None:
    loss = _gate("loss", "<=", "2.1")  # loss falls: it never fails this upper bound
    explanation, warning = _review([GateChange(head=loss, base=loss)], {"loss": LOSS_TREND})[
        loss.name
    ]
    assert "drifting" not in explanation
    assert warning == (
        f"loss drifts {_rate(LOSS_TREND)}, away from 2.1; a limit on a trending metric goes stale"
    )


def test_a_flat_metric_gets_no_trend_words() -> None:
    tokens = _gate("tokens", "<=", "300")
    acc = _gate("acc", ">=", "0.60")
    found = _review([GateChange(head=tokens, base=tokens), GateChange(head=acc, base=acc)], {})
    assert found[tokens.name] == (found[tokens.name][0],)  # no warning
    assert "drift" not in found[acc.name][0] and len(found[acc.name]) == 1
