"""Rewriting gate literals in place, and formatting new literals."""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.models import Gate, Span
from bot.core.thresholds.edit import SpanEdit, format_literal, replace_literals, replace_spans
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.shell.script import parse_shell
from bot.core.thresholds.structured.declared import parse_structured

DATA = Path(__file__).resolve().parent / "data"
SCRIPT = (DATA / "nightly_gsm8k.sh").read_text(encoding="utf-8")


def gates_of(path: str, text: str, decl: FileDecl) -> list[Gate]:
    """The gates ``decl`` declares in the file, without their declarations' indices."""
    return [gate for _, gate in parse_structured(path, text, decl, RepoConfig())]


@pytest.mark.parametrize(
    ("value", "decimals", "expected"),
    [
        (0.5, 2, "0.50"),
        (283.0, 0, "283"),
        (-0.019, 3, "-0.019"),
        (1e-7, 8, "0.00000010"),
        (1.5e16, 0, "15000000000000000"),
        (-0.0001, 2, "0.00"),
        (-0.0, 0, "0"),
        (12.25, 1, "12.2"),
    ],
)
def test_format_literal(value: float, decimals: int, expected: str) -> None:
    assert format_literal(value, decimals) == expected
    assert "e" not in expected.lower()


@pytest.mark.parametrize(("value", "decimals"), [(math.nan, 2), (math.inf, 0), (1.0, -1)])
def test_format_literal_rejects(value: float, decimals: int) -> None:
    with pytest.raises(ValueError):
        format_literal(value, decimals)


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_rebaseline_realistic_script_touches_only_literals() -> None:
    parsed = parse_shell("ci/nightly.sh", SCRIPT)
    gates = {(g.name, g.metric): g for g in parsed.gates}
    acc = gates[("EVAL_ACC_MIN_VALUE", "eval/all/avg_score")]
    acc2 = gates[("EVAL_ACC_MIN_VALUE", "eval/math500/avg_score")]
    tokens = gates[("AVG_NUM_TOKENS_MAX_VALUE", "generate/avg_num_tokens")]
    after = replace_literals(SCRIPT, [(acc, "0.50"), (acc2, "0.50"), (tokens, "290")])
    assert changed_lines(SCRIPT, after) == [
        "-export EVAL_ACC_MIN_VALUE=0.56",
        '-export AVG_NUM_TOKENS_MAX_VALUE="283"',
        "+export EVAL_ACC_MIN_VALUE=0.50",
        '+export AVG_NUM_TOKENS_MAX_VALUE="290"',
    ]
    reparsed = {(g.name, g.metric): g.value for g in parse_shell("ci/nightly.sh", after).gates}
    assert reparsed[("EVAL_ACC_MIN_VALUE", "eval/all/avg_score")] == 0.50
    assert reparsed[("AVG_NUM_TOKENS_MAX_VALUE", "generate/avg_num_tokens")] == 290


def test_conflicts_stale_files_and_bad_literals() -> None:
    parsed = parse_shell("ci/nightly.sh", SCRIPT)
    acc, acc2 = (g for g in parsed.gates if g.name == "EVAL_ACC_MIN_VALUE")
    with pytest.raises(ThresholdFileError, match="conflicting new values"):
        replace_literals(SCRIPT, [(acc, "0.50"), (acc2, "0.51")])
    with pytest.raises(ThresholdFileError, match="the file changed") as err:
        replace_literals(SCRIPT.replace("=0.56", "=0.57"), [(acc, "0.50")])
    assert err.value.line == acc.line
    with pytest.raises(ThresholdFileError, match="not a number"):
        replace_literals(SCRIPT, [(acc, "1e-3")])
    overlapping = acc.model_copy(
        update={"end": acc.end + 1, "literal": SCRIPT[acc.start : acc.end + 1]}
    )
    with pytest.raises(ThresholdFileError, match="overlapping"):
        replace_literals(SCRIPT, [(acc, "0.50"), (overlapping, "0.5")])
    assert replace_literals(SCRIPT, []) == SCRIPT


