"""Key patterns over located YAML / JSON / TOML trees: grammar, matches, captures, the key
paths that name each match, and metric templates."""

from __future__ import annotations

import pytest

from bot.core.thresholds.structured.located import locate
from bot.core.thresholds.structured.patterns import (
    MAX_DEEP,
    MAX_STEPS,
    find,
    leaf_value,
    lookup,
    parse_pattern,
)
from bot.core.thresholds.structured.templates import KeyPaths, expand, parse_template
from bot.core.thresholds.structured.tree import Scalar

LM_EVAL = """\
model_name: acme/llama-8b
rtol: 0.05
tasks:
- name: gsm8k
  metrics:
  - name: exact_match,strict-match
    value: 0.76
  - name: exact_match,flexible-extract
    value: 0.77
- name: "odd]name"
  metrics:
  - {name: "a.b", value: 0.5}
"""

MODELS = """\
llama.v3:
  ref_al: 2.81
  min_al: 2.67
  eval: {acc_min: 0.5, loss_max: 2.1}
"qwen[7b]":
  ref_al: 2.05
  min_al: 1.95
  eval: {acc_min: 0.4}
runs: [{id: a, loss: 1.5}, {id: b, loss: 1.4}, {loss: 1.3}, {id: a, loss: 1.2}]
"""


def values(text: str, pattern: str, path: str = "t.yaml") -> list[str]:
    located = locate(path, text)
    return [str(leaf_value(m.node)) for m in find(parse_pattern(pattern), located.root)]


# --------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("source", "kinds", "captures"),
    [
        ("a.b.0.c", ["key", "key", "key", "key"], 0),
        ('"a.b".c', ["key", "key"], 0),
        ("*.min_al", ["glob", "key"], 1),
        ("*.*_min", ["glob", "glob"], 2),
        ("**.value", ["deep", "key"], 1),
        ("tasks[*].metrics[name=a,b.c].value", ["key", "item", "key", "field", "key"], 2),
        ("[0].x", ["index", "key"], 0),
        ("checks[op=>=].threshold", ["key", "field", "key"], 1),
        ('a[name="x]y"].v', ["key", "field", "key"], 1),
        ('"*"', ["key"], 0),
    ],
)
def test_pattern_grammar(source: str, kinds: list[str], captures: int) -> None:
    pattern = parse_pattern(source)
    assert [s.kind for s in pattern.steps] == kinds
    assert pattern.captures == captures
    assert pattern.exact is all(k in ("key", "index") for k in kinds)


def test_selector_values_keep_commas_dots_equals_and_quoted_brackets() -> None:
    steps = parse_pattern('t[name=exact_match,strict-match].m[op=>=].x[k="a]\\"b"]').steps
    assert [(s.text, s.value) for s in steps if s.kind == "field"] == [
        ("name", "exact_match,strict-match"),
        ("op", ">="),
        ("k", 'a]"b'),
    ]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("a..b", "an empty key"),
        ("a.", "an empty key"),
        ("a[foo].b", "use [N], [*] or [field=value]"),
        ("a[x=1", "unclosed selector"),
        ('"abc', "unclosed quote"),
        ('"a"b', "expected a dot"),
    ],
)
def test_invalid_patterns_say_why(source: str, reason: str) -> None:
    with pytest.raises(ValueError, match="invalid key path") as err:
        parse_pattern(source)
    assert reason in str(err.value)


# --------------------------------------------------------------------------- matching


def test_wildcards_and_globs() -> None:
    assert values(MODELS, "*.min_al") == ["2.67", "1.95"]
    assert values(MODELS, "*.eval.*_min") == ["0.5", "0.4"]
    assert values(MODELS, "*.eval.*") == ["0.5", "2.1", "0.4"]
    assert values(MODELS, "**.acc_min") == ["0.5", "0.4"]
    assert values(MODELS, "**.loss") == ["1.5", "1.4", "1.3", "1.2"]
    assert values(MODELS, '"qwen[7b]".min_al') == ["1.95"]
    assert values(MODELS, "*.nope") == []


