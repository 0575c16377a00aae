"""The backtest judged on a seed-like nightly (issue 18): five regimes, ``loss/avg_final_rewards``
dropping on 30 Jun, three gates in a shell script as the seed writes them.

``threshold-bot backtest`` runs through the CLI (JSON and table); every figure it must print is
computed here from the data the test generated, by a naive replay: a plain loop calling
``recompute_limit`` on the ``WINDOW`` values before each run, the regimes known from the
generation.  Nothing here calls the backtest module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.limits import recompute_limit
from bot.core.limit_model import LimitModel, parse_model
from bot.core.models import Op, RuleSettings, passes

WINDOW = 20  # the rule's default window: the 20 runs before each run
MIN_RUNS = 5  # rule.backtest.min_runs' default: judged once 5 runs precede
WITHIN = 3  # rule.backtest.detect_within's default
HARM = 0.05  # rule.harm's default: the allowance
MODELS = ("minmax", "percentile p=5", "zscore k=3", "prediction confidence=99%", "iqr k=1.5")
DROP = datetime(2026, 6, 30, 8, 5, tzinfo=UTC)  # the reward's drop: the 4th regime's first run

REWARD, EVAL, STEP_TIME = "loss/avg_final_rewards", "eval/all/avg_score", "perf/time_per_step"
# regime lengths and each gated metric's level in each regime (the 4th starts on 30 Jun)
LENGTHS = (40, 30, 30, 30, 30)
LEVELS: dict[str, tuple[float, ...]] = {
    REWARD: (0.240, 0.246, 0.243, 0.224, 0.236),  # −7.8% on 30 Jun: harmful
    EVAL: (0.580, 0.590, 0.588, 0.541, 0.585),  # −8% on 30 Jun: harmful
    STEP_TIME: (41.0, 44.5, 44.0, 44.3, 40.5),  # +8.5% at the 2nd regime: harmful (upper)
}
NOISE = {REWARD: 0.002, EVAL: 0.004, STEP_TIME: 0.4}  # standard deviation of each night
DECIMALS = {REWARD: 4, EVAL: 4, STEP_TIME: 2}
# bad nights inside regimes (index, relative dip the bad way): healthy runs that a tight
# model fails and a loose one lets through
BAD_NIGHTS = {REWARD: ((15, -0.035), (57, -0.03), (88, -0.04), (148, -0.035))}
FIRST = DROP - timedelta(days=sum(LENGTHS[:3]))  # one nightly run a day

SCRIPT = """#!/usr/bin/env bash
# Nightly regression test: GSM8K fully-async RL on 8 GPUs.
# Thresholds are checked by the trainer at the end of the run (--asserts).
set -euo pipefail

export WANDB_ENTITY="rl-team"
NUM_GPUS=8

# ---- regression thresholds (tuned on the last 20 nightly runs) ----
export EVAL_ACC_MIN=0.52
REWARD_MIN=0.221
STEP_TIME_MAX=48.0

python3 -m slime.train \\
  --num-gpus "$NUM_GPUS" \\
  --use-wandb --project_name "gsm8k_fully_async_ci" \\
  --asserts "eval/all/avg_score >= $EVAL_ACC_MIN" \\
            "loss/avg_final_rewards >= $REWARD_MIN" \\
            "perf/time_per_step <= $STEP_TIME_MAX"
"""
# gate name -> (metric, operator, literal), as the script writes them
GATES: dict[str, tuple[str, Op, str]] = {
    "EVAL_ACC_MIN": (EVAL, ">=", "0.52"),
    "REWARD_MIN": (REWARD, ">=", "0.221"),
    "STEP_TIME_MAX": (STEP_TIME, "<=", "48.0"),
}


def starts() -> list[int]:
    """The first run of each regime after the first."""
    return [int(i) for i in np.cumsum(LENGTHS)[:-1]]


def generate(seed: int) -> dict[str, list[float]]:
    """Each gated metric night by night: its regime's level, noise, the bad nights."""
    rng = np.random.default_rng(seed)
    series: dict[str, list[float]] = {}
    for metric, levels in LEVELS.items():
        level = np.repeat(levels, LENGTHS)
        values = level + rng.normal(0.0, NOISE[metric], level.size)
        for at, dip in BAD_NIGHTS.get(metric, ()):
            values[at] = level[at] * (1 + dip)
        series[metric] = [round(float(v), DECIMALS[metric]) for v in values]
    return series


