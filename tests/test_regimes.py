"""Regimes of a run history: boundaries merged across metrics, medians, attribution data."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bot.core.analysis.regimes import detect_regimes
from bot.core.config import ConfigError, parse_config
from bot.core.models import Regime, RegimeSettings, Run

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

# a nightly history: 5 regimes, boundaries at these run indices
BOUNDS = [0, 60, 130, 200, 260, 320]
ACC = [0.55, 0.60, 0.60, 0.52, 0.58]  # eval accuracy, noise 0.01
CLIP = [0.0, 0.0, 0.02, 0.02, 0.02]  # exactly 0 for two months, then noisy
TOKENS = [260.0, 275.0, 275.0, 250.0, 300.0]  # noise 3
FLAT = 0.1234  # never moves


def _nightly(seed: int = 1) -> list[Run]:
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(BOUNDS[-1]):
        k = int(np.searchsorted(BOUNDS, i, side="right")) - 1
        summary = {
            "eval/acc": ACC[k] + rng.normal(0.0, 0.01),
            "clip_ratio": CLIP[k] + (rng.normal(0.0, 0.002) if CLIP[k] else 0.0),
            "tokens": TOKENS[k] + rng.normal(0.0, 3.0),
            "flat": FLAT,
        }
        if i == 100:
            summary["eval/acc"] = 0.05  # one broken run
        if i % 17 == 3:
            del summary["tokens"]  # sometimes a metric is missing
        runs.append(
            Run(
                id=f"run{i}",
                created_at=T0 + timedelta(days=i),
                commit=f"{i:040x}",
                summary=summary,
            )
        )
    return runs


def _values(runs: list[Run], regime: Regime, metric: str) -> list[float]:
    chosen = runs[regime.first_index : regime.last_index + 1]
    return [r.summary[metric] for r in chosen if metric in r.summary]


def test_empty_history() -> None:
    assert detect_regimes([]) == ([], [])


def test_nightly_history_gives_the_five_regimes() -> None:
    runs = _nightly()
    regimes, changes = detect_regimes(runs)
    starts = [r.first_index for r in regimes]
    assert len(starts) == len(BOUNDS) - 1
    assert all(abs(s - b) <= 2 for s, b in zip(starts, BOUNDS, strict=False))
    # regimes tile the history
    assert regimes[0].first_index == 0 and regimes[-1].last_index == len(runs) - 1
    for a, b in itertools.pairwise(regimes):
        assert b.first_index == a.last_index + 1
    for r in regimes:
        assert r.runs == r.last_index - r.first_index + 1
        assert r.start == runs[r.first_index].created_at
        assert r.end == runs[r.last_index].created_at
        assert set(r.medians) == {"eval/acc", "clip_ratio", "tokens", "flat"}
        for metric, median in r.medians.items():
            assert median == pytest.approx(float(np.median(_values(runs, r, metric))))
    assert len(changes) == len(regimes) - 1


def test_changes_carry_attribution_and_sorted_shifts() -> None:
    runs = _nightly()
    regimes, changes = detect_regimes(runs)
    for change, before, after in zip(changes, regimes, regimes[1:], strict=False):
        i = after.first_index
        assert change.index == i
        assert change.at == runs[i].created_at
        assert change.before_at == runs[i - 1].created_at
        assert (change.before_run, change.after_run) == (runs[i - 1].id, runs[i].id)
        assert (change.before_commit, change.after_commit) == (runs[i - 1].commit, runs[i].commit)
        assert change.pulls == ()
        assert "flat" not in change.metrics
        effects = [
            s.sigma if s.sigma is not None else float("inf") for s in change.metrics.values()
        ]
        assert effects == sorted(effects, reverse=True)
        for metric, shift in change.metrics.items():
            # over the metric's own stretches: from its previous change to its next
            own = [0, *(c.index for c in changes if metric in c.metrics), len(runs)]
            k = own.index(i)
            left = [r.summary[metric] for r in runs[own[k - 1] : i] if metric in r.summary]
            right = [r.summary[metric] for r in runs[i : own[k + 1]] if metric in r.summary]
            assert shift.before == pytest.approx(float(np.median(left)))
            assert shift.after == pytest.approx(float(np.median(right)))
            if own[k - 1] == before.first_index:  # its own stretch is the regime
                assert shift.before == pytest.approx(before.medians[metric])
            if shift.before != 0:
                assert shift.relative == pytest.approx((shift.after - shift.before) / shift.before)
    moved = [set(c.metrics) for c in changes]
    assert {"eval/acc", "tokens"} <= moved[0] and "clip_ratio" not in moved[0]
    assert moved[1] == {"clip_ratio"}  # only the flat-at-zero metric jumps here
    assert {"eval/acc", "tokens"} <= moved[2]
    assert {"eval/acc", "tokens"} <= moved[3]
    clip = changes[1].metrics["clip_ratio"]
    assert clip.before == 0.0 and clip.relative is None


def test_metrics_argument_limits_detection_but_not_medians() -> None:
    runs = _nightly()
    regimes, changes = detect_regimes(runs, metrics=["clip_ratio"])
    assert [r.first_index for r in regimes] == [0, changes[0].index]
    assert abs(changes[0].index - 130) <= 2
    assert set(changes[0].metrics) == {"clip_ratio"}
    assert set(regimes[0].medians) == {"eval/acc", "clip_ratio", "tokens", "flat"}
    assert detect_regimes(runs, metrics=["no/such/metric"])[1] == []


def test_steady_history_is_one_regime() -> None:
    rng = np.random.default_rng(5)
    runs = [
        Run(id=str(i), created_at=T0 + timedelta(days=i), summary={"m": float(rng.normal())})
        for i in range(100)
    ]
    regimes, changes = detect_regimes(runs)
    assert changes == []
    assert [(r.first_index, r.last_index, r.runs) for r in regimes] == [(0, 99, 100)]


def test_change_points_of_metrics_a_few_runs_apart_are_one_boundary() -> None:
    rng = np.random.default_rng(8)
    runs = []
    for i in range(120):
        summary = {
            "a": float(rng.normal()) + (10.0 if i >= 60 else 0.0),
            "b": float(rng.normal()) + (10.0 if i >= 62 else 0.0),
        }
        runs.append(Run(id=str(i), created_at=T0 + timedelta(hours=i), summary=summary))
    _, changes = detect_regimes(runs)
    assert len(changes) == 1 and changes[0].index in (60, 62)
    assert set(changes[0].metrics) == {"a", "b"}
    _, apart = detect_regimes(runs, RegimeSettings(merge_distance=1, min_regime_runs=2))
    assert [c.index for c in apart] == [60, 62]
    # farther apart than merge_distance, but a 2-run regime is below min_regime_runs
    _, joined = detect_regimes(runs, RegimeSettings(merge_distance=1, min_regime_runs=3))
    assert len(joined) == 1 and set(joined[0].metrics) == {"a", "b"}


def _history(seed: int, n: int = 300) -> list[Run]:
    """Nightly runs of 6 metrics; at each of 4 boundaries a different pair of metrics moves."""
    rng = np.random.default_rng(seed)
    bounds = [60, 130, 170, 240]
    scales = [0.5, 0.02, 250.0, 1e-4, 3.0, 1.0]
    runs = []
    for i in range(n):
        k = sum(i >= b for b in bounds)
        summary = {}
        for m, scale in enumerate(scales):
            moves = sum(1 for j in range(k) if m in (j % 6, (j + 3) % 6))
            noise = rng.normal(0.0, 0.05 * scale)
            summary[f"m{m}"] = scale * (1.0 + 0.4 * moves) + noise
        if rng.random() < 0.02:
            summary["m0"] = 0.0  # a crashed evaluation
        runs.append(Run(id=str(i), created_at=T0 + timedelta(days=i), summary=summary))
    return runs


@pytest.mark.parametrize("seed", range(5))
def test_appending_runs_does_not_move_old_boundaries(seed: int) -> None:
    """Boundaries older than a horizon neither move, appear nor vanish as runs arrive."""
    runs = _history(seed)
    horizon = 20
    full = [c.index for c in detect_regimes(runs)[1]]
    assert all(any(abs(i - b) <= 2 for i in full) for b in [60, 130, 170, 240])
    for n in range(100, 300, 20):
        old = [c.index for c in detect_regimes(runs[:n])[1] if c.index < n - horizon]
        for k in (1, 5, 20):
            new = [c.index for c in detect_regimes(runs[: n + k])[1] if c.index < n - horizon]
            assert new == old


def test_missing_values_and_metrics_absent_from_a_regime() -> None:
    rng = np.random.default_rng(2)
    runs = []
    for i in range(120):
        summary = {"a": float(rng.normal(0.0, 1.0)) + (8.0 if i >= 70 else 0.0)}
        if i < 70:
            summary["old"] = 1.0  # logged only before the change
        if i >= 40 and i % 3:
            summary["sparse"] = float(rng.normal(5.0, 0.1))  # appears later, with holes
        runs.append(Run(id=str(i), created_at=T0 + timedelta(days=i), summary=summary))
    regimes, changes = detect_regimes(runs)
    assert [c.index for c in changes] == [70]
    assert set(regimes[0].medians) == {"a", "old", "sparse"}
    assert set(regimes[1].medians) == {"a", "sparse"}
    expected = np.median([r.summary["sparse"] for r in runs[:70] if "sparse" in r.summary])
    assert regimes[0].medians["sparse"] == pytest.approx(float(expected))
    assert "old" not in changes[0].metrics and "a" in changes[0].metrics


def test_sensitivity_comes_from_the_repository_config() -> None:
    runs = _nightly()
    strict = parse_config("regimes:\n  min_effect_sigma: 12\n  min_regime_runs: 8\n").regimes
    _, default_changes = detect_regimes(runs)
    _, strict_changes = detect_regimes(runs, strict)
    assert 0 < len(strict_changes) < len(default_changes)
    for change in strict_changes:  # the strict boundaries are among the default ones
        assert min(abs(change.index - d.index) for d in default_changes) <= strict.merge_distance
        assert max(s.sigma or math.inf for s in change.metrics.values()) >= 2.0
    with pytest.raises(ConfigError, match="min_regime_runs"):
        parse_config("regimes:\n  min_regime_runs: 1\n")


def test_non_finite_values_count_as_missing() -> None:
    runs = _nightly()
    broken = [
        r.model_copy(update={"summary": {**r.summary, "tokens": float("nan")}})
        if i % 10 == 0
        else r
        for i, r in enumerate(runs)
    ]
    regimes, changes = detect_regimes(broken)
    assert [c.index for c in changes] == [c.index for c in detect_regimes(runs)[1]]
    assert all(np.isfinite(v) for r in regimes for v in r.medians.values())
