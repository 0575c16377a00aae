"""Gates a config declares on the variables of shell scripts and the constants of Python
files: kind, sides, tolerance (a number or a variable of the file), coupled literals and
placeholders apply as they do for YAML files."""

from __future__ import annotations

import pytest

from bot.core.config import parse_config
from bot.core.models import Gate
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import SpanEdit, replace_spans
from bot.core.thresholds.errors import ThresholdFileError

SCRIPT = """#!/bin/bash
SPEC_REF_AL=3.21
SPEC_MIN_AL=3.05
ACC_REF=0.812
ACC_RTOL=0.05
python bench/spec_decode.py --min-al "$SPEC_MIN_AL" --ref-acc "$ACC_REF" --rtol "$ACC_RTOL"
"""
PYTHON = """REF_AL = 3.21
MIN_AL = 3.05


def test_acceptance(run_bench):
    check_acceptance(run_bench(), MIN_AL)
"""
CONFIG = """files:
  - path: {path}
    gates:
      - key: {minimum}
        metric: spec/acceptance_length
        op: ">="
        coupled: [{{key: {reference}, factor: 1.0526}}]
{extra}"""
SHELL_EXTRA = """      - key: ACC_REF
        metric: eval/acc
        kind: reference
        sides: lower
        tolerance: {rel: ACC_RTOL}
"""


def _only(gates: tuple[Gate, ...], name: str) -> Gate:
    (gate,) = [g for g in gates if g.name == name]
    return gate


def test_a_shell_variable_declared_as_a_reference_reads_its_tolerance_from_the_script() -> None:
    config = parse_config(
        CONFIG.format(
            path="ci/spec.sh", minimum="SPEC_MIN_AL", reference="SPEC_REF_AL", extra=SHELL_EXTRA
        )
    )
    found = find_gates("ci/spec.sh", SCRIPT, config)
    assert found is not None
    acc = _only(found.gates, "ACC_REF")
    assert (acc.kind, acc.op, acc.sides, acc.value) == ("reference", ">=", "lower", 0.812)
    assert acc.tolerance is not None and acc.tolerance.rel == 0.05
    rel = acc.tolerance.rel_span
    assert rel is not None and SCRIPT[rel.start : rel.end] == "0.05"


@pytest.mark.parametrize(
    ("path", "text", "minimum", "reference"),
    [
        ("ci/spec.sh", SCRIPT, "SPEC_MIN_AL", "SPEC_REF_AL"),
        ("tests/test_spec.py", PYTHON, "MIN_AL", "REF_AL"),
    ],
    ids=["shell", "python"],
)
def test_a_coupled_variable_is_found_with_its_literal(
    path: str, text: str, minimum: str, reference: str
) -> None:
    config = parse_config(CONFIG.format(path=path, minimum=minimum, reference=reference, extra=""))
    found = find_gates(path, text, config)
    assert found is not None
    gate = _only(found.gates, minimum)
    assert (gate.kind, gate.op, gate.literal) == ("limit", ">=", "3.05")
    (coupled,) = gate.coupled
    assert (coupled.name, coupled.factor) == (reference, 1.0526)
    assert text[coupled.span.start : coupled.span.end] == "3.21"
    edited = replace_spans(
        path,
        text,
        [SpanEdit(gate.span, "3.10", gate.name), SpanEdit(coupled.span, "3.26", coupled.name)],
    )
    assert edited == text.replace("3.05", "3.10").replace("3.21", "3.26")


@pytest.mark.parametrize(
    ("path", "text", "minimum"),
    [("ci/spec.sh", SCRIPT, "SPEC_MIN_AL"), ("tests/test_spec.py", PYTHON, "MIN_AL")],
    ids=["shell", "python"],
)
def test_a_coupled_variable_that_is_not_there_is_an_error(
    path: str, text: str, minimum: str
) -> None:
    config = parse_config(CONFIG.format(path=path, minimum=minimum, reference="NOPE_AL", extra=""))
    with pytest.raises(ThresholdFileError) as err:
        find_gates(path, text, config)
    assert "NOPE_AL" in str(err.value)


def test_a_declared_shell_variable_can_be_a_placeholder() -> None:
    text = "X_MIN=0.5\npython check.py $X_MIN\n"
    config = parse_config(
        "files:\n  - path: a.sh\n    gates:\n"
        "      - {key: X_MIN, metric: x, op: '>=', ignore: true}\n"
    )
    found = find_gates("a.sh", text, config)
    assert found is not None
    (gate,) = found.gates
    assert gate.ignored == "declared with 'ignore: true' in the config"
