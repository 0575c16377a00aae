"""A change's move is measured over the metric's own stretches (docs/limit-rule.md#regimes,
docs/backtest.md#definitions): from its previous change to this one and on to its next, not
between the regimes other metrics cut (another gate of the file, a metric the history logs).

The history: ``eval/acc`` at 0.800 for 50 runs, a step too small to be a change (+0.005,
under one noise unit) for 30 runs, then a drop to 0.748; ``timing/latency_s`` steps up at
run 50. The accuracy's own stretches are runs 0-79 and 80-119; the latency's change cuts the
first at 50, where the runs 50-79 sit higher. Expected figures are the medians of the
test's data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.review import build_review
from bot.core.formatting import move
from bot.core.models import GateChange, History
from tests.builders import history_of, limit_gate, runs_of
from tests.test_cli_backtest import as_json, run, write_runs

ACC, LATENCY = "eval/acc", "timing/latency_s"
DROP, STEP = 80, 50  # the accuracy's change, the latency's
SCRIPT = 'ACC_MIN=0.70\nLAT_MAX=14\ncheck "eval/acc >= $ACC_MIN" "timing/latency_s <= $LAT_MAX"\n'


def values() -> dict[str, list[float]]:
    rng = np.random.default_rng(11)
    acc = np.r_[np.full(STEP, 0.800), np.full(DROP - STEP, 0.805), np.full(40, 0.748)]
    latency = np.r_[np.full(STEP, 10.0), np.full(120 - STEP, 12.0)]
    return {
        ACC: [round(float(v), 4) for v in acc + rng.normal(0, 0.006, acc.size)],
        LATENCY: [round(float(v), 3) for v in latency + rng.normal(0, 0.1, latency.size)],
    }


def relative(before: float, after: float) -> float:
    return (after - before) / abs(before)


def own_and_union(acc: list[float]) -> tuple[float, float]:
    """The accuracy's move at its drop: over its own stretches, and between the regimes the
    latency's step cuts (the data as meant: they differ by more than half a point)."""
    own = relative(float(np.median(acc[:DROP])), float(np.median(acc[DROP:])))
    union = relative(float(np.median(acc[STEP:DROP])), float(np.median(acc[DROP:])))
    assert abs(own - union) > 0.005
    return own, union


def test_the_backtest_measures_a_gates_harm_over_its_own_metrics_stretches(
    tmp_path: Path,
) -> None:
    data = values()
    own, union = own_and_union(data[ACC])
    history = write_runs(tmp_path / "runs.jsonl", data)
    script = tmp_path / "check.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    out = as_json(run("--history", history, "--file", script, "--format", "json"))
    assert out["history"]["regime_changes"] == 2
    acc_gate = next(g for g in out["gates"] if g["name"] == "ACC_MIN")
    (change,) = acc_gate["models"][0]["changes"]
    assert change["index"] == DROP
    assert change["moved"] == pytest.approx(own, abs=1e-12)
    assert change["moved"] != pytest.approx(union, abs=1e-3)
    latency_gate = next(g for g in out["gates"] if g["name"] == "LAT_MAX")
    assert [c["index"] for c in latency_gate["models"][0]["changes"]] == [STEP]
    table = run("--history", history, "--file", script).stdout
    assert f"({own * 100:+.1f}%)".replace("-", "−") in table, table


def history() -> History:
    data = values()
    summaries = [{k: v[i] for k, v in data.items()} for i in range(len(data[ACC]))]
    return history_of(runs_of(summaries))


def test_a_change_lists_the_metrics_move_between_its_own_stretches() -> None:
    runs = history().finished
    _, changes = detect_regimes(runs, metrics=[ACC, LATENCY])
    assert [c.index for c in changes] == [STEP, DROP]
    acc = [r.summary[ACC] for r in runs]
    shift = changes[1].metrics[ACC]
    assert (shift.before, shift.after) == (np.median(acc[:DROP]), np.median(acc[DROP:]))
    assert ACC not in changes[0].metrics  # the small step at the latency's change is no move


def test_the_reviews_words_give_the_move_over_the_metrics_own_stretches() -> None:
    acc = values()[ACC]
    gate = limit_gate(ACC, ">=", "0.78", name="ACC_MIN")  # fails every run since the drop
    review = build_review([GateChange(head=gate, base=gate)], history())
    (reviewed,) = review.gates
    own = move(float(np.median(acc[:DROP])), float(np.median(acc[DROP:])))
    union = move(float(np.median(acc[STEP:DROP])), float(np.median(acc[DROP:])))
    assert own != union
    assert f"the change that moved {ACC} {own}" in reviewed.explanation, reviewed.explanation


def test_the_review_json_gives_the_same_move(tmp_path: Path) -> None:
    """Through ``threshold-bot review --format json``: the change's metrics and the words."""
    data = values()
    acc = data[ACC]
    history = write_runs(tmp_path / "runs.jsonl", data)
    script = tmp_path / "check.sh"
    script.write_text(SCRIPT.replace("ACC_MIN=0.70", "ACC_MIN=0.78"), encoding="utf-8")
    args = ["review", "--file", str(script), "--history", str(history), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    before, after = float(np.median(acc[:DROP])), float(np.median(acc[DROP:]))
    (drop,) = [c for c in review["changes"] if ACC in c["metrics"]]
    assert drop["metrics"][ACC]["before"] == pytest.approx(before)
    assert drop["metrics"][ACC]["after"] == pytest.approx(after)
    (gate,) = [g for g in review["gates"] if g["name"] == "ACC_MIN"]
    assert f"the change that moved {ACC} {move(before, after)}" in gate["explanation"]
