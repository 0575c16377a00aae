"""Time the pure analysis, ``build_review`` with 10 gates, on synthetic histories of 350 and
10,000 runs × 40 metrics.

Prints the regime detection time, the rest of the review, and the total. Targets: the review
without regimes well under 3 s at 10,000 runs and the whole review ≤ 0.5 s at 350 runs.

Run: ``.venv/bin/python bench/bench_analysis.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.review import build_review
from bot.core.models import Gate, GateChange, History, Run

METRICS = 40
GATES = 10


def history(n: int) -> History:
    """``n`` runs of 40 noisy metrics; the first five step up halfway."""
    rng = np.random.default_rng(0)
    data = rng.normal(1.0, 0.01, (n, METRICS))
    data[n // 2 :, :5] += 0.2
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    runs = tuple(
        Run(
            id=f"r{i}",
            created_at=t0 + timedelta(hours=i),
            summary={f"m{j}": float(data[i, j]) for j in range(METRICS)},
        )
        for i in range(n)
    )
    return History(runs=runs)


def gates() -> list[GateChange]:
    """Ten gates on every third metric, half lower and half upper bounds, half changed."""
    out = []
    for i in range(GATES):
        base = Gate(
            name=f"G{i}",
            file="ci.sh",
            line=i + 1,
            metric=f"m{3 * i}",
            op=">=" if i % 2 else "<=",
            value=1.0,
            literal="1.00",
            start=0,
            end=4,
        )
        head = base.model_copy(update={"value": 0.9, "literal": "0.90"}) if i % 4 == 0 else base
        out.append(GateChange(head=head, base=base))
    return out


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """Best wall time of ``repeat`` calls of ``action``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    changes = gates()
    for n in (350, 10_000):
        hist = history(n)
        runs = hist.finished
        detected = detect_regimes(runs)
        regimes_s = best_of(3, partial(detect_regimes, runs))
        rest_s = best_of(3, partial(build_review, changes, hist, detected=detected))
        total_s = best_of(3, partial(build_review, changes, hist))
        print(
            f"build_review {n:>6} runs × {METRICS} metrics, {GATES} gates: "
            f"regimes {regimes_s:.3f} s, rest {rest_s:.3f} s, total {total_s:.3f} s"
        )


if __name__ == "__main__":
    main()
