"""Zero-config gate discovery in shell scripts (contract section 2)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.config import parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import replace_literals
from bot.core.thresholds.shell.lexer import Word, lex
from bot.core.thresholds.shell.script import MAX_NESTED_CHARS, is_shell_script, parse_shell

DATA = Path(__file__).resolve().parent / "data"
SCRIPT = (DATA / "nightly_gsm8k.sh").read_text(encoding="utf-8")
PATH = "tests/ci/nightly_gsm8k.sh"


def line_of(text: str, needle: str) -> int:
    """1-based line of the first occurrence of ``needle``."""
    return text[: text.index(needle)].count("\n") + 1


def literal_span(text: str, assignment: str, literal: str) -> tuple[int, int]:
    """Offsets of ``literal`` inside the first occurrence of ``assignment``."""
    start = text.index(assignment) + assignment.index(literal)
    return start, start + len(literal)


def gates_by_key(parsed: ThresholdFile) -> dict[tuple[str, str], Gate]:
    return {(g.name, g.metric): g for g in parsed.gates}


@pytest.mark.parametrize(
    ("assignment", "literal", "metric", "op"),
    [
        ("export EVAL_ACC_MIN_VALUE=0.56", "0.56", "eval/all/avg_score", ">="),
        ("export EVAL_ACC_MIN_VALUE=0.56", "0.56", "eval/math500/avg_score", ">="),
        ('export AVG_NUM_TOKENS_MAX_VALUE="283"', "283", "generate/avg_num_tokens", "<="),
        ("LOSS_MAX_VALUE='0.040'", "0.040", "loss/pg_clipfrac", "<"),
        ("readonly REWARD_MIN_VALUE=-0.019", "-0.019", "loss/avg_final_rewards", ">"),
        ("STEP_TIME_MAX_VALUE=${STEP_TIME_MAX_VALUE:-45.}", "45.", "perf/time_per_step", "<="),
    ],
)
def test_realistic_script_gates(assignment: str, literal: str, metric: str, op: str) -> None:
    parsed = parse_shell(PATH, SCRIPT)
    name = assignment.split("=")[0].split()[-1]
    gate = gates_by_key(parsed)[(name, metric)]
    start, end = literal_span(SCRIPT, assignment, literal)
    assert (gate.start, gate.end) == (start, end)
    assert SCRIPT[gate.start : gate.end] == gate.literal == literal
    assert gate.line == line_of(SCRIPT, assignment)
    assert gate.op == op
    assert gate.value == float(literal)
    assert gate.file == PATH


def test_realistic_script_gate_set_and_unbound() -> None:
    parsed = parse_shell(PATH, SCRIPT)
    assert sorted(gates_by_key(parsed)) == sorted(
        [
            ("EVAL_ACC_MIN_VALUE", "eval/all/avg_score"),
            ("EVAL_ACC_MIN_VALUE", "eval/math500/avg_score"),
            ("AVG_NUM_TOKENS_MAX_VALUE", "generate/avg_num_tokens"),
            ("LOSS_MAX_VALUE", "loss/pg_clipfrac"),
            ("REWARD_MIN_VALUE", "loss/avg_final_rewards"),
            ("STEP_TIME_MAX_VALUE", "perf/time_per_step"),
        ]
    )
    unbound = {u.name: u for u in parsed.unbound}
    assert "assigned 'auto', not a number" in unbound["BAD_MIN_VALUE"].reason
    twice = unbound["TWICE_MIN_VALUE"]
    first, second = line_of(SCRIPT, "TWICE_MIN_VALUE=0.1"), line_of(SCRIPT, "TWICE_MIN_VALUE=0.2")
    assert f"assigned 2 times (lines {first}, {second})" in twice.reason
    assert "never assigned" in unbound["UNSET_MIN_VALUE"].reason
    assert unbound["UNSET_MIN_VALUE"].line == line_of(SCRIPT, '"eval/missing')
    # numeric but not compared; the comment's comparison does not count
    old = unbound["OLD_ACC_MIN_VALUE"]
    assert old.literal == "0.50" and "never used" in old.reason
    assert "used elsewhere" in unbound["NUM_GPUS"].reason
    assert unbound["LR"].literal == "1e-6"
    assert "WANDB_ENTITY" not in unbound and "SCRIPT_DIR" not in unbound  # not numeric


def test_realistic_script_project_and_entity() -> None:
    source = parse_shell(PATH, SCRIPT).source
    assert source is not None
    assert (source.kind, source.project, source.entity) == (
        "wandb",
        "gsm8k_fully_async_ci",
        "rl-team",
    )


@pytest.mark.parametrize(
    ("assignment", "use", "literal"),
    [
        ("X=0.56", '"m >= $X"', "0.56"),
        ("export X=0.56", "'m >= ${X}'", "0.56"),
        ('X="0.56"', '"m>=$X"', "0.56"),
        ("X='.5'", '"m >= ${X}"', ".5"),
        ("declare -r X=5.", '"m >= $X"', "5."),
        ("local X=1e-3", '"m >= $X"', "1e-3"),
        ("export A=1 X=+2.5E+3", '"m >= $X"', "+2.5E+3"),
        ('X="${X:-0.7}"', '"m >= $X"', "0.7"),
        ("true && X=3; echo", '"m >= $X"', "3"),
    ],
)
def test_assignment_and_quoting_variants(assignment: str, use: str, literal: str) -> None:
    text = f"#!/bin/sh\n{assignment}\nrun --asserts {use}\n"
    (gate,) = parse_shell("t.sh", text).gates
    assert (gate.name, gate.metric, gate.op) == ("X", "m", ">=")
    assert text[gate.start : gate.end] == gate.literal == literal
    assert gate.start == text.index(assignment) + assignment.rindex(literal)
    assert gate.line == 2


def test_several_asserts_per_line_and_continuations() -> None:
    text = (
        "A=1\nB=2\nC=3\n"
        'python x.py --asserts "a/x >= $A" "b/y < ${B}" \\\n'
        '   "c/z <= $C && d/w > $A"\n'
    )
    parsed = parse_shell("t.sh", text)
    assert [(g.name, g.metric, g.op) for g in parsed.gates] == [
        ("A", "a/x", ">="),
        ("A", "d/w", ">"),
        ("B", "b/y", "<"),
        ("C", "c/z", "<="),
    ]
    assert parsed.unbound == ()


def test_comparisons_in_heredoc_and_not_in_comments_or_assert_targets() -> None:
    text = (
        "X=0.5\nY=0.6\nZ=0.7\n"
        "# m >= $Y\n"
        "cat > asserts.txt <<EOF\n"
        "eval/acc >= $X\n"
        "EOF\n"
        'echo "$Z >= $Z"\n'
    )
    parsed = parse_shell("t.sh", text)
    assert [(g.name, g.metric) for g in parsed.gates] == [("X", "eval/acc")]
    assert {u.name for u in parsed.unbound} == {"Y", "Z"}


def test_assignment_inside_arguments_is_not_a_gate() -> None:
    text = 'make X=1\nexport X\necho "m >= $X"\n'
    parsed = parse_shell("t.sh", text)
    assert parsed.gates == ()
    assert "never assigned" in parsed.unbound[0].reason


def test_literal_beyond_float_range_is_not_a_gate() -> None:
    parsed = parse_shell("t.sh", 'X=1e999\nY=-1e400\necho "m >= $X" "n <= $Y"\n')
    assert parsed.gates == ()
    assert [(u.name, u.literal) for u in parsed.unbound] == [("X", "1e999"), ("Y", "-1e400")]
    assert all("not a number" in u.reason for u in parsed.unbound)


def test_crlf_and_unterminated_quote_do_not_crash() -> None:
    text = 'X=0.5\r\necho "m >= $X"\r\necho "oops\n'
    (gate,) = parse_shell("t.sh", text).gates
    assert gate.literal == "0.5"
    assert parse_shell("t.sh", "echo 'never closed\nX=1\n").gates == ()


@pytest.mark.parametrize(
    ("text", "project", "entity"),
    [
        ("python t.py --project_name=p1\n", "p1", None),
        ("python t.py --project-name 'p2' --entity e\n", "p2", "e"),
        ("python t.py trainer.project_name=p3 wandb.entity=e3\n", "p3", "e3"),
        ("export WANDB_PROJECT=p4\npython t.py\n", "p4", None),
        ("python t.py --wandb-project p5\n", "p5", None),
        ('P=p6\npython t.py --project_name "$P"\n', "p6", None),
        ("WANDB_PROJECT=a\npython t.py --project_name b\n", None, None),
        ('python t.py --project_name "$UNKNOWN"\n', None, None),
        ("python t.py --project other\n", None, None),
    ],
)
def test_project_detection(text: str, project: str | None, entity: str | None) -> None:
    source = parse_shell("t.sh", text).source
    if project is None:
        assert source is None
    else:
        assert source is not None
        assert (source.kind, source.project, source.entity) == ("wandb", project, entity)


@pytest.mark.parametrize(
    ("path", "first_line", "expected"),
    [
        ("ci/run.sh", "", True),
        ("ci/run.BASH", "", True),
        ("ci/run", "#!/bin/bash", True),
        ("ci/run", "#!/usr/bin/env bash", True),
        ("ci/run", "#! /bin/sh -e", True),
        ("ci/run", "#!/usr/bin/env -S zsh -f", True),
        ("ci/run", "#!/bin/dash", True),
        ("ci/run.py", "#!/usr/bin/env python3", False),
        ("ci/run", "#!/usr/bin/shellcheck", False),
        ("ci/run", "#!/opt/bash-5/bin/python", False),
        ("ci/run.yaml", "a: 1", False),
    ],
)
def test_is_shell_script(path: str, first_line: str, expected: bool) -> None:
    assert is_shell_script(path, f"{first_line}\necho hi\n") is expected


def test_lexer_keeps_offsets_of_quoted_parts() -> None:
    text = 'cmd "a $(echo ")") b" \'c\'d$(x "y")\n'
    words = [t for t in lex(text).tokens if isinstance(t, Word)]
    assert [w.unquoted() for w in words] == ["cmd", 'a $(echo ")") b', 'cd$(x "y")']
    for word in words:
        for part in word.parts:
            assert text[part.start : part.start + len(part.text)] == part.text


TOKENS = [*"AXm_=0.5-e $'\"\\\n#;&|(){}<>` \t", "${", "$(", ">=", "<<EOF\n", "EOF\n"]
SHELLISH = st.lists(st.sampled_from(TOKENS), max_size=120).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(SHELLISH, max_size=4).map("".join))
def test_any_text_parses_without_error_and_spans_hold(text: str) -> None:
    parsed = parse_shell("t.sh", text)
    for gate in parsed.gates:
        assert text[gate.start : gate.end] == gate.literal
        assert gate.line == text[: gate.start].count("\n") + 1
        assert float(gate.literal) == gate.value


# --------------------------------------------------------------------------- expressions


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gates" / "expressions"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def at(text: str, needle: str, literal: str) -> tuple[int, int]:
    """The span of ``literal`` inside the first occurrence of ``needle``."""
    start = text.index(needle) + needle.index(literal)
    return start, start + len(literal)


GRPO = fixture("grpo_functional.sh")
ERROR = "train/token_mult_prob_error"


@pytest.mark.parametrize(
    ("needle", "literal", "metric", "op", "kind", "aggregation", "last_steps", "step"),
    [
        (
            "error\"]) < 1.05'",
            "1.05",
            "train/token_mult_prob_error",
            "<",
            "limit",
            "median",
            None,
            None,
        ),
        ("}'] < 1.1\"", "1.1", "train/token_mult_prob_error", "<", "limit", "last", None, None),
        ('loss"])) < 0.04', "0.04", "train/loss", "<", "limit", "median", None, None),
        ('["1"] > 0.0', "0.0", "train/loss", ">", "limit", None, None, 1),
        ("-1) < 25'", "25", "timing/train/total_step_time", "<", "limit", "mean", None, None),
        ("'0.3 <=", "0.3", "train/reward", ">=", "limit", "mean", 5, None),
        ("<= 0.95'", "0.95", "train/reward", "<=", "limit", "mean", 5, None),
        ("== 64'", "64", "train/num_valid_samples", "==", "reference", "max", None, None),
        ("mem_gb\"]) < 70'", "70", "ray/node.0.gpu.0.mem_gb", "<", "limit", "max", None, None),
    ],
)
def test_expression_gates_in_a_functional_test_script(
    needle: str,
    literal: str,
    metric: str,
    op: str,
    kind: str,
    aggregation: str | None,
    last_steps: int | None,
    step: int | None,
) -> None:
    start, end = at(GRPO, needle, literal)
    (gate,) = [g for g in parse_shell("tests/functional/grpo.sh", GRPO).gates if g.start == start]
    assert (gate.end, gate.literal, gate.value) == (end, literal, float(literal))
    assert (gate.metric, gate.op, gate.kind) == (metric, op, kind)
    assert (gate.aggregation, gate.last_steps) == (aggregation, last_steps)
    assert [p.step for p in gate.points] == ([step] if step is not None else [])
    assert gate.line == line_of(GRPO, needle)
    assert " " in gate.name and literal not in gate.name.split()[-1]
    if kind == "reference":
        assert gate.tolerance is not None and gate.tolerance.margin(gate.value) == 0


def test_functional_script_gate_set_ignore_marker_and_hints() -> None:
    parsed = parse_shell("tests/functional/grpo.sh", GRPO)
    assert len(parsed.gates) == 9
    ignored = [(g.literal, g.ignored) for g in parsed.gates if g.ignored]
    mem_line = line_of(GRPO, "mem_gb")
    assert ignored == [("70", f"marked '# threshold-bot: ignore' on line {mem_line}")]
    hints = {u.name: u for u in parsed.unbound}
    assert hints["train/kl_min"].literal == "-1e-3"
    assert "cannot be read" in hints["train/kl_min"].reason
    assert hints["train/loss"].literal == "20" and "len(" in hints["train/loss"].reason
    assert parsed.source is not None and parsed.source.project == "grpo-functional"
    names = [g.name for g in parsed.gates]
    assert len(set(names)) == len(names)
    assert 'median(data["train/token_mult_prob_error"]) <' in names


def test_checks_inside_a_quoted_command_map_through_escapes() -> None:
    text = fixture("nested_check_cmd.sh")
    parsed = parse_shell("ci/dapo.sh", text)
    assert [(g.metric, g.op, g.literal, [p.step for p in g.points]) for g in parsed.gates] == [
        ("train/token_mult_prob_error", "<", "1.1", []),
        ("validation/accuracy", ">", "0.31", [40]),
    ]
    for gate in parsed.gates:
        assert text[gate.start : gate.end] == gate.literal
    assert parsed.unbound == ()  # the command string itself is no hint
    edited = replace_literals(text, [(parsed.gates[1], "0.33")])
    assert edited == text.replace("] > 0.31", "] > 0.33")
    again = parse_shell("ci/dapo.sh", edited)
    assert [g.name for g in again.gates] == [g.name for g in parsed.gates]
    assert again.gates[1].value == 0.33


def test_literal_asserts_beside_variable_asserts_and_in_a_heredoc() -> None:
    text = fixture("asserts_mixed.sh")
    parsed = parse_shell("ci/gsm8k_async.sh", text)
    assert [(g.name, g.metric, g.op, g.literal) for g in parsed.gates] == [
        ("EVAL_ACC_MIN_VALUE", "eval/all/avg_score", ">=", "0.55"),
        ("TRAIN_ACC_MIN_VALUE", "loss/avg_final_rewards", ">=", "0.5"),
        ("eval/lag_steps >=", "eval/lag_steps", ">=", "0"),
        ("timing/eval <=", "timing/eval", "<=", "5"),
        ("policy/grad_norm <", "policy/grad_norm", "<", "12.5"),
        ("policy/entropy >", "policy/entropy", ">", "0.2"),
        ('summary["eval/pass_at_8"] >=', "eval/pass_at_8", ">=", "0.81"),
    ]
    for gate in parsed.gates:
        assert text[gate.start : gate.end] == gate.literal
    assert parsed.source is not None and parsed.source.project == "gsm8k_async_ci"


@pytest.mark.parametrize(
    ("line", "gates"),
    [
        ("check \"data['x'] < 1.5\"", [("x", "1.5")]),
        ("check $'data[\"x\"] < 1.5'", [("x", "1.5")]),
        ("check $'data[\\'x\\'] < 1.5'", [("x", "1.5")]),
        ("check $'data[\"x\"] < \\x31.5'", []),  # the literal is written through an escape
        ('check "data[\\"x\\"] < 1.5"', [("x", "1.5")]),
        ("check \"data['x'] < 1\\.5\"", []),  # \. stays: not a number
        ("check 'data[\"x\"] < 1.5' # data['y'] < 2", [("x", "1.5")]),
        ("check data[x]\\<1.5", []),  # unquoted
        ('echo "python>=3.10" \'NR > 1\' "$X >= 2"', []),
    ],
)
def test_expression_quoting(line: str, gates: list[tuple[str, str]]) -> None:
    text = f"#!/bin/sh\n{line}\n"
    parsed = parse_shell("t.sh", text)
    assert [(g.metric, g.literal) for g in parsed.gates] == gates
    for gate in parsed.gates:
        assert text[gate.start : gate.end] == gate.literal and gate.line == 2


def test_ignore_marker_on_the_assignment_or_the_comparison_line() -> None:
    text = (
        "A=0.5  # placeholder until tuned; threshold-bot: ignore\n"
        "B=0.6\n"
        'run --asserts "a/x >= $A" "b/y >= $B"\n'
        'run --asserts "c/z <= $B"  # threshold-bot: ignore\n'
        "echo '# threshold-bot: ignore' 'data[\"q\"] < 3'\n"
        "C=0.7 # threshold-bot: ignore\n"
    )
    parsed = parse_shell("t.sh", text)
    got = {(g.name, g.metric): g.ignored for g in parsed.gates}
    assert got == {
        ("A", "a/x"): "marked '# threshold-bot: ignore' on line 1",
        ("B", "b/y"): "",
        ("B", "c/z"): "marked '# threshold-bot: ignore' on line 4",
        ('data["q"] <', "q"): "",  # the marker is inside a string, not a comment
    }
    assert [u.name for u in parsed.unbound] == []  # C's hint is dropped: marked


def test_huge_and_deep_expression_strings_are_bounded() -> None:
    deep = "(" * 5000 + 'data["x"]' + ")" * 5000 + " < 1"
    long = " and ".join(f'data["m{i}"] < {i}' for i in range(20_000))
    nested = "(" * 900 + 'data["x"]' + ")" * 900 + " < 1"  # short enough, too deep
    text = f"check '{deep}'\ncheck '{long}' '{nested}'\ncheck 'data[\"ok\"] < 2'\n"
    began = time.process_time()
    parsed = parse_shell("t.sh", text)
    assert time.process_time() - began < 2
    assert [(g.metric, g.literal) for g in parsed.gates] == [("ok", "2")]
    inner = "'data[\"x\"] < 1'"
    for pad, read in ((MAX_NESTED_CHARS - len(inner), True), (MAX_NESTED_CHARS, False)):
        command = f'CMD="{"a" * pad}{inner}"\n'.replace('"x"', '\\"x\\"')
        assert bool(parse_shell("t.sh", command).gates) is read


# --------------------------------------------------------------------------- hints


def test_threshold_variables_passed_to_programs_are_hints_with_config() -> None:
    text = fixture("convergence_args.sh")
    path = "tests/convergence/run_125m.sh"
    hints = {u.name: u for u in parse_shell(path, text).unbound}
    expected = {
        "LOSS_THRESHOLD": "passed to check_convergence.py as a positional argument on line 12",
        "EXPECTED_TOKENS_PER_SEC": (
            "passed to check_throughput.py as --min-tokens-per-sec on line 13"
        ),
        "EVAL_ACC_MIN_VALUE": "passed to tests.check_eval as eval.min_accuracy=… on line 14",
        "GRAD_NORM_MAX": "used in a shell test on line 15",
    }
    for name, use in expected.items():
        assert hints[name].reason == f"{use}, not in a '<metric> <op> ${name}' comparison"
        assert hints[name].config.startswith("# .github/threshold-bot.yml\nfiles:\n")
        assert f"key: {name}\n" in hints[name].config
    # not threshold-like, never used, or marked: today's reasons, no config
    assert hints["MAX_STEPS"].reason.endswith("(used elsewhere in the file)")
    assert hints["OLD_LOSS_THRESHOLD"].reason.endswith("(never used in the file)")
    assert hints["MAX_STEPS"].config == hints["OLD_LOSS_THRESHOLD"].config == ""
    assert "ACC_TOL" not in hints


def test_seed_script_hints_keep_their_reasons() -> None:
    unbound = {u.name: u for u in parse_shell(PATH, SCRIPT).unbound}
    assert unbound["NUM_GPUS"].config == "" and unbound["LR"].config == ""
    assert unbound["OLD_ACC_MIN_VALUE"].config == ""  # never used: nothing to declare


def test_config_ignore_lists_expression_gates_by_name() -> None:
    text = fixture("asserts_mixed.sh")
    config = parse_config(
        "files:\n  - path: ci/*.sh\n    ignore: ['timing/eval <=', TRAIN_ACC_MIN_VALUE]\n"
    )
    found = find_gates("ci/gsm8k_async.sh", text, config)
    assert found is not None
    assert sorted(g.name for g in found.gates if g.ignored) == [
        "TRAIN_ACC_MIN_VALUE",
        "timing/eval <=",
    ]
    assert all(g.source is not None for g in found.gates)  # the script's W&B project
