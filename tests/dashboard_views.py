"""Dashboard views built the honest way: each file's ``DriftReport`` comes from the real
``build_review`` and ``drift_report`` over a history generated here, reviewed at its literal
with the drift window as ``bot.features.drift.evaluate`` does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from bot.core.analysis.drift import drift_report
from bot.core.analysis.review import build_review
from bot.core.config import DriftSettings
from bot.core.dashboard.view import FileView, RepoView
from bot.core.models import BacktestSettings, Gate, GateChange, RuleSettings
from tests.builders import history_of, limit_gate, series_runs

T0 = datetime(2026, 5, 21, tzinfo=UTC)
SETTINGS = DriftSettings()
BEFORE = 40  # runs before the drifting gate's step
STEP_RUNS = 6  # runs after it, all failing
TREND_RUNS = 80
TREND_START, TREND_SLOPE = 0.95, -0.002  # per run
HARM = 0.02  # the looser gate's harmful move (its backtest's too)
SHA = "0123456789abcdef0123456789abcdef01234567"
URL = "https://github.com/octo/repo"


def noisy(level: float, runs: int, seed: int, sd: float = 0.005) -> list[float]:
    rng = np.random.default_rng(seed)
    return [level + float(rng.normal(0, sd)) for _ in range(runs)]


def drifting_values() -> list[float]:
    """``BEFORE`` runs near 0.80, then ``STEP_RUNS`` near 0.70."""
    return noisy(0.80, BEFORE, 1) + noisy(0.70, STEP_RUNS, 11)


def trend_values() -> list[float]:
    """A steady fall of ``TREND_SLOPE`` per run from ``TREND_START``, noise 0.001."""
    rng = np.random.default_rng(2)
    return [TREND_START + TREND_SLOPE * i + float(rng.normal(0, 0.001)) for i in range(TREND_RUNS)]


def flaky_values() -> list[float]:
    """Near 0.80 with three scattered runs at 0.70 among the last 30."""
    values = noisy(0.80, 60, 4)
    for position in (-25, -14, -4):
        values[position] = 0.70
    return values


def looser_values() -> list[float]:
    """1.0, then 0.97 from run 40 (tests/test_backtest_hint.py's history: the z-score
    would have caught the step that minmax missed)."""
    rng = np.random.default_rng(3)
    return [(1.0 if i < 40 else 0.97) + float(rng.normal(0, 0.001)) for i in range(55)]


def file_view(
    path: str,
    gates: list[Gate],
    values: list[float],
    *,
    metric: str = "acc",
    rule: RuleSettings = RuleSettings(),
) -> FileView:
    """``gates`` of ``path`` reviewed as the drift watch does over ``values`` of ``metric``
    (a run a day from ``T0``)."""
    gates = [g.model_copy(update={"file": path}) for g in gates]
    history = history_of(series_runs(values, metric=metric, start=T0))
    review = build_review(
        [GateChange(head=g, base=g) for g in gates],
        history,
        rule=rule.model_copy(update={"window": SETTINGS.window}),
    )
    return FileView(
        path=path,
        source="file:runs.jsonl",
        gates=tuple(gates),
        report=drift_report(path, review, SETTINGS),
    )


@dataclass(frozen=True)
class Kinds:
    """One file per kind of gate, by name."""

    drifting: FileView
    no_data: FileView
    trending: FileView
    flaky: FileView
    looser: FileView
    healthy: FileView

    def view(self, *extra: FileView, **fields: object) -> RepoView:
        files = (
            self.healthy,
            self.looser,
            self.flaky,
            self.no_data,
            self.trending,
            self.drifting,
            *extra,
        )  # least urgent first: the order of the sections is place_gates'
        base = {"repo": "octo/repo", "branch": "main", "sha": SHA, "url": URL, "files": files}
        return RepoView.model_validate({**base, **fields})


def kinds() -> Kinds:
    return Kinds(
        drifting=file_view(
            "ci/train.sh", [limit_gate("acc", ">=", "0.75", name="TRAIN")], drifting_values()
        ),
        no_data=file_view(
            "ci/gone.sh",
            [limit_gate("vanished", ">=", "0.75", name="GONE")],
            noisy(0.80, 30, 5),
        ),
        trending=file_view(
            "ci/slide.sh", [limit_gate("acc", ">=", "0.78", name="SLIDE")], trend_values()
        ),
        flaky=file_view(
            "ci/eval.sh", [limit_gate("acc", ">=", "0.75", name="EVAL")], flaky_values()
        ),
        looser=file_view(
            "ci/loose.sh",
            [limit_gate("acc", ">=", "0.90", name="LOOSE")],
            looser_values(),
            rule=RuleSettings(backtest=BacktestSettings(harm=HARM)),
        ),
        healthy=file_view(
            "ci/fine.sh", [limit_gate("acc", ">=", "0.78", name="FINE")], noisy(0.80, 60, 5)
        ),
    )


def day(i: int) -> datetime:
    """When run ``i`` was created."""
    return T0 + timedelta(days=i)
