"""Drifting and wandering metrics in the regime table of every rendering (PR comment, check
run, terminal, drift issue) and in the JSON review.  Regimes carry their trends directly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from rich.console import Console

from bot.core.analysis.drift import drift_report
from bot.core.config import DriftSettings
from bot.core.formatting import day_month_year, significant_no_exponent
from bot.core.models import (
    Change,
    Failures,
    GateReview,
    MetricShift,
    Regime,
    Review,
    Trend,
    WindowInfo,
)
from bot.core.render.drift import item_body
from bot.core.render.review import render_check, render_comment, render_json
from bot.core.render.terminal import review_table
from bot.core.render.view import MAX_TREND_NOTES, regime_metrics, regime_notes

T0 = datetime(2026, 5, 3, tzinfo=UTC)
METRIC = "eval/all/avg_score"
OLD = Trend(slope=0.004, first=0.5, last=0.58, runs=21)  # rose through the first regime
NOW = Trend(slope=-0.0015, first=0.62, last=0.5915, runs=20)  # falls through the newest


def _gate() -> GateReview:
    return GateReview(
        name="EVAL_MIN",
        file="ci/nightly.sh",
        line=3,
        metric=METRIC,
        op=">=",
        old=0.56,
        proposed=0.5,
        recomputed=0.5,
        window=WindowInfo(kind="last", runs=20, first=T0, last=T0 + timedelta(days=40)),
        window_min=0.59,
        window_max=0.62,
        old_failures=Failures(failed=0, total=20),
        proposed_failures=Failures(failed=0, total=20),
        consecutive_failures=0,
        failing_since=None,
        verdict="ok",
        changed=True,
        decimals=2,
    )


def _regimes() -> tuple[Regime, ...]:
    first = Regime(
        start=T0,
        end=T0 + timedelta(days=20),
        runs=21,
        medians={METRIC: 0.54, "loss": 1.2},
        last_index=20,
        slope=OLD.slope,
        trends={METRIC: OLD},
    )
    newest = Regime(
        start=T0 + timedelta(days=21),
        end=T0 + timedelta(days=40),
        runs=20,
        medians={METRIC: 0.605, "loss": 1.1},
        first_index=21,
        last_index=40,
        slope=NOW.slope,
        trends={METRIC: NOW},
        wandering=("loss",),
    )
    return first, newest


def _review() -> Review:
    first, newest = _regimes()
    change = Change(
        at=newest.start,
        index=21,
        metrics={"loss": MetricShift(before=1.2, after=1.1, sigma=4.0)},
    )
    return Review(
        conclusion="success", gates=(_gate(),), regimes=(first, newest), changes=(change,)
    )


def _line(trend: Trend) -> str:
    return f"{significant_no_exponent(trend.first)} → {significant_no_exponent(trend.last)}"


def _notes() -> list[str]:
    """The notes expected under the table, newest regime first, from the regimes' data."""
    first, newest = _regimes()
    now = 100 * NOW.slope / abs(NOW.last)
    old = 100 * OLD.slope / abs(OLD.last)
    return [
        f"eval/all/avg_score drifting −{abs(now):.2g}% per run since"
        f" {day_month_year(newest.start)}",
        f"loss: no stable level since {day_month_year(newest.start)} (wanders like a random walk)",
        f"eval/all/avg_score drifted +{old:.2g}% per run from {day_month_year(first.start)}"
        f" to {day_month_year(first.end)}",
    ]


def _plain(markdown: str) -> str:
    return markdown.replace("<code>", "").replace("</code>", "").replace("\\", "")


def test_the_comment_marks_drifting_and_wandering_stretches() -> None:
    text = _plain(render_comment(_review()))
    rows = [line for line in text.splitlines() if line.startswith("| ") and " 2026 | " in line]
    assert len(rows) == 2
    assert f"| {_line(OLD)} |" in rows[0] and "| 1.2 |" in rows[0]
    assert f"| {_line(NOW)} |" in rows[1] and "| **wanders** |" in rows[1]  # moved at the change
    for note in _notes():
        assert f"- {note}" in text
    assert "a → b: a drifting metric's trend line over the stretch." in text


def test_the_check_text_and_the_terminal_say_the_same() -> None:
    check = _plain(render_check(_review()).text)
    console = Console(width=200, record=True, color_system=None)
    console.print(review_table(_review()))
    terminal = console.export_text()
    for note in _notes():
        assert note in check
        assert note in terminal
    assert _line(NOW) in terminal and "wanders*" in terminal


def test_a_flat_history_has_no_trend_notes() -> None:
    flat = tuple(
        r.model_copy(update={"trends": {}, "wandering": (), "slope": None}) for r in _regimes()
    )
    review = _review().model_copy(update={"regimes": flat})
    assert regime_notes(review, regime_metrics(review)) == []
    assert "trend line" not in render_comment(review)


def test_the_notes_are_bounded() -> None:
    many = tuple(
        Regime(
            start=T0 + timedelta(days=10 * i),
            end=T0 + timedelta(days=10 * i + 9),
            runs=10,
            medians={METRIC: 0.6},
            trends={METRIC: NOW},
        )
        for i in range(MAX_TREND_NOTES + 3)
    )
    review = _review().model_copy(update={"regimes": many, "changes": ()})
    notes = regime_notes(review, [METRIC])
    assert len(notes) == MAX_TREND_NOTES
    assert notes[-1] == f"and {len(many) - MAX_TREND_NOTES + 1} more"
    assert "since" in notes[0] and "from" in notes[1]  # the newest regime first


def test_a_drifting_ungated_metric_gets_a_column() -> None:
    first, newest = _regimes()
    speed = Trend(slope=-2.0, first=900.0, last=862.0, runs=20)
    newest = newest.model_copy(
        update={"trends": {"speed": speed}, "medians": {**newest.medians, "speed": 880.0}}
    )
    first = first.model_copy(update={"trends": {}})
    review = _review().model_copy(update={"regimes": (first, newest), "changes": ()})
    assert "speed" in regime_metrics(review, extra=0)


def test_the_drift_issue_marks_the_drifting_stretch() -> None:
    report = drift_report("ci/nightly.sh", _review(), DriftSettings())
    drifting = tuple(g.model_copy(update={"status": "drifting"}) for g in report.gates)
    report = report.model_copy(update={"gates": drifting})
    body = _plain(item_body(report, mode="issue", repo_url=None))
    for note in _notes():
        assert f"- {note}" in body


def test_json_gives_each_regimes_slope_trends_and_wandering() -> None:
    data = json.loads(render_json(_review()))
    first, newest = data["regimes"]
    assert first["slope"] == OLD.slope and newest["slope"] == NOW.slope
    assert newest["trends"] == {
        METRIC: {"slope": NOW.slope, "first": NOW.first, "last": NOW.last, "runs": NOW.runs}
    }
    assert newest["wandering"] == ["loss"] and first["wandering"] == []
    flat = Regime(start=T0, end=T0, runs=1, medians={METRIC: 0.6})
    data = json.loads(render_json(_review().model_copy(update={"regimes": (flat,)})))
    [regime] = data["regimes"]
    assert regime["slope"] is None and regime["trends"] == {} and regime["wandering"] == []