def write_history(path: Path, series: dict[str, list[float]], seed: int) -> None:
    """The nightly's runs as the history format has them, with two crashed runs between."""
    rng = np.random.default_rng(seed + 1000)
    lines = []
    for i in range(sum(LENGTHS)):
        at = FIRST + timedelta(days=i, seconds=int(rng.integers(0, 600)))
        summary: dict[str, Any] = {m: v[i] for m, v in series.items()}
        summary["generate/avg_num_tokens"] = round(float(261 + rng.normal(0, 1.5)), 1)
        record = {
            "id": f"n{i:04d}",
            "name": f"run_{at:%Y%m%d%H%M%S}_{i}",
            "created_at": at.isoformat().replace("+00:00", "Z"),
            "state": "finished",
            "commit": f"{i:040x}",
            "tags": ["nightly"],
            "summary": summary,
        }
        lines.append(json.dumps(record))
        if i in (33, 121):  # a crashed rerun the same night: not a finished run
            crashed = record | {
                "id": f"c{i:04d}",
                "created_at": (at + timedelta(hours=2)).isoformat().replace("+00:00", "Z"),
                "state": "crashed",
                "summary": {EVAL: 0.1},
            }
            lines.append(json.dumps(crashed))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- the naive replay


@dataclass(frozen=True)
class Expected:
    """One model on one gate, replayed naively."""

    judged: int
    false_alarms: int
    runs: tuple[int | None, ...]  # per harmful change: runs until caught (None: missed)

    def catches_all(self) -> bool:
        return all(r is not None and r <= WITHIN for r in self.runs)


def harmful(metric: str, op: Op) -> list[int]:
    """The regime changes that moved ``metric`` the bad way by more than ``HARM``."""
    levels = LEVELS[metric]
    found = []
    for at, (before, after) in zip(starts(), pairwise(levels), strict=True):
        moved = (after - before) / abs(before)
        if (-moved if op in (">=", ">") else moved) > HARM:
            found.append(at)
    return found


def replay(values: Sequence[float], op: Op, literal: str, model: LimitModel) -> list[bool]:
    """Whether each run fails the limit from the ``WINDOW`` runs before it (False until
    ``MIN_RUNS`` runs precede it)."""
    rule = RuleSettings(model=model)
    failed = [False] * len(values)
    for i in range(MIN_RUNS, len(values)):
        found = recompute_limit(values[max(0, i - WINDOW) : i], op, literal, rule)
        assert found is not None
        failed[i] = not passes(values[i], op, found[0])
    return failed


def expected(metric: str, values: Sequence[float], model: LimitModel) -> Expected:
    """The naive figures of ``model`` on the gate of ``metric``: a harmful change's runs
    from its start while the window reaches back before it (up to the next change) are its
    detection span; the other judged runs are healthy."""
    op, literal = next((o, lit) for m, o, lit in GATES.values() if m == metric)
    failed = replay(values, op, literal, model)
    bounds = [*starts(), len(values)]
    span: set[int] = set()
    runs: list[int | None] = []
    for at in harmful(metric, op):
        following = min(b for b in bounds if b > at)  # the next regime change (or the end)
        end = min(at + WINDOW, following)
        span |= set(range(at, end))
        hits = [i for i in range(at, end) if failed[i]]
        runs.append(hits[0] - at + 1 if hits else None)
    healthy = [i for i in range(MIN_RUNS, len(values)) if i not in span]
    return Expected(len(healthy), sum(failed[i] for i in healthy), tuple(runs))


def winner(scores: dict[str, Expected]) -> str | None:
    """Fewest false alarms among the models catching every harmful change within ``WITHIN``
    runs; ties go to the earlier model (the current one, minmax, first)."""
    able = [(s.false_alarms, i, name) for i, (name, s) in enumerate(scores.items())]
    able = [a for a in able if scores[a[2]].catches_all()]
    return min(able)[2] if able else None


def row_cells(block: list[str], model: str) -> list[str]:
    """The cells of ``model``'s row in a gate's table: model, false alarms, median, caught."""
    (line,) = [x for x in block if x.startswith(model)]
    return [cell.strip() for cell in line.split("│")]


