"""Zero-config gate discovery in shell scripts (contract section 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.shell import is_shell_script, parse_shell
from bot.core.thresholds.shell_lexer import Word, lex

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
