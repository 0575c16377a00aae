"""``threshold-bot backtest`` through the real command: its options, its usage errors (exit 2,
one line), a band (a MIN/MAX pair, a chained Python assert) backtested as one row set, gates
it cannot backtest, and the JSON document's shape (docs/backtest.md#json).

Figures checked here are computed from the generated data (a naive replay of ``minmax`` on a
band); the nightly scenario is ``tests/test_backtest_nightly.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.analysis.limits import recompute_limit
from bot.core.models import RuleSettings

LOSS, ACC = "train/loss", "eval/acc"
T0 = datetime(2026, 5, 1, 3, tzinfo=UTC)
BEFORE, AFTER = 50, 30  # runs before the loss steps up by 12%, and since
STEP = BEFORE  # index of the first run at the new level
SCRIPT = """#!/usr/bin/env bash
LOSS_MIN=0.20
LOSS_MAX=0.40
ACC_MIN=0.70
GONE_MIN=1.5
python train.py --asserts "train/loss > $LOSS_MIN" "train/loss < $LOSS_MAX" \\
  "eval/acc >= $ACC_MIN" "eval/gone >= $GONE_MIN"
"""


def run(*args: str | Path, columns: int = 160) -> Result:
    return CliRunner().invoke(
        app, ["backtest", *(str(a) for a in args)], env={"COLUMNS": str(columns)}
    )


def series(seed: int = 3) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    loss = np.r_[np.full(BEFORE, 0.300), np.full(AFTER, 0.336)] + rng.normal(0, 0.003, 80)
    acc = 0.80 + rng.normal(0, 0.004, 80)
    return {
        LOSS: [round(float(v), 4) for v in loss],
        ACC: [round(float(v), 4) for v in acc],
    }


def write_runs(path: Path, values: dict[str, list[float]]) -> Path:
    """A JSON Lines history: one run a day, each with the metrics' values of its index."""
    count = len(next(iter(values.values())))
    lines = [
        json.dumps(
            {
                "id": f"r{i:03d}",
                "created_at": (T0 + timedelta(days=i)).isoformat(),
                "summary": {k: v[i] for k, v in values.items()},
            }
        )
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    values = series()
    history = write_runs(tmp_path / "runs.jsonl", values)
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    return {"history": history, "file": script, "values": values, "dir": tmp_path}


def as_json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def gate(data: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [g for g in data["gates"] if g["name"] == name]
    return found


def naive_band(values: list[float], lower: str, upper: str) -> tuple[int, int, int | None]:
    """minmax on the band: (judged, false alarms, runs until the step is caught)."""
    rule = RuleSettings()
    failed = []
    for i in range(5, len(values)):
        window = values[max(0, i - 20) : i]
        low = recompute_limit(window, ">", lower, rule)
        high = recompute_limit(window, "<", upper, rule)
        assert low is not None and high is not None
        failed.append(not (low[0] < values[i] < high[0]))
    fails = dict(enumerate(failed, start=5))
    span = range(STEP, STEP + 20)
    healthy = [i for i in fails if i not in span]
    hits = [i for i in span if fails[i]]
    return len(healthy), sum(fails[i] for i in healthy), (hits[0] - STEP + 1 if hits else None)


# --------------------------------------------------------------------------- output


def test_the_json_document_has_its_documented_shape(world: dict[str, Any]) -> None:
    data = as_json(run("--history", world["history"], "--file", world["file"], "--format", "json"))
    assert set(data) == {"version", "file", "history", "settings", "gates"}
    assert data["version"] == 1
    assert data["history"]["runs"] == BEFORE + AFTER
    assert data["history"]["regime_changes"] >= 1
    assert set(data["settings"]) == {"window", "harm", "detect_within", "min_runs", "model"}
    for g in data["gates"]:
        assert set(g) == {
            "name", "file", "line", "metric", "sides", "runs", "skipped", "harmful_changes",
            "detect_within", "harm", "models", "recommended", "tie", "note", "hint",
        }  # fmt: skip
        for row in g["models"]:
            assert set(row) == {
                "model", "description", "current", "judged", "false_alarms",
                "false_alarm_rate", "median_runs_to_detect", "caught_within", "catches_all",
                "changes",
            }  # fmt: skip
            for change in row["changes"]:
                assert set(change) == {"at", "index", "moved", "runs", "within"}
    acc = gate(data, "ACC_MIN")
    assert acc["sides"] == "lower" and acc["skipped"] is None
    assert [r["current"] for r in acc["models"]] == [True, False, False, False, False]
    assert acc["harmful_changes"] == 0 and acc["note"].startswith("no harmful change")
    assert all(r["median_runs_to_detect"] is None for r in acc["models"])


def test_a_min_max_pair_is_one_band(world: dict[str, Any]) -> None:
    data = as_json(run("--history", world["history"], "--file", world["file"], "--format", "json"))
    names = [g["name"] for g in data["gates"]]
    assert "LOSS_MIN / LOSS_MAX" in names
    assert not {"LOSS_MIN", "LOSS_MAX"} & set(names)
    band = gate(data, "LOSS_MIN / LOSS_MAX")
    assert band["sides"] == "both" and band["metric"] == LOSS
    assert band["harmful_changes"] == 1  # the loss went up by 12%: out of the band's top
    minmax = band["models"][0]
    judged, alarms, runs = naive_band(world["values"][LOSS], "0.20", "0.40")
    assert (minmax["judged"], minmax["false_alarms"]) == (judged, alarms)
    (change,) = minmax["changes"]
    assert change["index"] == STEP and change["runs"] == runs
    assert change["moved"] == pytest.approx(0.12, abs=0.02)

    table = run("--history", world["history"], "--file", world["file"], "--format", "table")
    assert table.exit_code == 0, table.stderr
    headings = [line for line in table.stdout.splitlines() if line.startswith("LOSS_")]
    assert headings == [f"LOSS_MIN / LOSS_MAX ({world['file'].as_posix()} line 2): {LOSS}, band"]


def test_a_chained_python_assert_is_one_band(world: dict[str, Any]) -> None:
    test = world["dir"] / "test_nightly.py"
    test.write_text(
        'def test_loss(summary):\n    assert 0.20 < summary["train/loss"] < 0.40\n',
        encoding="utf-8",
    )
    data = as_json(run("--history", world["history"], "--file", test, "--format", "json"))
    (band,) = data["gates"]
    assert band["sides"] == "both" and band["metric"] == LOSS and band["skipped"] is None
    assert " / " not in band["name"]  # one assert, one name
    judged, alarms, runs = naive_band(world["values"][LOSS], "0.20", "0.40")
    minmax = band["models"][0]
    assert (minmax["judged"], minmax["false_alarms"]) == (judged, alarms)
    assert [c["runs"] for c in minmax["changes"]] == [runs]


def test_gates_that_cannot_be_backtested_are_listed_with_the_reason(
    world: dict[str, Any],
) -> None:
    args = ("--history", world["history"], "--file", world["file"])
    gone = gate(as_json(run(*args, "--format", "json")), "GONE_MIN")
    assert gone["runs"] == 0 and gone["models"] == [] and gone["recommended"] is None
    assert "the metric" in gone["skipped"]
    table = run(*args).stdout
    section = table[table.index("Not backtested (1)") :]
    assert f"GONE_MIN ({world['file'].as_posix()} line 5): {gone['skipped']}" in section


def test_the_table_marks_the_current_model_and_recommends(world: dict[str, Any]) -> None:
    result = run("--history", world["history"], "--file", world["file"])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert text.startswith(f"Backtest of {world['file'].as_posix()} over 80 finished runs,")
    assert "minmax, 5% allowance (current)" in text
    for column in ("model", "false alarms", "median runs to detect", "caught within 3"):
        assert column in text
    data = as_json(run("--history", world["history"], "--file", world["file"], "--format", "json"))
    for g in data["gates"]:
        if g["recommended"]:
            assert f"Recommended: `{g['recommended']}` —" in text


def test_markdown_and_output_file(world: dict[str, Any]) -> None:
    out = world["dir"] / "backtest.md"
    args = ("--history", world["history"], "--file", world["file"])
    result = run(*args, "--format", "markdown", "--output", out)
    assert result.exit_code == 0 and result.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert text.startswith("## Threshold model backtest\n")
    assert "| model | false alarms | median runs to detect | caught within 3 |" in text
    assert "**minmax, 5% allowance (current)**" in text
    assert "### Not backtested (1)" in text
    data = as_json(run(*args, "--format", "json"))
    best = gate(data, "LOSS_MIN / LOSS_MAX")["recommended"]
    assert f"Recommended: <code>{best}</code> — fewest false alarms" in text


# --------------------------------------------------------------------------- options


def test_models_option_keeps_the_current_model_first(world: dict[str, Any]) -> None:
    args = ("--history", world["history"], "--file", world["file"], "--format", "json")
    data = as_json(run(*args, "--models", "zscore k=4,minmax,percentile p=1"))
    acc = gate(data, "ACC_MIN")
    assert [r["model"] for r in acc["models"]] == ["minmax", "zscore k=4", "percentile p=1"]
    data = as_json(run(*args, "--models", "iqr k=2"))
    assert [r["model"] for r in gate(data, "ACC_MIN")["models"]] == ["minmax", "iqr k=2"]


def test_config_window_and_allowance_set_the_yardsticks(world: dict[str, Any]) -> None:
    config = world["dir"] / "threshold-bot.yml"
    config.write_text(
        "rule:\n"
        "  model: percentile p=1\n"
        "  allowance: 2%\n"
        "  backtest:\n"
        "    detect_within: 2\n"
        "    min_runs: 8\n"
        "  overrides:\n"
        "    - gate: LOSS_*\n"
        "      model: zscore k=4\n",
        encoding="utf-8",
    )
    args = ("--history", world["history"], "--file", world["file"], "--config", config)
    data = as_json(run(*args, "--format", "json", "--window", "10"))
    assert data["settings"] == {
        "window": 10,
        "harm": 0.02,
        "detect_within": 2,
        "min_runs": 8,
        "model": "percentile p=1",
    }
    acc = gate(data, "ACC_MIN")
    assert acc["models"][0]["model"] == "percentile p=1" and acc["models"][0]["current"]
    assert acc["models"][0]["description"] == "percentile p=1, 2% allowance"
    assert acc["detect_within"] == 2
    # judged once 8 runs precede; nothing harmful in acc: every run from the 9th is healthy
    assert acc["models"][0]["judged"] == BEFORE + AFTER - 8
    band = gate(data, "LOSS_MIN / LOSS_MAX")
    assert band["models"][0]["model"] == "zscore k=4"  # the override
    data = as_json(run(*args, "--format", "json", "--allowance", "3%"))
    assert data["settings"]["harm"] == 0.03
    assert "caught within 2" in run(*args).stdout


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ("nosuch", "unknown model 'nosuch': one of minmax, percentile"),
        ("percentile p=abc", "p=abc: not a number"),
        ("minmax,minmax", "minmax named twice"),
        (" , ", "no model named"),
        ("zscore p=3", "zscore takes k, sigma"),
    ],
)
def test_bad_models_are_usage_errors(world: dict[str, Any], models: str, message: str) -> None:
    result = run("--history", world["history"], "--file", world["file"], "--models", models)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("threshold-bot: error: --models ")
    assert message in line