def test_list_items_by_index_field_and_any() -> None:
    assert values(LM_EVAL, "tasks[*].metrics[*].value") == ["0.76", "0.77", "0.5"]
    assert values(LM_EVAL, "tasks.0.metrics.1.value") == ["0.77"]
    assert values(LM_EVAL, "tasks[0].metrics[1].value") == ["0.77"]
    assert values(LM_EVAL, "tasks[name=gsm8k].metrics[name=exact_match,strict-match].value") == [
        "0.76"
    ]
    assert values(LM_EVAL, 'tasks[name="odd]name"].metrics[name=a.b].value') == ["0.5"]
    assert values(MODELS, "runs[id=a].loss") == ["1.5", "1.2"]
    assert values("[{m: x, v: 1}, {m: y, v: 2}]\n", "[m=y].v") == ["2"]


def test_double_star_takes_every_depth_once() -> None:
    text = "a: {b: {c: {v: 1}, v: 2}, v: 3}\nv: 4\n"
    assert values(text, "**.v") == ["1", "2", "3", "4"]  # the file's order, each once
    assert values(text, "**.**.v") == ["1", "2", "3", "4"]
    assert values(text, "a.**.v") == ["1", "2", "3"]


def test_patterns_are_bounded_and_their_matching_linear() -> None:
    deep = "".join(f"{'  ' * i}k{i}:\n" for i in range(60)) + "  " * 60 + "v: 1\n"
    assert values(deep, ".".join(["**"] * MAX_DEEP) + ".v") == ["1"]  # each (node, step) once
    with pytest.raises(ValueError, match=f"more than {MAX_STEPS} steps or {MAX_DEEP} '\\*\\*'"):
        parse_pattern(".".join(["**"] * (MAX_DEEP + 1)))
    with pytest.raises(ValueError, match="more than"):
        parse_pattern("a" + "[x=1]" * 100_000)  # chained selectors count too
    with pytest.raises(ValueError) as err:
        parse_pattern("a." * 100_000 + "b")
    assert len(str(err.value)) < 200  # the pattern is shown short


def test_same_patterns_on_json_and_toml() -> None:
    json_text = '{"m": {"a": {"x_min": 1}, "b": {"x_min": 2}}, "l": [{"name": "n", "v": 3}]}'
    toml_text = 'l = [{name = "n", v = 3}]\n[m.a]\nx_min = 1\n[m.b]\nx_min = 2\n'
    for path, text in (("t.json", json_text), ("t.toml", toml_text)):
        assert values(text, "m.*.*_min", path) == ["1", "2"]
        assert values(text, "l[name=n].v", path) == ["3"]


# --------------------------------------------------------------------------- captures, names


def test_captures_in_pattern_order() -> None:
    located = locate("t.yaml", MODELS)
    (match, _) = find(parse_pattern("*.eval.*_*"), located.root)[:2]
    assert match.captures == ("llama.v3", "acc", "min")
    (task,) = find(
        parse_pattern("tasks[*].metrics[name=exact_match,strict-match].value"),
        locate("t.yaml", LM_EVAL).root,
    )
    assert task.captures == ("gsm8k", "exact_match,strict-match")
    deep = find(parse_pattern("**.v"), locate("t.yaml", "a: {b: {v: 1}}\n").root)
    assert deep[0].captures == ("a/b",)
    runs = find(parse_pattern("runs[*].loss"), located.root)
    assert [m.captures for m in runs] == [("a",), ("b",), ("2",), ("a",)]  # no id: the index


