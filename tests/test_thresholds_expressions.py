"""Literals inside expression strings (issue 12, part 5): the grammar, which comparisons are
gates, and gates in YAML / JSON string values with their exact spans."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.config import parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import replace_literals
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.expressions.checks import Check, read_checks
from bot.core.thresholds.expressions.grammar import (
    MAX_EXPRESSION_CHARS,
    MAX_NESTING,
    ExpressionError,
    parse,
)
from bot.core.thresholds.structured.expressions import structured_expressions

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gates" / "expressions"
YAML_PATH = "tests/e2e/e2e_checks.yaml"
YAML = (FIXTURES / "e2e_checks.yaml").read_text(encoding="utf-8")
JSON_PATH = "ci/eval_checks.json"
JSON = (FIXTURES / "eval_checks.json").read_text(encoding="utf-8")


def one(expression: str) -> Check:
    (check,), _ = read_checks(expression)
    assert expression[check.start : check.end] == check.literal
    return check


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# --------------------------------------------------------------------------- comparisons


@pytest.mark.parametrize(
    ("expression", "metric", "op", "literal", "aggregation", "last_steps", "step"),
    [
        ('median(data["train/loss"]) < 1.1', "train/loss", "<", "1.1", "median", None, None),
        ("mean(data['timing/step_s'][-5:]) <= 42", "timing/step_s", "<=", "42", "mean", 5, None),
        ("eval/all/avg_score >= 0.56", "eval/all/avg_score", ">=", "0.56", None, None, None),
        ("eval/all/avg_score>=.56", "eval/all/avg_score", ">=", ".56", None, None, None),
        ("min(x['acc']) >= 0.7", "acc", ">=", "0.7", "min", None, None),
        ("np.mean(data['f1'][-3:]) > 0.8", "f1", ">", "0.8", "mean", 3, None),
        ("statistics.median(data['a/b']) < 2", "a/b", "<", "2", "median", None, None),
        ("avg(data['lat_ms']) <= 310", "lat_ms", "<=", "310", "mean", None, None),
        ('data["x"].max() < 5e-2', "x", "<", "5e-2", "max", None, None),
        ('metrics.get("f1") >= 0.5', "f1", ">=", "0.5", None, None, None),
        ('results["gsm8k"]["em"] > 0.62', "gsm8k/em", ">", "0.62", None, None, None),
        ('data["train/loss"]["10"] < 0.8', "train/loss", "<", "0.8", None, None, 10),
        ('data["train/loss"][-1] < 0.8', "train/loss", "<", "0.8", "last", None, None),
        ("data['t']['${MAX_STEPS}'] < 1.1", "t", "<", "1.1", "last", None, None),
        ('mean(data["t"], -6, -1) < 30', "t", "<", "30", "mean", None, None),
        ('mean(data["t"], exclude_outliers=5) < 1.05', "t", "<", "1.05", "mean", None, None),
        ('abs(median(data["train/loss"])) < 0.05', "train/loss", "<", "0.05", "median", None, None),
        ('min(data["kl"]) > -1e-3', "kl", ">", "-1e-3", "min", None, None),
        ('0.5 <= data["acc"]', "acc", ">=", "0.5", None, None, None),
        ('not data["loss"] > 2.5', "loss", "<=", "2.5", None, None, None),
        ('assert m["acc"] >= 0.7, "too low"', "acc", ">=", "0.7", None, None, None),
        ('max(data["u"]) == 1', "u", "==", "1", "max", None, None),
    ],
)
def test_a_comparison_with_a_literal_is_a_gate(
    expression: str,
    metric: str,
    op: str,
    literal: str,
    aggregation: str | None,
    last_steps: int | None,
    step: int | None,
) -> None:
    check = one(expression)
    assert (check.metric, check.op, check.literal) == (metric, op, literal)
    assert (check.aggregation, check.last_steps, check.step) == (aggregation, last_steps, step)
    assert not check.alternative


def test_chains_ands_ors_and_counters() -> None:
    checks, _ = read_checks('0.3 <= mean(data["r"][-5:]) < 0.95 and data["e"] < 3')
    assert [(c.metric, c.op, c.literal, c.alternative) for c in checks] == [
        ("r", ">=", "0.3", False),
        ("r", "<", "0.95", False),
        ("e", "<", "3", False),
    ]
    checks, _ = read_checks("(v['value'] <= 3.3) and (v['epoch'] < 10)")
    assert [(c.metric, c.op, c.literal) for c in checks] == [("value", "<=", "3.3")]
    checks, _ = read_checks("min(x['acc']) >= 0.7 or x['loss'] < 2")
    assert [(c.metric, c.alternative) for c in checks] == [("acc", True), ("loss", True)]
    # De Morgan: not (a and b) fails when either fails... and passes when either passes
    checks, _ = read_checks('not (data["a"] < 1 and data["b"] > 2)')
    assert [(c.metric, c.op, c.alternative) for c in checks] == [
        ("a", ">=", True),
        ("b", "<=", True),
    ]
    assert read_checks("x['step'] < 100 and x['global_step'] > 5 and x['train/epoch'] < 3") == (
        [],
        [],
    )


@pytest.mark.parametrize(
    "expression",
    [
        "python>=3.10",  # a requirement, not a metric
        "NR > 1",  # awk: a bare name is no metric
        '"10" in data["train/loss"]',
        'data["x"] != 0',
        'data["a"] < data["b"]',
        'mean(data["x"]) < 0.6 * data["x"]["1"]',  # the right side is computed
        'data["x"] > - 1',  # a sign apart from its number
        "x/2 > 1",  # a division, not a metric path
        "1 < 2",
        'data["x"] < $MAX',  # a shell variable is never a literal
        'data["x"] >= 1e999',  # not finite
        "a is not None",
        'data[""] < 1',
    ],
)
def test_comparisons_that_are_no_gates(expression: str) -> None:
    assert read_checks(expression)[0] == []


def test_computed_values_compared_with_literals_are_hints() -> None:
    checks, unchecked = read_checks('len(data["train/loss"]) >= 20 and data["x"][-5:] < 3')
    assert checks == []
    assert [(u.metric, u.literal) for u in unchecked] == [("train/loss", "20"), ("x", "3")]
    assert 'len(data["train/loss"])' in unchecked[0].reason
    expression = '(data["l"]["1"] - mean(data["l"], -6, -1)) / data["l"]["1"] > 0.20'
    (hint,) = read_checks(expression)[1]
    assert (hint.metric, hint.literal) == ("l", "0.20")
    assert expression[hint.start : hint.end] == "0.20"


@pytest.mark.parametrize(
    "expression",
    [
        'min({k: v for k, v in data["x"].items()}) > -1e-3',
        "lambda x: x > 1",
        'data["x"] <',
        'data["x" < 1',
        "data['x] < 1",
        "2Gi > 1",
        "a[] > 1",
        "x = 1",
        "$(date) > 1",
    ],
)
def test_unreadable_expressions_are_errors(expression: str) -> None:
    with pytest.raises(ExpressionError):
        read_checks(expression)


def test_the_grammar_is_bounded() -> None:
    with pytest.raises(ExpressionError, match="longer than"):
        parse("a" * (MAX_EXPRESSION_CHARS + 1))
    deep = "(" * (MAX_NESTING + 1) + 'data["x"]' + ")" * (MAX_NESTING + 1) + " < 1"
    with pytest.raises(ExpressionError, match="nested more than"):
        parse(deep)
    fits = "(" * (MAX_NESTING - 2) + 'data["x"]' + ")" * (MAX_NESTING - 2) + " < 1"
    assert one(fits).metric == "x"
    for hostile in ("not " * 400 + "x", "-" * 1900 + "1", "x[" * 600 + "0" + "]" * 600, "[" * 1000):
        with pytest.raises(ExpressionError):
            parse(hostile)
    assert parse("a" + ".b" * 900).kind == "attr"  # a chain is a loop, not a recursion
    began = time.perf_counter()
    long = " and ".join(f'data["m{i}"] < {i}.5' for i in range(100))[:MAX_EXPRESSION_CHARS]
    long = long[: long.rindex(" and ")]
    checks, _ = read_checks(long)
    assert len(checks) == long.count("<")
    assert time.perf_counter() - began < 0.5


SYMBOLS = [*"dat[]()'\"<>=!-+*/.:,0123456789 ", "data", "mean", "not", "and", "or", "e", "$X"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(SYMBOLS), max_size=40).map("".join))
def test_any_text_is_read_or_refused_and_literals_hold(text: str) -> None:
    try:
        checks, unchecked = read_checks(text)
    except ExpressionError:
        return
    for item in [*checks, *unchecked]:
        assert text[item.start : item.end] == item.literal
        float(item.literal)


# --------------------------------------------------------------------------- YAML / JSON


def by_literal(found: ThresholdFile) -> dict[str, Gate]:
    return {g.literal: g for g in found.gates}


@pytest.mark.parametrize(
    ("literal", "metric", "op", "needle", "aggregation", "last_steps"),
    [
        ("0.69", "train/loss", "<", "0.69'", "median", None),
        ("0.42", "rewards/margins", ">=", '0.42"', "mean", 10),
        ("3e1", "train/grad_norm", "<=", '3e1"', "max", None),
        ("0.55", "eval/win_rate", ">", "0.55'", None, None),
        ("3.3", "val/loss", "<=", "3.3 and", None, None),  # v['value'] under its mapping key
        ("0.38", "eval/ifeval", ">=", "0.38 ", None, None),
        ("1800", "perf/tokens_per_s", ">", "1800\n", "median", None),
        ("61.5", "perf/peak_mem_gb", "<", "61.5\n", None, None),
    ],
)
def test_yaml_expression_gates_and_spans(
    literal: str, metric: str, op: str, needle: str, aggregation: str | None, last_steps: int | None
) -> None:
    gate = by_literal(structured_expressions(YAML_PATH, YAML))[literal]
    start = YAML.index(needle)
    assert (gate.start, gate.end) == (start, start + len(literal))
    assert YAML[gate.start : gate.end] == literal
    assert (gate.metric, gate.op, gate.kind) == (metric, op, "limit")
    assert (gate.aggregation, gate.last_steps) == (aggregation, last_steps)
    assert gate.line == line_of(YAML, needle)


def test_yaml_gate_set_ignore_marker_and_steps() -> None:
    found = structured_expressions(YAML_PATH, YAML)
    # the requirements list, the folded scalar and the epoch guard give no gate
    assert sorted(by_literal(found)) == sorted(
        ["0.69", "0.42", "3e1", "0.55", "3.3", "0.38", "1800", "61.5"]
    )
    gates = by_literal(found)
    assert gates["0.38"].ignored == f"marked '# threshold-bot: ignore' on line {gates['0.38'].line}"
    assert [g.literal for g in found.gates if g.ignored] == ["0.38"]
    (point,) = gates["61.5"].points
    assert (point.step, point.value, point.span.start) == (50, 61.5, gates["61.5"].start)
    assert gates["3.3"].name == "val/loss: v['value'] <="  # the metric's key names it
    assert gates["3.3"].context == "v['value'] <= 3.3 and v['epoch'] < 10"
    assert found.unbound == ()


def test_json_expression_gates_and_spans() -> None:
    found = structured_expressions(JSON_PATH, JSON)
    got = {g.literal: (g.metric, g.op, g.line) for g in found.gates}
    assert got == {
        "6.9": ("eval/mt_bench", ">=", line_of(JSON, "6.9")),
        "1.32": ("train/loss", "<", line_of(JSON, "1.32")),
        "0.41": ("eval/ifeval_strict", ">=", line_of(JSON, "0.41")),  # key written \u005f
        "0.62": ("eval/gsm8k", ">", line_of(JSON, "0.62")),
    }
    for gate in found.gates:
        assert JSON[gate.start : gate.end] == gate.literal
        assert JSON.index(gate.literal) == gate.start


def test_rebaseline_edits_only_the_literal_and_names_stay() -> None:
    for path, text in ((YAML_PATH, YAML), (JSON_PATH, JSON)):
        base = structured_expressions(path, text)
        edits = [(g, f"{g.value + 1:.2f}") for g in base.gates]
        edited = replace_literals(text, edits)
        head = structured_expressions(path, edited)
        assert [g.name for g in head.gates] == [g.name for g in base.gates]
        assert [g.value for g in head.gates] == [round(g.value + 1, 2) for g in base.gates]
        changes = diff_gates(base, head)
        assert all(c.base is not None and c.changed for c in changes)
        assert outside_literals(edited, head.gates) == outside_literals(text, base.gates)


def outside_literals(text: str, gates: tuple[Gate, ...]) -> list[str]:
    """The text between the gates' literals."""
    cuts = [0, *(at for g in sorted(gates, key=lambda g: g.start) for at in (g.start, g.end))]
    cuts.append(len(text))
    return [text[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2)]


