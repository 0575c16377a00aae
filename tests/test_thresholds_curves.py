"""Per-step golden curves in JSON: a reference gate per curve, a point per step, exact spans."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bot.core.bounded import MAX_DEPTH
from bot.core.config import parse_config
from bot.core.models import Gate
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import replace_literals
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.curves import parse_curves

CURVES = Path(__file__).resolve().parent / "fixtures" / "gates" / "curves"
DICT_FORM = "golden_values_dev_dgx_h100.json"
LIST_FORM = "gpt3_tp2_pp2_1nodes_50steps.json"


def read(name: str) -> tuple[str, str]:
    return f"tests/functional/{name}", (CURVES / name).read_text(encoding="utf-8")


def goldens(values: Any) -> list[float | None]:
    """The golden values as ``json.loads`` reads them, nan (however written) as None."""
    items = values.values() if isinstance(values, dict) else values
    numbers = [float(v) if v is not None else math.nan for v in items]
    return [None if math.isnan(v) else v for v in numbers]


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def test_dict_form_a_reference_gate_per_curve_with_every_step() -> None:
    path, text = read(DICT_FORM)
    data = json.loads(text)
    found = parse_curves(path, text)
    assert found is not None and found.unbound == ()
    assert [g.name for g in found.gates] == list(data)
    for gate in found.gates:
        curve = data[gate.name]
        assert (gate.metric, gate.kind, gate.op, gate.sides) == (
            gate.name,
            "reference",
            "==",
            "both",
        )
        assert gate.tolerance is None  # none in the file: the config's default applies
        assert [p.step for p in gate.points] == [int(s) for s in curve["values"]]
        assert [p.value for p in gate.points] == goldens(curve["values"])
        for point in gate.points:
            span = point.span
            assert text[span.start : span.end] == span.literal
            assert span.line == line_of(text, span.start)
            assert span.literal == ("nan" if point.value is None else repr(point.value))
        last = [p for p in gate.points if p.value is not None][-1]
        assert (gate.value, gate.literal, gate.start, gate.end, gate.line) == (
            last.value,
            last.span.literal,
            last.span.start,
            last.span.end,
            last.span.line,
        )


def test_leading_and_trailing_nan_steps() -> None:
    path, text = read(DICT_FORM)
    found = parse_curves(path, text)
    assert found is not None
    gates = {g.name: g for g in found.gates}
    zeros, timing = gates["num-zeros"], gates["iteration-time"]
    assert [p.value is None for p in zeros.points[:3]] == [True, True, True]
    assert zeros.points[3].value is not None
    # the last step is nan: the gate's value is the last step that has one
    assert timing.points[-1].value is None and timing.points[-1].span.literal == "nan"
    assert timing.literal == timing.points[-2].span.literal
    assert timing.points[0].step == json.loads(text)["iteration-time"]["start_step"]


def test_list_form_steps_from_start_and_interval() -> None:
    path, text = read(LIST_FORM)
    data = json.loads(text)
    found = parse_curves(path, text)
    assert found is not None
    gates = {g.name: g for g in found.gates}
    assert set(gates) == {"lm loss", "num-zeros"}
    for name, gate in gates.items():
        curve = data[name]
        start, interval = curve["start_step"], curve["step_interval"]
        assert [p.step for p in gate.points] == [
            start + i * interval for i in range(len(curve["values"]))
        ]
        assert [p.value for p in gate.points] == goldens(curve["values"])
    assert gates["num-zeros"].points[0].span.literal == "NaN"  # the bare JSON token
    assert gates["lm loss"].literal == str(data["lm loss"]["values"][-1])


def test_a_single_value_beside_the_curves_is_a_hint_that_config_lines_declare() -> None:
    path, text = read(LIST_FORM)
    found = parse_curves(path, text)
    assert found is not None
    (hint,) = found.unbound
    assert hint.name == "iteration_timing_avg"
    assert hint.literal == str(json.loads(text)["iteration_timing_avg"])
    assert text[text.index(hint.literal) :].startswith(hint.literal)
    config = parse_config(hint.config)
    (decl,) = config.files
    (gate,) = decl.gates
    assert (decl.path, gate.key, gate.kind, gate.sides) == (
        path,
        "iteration_timing_avg",
        "reference",
        "both",
    )


def test_an_all_nan_curve_is_a_hint_not_a_gate() -> None:
    path, text = read("golden_values_lts_dgx_a100.json")
    found = parse_curves(path, text)
    assert found is not None
    assert [g.name for g in found.gates] == ["lm loss"]
    (hint,) = found.unbound
    assert (hint.name, hint.literal) == ("mtp_1 loss", "nan")
    assert "every golden value is nan" in hint.reason
    assert hint.line == 1


def test_tolerances_beside_the_curve_or_at_the_top_level() -> None:
    path, text = read("golden_values_with_tolerance.json")
    found = parse_curves(path, text)
    assert found is not None
    gates = {g.name: g for g in found.gates}
    loss, grad = gates["lm loss"].tolerance, gates["grad-norm"].tolerance
    assert loss is not None and grad is not None
    assert (loss.rel, loss.abs) == (0.05, None)  # the file's top-level rtol
    assert loss.rel_span is not None
    assert text[loss.rel_span.start : loss.rel_span.end] == "0.05"
    assert loss.rel_span.line == line_of(text, text.index('"rtol": 0.05') + 8)
    assert (grad.rel, grad.abs) == (0.1, 0.25)  # its own rtol wins over the file's
    assert grad.abs_span is not None and grad.rel_span is not None
    assert text[grad.abs_span.start : grad.abs_span.end] == "0.25"
    assert text[grad.rel_span.start : grad.rel_span.end] == "0.1"


def test_quoted_numbers_span_inside_the_quotes() -> None:
    path, text = read("golden_values_with_tolerance.json")
    found = parse_curves(path, text)
    assert found is not None
    grad = next(g for g in found.gates if g.name == "grad-norm")
    assert [p.value for p in grad.points] == [14.12, 6.418, 3.907, 2.861]
    for point in grad.points:
        span = point.span
        assert text[span.start - 1] == text[span.end] == '"'
        assert text[span.start : span.end] == span.literal


NOT_CURVES = {
    "cfg/sampler_schedule.json": (CURVES / "sampler_schedule.json").read_text(encoding="utf-8"),
    "cfg/train.json": '{"optimizer": {"lr": 0.0003, "warmup_steps": 100}}',
    "cfg/list.json": '[{"start_step": 0, "values": [1.0, 2.0]}]',
    "cfg/empty.json": '{"loss": {"start_step": 1, "values": {}}}',
    "cfg/keys.json": '{"loss": {"start_step": 1, "values": {"first": 1.0}}}',
    "cfg/interval.json": '{"loss": {"start_step": 1, "step_interval": 0, "values": [1.0]}}',
    "cfg/float_start.json": '{"loss": {"start_step": 1.5, "values": [1.0]}}',
    "cfg/nested.json": '{"loss": {"start_step": 1, "values": [[1.0]]}}',
    "cfg/golden.yaml": 'loss: {"start_step": 1, "values": [1.0]}',
}


@pytest.mark.parametrize(("path", "text"), NOT_CURVES.items(), ids=list(NOT_CURVES))
def test_files_that_are_not_curves_are_not_claimed(path: str, text: str) -> None:
    assert parse_curves(path, text) is None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('{"lm loss": {"start_step": 1,\n "values": {"1": 10.8,\n "2": "fast"}}}', 3, "step 2"),
        ('{"lm loss": {"start_step": 1, "values": [10.8, true]}}', 1, "step 2"),
        ('{"lm loss": {"start_step": 1,\n "values": [10.8, 10.7,]}}', 2, "not valid JSON"),
        ('{"rtol": "five", "x": {"start_step": 1, "values": [1.0]}}', 1, "rtol"),
        ('{"x": {"start_step": 1, "values": [1' + "0" * 150 + "]}}", 1, "digits"),
        ("[" * (MAX_DEPTH + 1) + '"start_step", "values"' + "]" * (MAX_DEPTH + 1), 1, "nested"),
    ],
)
def test_a_broken_curve_file_is_an_error_with_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ThresholdFileError) as info:
        parse_curves("golden.json", text)
    assert info.value.line == line
    assert words in info.value.message


def test_a_step_written_twice_keeps_both_literals() -> None:
    text = '{"lm loss": {"start_step": 1, "values": {"1": 10.5, "01": 10.4, "2": 10.3}}}'
    found = parse_curves("golden.json", text)
    assert found is not None
    (gate,) = found.gates
    assert [(p.step, p.span.literal) for p in gate.points] == [
        (1, "10.5"),
        (1, "10.4"),
        (2, "10.3"),
    ]


def test_rebaseline_rewrites_only_the_literal_of_a_gate_or_a_point() -> None:
    path, text = read(DICT_FORM)
    found = parse_curves(path, text)
    assert found is not None
    gate = found.gates[0]
    edited = replace_literals(text, [(gate, "9.25")])
    assert edited == text[: gate.start] + "9.25" + text[gate.end :]
    assert json.loads(edited)["lm loss"]["values"][str(gate.points[-1].step)] == 9.25
    for point in gate.points[:3]:
        at_point = gate.model_copy(update=point.span.model_dump(include={"start", "end", "line"}))
        one = at_point.model_copy(update={"literal": point.span.literal})
        changed = replace_literals(text, [(one, "1.5")])
        assert changed == text[: point.span.start] + "1.5" + text[point.span.end :]
        assert json.loads(changed)["lm loss"]["values"][str(point.step)] == 1.5


def test_find_gates_without_config_and_with_the_files_tolerance() -> None:
    path, text = read(DICT_FORM)
    bare = find_gates(path, text, parse_config(""))
    assert bare is not None
    assert {g.kind for g in bare.gates} == {"reference"}
    assert all(g.tolerance is None for g in bare.gates)
    config = parse_config(
        "files:\n"
        '  - path: "tests/functional/golden_values_*.json"\n'
        "    kind: reference\n"
        "    tolerance: {rel: 0.05}\n"
        "    metrics: {lm loss: train/lm_loss}\n"
    )
    found = find_gates(path, text, config)
    assert found is not None
    gates: dict[str, Gate] = {g.name: g for g in found.gates}
    assert gates["lm loss"].metric == "train/lm_loss"
    assert gates["num-zeros"].metric == "num-zeros"
    assert all(g.tolerance is not None and g.tolerance.rel == 0.05 for g in gates.values())
    assert [len(g.points) for g in gates.values()] == [len(g.points) for g in bare.gates]
