"""Without ``--history`` or ``--wandb``, ``review``, ``drift``, ``backtest`` and ``rebaseline``
read the source each gate's file or the config names, as the App and the Action do (issue 26).

Each runs through the real ``threshold-bot`` entry point in a checkout (the current
directory) holding the demo's nightly script, its history as ``ci/history.jsonl`` and a
config naming that file as the script's source; the expected results are those of the same
command given ``--history ci/history.jsonl``.  W&B sources are in tests/test_cli_credentials.py.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from demo.data import SCRIPT_PATH, build_example, dump_jsonl

HISTORY = "ci/history.jsonl"
CONFIG_PATH = ".github/threshold-bot.yml"
CONFIG = f"""sources:
  offline: {{kind: file, path: {HISTORY}}}
files:
  - path: tests/ci/*.sh
    source: offline
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    example = build_example()
    files = {
        SCRIPT_PATH: example.head_script,
        "base.sh": example.base_script,
        HISTORY: dump_jsonl(example.records),
        CONFIG_PATH: CONFIG,
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _without_source(review: dict[str, Any]) -> dict[str, Any]:
    """The review but for where it says its runs came from (a path given, a source named)."""
    gates = [{k: v for k, v in g.items() if k != "source"} for g in review["gates"]]
    return {k: v for k, v in review.items() if k != "source"} | {"gates": gates}


def test_review_reads_the_source_the_config_names(checkout: Path) -> None:
    args = ["review", "--file", SCRIPT_PATH, "--base", "base.sh", "--config", CONFIG_PATH]
    own = run(*args, "--format", "json")
    given = run(*args, "--history", HISTORY, "--format", "json")
    assert own.exit_code == given.exit_code == 0, own.output + given.output
    review = json.loads(own.stdout)
    assert review["source"] == f"file:{HISTORY}"
    assert review["conclusion"] == "action_required"  # the demo PR loosens a gate
    assert _without_source(review) == _without_source(json.loads(given.stdout))


def test_the_rebaseline_command_the_review_prints_runs_as_printed(checkout: Path) -> None:
    args = ["review", "--file", SCRIPT_PATH, "--config", CONFIG_PATH, "--format", "markdown"]
    comment = run(*args)
    assert comment.exit_code == 0, comment.output
    [command] = re.findall(r"^ *(threshold-bot rebaseline .+)$", comment.stdout, re.M)
    words = shlex.split(command)[1:]
    assert "--history" not in words and "--config" in words  # the review's own options
    before = (checkout / SCRIPT_PATH).read_text()
    (checkout / "copy.sh").write_text(before)
    printed = run(*words)
    assert printed.exit_code == 0, printed.output
    files = [w if w != SCRIPT_PATH else "copy.sh" for w in words]
    given = run(*files, "--history", HISTORY)
    assert given.exit_code == 0, given.output
    assert printed.stderr == given.stderr.replace("copy.sh", SCRIPT_PATH)
    rewritten = (checkout / SCRIPT_PATH).read_text()
    assert rewritten == (checkout / "copy.sh").read_text()
    assert rewritten != before


@pytest.mark.parametrize(
    "args",
    [
        ["drift", "--file", SCRIPT_PATH, "--config", CONFIG_PATH, "--format", "json"],
        ["backtest", "--file", SCRIPT_PATH, "--config", CONFIG_PATH, "--format", "json"],
    ],
    ids=["drift", "backtest"],
)
def test_drift_and_backtest_read_it_too(checkout: Path, args: list[str]) -> None:
    own = run(*args)
    given = run(*args, "--history", HISTORY)
    assert own.exit_code == given.exit_code, own.output + given.output
    assert own.exit_code in (0, 1), own.output  # drift: 1 when a gate drifts
    assert json.loads(own.stdout) == json.loads(given.stdout)
    assert own.stdout.strip()


TWO_SOURCES = """sources:
  a: {kind: file, path: a.jsonl}
  b: {kind: file, path: b.jsonl}
files:
  - path: limits.yaml
    gates:
      - {key: acc_min, metric: acc, op: ">=", source: a}
      - {key: loss_max, metric: loss, op: "<=", source: b}
"""


def _runs(path: Path, metric: str, values: list[float]) -> None:
    lines = [
        {"id": f"{metric}{i}", "created_at": f"2026-07-{i + 1:02d}T08:00:00Z", "state": "finished"}
        | {"summary": {metric: value}}
        for i, value in enumerate(values)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_gates_reading_two_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yml").write_text(TWO_SOURCES)
    (tmp_path / "limits.yaml").write_text("acc_min: 0.80\nloss_max: 0.50\n")
    accuracy, loss = [0.91, 0.93, 0.92, 0.94], [0.31, 0.33, 0.30]
    _runs(tmp_path / "a.jsonl", "acc", accuracy)
    _runs(tmp_path / "b.jsonl", "loss", loss)
    # a review merges the review of each source
    review = run("review", "--file", "limits.yaml", "--config", "config.yml", "--format", "json")
    assert review.exit_code == 0, review.output
    gates = {g["name"]: g for g in json.loads(review.stdout)["gates"]}
    assert (gates["acc_min"]["window"]["runs"], gates["acc_min"]["window_min"]) == (
        len(accuracy),
        min(accuracy),
    )
    assert (gates["loss_max"]["window"]["runs"], gates["loss_max"]["window_max"]) == (
        len(loss),
        max(loss),
    )
    # a backtest or a rebaseline reads one history: it asks which
    for command in ("backtest", "rebaseline"):
        result = run(command, "--file", "limits.yaml", "--config", "config.yml")
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            "threshold-bot: error: limits.yaml: its gates read 2 sources (file:a.jsonl, "
            "file:b.jsonl); give --history FILE or --wandb ENTITY/PROJECT\n"
        )
    assert (tmp_path / "limits.yaml").read_text() == "acc_min: 0.80\nloss_max: 0.50\n"


@pytest.mark.parametrize("command", ["review", "drift", "backtest", "rebaseline"])
def test_a_source_file_the_checkout_lacks_is_bad_input(checkout: Path, command: str) -> None:
    (checkout / HISTORY).unlink()
    result = run(command, "--file", SCRIPT_PATH, "--config", CONFIG_PATH)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"threshold-bot: error: {HISTORY}: no such history file\n"