def test_missing_and_unreadable_inputs_are_usage_errors(world: dict[str, Any]) -> None:
    missing = world["dir"] / "nope.jsonl"
    cases = [
        (("--history", missing, "--file", world["file"]), f"{missing}: no such file"),
        (
            ("--history", world["history"], "--file", world["dir"] / "nope.sh"),
            "no such file",
        ),
        (
            ("--history", world["history"], "--file", world["file"], "--config", missing),
            "no such file",
        ),
        (("--file", world["file"]), "no history source; give --history FILE or --wandb"),
        (
            ("--history", world["history"], "--file", world["file"], "--window", "soon"),
            "--window",
        ),
        (
            ("--history", world["history"], "--file", world["file"], "--window", "1001"),
            "--window: invalid window '1001': at most 1,000 runs",
        ),
        (
            ("--history", world["history"], "--file", world["file"], "--format", "html"),
            "--format",
        ),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.stdout)
        assert result.stderr.startswith("threshold-bot: error: "), args
        assert message in result.stderr, (args, result.stderr)


def test_no_recommendation_when_no_model_catches_the_harmful_change(tmp_path: Path) -> None:
    """eval/acc drops by 5.6%: harmful (over 5%), yet inside minmax's 5% below the minimum."""
    rng = np.random.default_rng(5)
    level = np.r_[np.full(40, 0.800), np.full(30, 0.755)]
    acc = [round(float(v), 4) for v in level + rng.normal(0, 0.002, level.size)]
    history = write_runs(tmp_path / "runs.jsonl", {ACC: acc})
    script = tmp_path / "check.sh"
    script.write_text('ACC_MIN=0.70\ncheck "eval/acc >= $ACC_MIN"\n', encoding="utf-8")
    caught = []
    for i in range(40, 60):  # the runs whose window reaches back before the drop
        found = recompute_limit(acc[i - 20 : i], ">=", "0.70", RuleSettings())
        assert found is not None
        if acc[i] < found[0]:
            caught.append(i)
    assert not caught  # the data as meant: minmax never fails a run after the drop
    args = ("--history", history, "--file", script, "--models", "minmax")
    data = as_json(run(*args, "--format", "json"))
    (acc_gate,) = data["gates"]
    assert acc_gate["recommended"] is None and acc_gate["harmful_changes"] == 1
    assert [r["median_runs_to_detect"] for r in acc_gate["models"]] == [None]
    table = run(*args).stdout
    assert "No recommendation: no model catches every harmful change within 3 runs." in table
    assert "│ never " in table and "│ 0 of 1" in table


