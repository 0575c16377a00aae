"""Each gate's own threshold model in the review, its words and ``/rebaseline``: a per-gate
override changes the recomputed limit (computed here from the data), the JSON names the
model, the method line groups the gates by model, and the CLI's rebaseline writes the
override's value and names the model in the provenance comment."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from bot.core.analysis.drift import drift_report
from bot.core.analysis.review import build_review
from bot.core.commands import Command
from bot.core.config import DriftSettings
from bot.core.limit_model import parse_model
from bot.core.models import (
    GateChange,
    History,
    Op,
    Review,
    RuleOverride,
    RuleSettings,
)
from bot.core.render.drift import item_body
from bot.core.render.review import render_comment, render_json
from bot.core.render.terminal import review_table
from bot.features.rebaseline.literals import GateEdit
from bot.features.rebaseline.plan import FilePlan, commit_message, rule_for
from bot.features.rebaseline.replies import describe_rule
from demo.data import ExamplePaths, write_example
from tests.builders import history_of, limit_gate, runs_of
from tests.test_cli_rebaseline import _literal, _window, run
from tests.test_drift_assess import gate as drift_gate
from tests.test_drift_assess import history as drift_history
from tests.test_drift_assess import step

T0 = datetime(2026, 6, 1, tzinfo=UTC)
RUNS = 30
ZSCORE = "zscore k=3"
WIDE = "zscore k=8"  # on the example's eval score: neither its literal nor minmax's value


def _history() -> History:
    """``acc`` around 0.60 with one low run (0.55), ``tokens`` around 260."""
    rng = np.random.default_rng(18)
    summaries = [
        {
            "acc": 0.55 if i == RUNS - 5 else 0.60 + rng.normal(0, 0.004),
            "tokens": 260 + rng.normal(0, 2.0),
        }
        for i in range(RUNS)
    ]
    return history_of(runs_of(summaries, start=T0, every=timedelta(hours=1)))


def _gate(name: str, metric: str, op: Op, literal: str, line: int) -> GateChange:
    gate = limit_gate(metric, op, literal, name=name, line=line)
    return GateChange(head=gate, base=gate)


GATES = [_gate("ACC", "acc", ">=", "0.50", 3), _gate("TOKENS", "tokens", "<=", "300", 4)]
OVERRIDE = RuleSettings(overrides=(RuleOverride(gate="ACC", model=parse_model(ZSCORE)),))


def _window_of(history: History, metric: str) -> list[float]:
    return [r.summary[metric] for r in history.finished][-20:]


def _decimals(raw: float, literal: str) -> int:
    written = max(0, -int(Decimal(literal).as_tuple().exponent))
    return max(written, 2 - 1 - math.floor(math.log10(abs(raw))))


def _zscore_lower(values: list[float], literal: str, k: float = 3) -> float:
    """mean − k·(1.4826·MAD), never above the window's minimum, rounded down."""
    sigma = float(stats.median_abs_deviation(values, scale="normal"))
    raw = min(float(np.mean(values)) - k * sigma, min(values))
    step = Decimal(1).scaleb(-_decimals(raw, literal))
    return float(Decimal(repr(raw)).quantize(step, rounding=ROUND_FLOOR))


def _minmax(values: list[float], literal: str, lower: bool) -> float:
    edge = min(values) if lower else max(values)
    raw = Decimal(repr(edge)) + Decimal("0.05") * abs(Decimal(repr(edge))) * (-1 if lower else 1)
    step = Decimal(1).scaleb(-_decimals(float(raw), literal))
    return float(raw.quantize(step, rounding=ROUND_FLOOR if lower else ROUND_CEILING))


def _flat(text: str) -> str:
    return " ".join(text.split())


def _terminal(review: Review) -> str:
    console = Console(width=120, file=io.StringIO(), color_system=None)
    console.print(review_table(review))
    assert isinstance(console.file, io.StringIO)
    return _flat(console.file.getvalue())