@pytest.mark.parametrize("fmt", ["yaml", "json", "toml"])
def test_structured_edit_keeps_format(fmt: str) -> None:
    text = (DATA / f"eval_thresholds.{fmt}").read_text(encoding="utf-8")
    decl = FileDecl(
        path="x",
        gates=(
            GateDecl(key="gsm8k.eval.acc_min", metric="a", op=">="),
            GateDecl(key="gsm8k.eval.tokens_max", metric="t", op="<="),
            GateDecl(key="math500.1.max", metric="l", op="<="),
        ),
    )
    path = f"eval_thresholds.{fmt}"
    acc, tokens, length = gates_of(path, text, decl)
    after = replace_literals(text, [(acc, "0.50"), (tokens, "290"), (length, "-0.020")])
    reparsed = gates_of(path, after, decl)
    assert [g.value for g in reparsed] == [0.50, 290.0, -0.020]
    assert after.count("\n") == text.count("\n")
    assert len(changed_lines(text, after)) == 2 * len({acc.line, tokens.line, length.line})


@st.composite
def rewrites(draw: st.DrawFn) -> tuple[str, list[tuple[Gate, str]]]:
    """Random text with random non-overlapping literal spans and random new literals."""
    alphabet = st.characters(codec="utf-8", exclude_categories=("Cs",))
    chunks = draw(st.lists(st.text(alphabet, max_size=30), min_size=1, max_size=8))
    literals = draw(
        st.lists(
            st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
            min_size=len(chunks) - 1,
            max_size=len(chunks) - 1,
        )
    )
    text, gates = chunks[0], []
    for i, (value, chunk) in enumerate(zip(literals, chunks[1:], strict=True)):
        literal = format_literal(value, draw(st.integers(0, 6)))
        start = len(text)
        text += literal + chunk
        gate = Gate(
            name=f"G{i}",
            file="f.sh",
            line=1,
            metric="m",
            op=">=",
            value=float(literal),
            literal=literal,
            start=start,
            end=start + len(literal),
        )
        new = format_literal(draw(st.floats(-1e6, 1e6)), draw(st.integers(0, 4)))
        gates.append((gate, new))
    chosen = draw(st.lists(st.sampled_from(gates), unique_by=lambda e: e[0].name)) if gates else []
    return text, chosen


@settings(max_examples=200, deadline=None)
@given(rewrites())
def test_rewrite_keeps_every_other_character(case: tuple[str, list[tuple[Gate, str]]]) -> None:
    text, edits = case
    after = replace_literals(text, edits)
    # walk both texts: outside the edited spans they are identical, inside they hold the new text
    spans = sorted((g.start, g.end, new) for g, new in edits)
    i = j = 0
    for start, end, new in spans:
        assert after[j : j + start - i] == text[i:start]
        j += start - i
        assert after[j : j + len(new)] == new
        i, j = end, j + len(new)
    assert after[j:] == text[i:]


def test_replace_spans_edits_any_literal_and_names_it() -> None:
    text = "acc_ref: 0.62\nrtol: 0.05  # relative\nmin_al: 3.25\n"

    def at(literal: str) -> Span:
        start = text.index(literal)
        return Span(
            literal=literal,
            start=start,
            end=start + len(literal),
            line=text.count("\n", 0, start) + 1,
        )

    ref, rtol, low = at("0.62"), at("0.05"), at("3.25")
    after = replace_spans(
        "ci/acc.yaml",
        text,
        [
            SpanEdit(rtol, "0.12", "ACC tolerance"),
            SpanEdit(ref, "0.58", "ACC"),
            SpanEdit(low, "3.10", "ACC coupled min_al"),
        ],
    )
    assert after == "acc_ref: 0.58\nrtol: 0.12  # relative\nmin_al: 3.10\n"
    stale = re.escape("ACC tolerance: expected '0.05' here")
    with pytest.raises(ThresholdFileError, match=stale) as err:
        replace_spans(
            "ci/acc.yaml", text.replace("0.05", "0.06"), [SpanEdit(rtol, "0.12", "ACC tolerance")]
        )
    assert (err.value.path, err.value.line) == ("ci/acc.yaml", 2)
    with pytest.raises(ThresholdFileError, match="ACC coupled min_al: 'nan' is not a number"):
        replace_spans("ci/acc.yaml", text, [SpanEdit(low, "nan", "ACC coupled min_al")])
    conflict = re.escape("conflicting new values '0.12' and '0.13'")
    with pytest.raises(ThresholdFileError, match=conflict):
        replace_spans(
            "ci/acc.yaml", text, [SpanEdit(rtol, "0.12", "A"), SpanEdit(rtol, "0.13", "B")]
        )
    wide = Span(literal="0.62\nrtol", start=ref.start, end=ref.start + 9, line=1)
    with pytest.raises(ThresholdFileError, match="overlapping"):
        replace_spans(
            "ci/acc.yaml", text, [SpanEdit(wide, "1", "A"), SpanEdit(at("rtol"), "2", "B")]
        )