# --------------------------------------------------------------------------- ties


def steady(tmp_path: Path, seed: int = 7, runs: int = 60) -> tuple[Path, Path]:
    """A history of one steady, noisy metric, and a script gating it far below."""
    rng = np.random.default_rng(seed)
    acc = [round(float(v), 4) for v in 0.80 + rng.normal(0, 0.004, runs)]
    history = write_runs(tmp_path / "runs.jsonl", {ACC: acc})
    script = tmp_path / "check.sh"
    script.write_text('ACC_MIN=0.70\ncheck "eval/acc >= $ACC_MIN"\n', encoding="utf-8")
    return history, script


def test_when_every_model_ties_the_recommendation_says_so(tmp_path: Path) -> None:
    history, script = steady(tmp_path)
    args = ("--history", history, "--file", script)
    (acc_gate,) = as_json(run(*args, "--format", "json"))["gates"]
    models = acc_gate["models"]
    judged = 60 - RuleSettings().backtest.min_runs  # each run after the first min_runs
    assert {(m["false_alarms"], m["judged"]) for m in models} == {(0, judged)}  # the premise
    assert acc_gate["recommended"] == models[0]["model"] == "minmax" and models[0]["current"]
    assert acc_gate["tie"] == {
        "models": [m["model"] for m in models],
        "broken_by": "current_model",
    }
    expected = (
        f"Recommended: `minmax` — a tie: every model has the fewest false alarms (0 of"
        f" {judged}); no harmful change in the history: judged on false alarms alone; the tie"
        " goes to the current model."
    )
    assert expected in " ".join(run(*args).stdout.split())
    markdown = run(*args, "--format", "markdown").stdout
    assert expected.replace("`minmax`", "<code>minmax</code>") in markdown


