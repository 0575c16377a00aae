"""Hints instead of silence (issue 12, part 8): which names read like thresholds, the guesses
made from them, and config lines that really declare the gate they describe."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.core.config import parse_config
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.hints import config_lines, guess_metric, guess_op, metric_like
from bot.core.thresholds.shell.script import parse_shell

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gates" / "expressions"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("LOSS_THRESHOLD", True),
        ("EVAL_ACC_MIN_VALUE", True),
        ("AVG_NUM_TOKENS_MAX_VALUE", True),
        ("EXPECTED_TOKENS_PER_SEC", True),
        ("BASELINE_TPS", True),
        ("ref_score", True),
        ("minAccuracy", True),
        ("ACC_TOL", True),
        ("MAX_MEMORY_GB", True),
        ("MAX_STEPS", False),
        ("MAX_TOKENS", False),
        ("CUDA_DEVICE_MAX_CONNECTIONS", False),
        ("LOSS_SCALE", False),
        ("MIN_LR", False),
        ("NUM_GPUS", False),
        ("LR", False),
        ("BATCH_SIZE", False),
    ],
)
def test_metric_like_names(name: str, expected: bool) -> None:
    assert metric_like(name) is expected


@pytest.mark.parametrize(
    ("name", "metric", "op"),
    [
        ("EVAL_ACC_MIN_VALUE", "eval_acc", ">="),
        ("LOSS_THRESHOLD", "loss", "<="),
        ("EXPECTED_TRAIN_LOSS", "train_loss", "<="),
        ("GRAD_NORM_MAX", "grad_norm", "<="),
        ("MIN_THROUGHPUT", "throughput", ">="),
        ("THRESHOLD", "threshold", ">="),
        ("PPL_CEILING", "ppl", "<="),
    ],
)
def test_guesses_from_the_name(name: str, metric: str, op: str) -> None:
    assert (guess_metric(name), guess_op(name)) == (metric, op)


def test_config_lines_mark_their_guesses_and_parse() -> None:
    lines = config_lines("ci/my tests/run.sh", "yes", "eval/acc", metric_guessed=True)
    assert "# a guess: the history key this is checked against" in lines
    assert "# a guess from the name" in lines
    config = parse_config(lines)
    (entry,) = config.files
    (gate,) = entry.gates
    assert (entry.path, gate.key, gate.metric, gate.op) == (
        "ci/my tests/run.sh",
        "yes",
        "eval/acc",
        ">=",
    )
    given = config_lines("ci/run.sh", "X", "m", "<")
    assert "guess" not in given
    assert yaml.safe_load(given)["files"][0]["gates"][0] == {"key": "X", "metric": "m", "op": "<"}


@pytest.mark.parametrize(
    ("name", "metric", "op"),
    [
        ("LOSS_THRESHOLD", "loss", "<="),
        ("EXPECTED_TOKENS_PER_SEC", "tokens_per_sec", ">="),
        ("EVAL_ACC_MIN_VALUE", "eval_acc", ">="),
        ("GRAD_NORM_MAX", "grad_norm", "<="),
    ],
)
def test_suggested_lines_declare_the_gate(name: str, metric: str, op: str) -> None:
    path = "tests/convergence/run_125m.sh"
    text = (FIXTURES / "convergence_args.sh").read_text(encoding="utf-8")
    (hint,) = [u for u in parse_shell(path, text).unbound if u.name == name]
    found = find_gates(path, text, parse_config(hint.config))
    assert found is not None
    (gate,) = [g for g in found.gates if g.name == name]
    assert (gate.metric, gate.op, gate.literal, gate.line) == (metric, op, hint.literal, hint.line)
    assert text[gate.start : gate.end] == hint.literal
    assert gate.pattern == "files.0.gates.0"
    assert name not in {u.name for u in found.unbound}  # declared: no longer a hint


def test_a_variable_assigned_twice_gets_no_config() -> None:
    text = 'LOSS_THRESHOLD=2.5\n[ -n "$FAST" ] && LOSS_THRESHOLD=3\npython c.py $LOSS_THRESHOLD\n'
    (hint,) = [u for u in parse_shell("t.sh", text).unbound if u.name == "LOSS_THRESHOLD"]
    assert hint.reason.startswith("passed to c.py as a positional argument on line 3")
    assert hint.config == ""  # a declared gate needs exactly one assignment


def test_an_undeclared_script_with_a_hint_is_reported_with_it() -> None:
    text = (FIXTURES / "convergence_args.sh").read_text(encoding="utf-8")
    found = find_gates("tests/convergence/run_125m.sh", text, parse_config(""))
    assert found is not None and found.gates == ()
    assert [u.name for u in found.unbound if u.config] == [
        "LOSS_THRESHOLD",
        "EXPECTED_TOKENS_PER_SEC",
        "EVAL_ACC_MIN_VALUE",
        "GRAD_NORM_MAX",
    ]
    # a script whose numeric variables read like settings is still no threshold file
    assert (
        find_gates("ci/setup.sh", "MAX_STEPS=3\npython t.py $MAX_STEPS\n", parse_config("")) is None
    )


def test_a_declared_variable_on_a_marked_line_is_a_placeholder() -> None:
    text = "LOSS_THRESHOLD=2.5  # threshold-bot: ignore\npython c.py $LOSS_THRESHOLD\n"
    config = parse_config(config_lines("ci/c.sh", "LOSS_THRESHOLD", "train/loss", "<="))
    found = find_gates("ci/c.sh", text, config)
    assert found is not None
    (gate,) = found.gates
    assert gate.ignored == "marked '# threshold-bot: ignore' on line 1"
    assert found.unbound == ()
