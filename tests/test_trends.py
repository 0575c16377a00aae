"""Trends in regimes: a steady drift is one stretch with a slope, a walk has no stable level."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.changepoints import detect
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.trends import Fits, consolidate
from bot.core.models import Run

T0 = datetime(2026, 5, 1, 3, 0, tzinfo=UTC)
N = 300


def _runs(values: np.ndarray, metric: str = "throughput") -> list[Run]:
    return [
        Run(
            id=f"run{i}",
            created_at=T0 + timedelta(days=i),
            commit=f"{i:040x}",
            summary={metric: float(v)},
        )
        for i, v in enumerate(values)
    ]


def _trend(seed: int, total: float) -> np.ndarray:
    """A linear trend moving ``total`` noise units end to end, plus unit noise."""
    rng = np.random.default_rng(seed)
    return 100.0 + total * np.arange(N) / (N - 1) + rng.normal(0.0, 1.0, N)


def test_fits_match_least_squares() -> None:
    rng = np.random.default_rng(3)
    values = 5.0 + 0.3 * np.arange(40) + rng.normal(0.0, 1.0, 40)
    line = Fits(values).line(7, 33)
    slope, intercept = np.polyfit(np.arange(7, 33), values[7:33], 1)
    fitted = intercept + slope * np.arange(7, 33)
    assert line.slope == pytest.approx(slope, rel=1e-9)
    assert line.at(7) == pytest.approx(fitted[0], rel=1e-9)
    assert line.sse == pytest.approx(float(np.sum((values[7:33] - fitted) ** 2)), rel=1e-6)
    mean = values[7:33].mean()
    assert line.sse_flat == pytest.approx(float(np.sum((values[7:33] - mean) ** 2)), rel=1e-6)


def test_two_levels_a_step_apart_are_never_joined_into_a_line() -> None:
    rng = np.random.default_rng(4)
    values = np.concatenate([np.zeros(60), np.full(60, 6.0)]) + rng.normal(0.0, 1.0, 120)
    assert consolidate(Fits(values), [0, 60, 120], beta=3.0 * np.log(120)) == [0, 60, 120]


def test_a_staircase_along_a_trend_becomes_one_line() -> None:
    values = 0.2 * np.arange(200) + np.random.default_rng(5).normal(0.0, 1.0, 200)
    staircase = [0, *range(20, 200, 20), 200]
    assert consolidate(Fits(values), staircase, beta=3.0 * np.log(200)) == [0, 200]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("total", [15.0, 40.0, 80.0])
def test_a_steady_trend_is_one_regime_with_its_slope(seed: int, total: float) -> None:
    values = _trend(seed, total)
    regimes, changes = detect_regimes(_runs(values))
    assert changes == []
    (regime,) = regimes
    slope = float(np.polyfit(np.arange(N), values, 1)[0])
    trend = regime.trends["throughput"]
    assert trend.slope == pytest.approx(slope, rel=0.05)
    assert regime.slope == trend.slope
    assert trend.runs == N
    assert trend.last - trend.first == pytest.approx(slope * (N - 1), rel=0.05)
    assert regime.wandering == ()


@pytest.mark.parametrize("seed", range(4))
def test_curved_trends_are_not_cut_into_steps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(N)
    curves = [
        30.0 * np.exp(3.0 * t / N) / np.exp(3.0),
        40.0 / (1.0 + np.exp(-(t - 150.0) / 30.0)),
        200.0 * (t / N - 0.5) ** 2,
    ]
    for curve in curves:
        found = detect(curve + rng.normal(0.0, 1.0, N))
        assert len(found.changepoints) <= 1
        assert not found.wandering


@pytest.mark.parametrize("seed", range(5))
def test_a_step_on_a_trend_is_still_found(seed: int) -> None:
    values = _trend(seed, 30.0)
    values[120:] += 6.0
    values[220:] -= 8.0
    regimes, changes = detect_regimes(_runs(values))
    assert [c.index for c in changes] == pytest.approx([120, 220], abs=2)
    slope = 30.0 / (N - 1)
    for regime in regimes:
        assert regime.trends["throughput"].slope == pytest.approx(slope, rel=0.35)
    up, down = (c.metrics["throughput"] for c in changes)
    assert up.after - up.before == pytest.approx(6.0, abs=1.5)  # the jump, not the drift
    assert down.after - down.before == pytest.approx(-8.0, abs=1.5)


def test_a_flat_metric_has_no_trend() -> None:
    values = 100.0 + np.random.default_rng(8).normal(0.0, 1.0, N)
    (regime,) = detect_regimes(_runs(values))[0]
    assert regime.trends == {} and regime.slope is None


@pytest.mark.parametrize("seed", range(8))
def test_a_random_walk_wanders_with_few_boundaries(seed: int) -> None:
    rng = np.random.default_rng(seed)
    walk = 50.0 + np.cumsum(rng.normal(0.0, 1.0, N))
    found = detect(walk)
    assert found.wandering
    assert len(found.changepoints) <= 1
    regimes, _ = detect_regimes(_runs(walk))
    assert all(r.wandering == ("throughput",) and r.trends == {} for r in regimes)


@pytest.mark.parametrize("seed", range(5))
def test_a_jump_in_a_random_walk_is_kept(seed: int) -> None:
    rng = np.random.default_rng(seed)
    walk = 50.0 + np.cumsum(rng.normal(0.0, 1.0, N))
    walk[200:] += 30.0
    found = detect(walk)
    assert found.wandering
    assert found.changepoints == [200]


def test_noise_around_a_trend_is_not_a_walk() -> None:
    rng = np.random.default_rng(9)
    ar = np.zeros(N)
    for i in range(1, N):  # autocorrelated noise, as a busy CI machine gives
        ar[i] = 0.6 * ar[i - 1] + rng.normal(0.0, 0.8)
    assert not detect(ar).wandering
    assert not detect(_trend(9, 40.0)).wandering


def test_the_json_review_gives_each_regime_its_slope(tmp_path: Path) -> None:
    """Through ``threshold-bot review --format json``, as any history is read."""
    values = _trend(11, -40.0)  # eroding: 100 → 60 over 300 runs, unit noise
    values[150:] += 8.0  # a step on top of the trend
    history = tmp_path / "history.jsonl"
    history.write_text(
        "".join(
            json.dumps({"id": r.id, "created_at": r.created_at.isoformat(), "summary": r.summary})
            + "\n"
            for r in _runs(values)
        ),
        encoding="utf-8",
    )
    script = tmp_path / "check.sh"
    script.write_text(
        'THROUGHPUT_MIN=70\npython get_summary.py --asserts "throughput >= $THROUGHPUT_MIN"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["review", "--history", str(history), "--file", str(script), "--format", "json"]
    )
    review = json.loads(result.stdout)
    assert [c["index"] for c in review["changes"]] == pytest.approx([150], abs=2)
    for regime in review["regimes"]:
        a, b = regime["first_index"], regime["last_index"] + 1
        expected = float(np.polyfit(np.arange(a, b), values[a:b], 1)[0])
        assert regime["slope"] == pytest.approx(expected, rel=0.1)
        trend = regime["trends"]["throughput"]
        assert trend["slope"] == regime["slope"] and trend["runs"] == b - a
        assert regime["wandering"] == []