def test_an_override_sets_its_gates_limit_by_its_model() -> None:
    history = _history()
    plain = build_review(GATES, history)
    review = build_review(GATES, history, rule=OVERRIDE)
    acc, tokens = _window_of(history, "acc"), _window_of(history, "tokens")
    by_name = {g.name: g for g in review.gates}
    expected = _zscore_lower(acc, "0.50")
    assert by_name["ACC"].recomputed == expected
    assert plain.gates[0].recomputed == _minmax(acc, "0.50", lower=True)
    assert expected != plain.gates[0].recomputed  # the low run: minmax follows it down
    assert by_name["TOKENS"].recomputed == _minmax(tokens, "300", lower=False)
    data = json.loads(render_json(review))
    assert [g["model"] for g in data["gates"]] == [ZSCORE, "minmax, 5% allowance"]


def test_the_method_line_names_each_gates_model() -> None:
    history = _history()
    one = render_comment(build_review(GATES, history))
    assert "- **Rule:** minmax, 5% allowance: a lower bound (≥, \\>) is the window's minimum" in one
    assert "Rule of" not in one
    mixed = build_review(GATES, history, rule=OVERRIDE)
    comment = render_comment(mixed)
    assert f"- **Rule of <code>ACC</code>:** {ZSCORE}: a lower bound" in comment
    assert "- **Rule of <code>TOKENS</code>:** minmax, 5% allowance: a lower bound" in comment
    assert "**Rule:**" not in comment
    terminal = _terminal(mixed)
    assert f"Rule of ACC: {ZSCORE}: a lower bound (≥, >) is the window's mean less 3" in terminal
    assert "Rule of TOKENS: minmax, 5% allowance:" in terminal


def test_every_gate_on_one_model_is_one_line() -> None:
    rule = RuleSettings(model=parse_model("percentile p=10"), allowance=0.02)
    comment = render_comment(build_review(GATES, _history(), rule=rule))
    assert (
        "- **Rule:** percentile p=10, 2% allowance: a lower bound (≥, \\>) is the window's"
        " 10th percentile less 2% of its magnitude" in _flat(comment)
    )


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


@pytest.fixture(autouse=True)
def user(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "alice")


def _config(tmp_path: Path, override: str) -> Path:
    config = tmp_path / "threshold-bot.yml"
    config.write_text(f"rule:\n  overrides:\n    - gate: EVAL_ACC_MIN_VALUE\n{override}")
    return config


def test_cli_rebaseline_writes_the_overrides_value(example: ExamplePaths, tmp_path: Path) -> None:
    script = tmp_path / "nightly.sh"
    script.write_text(example.head.read_text())
    config = _config(tmp_path, f"      model: {WIDE}\n")
    name, metric = "EVAL_ACC_MIN_VALUE", "eval/all/avg_score"
    _, literal = _literal(script.read_text(), name)
    _, train_literal = _literal(script.read_text(), "TRAIN_ACC_MIN_VALUE")
    result = run(
        "--file",
        script,
        "--history",
        example.history,
        "--config",
        config,
        name,
        "TRAIN_ACC_MIN_VALUE",
    )
    assert result.exit_code == 0, result.output
    text = script.read_text()
    written = text.splitlines()
    new = _zscore_lower(_window(example.history, metric), literal, k=8)
    minmax = _minmax(_window(example.history, metric), literal, lower=True)
    assert new not in (minmax, float(literal))  # the model matters on this history
    assert f"{name}={new:.{_decimals(new, literal)}f}" in written
    train = _minmax(_window(example.history, "loss/avg_final_rewards"), train_literal, True)
    assert f"TRAIN_ACC_MIN_VALUE={train:.{_decimals(train, train_literal)}f}" in written
    rule_line = next(x for x in written if x.startswith("#   rule:"))
    assert rule_line.startswith(
        f"#   rule: {WIDE} ({name}); minmax, 5% allowance (TRAIN_ACC_MIN_VALUE) over the last"
    )


