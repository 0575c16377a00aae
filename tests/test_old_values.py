"""How the old value of a gate fares (issue #11): failing every run, shifted, failed only
before a change, or flaky, with the newest failing streak and its date.  Through the real
``threshold-bot review`` on the demo's seeded history, and ``build_review`` on a history
shaped like the issue's, every expected number computed here from the data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.review import build_review
from bot.core.formatting import day_month, move
from bot.core.models import Gate, GateChange, History, Run
from demo.data import ExamplePaths, write_example

EVAL, TRAIN, STEP = "eval/all/avg_score", "loss/avg_final_rewards", "timing/step_s"
LOOKBACK = 30


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def finished(example: ExamplePaths) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in example.history.read_text().splitlines()]
    return sorted((r for r in rows if r["state"] == "finished"), key=lambda r: r["created_at"])


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def audit(example: ExamplePaths, tmp: Path, gates: dict[str, tuple[str, str, str]]) -> Any:
    """Review a script holding ``gates`` (name -> metric, op, literal) against the demo."""
    lines = [f"{name}={literal}" for name, (_m, _op, literal) in gates.items()]
    asserts = " ".join(f'"{m} {op} ${name}"' for name, (m, op, _l) in gates.items())
    (tmp / "gates.sh").write_text("#!/bin/bash\n" + "\n".join(lines) + f"\ncheck {asserts}\n")
    args = ["review", "--history", str(example.history), "--file", str(tmp / "gates.sh")]
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fails_of(rows: list[dict[str, Any]], metric: str, op: str, limit: float) -> list[bool]:
    values = [r["summary"][metric] for r in rows if metric in r["summary"]]
    return [not (v >= limit if op == ">=" else v <= limit) for v in values]


def streak(fails: list[bool]) -> int:
    count = 0
    for failed in reversed(fails):
        if not failed:
            break
        count += 1
    return count


def test_seeded_history_words_match_the_data(
    example: ExamplePaths, finished: list[dict[str, Any]], tmp_path: Path
) -> None:
    gates = {
        "TRAIN_ACC_MIN_VALUE": (TRAIN, ">=", "0.32"),  # above every reward ever logged
        "STEP_TIME_MAX_VALUE": (STEP, "<=", "85"),  # failed only before the newest change
        "EVAL_ACC_MIN_VALUE": (EVAL, ">=", "0.545"),  # most runs since the change fail
    }
    review = audit(example, tmp_path, gates)
    by_name = {g["name"]: g for g in review["gates"]}
    newest = _at(finished[-1]["created_at"])
    last_change = _at(review["changes"][-1]["at"])
    since = [r for r in finished if _at(r["created_at"]) >= last_change]
    before = [r for r in finished if _at(r["created_at"]) < last_change]

    train = by_name["TRAIN_ACC_MIN_VALUE"]
    train_fails = fails_of(finished, TRAIN, ">=", 0.32)
    assert all(train_fails) and len(train_fails) > LOOKBACK  # the data's premise
    assert train["classification"] == "failing_every_run"
    assert train["consecutive_failures"] == len(train_fails)
    first = _at(finished[0]["created_at"])
    assert train["explanation"] == (
        f"fails every run since {day_month(first, newest)} ({len(train_fails)} runs in a row:"
        " the whole history)"
    )

    step = by_name["STEP_TIME_MAX_VALUE"]
    step_fails = fails_of(finished, STEP, "<=", 85)
    recent = step_fails[-LOOKBACK:]
    assert not any(fails_of(since, STEP, "<=", 85)) and any(recent)  # the data's premise
    assert step["classification"] == "failed_before_change"
    assert step["consecutive_failures"] == 0
    moved = review["changes"][-1]["metrics"][STEP]
    assert step["explanation"] == (
        f"passes every run since {day_month(last_change, newest)} ({len(since)} runs), after"
        f" the change that moved {STEP} {move(moved['before'], moved['after'])};"
        f" its {sum(recent)} failures in the last {LOOKBACK} runs were all before it"
    )

    score = by_name["EVAL_ACC_MIN_VALUE"]
    after = fails_of(since, EVAL, ">=", 0.545)
    assert sum(after) * 2 >= len(after) and not all(after)  # the data's premise
    assert not any(fails_of(before, EVAL, ">=", 0.545)[-len(after) :])
    assert score["classification"] == "shifted"
    moved = review["changes"][-1]["metrics"][EVAL]
    text = (
        f"fails {sum(after)} of {len(after)} runs since {day_month(last_change, newest)}, after"
        f" the change that moved {EVAL} {move(moved['before'], moved['after'])}"
    )
    eval_fails = fails_of(finished, EVAL, ">=", 0.545)
    run_of_streak = [r for r in finished if EVAL in r["summary"]][-streak(eval_fails) or -1]
    if streak(eval_fails) == 1:
        text += f"; the newest run fails ({day_month(_at(run_of_streak['created_at']), newest)})"
    elif streak(eval_fails) > 1:
        text += (
            f"; the newest {streak(eval_fails)} fail in a row, since"
            f" {day_month(_at(run_of_streak['created_at']), newest)}"
        )
    assert score["explanation"] == text
    assert "flaky" not in json.dumps(review)


def test_scattered_failures_are_flaky_with_their_rate(
    example: ExamplePaths, finished: list[dict[str, Any]], tmp_path: Path
) -> None:
    review = audit(example, tmp_path, {"EVAL_ACC_MIN_VALUE": (EVAL, ">=", "0.535")})
    (gate,) = review["gates"]
    fails = fails_of(finished, EVAL, ">=", 0.535)[-LOOKBACK:]
    assert 0 < sum(fails) * 2 < len(fails)  # the data's premise: a few scattered failures
    assert gate["classification"] == "flaky"
    rate = round(100 * sum(fails) / LOOKBACK)
    assert gate["explanation"].startswith(
        f"fails {sum(fails)} of {LOOKBACK} recent runs ({rate}%), scattered"
    )
    assert "(flaky)" in gate["explanation"]
    if fails[-1]:
        assert "the newest" in gate["explanation"]


# --------------------------------------------------------------------------- the issue's shape

T0 = datetime(2026, 2, 1, 8, tzinfo=UTC)
BEFORE, AFTER = 120, 146  # runs before and since the change


def issue_history(level: float) -> History:
    """Rewards near ``level``, then a step down to 0.287 that fails 0.32 in every run."""
    rng = np.random.default_rng(3)
    values = [level + rng.normal(0, 0.004) for _ in range(BEFORE)]
    values += [0.287 + rng.normal(0, 0.004) for _ in range(AFTER)]
    runs = tuple(
        Run(id=f"r{i:03d}", created_at=T0 + timedelta(days=i / 2), summary={TRAIN: round(v, 4)})
        for i, v in enumerate(values)
    )
    return History(runs=runs, source="file:runs.jsonl")


@pytest.mark.parametrize("level", [0.33, 0.315])  # before the change: most pass; most fail
def test_failing_every_run_since_a_change_longer_than_the_lookback(level: float) -> None:
    history = issue_history(level)
    gate = Gate(
        name="TRAIN_ACC_MIN_VALUE",
        file="ci.sh",
        line=3,
        metric=TRAIN,
        op=">=",
        value=0.32,
        literal="0.32",
        start=0,
        end=4,
    )
    review = build_review([GateChange(head=gate, base=gate)], history)
    (g,) = review.gates
    values = [r.summary[TRAIN] for r in history.runs]
    fails = [v < 0.32 for v in values]
    n = streak(fails)
    assert n > LOOKBACK and not fails[-n - 1]
    since = history.runs[-n].created_at
    (change,) = [c for c in review.changes if TRAIN in c.metrics]
    start = len(values) - n
    # the change is named when the streak begins at it, within max(3, n // 10) runs
    assert start <= change.index <= start + max(3, n // 10)  # the data's premise
    shift = change.metrics[TRAIN]
    assert g.classification == "failing_every_run"
    assert (g.consecutive_failures, g.failing_since) == (n, since)
    newest = history.runs[-1].created_at
    when = (
        "the change that moved"
        if change.at == since
        else f"the change of {day_month(change.at, newest)} that moved"
    )
    assert g.explanation == (
        f"fails every run since {day_month(since, newest)} ({n} runs in a row), since {when}"
        f" {TRAIN} {move(shift.before, shift.after)}"
    )
