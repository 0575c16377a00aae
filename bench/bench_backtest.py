"""Time the backtest (docs/backtest.md): 10,000 runs × 40 gates × 5 threshold models; and
the peak memory of one ``threshold-bot backtest`` and one ``threshold-bot review`` over a
14,000-run history at ``rule.window`` 20 and at its maximum.

Speed: a synthetic history of 40 noisy metrics, each with a few steps (some down, some up) and
the occasional bad run; 40 gates, one per metric, half lower and half upper bounds. Prints the
regime detection, the replay of every model over every gate, and the total; target ≤ 5 s for
the replay, reported with the detection too. Also prints how many gates each model is
recommended for, as a sanity check that the replay judged something.

Memory: a 14,000-run JSON Lines history of one metric (about 1.2 MB) and a script with one
gate on it; each command is a whole process, ``--window N``, its peak RSS the kernel's
``ru_maxrss`` (started by a bare interpreter of about 10 MB, the floor of the figure), with
its wall time and CPU time (user + system: less sensitive to a busy machine). ``--windows``
measures other windows (a window over the maximum is refused with exit 2 in a second: that
is the figure then). Also the review with ``regimes.min_regime_runs`` at its default and at
its maximum (``--regime-runs``), whose running medians also grow with runs × that setting.

Run: ``.venv/bin/python bench/bench_backtest.py [--speed | --memory] [--windows 20,1000]``;
the figures of another checkout (before a change): ``PYTHONPATH=CHECKOUT`` before it (the
commands import ``bot`` from there).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.analysis.backtest import DEFAULT_MODELS, backtest_gates
from bot.core.analysis.context import HistoryContext
from bot.core.analysis.regimes import detect_regimes
from bot.core.models import MAX_REGIME_RUNS, MAX_WINDOW, Gate, RuleSettings, Run

RUNS = 10_000
METRICS = 40
TARGET_S = 5.0
MEMORY_RUNS = 14_000


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


def speed() -> None:
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


SCRIPT = """#!/usr/bin/env bash
ACC_MIN={value}
python train.py --asserts "eval/acc >= $ACC_MIN"
"""

# A child's peak RSS (ru_maxrss) includes the memory of the process that started it, up to
# its exec: so each command is started by this small launcher, never by the benchmark itself.
LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
cpu, code = usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)
print(json.dumps([time.perf_counter() - start, cpu, usage.ru_maxrss, code]))
"""


def write_world(root: Path) -> None:
    """``history.jsonl`` (``MEMORY_RUNS`` runs of ``eval/acc``, noise 0.4 %, two steps) and
    the script before and after a PR that raises the gate."""
    rng = np.random.default_rng(1)
    level = np.ones(MEMORY_RUNS)
    level[MEMORY_RUNS // 3 :] *= 0.9
    level[2 * MEMORY_RUNS // 3 :] *= 1.05
    values = np.round(0.8 * level * (1 + rng.normal(0, 0.004, MEMORY_RUNS)), 4)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    lines = [
        json.dumps(
            {
                "id": f"r{i}",
                "created_at": (t0 + timedelta(hours=i)).isoformat(),
                "summary": {"eval/acc": float(v)},
            }
        )
        for i, v in enumerate(values)
    ]
    (root / "history.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "base.sh").write_text(SCRIPT.format(value="0.70"), encoding="utf-8")
    (root / "head.sh").write_text(SCRIPT.format(value="0.72"), encoding="utf-8")


def peak(command: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """One whole process: wall and CPU seconds, peak RSS in MB, exit code."""
    launched = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    seconds, cpu, kilobytes, code = json.loads(launched.stdout)
    return seconds, cpu, kilobytes / 1024, code


def memory(windows: list[int], regime_runs: list[int]) -> None:
    binary = str(Path(sys.executable).with_name("threshold-bot"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_world(root)
        size = (root / "history.jsonl").stat().st_size / 1e6
        print(f"memory: {MEMORY_RUNS:,}-run history ({size:.1f} MB), one gate, maximum window")
        print(f"  {MAX_WINDOW:,}; peak RSS (ru_maxrss), wall and CPU time of each command")
        history = ["--history", "history.jsonl"]
        commands = {
            "backtest": [binary, "backtest", "--file", "head.sh", *history, "--format", "json"],
            "review": [binary, "review", "--file", "head.sh", "--base", "base.sh", *history],
        }
        for window in windows:
            for name, command in commands.items():
                seconds, cpu, mb, code = peak([*command, "--window", str(window)], root)
                print(
                    f"  {name:8} --window {window:>5}  {mb:7.0f} MB  {seconds:6.2f} s"
                    f" (CPU {cpu:6.2f} s)  exit {code}"
                )
        for runs in regime_runs:  # the regime detector's running medians
            config = root / f"regimes-{runs}.yml"
            config.write_text(f"regimes: {{min_regime_runs: {runs}}}\n", encoding="utf-8")
            command = [*commands["review"], "--config", config.name]
            seconds, cpu, mb, code = peak(command, root)
            print(
                f"  review   min_regime_runs {runs:>4}  {mb:7.0f} MB  {seconds:6.2f} s"
                f" (CPU {cpu:6.2f} s)  exit {code}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--speed", action="store_true", help="the timing only")
    part.add_argument("--memory", action="store_true", help="the peak memory only")
    parser.add_argument("--windows", default=f"20,{MAX_WINDOW}", help="windows of --memory")
    parser.add_argument(
        "--regime-runs", default=f"5,{MAX_REGIME_RUNS}", help="regimes.min_regime_runs of --memory"
    )
    args = parser.parse_args()
    if not args.memory:
        speed()
    if not args.speed:
        memory(
            [int(w) for w in args.windows.split(",")],
            [int(r) for r in args.regime_runs.split(",")],
        )


if __name__ == "__main__":
    main()