@pytest.mark.parametrize(("text", "path"), [(MODELS, "t.yaml"), (LM_EVAL, "t.yaml")])
def test_key_paths_name_one_literal_each_and_parse_back(text: str, path: str) -> None:
    located = locate(path, text)
    paths = KeyPaths()
    matches = find(parse_pattern("**.*"), located.root)
    leaves = [m for m in matches if isinstance(m.node, Scalar)]
    names = [paths.of(m.trail) for m in leaves]
    assert len(set(names)) == len(names)
    for name, match in zip(names, leaves, strict=True):
        (found,) = find(parse_pattern(name), located.root)
        assert found.node is match.node


def test_key_paths_quote_and_label_items() -> None:
    located = locate("t.yaml", MODELS + LM_EVAL.replace("rtol: 0.05\n", ""))
    paths = KeyPaths()
    named = {paths.of(m.trail) for m in find(parse_pattern("**.*"), located.root)}
    assert '"llama.v3".min_al' in named
    assert '"qwen[7b]".eval.acc_min' in named
    assert "tasks[name=gsm8k].metrics[name=exact_match,strict-match].value" in named
    assert 'tasks[name="odd]name"].metrics[name=a.b].value' in named
    assert "runs[id=b].loss" in named and "runs.0.loss" in named  # id 'a' twice: by index


def test_lookup_beside_then_enclosing_mappings() -> None:
    located = locate("t.yaml", LM_EVAL + "x:\n  rtol: 0.2\n")
    matches = find(parse_pattern("tasks[*].metrics[*].value"), located.root)
    found = lookup(matches[0], ["rtol"])
    assert found is not None and leaf_value(found.node) == "0.05"  # the top level's
    assert lookup(matches[0], ["x", "rtol"]) is not None
    assert lookup(matches[0], ["nope"]) is None


# --------------------------------------------------------------------------- templates


def test_templates_fill_captures_keys_and_fields() -> None:
    located = locate("t.yaml", LM_EVAL)
    pattern = parse_pattern("tasks[*].metrics[*].value")
    match = find(pattern, located.root)[1]
    fill = [
        ("{..name}/{.name}", "gsm8k/exact_match,flexible-extract"),
        ("{1}/{2}", "gsm8k/exact_match,flexible-extract"),
        ("eval/{1}/{key}", "eval/gsm8k/value"),
        ("{{literal}} {1}", "{literal} gsm8k"),
        ("{...model_name}:{1}", "acme/llama-8b:gsm8k"),
    ]
    for template, expected in fill:
        assert expand(parse_template(template, pattern.captures), match, leaf_value) == expected


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("{3}", "the pattern has 2 wildcard(s)"),
        ("{task}", "unknown placeholder {task}"),
        ("{.}", "unknown placeholder {.}"),
        ("a}b", "unmatched '}'"),
    ],
)
def test_bad_templates_are_refused(template: str, reason: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_template(template, 2)
    assert reason in str(err.value)


def test_a_missing_field_names_itself() -> None:
    located = locate("t.yaml", MODELS)
    match = find(parse_pattern("*.min_al"), located.root)[0]
    with pytest.raises(LookupError, match="no field 'name' beside the literal"):
        expand(parse_template("{.name}", 1), match, leaf_value)


def test_chained_selectors_select_items_with_every_field() -> None:
    text = """\
acme/llama-8b:
  - accuracy: 66.1
  - {quant_algo: FP8, accuracy: 65.7}
  - {quant_algo: FP8, kv_cache_quant_algo: FP8, accuracy: 65.2}
  - {quant_algo: NVFP4, kv_cache_quant_algo: FP8, accuracy: 63.9}
"""
    assert values(text, "*[quant_algo=FP8].accuracy") == ["65.7", "65.2"]
    assert values(text, "*[quant_algo=FP8][kv_cache_quant_algo=FP8].accuracy") == ["65.2"]
    assert values(text, "*[kv_cache_quant_algo=FP8].accuracy") == ["65.2", "63.9"]
    assert parse_pattern("*[a=1][b=2].x").captures == 2  # the key, and the item