def median_words(e: Expected) -> str:
    if not e.runs:
        return "—"
    middle = median(math.inf if r is None else r for r in e.runs)
    return "never" if math.isinf(middle) else f"{middle:g}"


def caught_words(e: Expected) -> str:
    if not e.runs:
        return "—"
    return f"{sum(r is not None and r <= WITHIN for r in e.runs)} of {len(e.runs)}"


def rate_words(e: Expected) -> str:
    rate = f"{e.false_alarms / e.judged * 100:.1f}".removesuffix(".0")
    return f"{rate}% ({e.false_alarms} of {e.judged})"


# --------------------------------------------------------------------------- the test


@pytest.mark.parametrize("seed", [7, 18])
def test_the_backtest_of_a_seed_like_nightly(tmp_path: Path, seed: int) -> None:
    series = generate(seed)
    history, script = tmp_path / "nightly.jsonl", tmp_path / "nightly_gsm8k.sh"
    write_history(history, series, seed)
    script.write_text(SCRIPT, encoding="utf-8")
    runner = CliRunner()
    args = ["backtest", "--history", str(history), "--file", str(script)]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["history"]["runs"] == sum(LENGTHS)  # the crashed runs are not replayed
    assert data["settings"] == {
        "window": WINDOW,
        "harm": HARM,
        "detect_within": WITHIN,
        "min_runs": MIN_RUNS,
        "model": "minmax",
    }
    gates = {g["name"]: g for g in data["gates"]}
    assert set(gates) == set(GATES)
    table = runner.invoke(app, [*args, "--format", "table"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.stderr
    blocks = _blocks(table.stdout)

    for name, (metric, op, _) in GATES.items():
        gate = gates[name]
        values = series[metric]
        changes = harmful(metric, op)
        assert gate["metric"] == metric and gate["runs"] == len(values)
        assert gate["harmful_changes"] == len(changes)
        want = {m: expected(metric, values, parse_model(m)) for m in MODELS}
        rows = {row["model"]: row for row in gate["models"]}
        assert list(rows) == list(MODELS)  # the current model (minmax) first
        for model, e in want.items():
            row = rows[model]
            assert (row["judged"], row["false_alarms"]) == (e.judged, e.false_alarms), model
            assert row["false_alarm_rate"] == pytest.approx(e.false_alarms / e.judged)
            assert [c["runs"] for c in row["changes"]] == list(e.runs), model
            assert [c["index"] for c in row["changes"]] == changes
            cells = row_cells(blocks[name], model)
            assert cells[1:] == [rate_words(e), median_words(e), caught_words(e)], model
        best = winner(want)
        assert gate["recommended"] == best
        words = f"Recommended: `{best}` —" if best else "No recommendation"
        assert any(words in x for x in blocks[name]), blocks[name]

    # the 30 Jun drop of the reward: found there, by the move generated
    reward = gates["REWARD_MIN"]
    (drop,) = reward["models"][0]["changes"]
    assert drop["at"].startswith("2026-06-30")
    assert drop["moved"] == pytest.approx(
        (LEVELS[REWARD][3] - LEVELS[REWARD][2]) / LEVELS[REWARD][2], abs=0.01
    )
    # the models differ on this history: the figures discriminate
    figures = {m: expected(REWARD, series[REWARD], parse_model(m)) for m in MODELS}
    assert len({(e.false_alarms, e.runs) for e in figures.values()}) > 1
    # on these seeds a bad night in the window lets minmax miss the drop: the recommendation
    # is another model, and the PR comment's line says so
    assert figures["minmax"].runs == (None,) and winner(figures) != "minmax"
    assert "30 Jun 2026" in reward["hint"] and "`minmax` missed" in reward["hint"]
    markdown = runner.invoke(app, [*args, "--format", "markdown"])
    best = winner(figures)
    assert f"> with <code>{best}</code> this gate would have caught" in markdown.stdout
    assert f"Recommended: <code>{best}</code> — fewest false alarms" in markdown.stdout


def _blocks(text: str) -> dict[str, list[str]]:
    """The table's lines under each gate's heading, by gate name."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        name = line.split(" (", 1)[0]
        if name in GATES:
            current = blocks.setdefault(name, [])
        current.append(line)
    return blocks