def test_cli_allowance_applies_to_every_gate(example: ExamplePaths, tmp_path: Path) -> None:
    name, metric = "EVAL_ACC_MIN_VALUE", "eval/all/avg_score"
    config = _config(tmp_path, "      allowance: 20%\n")
    window = _window(example.history, metric)
    for extra, allowance in (((), "0.20"), (("--allowance", "2%"), "0.02")):
        script = tmp_path / "nightly.sh"
        script.write_text(example.head.read_text())
        _, literal = _literal(script.read_text(), name)
        result = run(
            "--file", script, "--history", example.history, "--config", config, *extra, name
        )
        assert result.exit_code == 0, result.output
        edge = Decimal(repr(min(window)))
        raw = edge - Decimal(allowance) * abs(edge)
        step = Decimal(1).scaleb(-_decimals(float(raw), literal))
        new = raw.quantize(step, rounding=ROUND_FLOOR)
        assert f"{name}={new}" in script.read_text(), (extra, new)


def test_the_drift_issue_names_the_gates_model() -> None:
    """A gate drifting under an override: its issue says which model gave the new value."""
    settings = DriftSettings()
    values = step(after=8)
    h = drift_history(values)
    rule = RuleSettings(
        window=settings.window,
        overrides=(RuleOverride(gate="ACC_MIN", model=parse_model("iqr k=2")),),
    )
    review = build_review([GateChange(head=drift_gate(), base=drift_gate())], h, rule=rule)
    body = item_body(drift_report("ci/nightly.sh", review, settings), mode="issue", repo_url=None)
    (g,) = review.gates
    assert g.model == "iqr k=2"
    assert g.recomputed is not None
    window = [r.summary[g.metric] for r in h.finished][-g.window.runs :]
    q1, q3 = np.percentile(window, [25, 75])
    raw = min(float(q1 - 2 * (q3 - q1)), min(window))
    new = math.floor(raw * 100) / 100  # 2 significant digits at 0.7
    assert g.recomputed == new
    assert (
        f"The rule's new value: **{new:.2f}**, by iqr k=2: the window's first quartile less 2"
        " interquartile ranges, rounded down, over" in body
    )


def _edit(change: GateChange, new: str) -> GateEdit:
    return GateEdit(gate=change.head, new_literal=new, new=float(new))


def test_the_commit_message_and_reply_name_the_models() -> None:
    acc, tokens = GATES
    plans = [FilePlan(path="ci/nightly.sh", edits=(_edit(acc, "0.58"), _edit(tokens, "270")))]
    message = commit_message(plans, OVERRIDE, None)
    assert f"Rule: {ZSCORE} (ACC); minmax, 5% allowance (TOKENS), window 20." in message
    plain = commit_message(plans, RuleSettings(), None)
    assert "Rule: 5% allowance, window 20." in plain
    only_tokens = [FilePlan(path="ci/nightly.sh", edits=(_edit(tokens, "270"),))]
    assert "Rule: 5% allowance, window 20." in commit_message(only_tokens, OVERRIDE, None)
    gates = [(g.head.name, g.head.metric, g.head.file) for g in GATES]
    assert describe_rule(OVERRIDE, gates) == (
        f"{ZSCORE} (<code>ACC</code>); minmax, 5% allowance (<code>TOKENS</code>)"
        " over the last 20 runs"
    )


def test_the_commands_allowance_is_every_gates() -> None:
    rule = RuleSettings(
        overrides=(
            RuleOverride(gate="ACC", model=parse_model(ZSCORE), allowance=0.1),
            RuleOverride(gate="TOKENS", allowance=0.2),
        )
    )
    assert rule.for_gate("TOKENS", "tokens", "ci/nightly.sh").allowance == 0.2
    command = Command(kind="rebaseline", line=1, allowance=0.03)
    applied = rule_for(command, rule)
    for name, metric in (("ACC", "acc"), ("TOKENS", "tokens"), ("OTHER", "x")):
        assert applied.for_gate(name, metric, "ci/nightly.sh").allowance == 0.03
    assert applied.for_gate("ACC", "acc", "ci/nightly.sh").model == parse_model(ZSCORE)
