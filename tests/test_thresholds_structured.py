"""Gates declared in the config for YAML / JSON / TOML files: exact literal spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.config import FileDecl, GateDecl
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured import parse_structured, split_key

DATA = Path(__file__).resolve().parent / "data"

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
    (gate,) = parse_structured(path, text, decl).gates
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
    parsed = parse_structured(path, text, FileDecl(path=path, gates=decls))
    assert [(g.name, g.metric, g.op, g.value) for g in parsed.gates] == [
        ("LEN_MAX", "len", "<=", -0.019),
        ("gsm8k.eval.acc_min", "eval/all/avg_score", ">=", 0.56),
    ]
    assert parsed.path == path and parsed.unbound == ()


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
        parse_structured(path, text, decl)
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
        parse_structured(path, text, decl)
    assert err.value.line == line


def test_unsupported_extension_and_bad_key_path() -> None:
    decl = FileDecl(path="x", gates=(GateDecl(key="a", metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match=r"need a \.yaml"):
        parse_structured("ci/x.ini", "a=1", decl)
    bad = FileDecl(path="x", gates=(GateDecl(key='a."b', metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match="invalid key path"):
        parse_structured("x.yaml", "a: 1\n", bad)


def test_split_key() -> None:
    assert split_key("a.b.0") == ["a", "b", "0"]
    assert split_key('"a.b".c') == ["a.b", "c"]
    with pytest.raises(ValueError):
        split_key("a..b")


@pytest.mark.parametrize(
    ("path", "text"),
    [("a.yaml", "flag: true\n"), ("a.json", '{"flag": true}'), ("a.toml", "flag = true\n")],
)
def test_boolean_is_not_a_number(path: str, text: str) -> None:
    decl = FileDecl(path=path, gates=(GateDecl(key="flag", metric="m", op="<"),))
    with pytest.raises(ThresholdFileError, match="not a number"):
        parse_structured(path, text, decl)
