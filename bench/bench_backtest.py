"""Time the backtest (docs/backtest.md): 10,000 runs × 40 gates × 5 threshold models.

A synthetic history of 40 noisy metrics, each with a few steps (some down, some up) and the
occasional bad run; 40 gates, one per metric, half lower and half upper bounds. Prints the
regime detection, the replay of every model over every gate, and the total; target ≤ 5 s for
the replay, reported with the detection too. Also prints how many gates each model is
recommended for, as a sanity check that the replay judged something.

Run: ``.venv/bin/python bench/bench_backtest.py``.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.analysis.backtest import DEFAULT_MODELS, backtest_gates
from bot.core.analysis.context import HistoryContext
from bot.core.analysis.regimes import detect_regimes
from bot.core.models import Gate, RuleSettings, Run

RUNS = 10_000
METRICS = 40
TARGET_S = 5.0


def runs(n: int, seed: int = 0) -> list[Run]:
    """``n`` runs of ``METRICS`` metrics around 1.0 (noise 1–3 %), each with 4 steps of
    ±3–15 % at random places and one bad run in 500."""
    rng = np.random.default_rng(seed)
    data = np.empty((n, METRICS))
    for j in range(METRICS):
        level = np.ones(n)
        for at in rng.choice(np.arange(100, n - 100), size=4, replace=False):
            level[at:] *= 1 + rng.choice([-1, 1]) * rng.uniform(0.03, 0.15)
        data[:, j] = level * (1 + rng.normal(0, rng.uniform(0.01, 0.03), n))
        bad = rng.random(n) < 1 / 500
        data[bad, j] *= 0.7
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    return [
        Run(
            id=f"r{i}",
            created_at=t0 + timedelta(hours=i),
            summary={f"m{j}": float(data[i, j]) for j in range(METRICS)},
        )
        for i in range(n)
    ]


def gates() -> list[Gate]:
    """One gate per metric, alternating ``>=`` and ``<=``."""
    return [
        Gate(
            name=f"G{j}",
            file="ci.sh",
            line=j + 1,
            metric=f"m{j}",
            op=">=" if j % 2 == 0 else "<=",
            value=1.0,
            literal="1.00",
            start=0,
            end=4,
        )
        for j in range(METRICS)
    ]


def main() -> None:
    history = runs(RUNS)
    gated = gates()
    start = time.perf_counter()
    regimes, changes = detect_regimes(history, metrics=[g.metric for g in gated])
    detected = time.perf_counter()
    ctx = HistoryContext(history, regimes, changes, len(history))
    best = float("inf")
    for _ in range(3):
        begin = time.perf_counter()
        results = backtest_gates(ctx, gated, RuleSettings(), DEFAULT_MODELS)
        best = min(best, time.perf_counter() - begin)
        ctx = HistoryContext(history, regimes, changes, len(history))  # no cached columns
    wins = Counter(r.recommended.model.describe() if r.recommended else "none" for r in results)
    harmful = sum(len(r.current.caught) for r in results if r.current is not None)
    print(f"backtest: {RUNS:,} runs x {METRICS} gates x {len(DEFAULT_MODELS)} models")
    print(f"  regime detection      {detected - start:6.2f} s ({len(changes)} changes)")
    print(f"  replay, best of 3     {best:6.2f} s (target <= {TARGET_S:g} s)")
    print(f"  total                 {detected - start + best:6.2f} s")
    print(f"  harmful changes judged: {harmful}; recommended: {dict(wins)}")
    if best > TARGET_S:
        print("  OVER TARGET")
        sys.exit(1)


if __name__ == "__main__":
    main()
