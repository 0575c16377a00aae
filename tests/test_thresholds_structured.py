"""Gates declared in the config for YAML / JSON / TOML files, by key path or pattern: exact
literal spans, metrics, kinds, tolerances, coupled literals, placeholders, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.config import FileDecl, GateDecl, RepoConfig, parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import SpanEdit, replace_spans
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.declared import parse_structured
from bot.core.thresholds.structured.located import locate
from bot.core.thresholds.structured.patterns import parse_pattern
from bot.core.thresholds.structured.tree import Scalar

DATA = Path(__file__).resolve().parent / "data"


def gates_of(path: str, text: str, decl: FileDecl) -> list[Gate]:
    """The gates ``decl`` declares in the file, without their declarations' indices."""
    return [gate for _, gate in parse_structured(path, text, decl, RepoConfig())]


# key path -> (text around the literal in each format, the literal)
CASES = {
    "yaml": [
        ("gsm8k.eval.acc_min", "acc_min: 0.56", "0.56"),
        ("gsm8k.eval.tokens_max", 'tokens_max: "283"', "283"),
        ("gsm8k.loss.clipfrac_max", "clipfrac_max: 4.0e-2", "4.0e-2"),
        ("math500.0.min", "min: .45", ".45"),
        ("math500.1.max", "max: -0.019", "-0.019"),
        ('"dotted.key".min', "min: 1_000", "1_000"),
        ("flow.a", "a: 0.25", "0.25"),
        ("flow.b.1", "2.5]", "2.5"),
    ],
    "json": [
        ("gsm8k.eval.acc_min", '"acc_min": 0.56', "0.56"),
        ("gsm8k.eval.tokens_max", '"tokens_max": "283"', "283"),
        ("gsm8k.loss.clipfrac_max", '"clipfrac_max": 4.0e-2', "4.0e-2"),
        ("math500.0.min", '"min": 0.45', "0.45"),
        ("math500.1.max", '"max": -0.019', "-0.019"),
        ('"dotted.key".min', '"min": 1000', "1000"),
        ('escaped "key".min', '"min": 1E3', "1E3"),
    ],
    "toml": [
        ("gsm8k.eval.acc_min", "acc_min = 0.56", "0.56"),
        ("gsm8k.eval.tokens_max", "tokens_max = 283", "283"),
        ("gsm8k.loss.clipfrac_max", "loss.clipfrac_max = 4.0e-2", "4.0e-2"),
        ("math500.0.min", "min = 0.45", "0.45"),
        ("math500.1.max", "max = -0.019", "-0.019"),
        ('"dotted.key".min', "min = 1_000", "1_000"),
        ('"dotted.key".limits.low', "low = +0.5", "+0.5"),
        ('"dotted.key".limits.high.1', "2.5 ]", "2.5"),
    ],
}
PARAMS = [(fmt, *case) for fmt, cases in CASES.items() for case in cases]


def sample(fmt: str) -> tuple[str, str]:
    path = f"ci/eval_thresholds.{fmt}"
    return path, (DATA / f"eval_thresholds.{fmt}").read_text(encoding="utf-8")


@pytest.mark.parametrize(("fmt", "key", "anchor", "literal"), PARAMS)
def test_declared_gate_exact_span(fmt: str, key: str, anchor: str, literal: str) -> None:
    path, text = sample(fmt)
    decl = FileDecl(path="ci/*", gates=(GateDecl(key=key, metric="eval/x", op=">="),))
    (gate,) = gates_of(path, text, decl)
    start = text.index(anchor) + anchor.index(literal)
    assert (gate.start, gate.end) == (start, start + len(literal))
    assert gate.literal == text[gate.start : gate.end] == literal
    assert gate.line == text[:start].count("\n") + 1
    assert gate.value == float(literal.replace("_", ""))
    assert (gate.name, gate.file, gate.metric, gate.op) == (key, path, "eval/x", ">=")


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_gates_in_declaration_order_with_names(fmt: str) -> None:
    path, text = sample(fmt)
    decls = (
        GateDecl(key="math500.1.max", metric="len", op="<=", name="LEN_MAX"),
        GateDecl(key="gsm8k.eval.acc_min", metric="eval/all/avg_score", op=">="),
    )
    parsed = parse_structured(path, text, FileDecl(path=path, gates=decls), RepoConfig())
    assert [(i, g.name, g.metric, g.op, g.value) for i, g in parsed] == [
        (0, "LEN_MAX", "len", "<=", -0.019),
        (1, "gsm8k.eval.acc_min", "eval/all/avg_score", ">=", 0.56),
    ]
    assert all(g.file == path and g.kind == "limit" for _, g in parsed)


