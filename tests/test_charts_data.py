"""The charts' data (``GateReview.chart``, ``Review.metric_charts``) from synthetic histories:
which runs, their values, dates, commits and regime medians, the old / proposed / rule values
and bands. Every expected value is computed here from the test's own data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal

import numpy as np
import pytest

from bot.core.analysis.review import build_review, merge_reviews
from bot.core.models import (
    CurvePoint,
    Gate,
    GateChange,
    History,
    Op,
    RuleSettings,
    Run,
    Span,
    Tolerance,
    WindowSpec,
)
from bot.core.render.review import render_json
from bot.core.render.view import regime_metrics

T0 = datetime(2026, 5, 4, 3, tzinfo=UTC)
N_RUNS = 100
SHIFT_AT = 80  # first run of acc's second regime
WINDOW = RuleSettings().window.runs  # 20
LOOKBACK = RuleSettings().failure_lookback  # 30


def acc_values() -> list[float]:
    rng = np.random.default_rng(11)
    return [(0.60 if i < SHIFT_AT else 0.50) + float(rng.normal(0, 0.004)) for i in range(N_RUNS)]


def history_of(summaries: list[dict[str, float]], *, failed: tuple[int, ...] = ()) -> History:
    """One finished run per summary, 12 hours apart; every third has a name, each a commit;
    a failed run (with a wild value) after each index of ``failed``."""
    runs = [
        Run(
            id=f"id{i:03d}",
            name=f"nightly-{i}" if i % 3 == 0 else None,
            created_at=T0 + timedelta(hours=12 * i),
            commit=f"{i:040x}",
            summary=s,
        )
        for i, s in enumerate(summaries)
    ]
    runs += [
        Run(
            id=f"bad{i}",
            created_at=T0 + timedelta(hours=12 * i + 1),
            state="failed",
            summary={k: 1e6 for k in summaries[i]},
        )
        for i in failed
    ]
    return History(runs=tuple(sorted(runs, key=lambda r: r.created_at)))


def gate(name: str, metric: str, op: Op, literal: str, **update: object) -> Gate:
    g = Gate(
        name=name,
        file="ci/nightly.sh",
        line=3,
        metric=metric,
        op=op,
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
    )
    return g.model_copy(update=update)


def changed(base: Gate, literal: str) -> GateChange:
    head = base.model_copy(update={"literal": literal, "value": float(literal)})
    return GateChange(head=head, base=base)


ACC = gate("ACC_MIN", "acc", ">=", "0.56")


def test_limit_gate_chart_shows_the_lookback_with_regime_medians() -> None:
    acc = acc_values()
    history = history_of([{"acc": v} for v in acc], failed=(85, 90))
    review = build_review([changed(ACC, "0.48")], history)
    assert [c.index for c in review.changes] == [SHIFT_AT]  # the step is found where it is

    chart = review.gates[0].chart
    assert chart is not None and chart.metric == "acc"
    shown = range(N_RUNS - max(WINDOW, LOOKBACK), N_RUNS)  # the failed runs are left out
    assert [p.value for p in chart.points] == [acc[i] for i in shown]
    assert [p.at for p in chart.points] == [T0 + timedelta(hours=12 * i) for i in shown]
    assert [p.commit for p in chart.points] == [f"{i:040x}" for i in shown]
    assert [p.run for p in chart.points] == [
        f"nightly-{i}" if i % 3 == 0 else f"id{i:03d}" for i in shown
    ]
    before, after = float(np.median(acc[:SHIFT_AT])), float(np.median(acc[SHIFT_AT:]))
    assert [p.regime_median for p in chart.points] == [
        pytest.approx(before if i < SHIFT_AT else after) for i in shown
    ]
    assert chart.window_start == LOOKBACK - WINDOW  # the window: the newest 20 of the 30
    # the rule's limit: the window's minimum less 5%, floored at the literal's decimals
    low = Decimal(repr(min(acc[-WINDOW:])))
    rule = float((low - Decimal("0.05") * low).quantize(Decimal("0.01"), rounding=ROUND_FLOOR))
    assert (chart.old, chart.proposed, chart.rule) == (0.56, 0.48, rule)
    assert chart.old_band is chart.proposed_band is chart.rule_band is None


def test_a_window_longer_than_the_lookback_is_shown_whole() -> None:
    acc = acc_values()
    rule = RuleSettings(window=WindowSpec(kind="last", runs=50))
    review = build_review([changed(ACC, "0.48")], history_of([{"acc": v} for v in acc]), rule=rule)
    chart = review.gates[0].chart
    assert chart is not None
    assert [p.value for p in chart.points] == acc[-50:]
    assert chart.window_start == 0


def test_runs_without_the_metric_are_not_points() -> None:
    acc = acc_values()
    summaries = [{"acc": v} if i % 4 else {"other": 1.0} for i, v in enumerate(acc)]
    review = build_review([changed(ACC, "0.48")], history_of(summaries))
    chart = review.gates[0].chart
    having = [i for i in range(N_RUNS) if i % 4]
    assert chart is not None
    assert [p.value for p in chart.points] == [acc[i] for i in having[-LOOKBACK:]]
    assert [p.run for p in chart.points][-1] == f"nightly-{having[-1]}"


def test_an_aggregated_gate_charts_what_it_compares() -> None:
    """A gate on the mean of the last 3 steps charts that mean per run."""
    rng = np.random.default_rng(3)
    steps = [{s: float(v) for s, v in enumerate(rng.normal(2.0, 0.1, 6))} for _ in range(40)]
    runs = tuple(
        Run(
            id=f"r{i}",
            created_at=T0 + timedelta(days=i),
            summary={"loss": 9.0},
            series={"loss": s},
        )
        for i, s in enumerate(steps)
    )
    loss = gate("LOSS_MAX", "loss", "<=", "2.5", aggregation="mean", last_steps=3)
    review = build_review([changed(loss, "2.6")], History(runs=runs))
    chart = review.gates[0].chart
    expected = [float(np.mean([s[k] for k in sorted(s)][-3:])) for s in steps[-LOOKBACK:]]
    assert chart is not None
    assert [p.value for p in chart.points] == pytest.approx(expected)


def test_reference_gate_chart_has_the_bands() -> None:
    values = [0.93 + 0.002 * (i % 5) for i in range(40)]
    ref = gate("GSM8K", "acc", ">=", "0.95", kind="reference", tolerance=Tolerance(rel=0.08))
    review = build_review([changed(ref, "0.94")], history_of([{"acc": v} for v in values]))
    g = review.gates[0]
    chart = g.chart
    assert chart is not None
    assert g.recomputed is not None and chart.rule == g.recomputed
    bands = [b for b in (chart.old_band, chart.proposed_band, chart.rule_band) if b is not None]
    assert [high for _, high in bands] == [None] * 3  # lower-sided: open above
    floors = [ref - ref * 0.08 for ref in (0.95, 0.94, g.recomputed)]
    assert [low for low, _ in bands] == pytest.approx(floors)
    assert (chart.old, chart.proposed) == (0.95, 0.94)


def test_added_gate_has_no_old_value() -> None:
    review = build_review(
        [GateChange(head=ACC, base=None)], history_of([{"acc": v} for v in acc_values()])
    )
    chart = review.gates[0].chart
    assert chart is not None and chart.old is None and chart.proposed == 0.56


def test_no_chart_for_curves_or_missing_metrics() -> None:
    span = Span(start=0, end=3, literal="0.5", line=3)
    curve = gate(
        "CURVE",
        "acc",
        ">=",
        "0.5",
        points=(CurvePoint(step=1, value=0.5, span=span), CurvePoint(step=2, value=0.5, span=span)),
    )
    gone = gate("GONE", "nope", ">=", "1.0")
    review = build_review(
        [GateChange(head=curve, base=curve), changed(gone, "0.9")],
        history_of([{"acc": v} for v in acc_values()]),
    )
    assert [g.chart for g in review.gates] == [None, None]


def test_the_json_review_has_no_chart_data() -> None:
    review = build_review([changed(ACC, "0.48")], history_of([{"acc": v} for v in acc_values()]))
    assert review.gates[0].chart is not None and review.metric_charts
    data = json.loads(render_json(review))
    assert "metric_charts" not in data and "chart" not in data["gates"][0]


def test_metric_charts_follow_the_regime_table() -> None:
    """400 runs; ``acc`` and m1..m7 step at run 250, m{k} by k·0.05 (noise 0.01); ``flat``
    never moves. The charts: the gated metric, then the ones that moved most, six in all,
    each over the newest 350 runs, with its regime medians."""
    n, shift = 400, 250
    rng = np.random.default_rng(5)
    rows: list[dict[str, float]] = []
    for i in range(n):
        row = {"acc": (0.6 if i < shift else 0.5) + float(rng.normal(0, 0.004))}
        for k in range(1, 8):
            row[f"m{k}"] = (k * 0.05 if i >= shift else 0.0) + float(rng.normal(0, 0.01))
        row["flat"] = float(rng.normal(0, 0.01))
        rows.append(row)
    review = build_review([changed(ACC, "0.48")], history_of(rows))
    assert [c.index for c in review.changes] == [shift]

    charts = review.metric_charts
    assert [c.metric for c in charts] == ["acc", "m7", "m6", "m5", "m4", "m3"]
    assert set(regime_metrics(review)) <= {c.metric for c in charts}
    for chart in charts:
        values = [r[chart.metric] for r in rows]
        assert [p.value for p in chart.points] == values[-350:]
        assert chart.points[0].at == T0 + timedelta(hours=12 * (n - 350))
        medians = (float(np.median(values[:shift])), float(np.median(values[shift:])))
        assert [p.regime_median for p in chart.points] == [
            pytest.approx(medians[i >= shift]) for i in range(n - 350, n)
        ]


def test_merged_reviews_keep_the_main_metric_charts() -> None:
    history = history_of([{"acc": v} for v in acc_values()])
    one = build_review([changed(ACC, "0.48")], history)
    two = build_review([changed(ACC, "0.49"), changed(ACC, "0.50")], history)
    merged = merge_reviews([one, two])
    assert merged.metric_charts == two.metric_charts
    assert [g.chart for g in merged.gates] == [g.chart for g in (*one.gates, *two.gates)]
