"""A key whose value is an entry (``{expected: V, atol: T}``, ``{value: V, kind: limit, op:
"<="}``): one gate with its own tolerance and kind, declared or not; reference files whose
models map to lists of entries; a golden curve with its own ``tolerance``."""

from __future__ import annotations

import json

import pytest
import yaml

from bot.core.config import parse_config
from bot.core.models import ThresholdFile
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import SpanEdit, replace_spans

EVAL_YAML = """\
# decoder quality on the held-out set, one entry per metric
bleu:
  expected: 27.31
  rtol: 0.015
word_error_rate:
  value: 0.0812
  tolerance: 0.004
decode_ms_p50:
  value: 41.5
  kind: limit
  op: "<="
"""
EVAL_JSON = json.dumps(yaml.safe_load(EVAL_YAML), indent=1)
DECLARED = """
files:
  - path: "ci/goldens/{name}"
    gates:
      - {{key: "*", metric: "asr/{{1}}", kind: reference}}
"""


def _read(path: str, text: str, config: str = "") -> ThresholdFile:
    found = find_gates(path, text, parse_config(config or "{}"))
    assert found is not None
    return found


def _summary(found: ThresholdFile) -> list[tuple[str, str, str, str, float | None, float | None]]:
    return [
        (
            g.metric,
            g.literal,
            g.kind,
            g.op,
            g.tolerance.rel if g.tolerance else None,
            g.tolerance.abs if g.tolerance else None,
        )
        for g in found.gates
    ]


ABS = (None, 0.004)  # the word error rate's own absolute tolerance


@pytest.mark.parametrize(("name", "text"), [("eval.yaml", EVAL_YAML), ("eval.json", EVAL_JSON)])
def test_declared_key_holding_an_entry_is_one_gate_with_its_own_tolerance_and_kind(
    name: str, text: str
) -> None:
    data = yaml.safe_load(text)
    found = _read(f"ci/goldens/{name}", text, DECLARED.format(name=name))
    assert _summary(found) == [
        ("asr/bleu", str(data["bleu"]["expected"]), "reference", "==", 0.015, None),
        ("asr/word_error_rate", str(data["word_error_rate"]["value"]), "reference", "==", *ABS),
        ("asr/decode_ms_p50", str(data["decode_ms_p50"]["value"]), "limit", "<=", None, None),
    ]
    for gate in found.gates:
        assert text[gate.start : gate.end] == gate.literal
    bleu = found.gates[0]
    assert bleu.tolerance is not None and bleu.tolerance.rel_span is not None
    # /rebaseline --tolerance rewrites the entry's own rtol, nothing else
    edited = replace_spans(
        bleu.file, text, [SpanEdit(bleu.tolerance.rel_span, "0.020", "bleu tolerance")]
    )
    assert yaml.safe_load(edited)["bleu"] == {"expected": 27.31, "rtol": 0.02}
    assert yaml.safe_load(edited)["word_error_rate"] == data["word_error_rate"]


def test_entry_without_a_value_is_still_an_error_naming_it() -> None:
    text = "bleu:\n  rtol: 0.01\n  note: pending\n"
    with pytest.raises(Exception, match="bleu is a mapping, not a number"):
        _read("ci/goldens/eval.yaml", text, DECLARED.format(name="eval.yaml"))


def test_entries_with_their_own_tolerance_or_kind_are_read_without_config() -> None:
    found = _read("ci/goldens/eval.yaml", EVAL_YAML)
    assert _summary(found) == [
        ("bleu", "27.31", "reference", "==", 0.015, None),
        ("word_error_rate", "0.0812", "reference", "==", None, 0.004),
        ("decode_ms_p50", "41.5", "limit", "<=", None, None),
    ]


def test_value_with_nothing_saying_how_stays_a_hint() -> None:
    text = "golden:\n  bleu:\n    value: 27.3\n"
    found = _read("ci/expectations.yaml", text, "files: [ci/expectations.yaml]")
    assert found.gates == ()
    assert [u.literal for u in found.unbound] == ["27.3"]