def test_repeated_names_are_numbered_in_file_order() -> None:
    text = "a: ['data[\"x\"] < 1', 'data[\"x\"] < 2']\nb: 'data[\"x\"] < 3'\n"
    names = [g.name for g in structured_expressions("c.yaml", text).gates]
    assert names == ['data["x"] <', 'data["x"] < #2', 'data["x"] < #3']


@pytest.mark.parametrize(
    "text",
    [
        "a: \"data['x'] < \\x31.5\"\n",  # the literal is written through an escape
        "a: \"data['x'] <\n  1.5\"\n",  # a multi-line flow scalar
        "a: >\n  data['x'] < 1.5\n",  # folded
        "a: 'data[''x''] < 1.5 and'\n",  # unreadable, no metric-like subscript left
    ],
)
def test_yaml_strings_not_read(text: str) -> None:
    found = structured_expressions("c.yaml", text)
    assert found.gates == ()


def test_json_literal_written_through_an_escape_is_no_gate() -> None:
    found = structured_expressions("c.json", '{"a": "data[\'x\'] < \\u0031.5", "b": "x/y < 2"}')
    assert [(g.metric, g.literal) for g in found.gates] == [("x/y", "2")]


def test_unreadable_check_is_a_hint() -> None:
    text = "checks:\n  - 'min({k: v for k, v in data[\"kl\"].items()}) > -1e-3'\n"
    found = structured_expressions("c.yaml", text)
    (hint,) = found.unbound
    assert (hint.name, hint.literal, hint.line) == ("kl", "-1e-3", 2)
    assert "cannot be read" in hint.reason and hint.config == ""