@pytest.mark.parametrize("fmt", sorted(CASES))
@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("gsm8k.eval.nope", "key 'nope' not found under gsm8k.eval"),
        ("math500.7.min", "key '7' not found under math500"),
        ("gsm8k.eval", "not a number"),
        ("gsm8k.eval.acc_min.x", "gsm8k.eval.acc_min is a single value"),
        ("not_a_number", "'auto' is not a number"),
    ],
)
def test_missing_or_non_numeric(fmt: str, key: str, message: str) -> None:
    path, text = sample(fmt)
    decl = FileDecl(path=path, gates=(GateDecl(key=key, metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match=message) as err:
        gates_of(path, text, decl)
    assert err.value.path == path
    assert str(err.value).startswith(f"{path}:")
    if "auto" in message:  # the value exists: its line is named
        assert err.value.line == text[: text.index("auto")].count("\n") + 1


@pytest.mark.parametrize(
    ("path", "text", "line"),
    [
        ("a.yaml", "a: 1\nb: [1, 2\nc: 3\n", 3),
        ("a.json", '{"a": 1,\n "b": }', 2),
        ("a.toml", "a = 1\nb = = 2\n", 2),
    ],
)
def test_invalid_file_names_line(path: str, text: str, line: int) -> None:
    decl = FileDecl(path=path, gates=(GateDecl(key="a", metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match="not valid") as err:
        gates_of(path, text, decl)
    assert err.value.line == line


def test_unsupported_extension_and_bad_key_path() -> None:
    decl = FileDecl(path="x", gates=(GateDecl(key="a", metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match=r"need a \.yaml"):
        gates_of("ci/x.ini", "a=1", decl)
    bad = FileDecl(path="x", gates=(GateDecl(key='a."b', metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match="invalid key path"):
        gates_of("x.yaml", "a: 1\n", bad)


def test_plain_key_paths_parse_as_exact_patterns() -> None:
    assert [s.text for s in parse_pattern("a.b.0").steps] == ["a", "b", "0"]
    assert [s.text for s in parse_pattern('"a.b".c').steps] == ["a.b", "c"]
    assert parse_pattern('"a.b".c').exact and not parse_pattern("a.*").exact
    with pytest.raises(ValueError):
        parse_pattern("a..b")


@pytest.mark.parametrize(
    ("path", "text"),
    [("a.yaml", "flag: true\n"), ("a.json", '{"flag": true}'), ("a.toml", "flag = true\n")],
)
def test_boolean_is_not_a_number(path: str, text: str) -> None:
    decl = FileDecl(path=path, gates=(GateDecl(key="flag", metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match="not a number"):
        gates_of(path, text, decl)


# --------------------------------------------------------------------------- patterns

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gates" / "structured"
SPEC_DECODE = (FIXTURES / "spec_decode_acceptance.yaml").read_text(encoding="utf-8")
LM_EVAL = (FIXTURES / "lm_eval_llama3_fp8.yaml").read_text(encoding="utf-8")


def found(path: str, text: str, config_text: str) -> ThresholdFile:
    """``find_gates`` with the config as a repository writes it."""
    result = find_gates(path, text, parse_config(config_text))
    assert result is not None
    return result


def entries(text: str) -> dict[str, dict[str, str]]:
    """The spec-decoding fixture's entries as written: test -> key -> literal."""
    out: dict[str, dict[str, str]] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(("#", " ")):
            current = line.rstrip(":")
            out[current] = {}
        elif line.startswith("  "):
            key, _, rest = line.strip().partition(": ")
            out[current][key] = rest.split()[0]
    return out


SPEC_CONFIG = """
files:
  - path: ci/spec_decode_acceptance.yaml
    gates:
      - key: "*.min_al"
        metric: "{1}/acceptance_length"
        op: ">="
        coupled: [{key: ref_al, factor: 1.0526}]
"""


def test_one_pattern_declares_every_entry_with_its_coupled_literal() -> None:
    result = found("ci/spec_decode_acceptance.yaml", SPEC_DECODE, SPEC_CONFIG)
    written = entries(SPEC_DECODE)
    assert len(written) == 25
    assert [g.metric for g in result.gates] == [f"{t}/acceptance_length" for t in written]
    assert [g.literal for g in result.gates] == [e["min_al"] for e in written.values()]
    assert {(g.kind, g.op, g.pattern) for g in result.gates} == {("limit", ">=", "files.0.gates.0")}
    for gate in result.gates:
        assert SPEC_DECODE[gate.start : gate.end] == gate.literal
        assert gate.line == SPEC_DECODE[: gate.start].count("\n") + 1
        (coupled,) = gate.coupled
        assert coupled.factor == 1.0526
        assert SPEC_DECODE[coupled.span.start : coupled.span.end] == coupled.span.literal
        assert coupled.name == gate.name.replace("min_al", "ref_al")
    assert result.gates[1].name == '"TestLlama3_8B::test_eagle3[tp2]".min_al'  # quoted: brackets


def test_coupled_literals_off_the_factor_are_noted() -> None:
    result = found("ci/spec_decode_acceptance.yaml", SPEC_DECODE, SPEC_CONFIG)
    off = set()
    for test, entry in entries(SPEC_DECODE).items():
        expected = 1.0526 * float(entry["min_al"])
        decimals = len(entry["ref_al"].split(".")[1])
        if abs(float(entry["ref_al"]) - expected) > 0.5 * 10**-decimals + 1e-9:
            off.add(test)
    assert off and len(off) < 25  # the fixture has both
    noted = {note.split(": ", 1)[1].split(".ref_al")[0].strip('"') for note in result.notes}
    assert noted == off
    tripwire = next(n for n in result.notes if "TestLlama4Scout::test_eagle3[dynamic]" in n)
    line = SPEC_DECODE[: SPEC_DECODE.index("ref_al: 1.012")].count("\n") + 1
    assert tripwire.startswith(f"ci/spec_decode_acceptance.yaml:{line}: ")
    assert "is 1.012, not 1.0526 x 1.001" in tripwire


def test_rebaseline_of_pattern_gates_and_coupled_literals_touches_only_them() -> None:
    result = found("ci/spec_decode_acceptance.yaml", SPEC_DECODE, SPEC_CONFIG)
    first, second = result.gates[:2]
    edits = [
        SpanEdit(first.span, "2.70", first.name),
        SpanEdit(first.coupled[0].span, "2.84", first.coupled[0].name),
        SpanEdit(second.span, "2.61", second.name),
    ]
    after = replace_spans(first.file, SPEC_DECODE, edits)
    before_lines, after_lines = SPEC_DECODE.splitlines(), after.splitlines()
    changed = [(a, b) for a, b in zip(before_lines, after_lines, strict=True) if a != b]
    assert changed == [
        ("  ref_al: 2.81", "  ref_al: 2.84"),
        ("  min_al: 2.67", "  min_al: 2.70"),
        ("  min_al: 2.65", "  min_al: 2.61"),
    ]
    again = found("ci/spec_decode_acceptance.yaml", after, SPEC_CONFIG)
    assert [g.value for g in again.gates[:2]] == [2.70, 2.61]


def test_placeholders_in_place_and_in_the_config() -> None:
    result = found("ci/spec_decode_acceptance.yaml", SPEC_DECODE, SPEC_CONFIG)
    ignored = {g.name: g.ignored for g in result.gates if g.ignored}
    assert ignored == {
        "TestKimiK2::test_mtp.min_al": "marked '# threshold-bot: ignore' in the file"
    }
    config = SPEC_CONFIG.replace('op: ">="', 'op: ">="\n        ignore: true')
    result = found("ci/spec_decode_acceptance.yaml", SPEC_DECODE, config)
    assert {g.ignored for g in result.gates} == {"declared 'ignore' in the config"}
    # a placeholder that is not even a number gives no gate (and no error)
    text = SPEC_DECODE.replace("min_al: 3.10  #", "min_al: TBD  #")
    result = found("ci/spec_decode_acceptance.yaml", text, SPEC_CONFIG)
    assert len(result.gates) == 24


LM_CONFIG = """
tolerance: {rel: 0.08}
files:
  - path: "ci/lm_eval/*.yaml"
    kind: reference
    tolerance: {rel: rtol}
    gates:
      - {key: "tasks[*].metrics[*].value", metric: "{..name}/{.name}"}
"""


def test_lm_eval_accuracies_with_tolerance_keys_beside_or_at_the_top() -> None:
    result = found("ci/lm_eval/llama3.yaml", LM_EVAL, LM_CONFIG)
    assert [(g.metric, g.literal, g.kind, g.op) for g in result.gates] == [
        ("gsm8k/exact_match,strict-match", "0.762", "reference", "=="),
        ("gsm8k/exact_match,flexible-extract", "0.771", "reference", "=="),
        ("mmlu_pro/exact_match,custom-extract", "0.412", "reference", "=="),
    ]
    top = LM_EVAL.index("rtol: 0.05") + len("rtol: ")
    beside = LM_EVAL.index("rtol: 0.1") + len("rtol: ")
    spans = [g.tolerance.rel_span if g.tolerance else None for g in result.gates]
    assert [(s.start, s.literal) for s in spans if s] == [
        (top, "0.05"),
        (top, "0.05"),
        (beside, "0.1"),
    ]
    assert [g.tolerance.rel for g in result.gates if g.tolerance] == [0.05, 0.05, 0.1]
    assert result.gates[0].name == "tasks[name=gsm8k].metrics[name=exact_match,strict-match].value"


@pytest.mark.parametrize(
    ("sides", "op"), [("lower", ">="), ("upper", "<="), ("both", "=="), (None, "==")]
)
def test_sides_give_a_reference_its_operator(sides: str | None, op: str) -> None:
    line = f", sides: {sides}" if sides else ""
    config = LM_CONFIG.replace('{.name}"}', '{.name}"' + line + "}")
    result = found("ci/lm_eval/llama3.yaml", LM_EVAL, config)
    assert {g.op for g in result.gates} == {op}


def test_limit_and_reference_kinds_by_pattern_and_a_numeric_tolerance() -> None:
    config = """
files:
  - path: ci/perf.yaml
    gates:
      - {key: "*.*_min", metric: "{1}/{2}", op: ">="}
      - {key: "*.*_max", metric: "{1}/{2}", op: "<="}
      - {key: "*.expected_*", metric: "{1}/{2}", kind: reference, tolerance: {abs: 0.5}}
"""
    text = "llama:\n  acc_min: 0.61\n  ttft_ms_max: 180\n  expected_loss: 1.92\n"
    result = found("ci/perf.yaml", text, config)
    assert [(g.metric, g.op, g.kind, g.literal) for g in result.gates] == [
        ("llama/acc", ">=", "limit", "0.61"),
        ("llama/ttft_ms", "<=", "limit", "180"),
        ("llama/loss", "==", "reference", "1.92"),
    ]
    tolerance = result.gates[2].tolerance
    assert tolerance is not None and (tolerance.abs, tolerance.abs_span) == (0.5, None)


def test_json_and_toml_patterns_with_exact_spans() -> None:
    json_text = (FIXTURES / "eval_gates.json").read_text(encoding="utf-8")
    config = """
files:
  - path: ci/eval_gates.json
    gates:
      - {key: "checks[op=>=].threshold", metric_from: metric, op: ">="}
      - {key: "checks[op=<=].threshold", metric_from: metric, op: "<="}
"""
    result = found("ci/eval_gates.json", json_text, config)
    assert [(g.metric, g.op, g.literal) for g in result.gates] == [
        ("eval/alpaca_eval_lc_winrate", ">=", "22.5"),
        ("train/final_loss", "<=", "0.58"),
    ]
    assert all(json_text[g.start : g.end] == g.literal for g in result.gates)
    toml_text = (FIXTURES / "diffusion_regression.toml").read_text(encoding="utf-8")
    config = """
files:
  - path: ci/regression.toml
    gates:
      - {key: "*.max", metric: "eval/{1}", op: "<="}
      - {key: "golden.expected_*", metric: "eval/{1}", kind: reference, tolerance: {rel: rtol}}
"""
    result = found("ci/regression.toml", toml_text, config)
    assert [(g.metric, g.literal) for g in result.gates] == [
        ("eval/fid", "14.6"),
        ("eval/lpips", "0.1875"),
    ]
    rel = result.gates[1].tolerance.rel_span if result.gates[1].tolerance else None
    assert rel is not None and toml_text[rel.start : rel.end] == "0.02"
    after = replace_spans(
        "ci/regression.toml", toml_text, [SpanEdit(result.gates[0].span, "15.1", "f")]
    )
    assert after == toml_text.replace("max = 14.6", "max = 15.1")


def test_spans_are_exact_in_non_ascii_text() -> None:
    text = (
        "# Schwellenwerte für die nächtliche Auswertung — ✓ 🚀\n"
        "modèle_été:\n  genauigkeit_min: 0.71  # ±0.01 höchstens\n"
        "模型:\n  准确率_min: 0.65\n"
    )
    config = 'files: [{path: ci/t.yaml, gates: [{key: "*.*_min", metric: "{1}/{2}", op: ">="}]}]'
    result = found("ci/t.yaml", text, config)
    assert [(g.metric, g.literal) for g in result.gates] == [
        ("modèle_été/genauigkeit", "0.71"),
        ("模型/准确率", "0.65"),
    ]
    for gate in result.gates:
        assert text[gate.start : gate.end] == gate.literal
        assert gate.line == text[: gate.start].count("\n") + 1
    after = replace_spans(
        "ci/t.yaml", text, [SpanEdit(g.span, "0.60", g.name) for g in result.gates]
    )
    assert after == text.replace("0.71", "0.60").replace("0.65", "0.60")


# --------------------------------------------------------------------------- bad cases


@pytest.mark.parametrize(
    ("gate", "text", "message"),
    [
        (
            '{key: "models.*.min_al", metric: "{1}", op: ">="}',
            "models: {}\n",
            "ci/t.yaml: files.1.gates.0: pattern 'models.*.min_al' matches nothing in ci/t.yaml",
        ),
        (
            '{key: "*.ref", metric: "{1}", kind: reference, tolerance: {rel: rtol}}',
            "a:\n  ref: 0.5\n",
            "ci/t.yaml:2: files.1.gates.0: tolerance key 'rtol' is not beside a.ref "
            "nor in a mapping enclosing it",
        ),
        (
            '{key: "*.min", metric: "{1}", op: ">="}',
            "a:\n  min: 0.5\nb:\n  min: auto\n",
            "ci/t.yaml:4: b.min: 'auto' is not a number",
        ),
        (
            '{key: "*.min", metric: "{1}", op: ">="}',
            "a:\n  min: .nan\n",
            "ci/t.yaml:2: a.min: '.nan' is not a finite number",
        ),
        (
            '{key: "*.min", metric: "{1}/{2}", op: ">="}',
            "a:\n  min: 0.5\n",
            "ci/t.yaml: files.1.gates.0: metric: {2} in '{1}/{2}': the pattern has 1 wildcard(s)",
        ),
        (
            '{key: "*.min", metric: "{.name}", op: ">="}',
            "a:\n  min: 0.5\n",
            "ci/t.yaml:2: files.1.gates.0: a.min: no field 'name' beside the literal",
        ),
        (
            '{key: "*.min", metric: "{1}", name: MIN, op: ">="}',
            "a:\n  min: 0.5\nb:\n  min: 0.6\n",
            "ci/t.yaml: files.1.gates.0: name 'MIN' is the same for 2 literals",
        ),
        (
            '{key: "*.min", metric: "{1}", op: ">=", coupled: [{key: ref, factor: 2}]}',
            "a:\n  min: 0.5\n",
            "ci/t.yaml:2: files.1.gates.0: coupled key 'ref' is not beside a.min",
        ),
    ],
    ids=[
        "no-match",
        "no-tolerance-key",
        "not-a-number",
        "nan",
        "capture",
        "field",
        "name",
        "coupled",
    ],
)
def test_pattern_errors_name_the_declaration_and_the_line(
    gate: str, text: str, message: str
) -> None:
    config = f"files:\n  - path: other.yaml\n  - path: ci/t.yaml\n    gates: [{gate}]\n"
    with pytest.raises(ThresholdFileError) as err:
        find_gates("ci/t.yaml", text, parse_config(config))
    assert str(err.value).startswith(message)


def test_an_exact_key_still_names_what_is_missing() -> None:
    config = "files: [{path: ci/t.yaml, gates: [{key: a.b.c, metric: m, op: '>=', name: ABC}]}]"
    with pytest.raises(ThresholdFileError) as err:
        find_gates("ci/t.yaml", "a: {b: {}}\n", parse_config(config))
    assert str(err.value) == "ci/t.yaml: gate 'ABC': key 'c' not found under a.b"


# --------------------------------------------------------------------------- libyaml


def trees(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """The located tree as libyaml and as the pure-Python parser build it."""
    fast = locate("t.yaml", text).root
    with monkeypatch.context() as patched:
        patched.setattr(yaml, "__with_libyaml__", False)
        slow = locate("t.yaml", text).root
    return fast, slow


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
@pytest.mark.parametrize(
    "text",
    [
        "é: 0.5\nñ: 'x'\nk: 0.7  # ü\n",
        "\ufeffa: 1\nb: 2\n",
        "a: 1\r\nb: 2\r\nc: é\r\nd: 3\r\n",
        "a: \U0001f600\nb: [0.3, {c: 4}]\n? [complex, key]\n: 5\ne: 6\n",
        'a: "q\\u00e9"\nb: |\n  text\nc: 7\n',
        "- x: 1\n- [2, 3]\n",
    ],
)
def test_libyaml_and_pure_python_locate_the_same(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = trees(text, monkeypatch)
    assert fast == slow


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.sampled_from("aé模_- 😀"), min_size=1, max_size=6),
            st.floats(allow_nan=False, allow_infinity=False, width=32),
            st.sampled_from(["\n", "\r\n"]),
            st.text(st.sampled_from("# é😀x"), max_size=6),
        ),
        min_size=1,
        max_size=6,
        unique_by=lambda e: e[0].strip(),
    )
)
def test_libyaml_spans_match_on_random_text(entries_: list[tuple[str, float, str, str]]) -> None:
    text = "".join(
        f"{json.dumps(key, ensure_ascii=False)}: {value!r}  {('#' + note) if note else ''}{newline}"
        for key, value, newline, note in entries_
    )
    with pytest.MonkeyPatch.context() as patch:
        fast, slow = trees(text, patch)
    assert fast == slow
    assert isinstance(fast, dict)
    for leaf in fast.values():
        assert isinstance(leaf, Scalar) and text[leaf.start : leaf.end] == leaf.value


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("a: 1\nb: [1, 2\nc: 3\n", 3, "expected ',' or ']'"),
        ("a: 1\n---\nb: 2\n", 2, "but found another document"),
        ("a: 1\nb:\x07\n", 2, "unacceptable character #x0007"),
    ],
)
def test_yaml_errors_do_not_depend_on_the_parser(
    text: str, line: int, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = []
    for libyaml in (True, False):
        monkeypatch.setattr(yaml, "__with_libyaml__", libyaml and yaml.__with_libyaml__)
        with pytest.raises(ThresholdFileError) as err:
            locate("t.yaml", text)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"t.yaml:{line}: not valid YAML: ")
    assert problem in messages[0]


@pytest.mark.parametrize(
    ("path", "text", "literal"),
    [
        ("t.yaml", "m:\n  acc_min: [0.56]\n", "0.56"),
        ("t.json", '{"m": {"acc_min": [0.56]}}', "0.56"),
        ("t.yaml", 'm:\n  acc_min: ["0.56"]\n', "0.56"),
        ("t.toml", "[m]\nacc_min = [ 0.56 ]\n", "0.56"),
    ],
)
def test_a_one_item_list_is_its_number(path: str, text: str, literal: str) -> None:
    decl = FileDecl(path=path, gates=(GateDecl(key="*.acc_min", metric="{1}/acc", op=">="),))
    (gate,) = gates_of(path, text, decl)
    assert (gate.literal, text[gate.start : gate.end], gate.metric) == (literal, literal, "m/acc")
    two = ", 0.6]".join(text.rsplit("]", 1))  # a second item
    with pytest.raises(ThresholdFileError, match=r"m\.acc_min is a list, not a number"):
        gates_of(path, two, decl)