REFERENCE_LISTS = """\
# MMLU-Pro exact match per model and weight dtype
mistralai/Mistral-7B-v0.3:
  - dtype: bf16
    exact_match: 0.3921
  - dtype: int4-awq
    exact_match: 0.3744
google/gemma-2-2b:
  - dtype: bf16
    exact_match: 0.2705
"""


def test_reference_lists_of_entries_one_gate_per_entry() -> None:
    path = "evals/references/mmlu_pro.yaml"
    found = _read(path, REFERENCE_LISTS)
    data = yaml.safe_load(REFERENCE_LISTS)
    expected = [
        (f"{model}/{entry['dtype']}/exact_match", str(entry["exact_match"]))
        for model, items in data.items()
        for entry in items
    ]
    assert [(g.metric, g.literal) for g in found.gates] == expected
    assert {(g.kind, g.op) for g in found.gates} == {("reference", "==")}
    for gate in found.gates:
        assert REFERENCE_LISTS[gate.start : gate.end] == gate.literal


def test_list_items_that_cannot_be_told_apart_are_hints() -> None:
    text = "org/model-a:\n  - exact_match: 0.41\n  - exact_match: 0.43\n"
    found = _read("evals/references/x.yaml", text, "files: [evals/references/x.yaml]")
    assert found.gates == ()
    assert sorted(u.literal for u in found.unbound) == ["0.41", "0.43"]


def test_golden_curve_with_its_own_absolute_tolerance() -> None:
    text = json.dumps(
        {
            "val ppl": {"start_step": 0, "step_interval": 100, "values": [31.2, 24.9, 21.7]},
            "grad norm": {
                "start_step": 0,
                "step_interval": 100,
                "tolerance": 0.25,
                "values": [4.1, 2.2, 1.9],
            },
        },
        indent=1,
    )
    found = _read("tests/functional/golden_values_x.json", text)
    tolerances = {g.metric: g.tolerance for g in found.gates}
    assert tolerances["val ppl"] is None
    grad = tolerances["grad norm"]
    assert grad is not None and grad.abs == 0.25 and grad.rel is None
    assert grad.abs_span is not None and text[grad.abs_span.start : grad.abs_span.end] == "0.25"


CURVES_YAML = """\
# golden eval curves of the nightly, one value per eval
eval_bpb: [1.412, 1.207, .nan, 1.118]
eval_acc: [0.31, 0.38, 0.41, 0.43]
"""
CURVES_CONFIG = """
files:
  - path: ci/golden_curves.yaml
    kind: reference
    tolerance: {abs: 0.02}
    steps: {start: 250, interval: 250}
    gates:
      - {key: "*", metric: "nightly/{1}"}
"""


def test_declared_list_of_values_is_a_golden_curve_from_the_configured_steps() -> None:
    found = _read("ci/golden_curves.yaml", CURVES_YAML, CURVES_CONFIG)
    data = yaml.safe_load(CURVES_YAML)
    assert [g.metric for g in found.gates] == [f"nightly/{k}" for k in data]
    bpb, acc = found.gates
    assert [p.step for p in bpb.points] == [250, 500, 750, 1000]
    assert [p.value for p in acc.points] == data["eval_acc"]
    assert bpb.points[2].value is None and bpb.points[2].span.literal == ".nan"
    assert (bpb.literal, bpb.kind, bpb.op) == ("1.118", "reference", "==")
    assert bpb.tolerance is not None and bpb.tolerance.abs == 0.02
    second = acc.points[1].span
    edited = replace_spans(acc.file, CURVES_YAML, [SpanEdit(second, "0.37", "eval_acc step 500")])
    assert yaml.safe_load(edited)["eval_acc"] == [0.31, 0.37, 0.41, 0.43]


def test_a_declared_list_of_a_limit_is_still_an_error() -> None:
    config = CURVES_CONFIG.replace("kind: reference", "kind: limit")
    config = config.replace('"nightly/{1}"}', '"nightly/{1}", op: ">="}')
    with pytest.raises(Exception, match="is a list, not a number"):
        _read("ci/golden_curves.yaml", CURVES_YAML, config)