def test_a_tie_the_current_model_is_not_in_goes_to_the_first_listed(tmp_path: Path) -> None:
    history, script = steady(tmp_path)
    config = tmp_path / "threshold-bot.yml"
    config.write_text("rule:\n  model: percentile p=45\n  allowance: 0\n", encoding="utf-8")
    args = ("--history", history, "--file", script, "--config", config)
    args += ("--models", "zscore k=4,iqr k=3")
    (acc_gate,) = as_json(run(*args, "--format", "json"))["gates"]
    current, *others = acc_gate["models"]
    fewest = min(m["false_alarms"] for m in acc_gate["models"])
    assert current["false_alarms"] > fewest  # the premise: the current model is noisier
    quiet = [m["model"] for m in others if m["false_alarms"] == fewest]
    assert quiet == ["zscore k=4", "iqr k=3"]
    assert acc_gate["recommended"] == "zscore k=4"
    assert acc_gate["tie"] == {"models": quiet, "broken_by": "models_order"}
    table = " ".join(run(*args).stdout.split())
    assert f"fewest false alarms ({fewest} of {current['judged']}), tied with `iqr k=3`" in table
    assert table.endswith("the tie goes to the first of them in the --models list.")


def test_without_a_tie_there_is_no_tie_to_break(world: dict[str, Any]) -> None:
    data = as_json(run("--history", world["history"], "--file", world["file"], "--format", "json"))
    for g in data["gates"]:
        rows = [m for m in g["models"] if m["catches_all"]]
        fewest = [m for m in rows if m["false_alarms"] == min(r["false_alarms"] for r in rows)]
        assert (g["tie"] is None) == (len(fewest) < 2), g["name"]