def test_invalid_files_are_errors_only_when_they_compare() -> None:
    with pytest.raises(ThresholdFileError, match=r"^c\.yaml:2: not valid YAML"):
        structured_expressions("c.yaml", "a: 'data[\"x\"] < 1'\n\t- b: [\n")
    with pytest.raises(ThresholdFileError, match=r"^c\.json:1: not valid JSON"):
        structured_expressions("c.json", '{"a": "x/y < 2",}')
    with pytest.raises(ThresholdFileError, match="nested more than"):
        structured_expressions("c.json", "[" * 100 + '"x/y < 2"' + "]" * 100)
    assert structured_expressions("c.yaml", "a: [\n").gates == ()  # nothing to read: not parsed
    assert structured_expressions("c.toml", 'a = "x/y < 2"\n').gates == ()


def test_hostile_yaml_is_scanned_not_expanded() -> None:
    laughs = ["l0: &l0 ['data[\"x\"] < 1']"]
    laughs += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    began = time.perf_counter()
    found = structured_expressions("c.yaml", "\n".join(laughs) + "\n")
    assert [g.literal for g in found.gates] == ["1"]
    big = "".join(f"m{i}: 'median(data[\"m/{i}\"]) < {i}.5'\n" for i in range(5_000))
    assert len(structured_expressions("c.yaml", big).gates) == 5_000
    assert time.perf_counter() - began < 5


def test_through_find_gates_without_config() -> None:
    found = find_gates(YAML_PATH, YAML, parse_config(""))
    assert found is not None
    mine = {g.literal: g for g in found.gates if g.name.startswith(("median(", "val/", "eval/"))}
    assert {"0.69", "3.3", "0.38", "1800"} <= set(mine)
    assert mine["0.38"].ignored
    config = parse_config("metrics: {val/loss: eval/val_loss}\n")
    found = find_gates(YAML_PATH, YAML, config)
    assert found is not None
    assert {g.metric for g in found.gates if g.literal == "3.3"} == {"eval/val_loss"}
