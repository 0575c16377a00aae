"""CSV threshold tables: a gate per row, declared by columns or recognised by the header."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.config import CsvDecl, parse_config
from bot.core.models import Gate, Span
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.edit import replace_literals
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.tables.reader import parse_table

TABLES = Path(__file__).resolve().parent / "fixtures" / "gates" / "tables"
THROUGHPUT = "bench/throughput_expected.csv"
DECL = CsvDecl(key="benchmark", value="expected", tolerance="noise_margin")
PYTORCH_COLUMNS = ("benchmark", "metric", "expected", "noise_margin")

Variant = Callable[[str], str]
VARIANTS: dict[str, Variant] = {
    "lf": lambda text: text,
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "bom": lambda text: "\ufeff" + text,
    "bom-crlf": lambda text: "\ufeff" + text.replace("\n", "\r\n"),
}


def read(name: str, variant: Variant = VARIANTS["lf"]) -> str:
    return variant((TABLES / name).read_text(encoding="utf-8"))


def records(text: str) -> list[list[str]]:
    """The table as the csv module reads it (what a CI script sees), BOM and comments left out."""
    rows = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    return [r for r in rows if r and not r[0].startswith("#")]


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def first_numbers(text: str) -> list[str]:
    """The first data row with a number (the header is the first row unless it has one)."""
    rows = [[c.strip() for c in r] for r in records(text)]
    numeric = re.compile(r"[\d.]+%?")
    data = rows if any(numeric.fullmatch(c) for c in rows[0]) else rows[1:]
    return next(r for r in data if any(numeric.fullmatch(c) for c in r))


def assert_span(text: str, span: Span) -> None:
    assert text[span.start : span.end] == span.literal
    assert span.line == line_of(text, span.start)


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=list(VARIANTS))
def test_declared_table_a_reference_gate_per_row(variant: Variant) -> None:
    text = read("throughput_expected.csv", variant)
    header, *rows = records(text)
    found = parse_table(THROUGHPUT, text, DECL)
    assert found is not None
    key, value, margin = (header.index(c) for c in ("benchmark", "expected", "noise_margin"))
    # rows 4 (no expected value) and 5 (listed twice) are hints, not gates
    wanted = [r for i, r in enumerate(rows) if i not in (4, 5)]
    assert [g.name for g in found.gates] == [r[key] for r in wanted]
    for gate, row in zip(found.gates, wanted, strict=True):
        assert (gate.metric, gate.kind, gate.op, gate.sides) == (
            row[key],
            "reference",
            "==",
            "both",
        )
        assert (gate.literal, gate.value) == (row[value], float(row[value]))
        assert_span(text, gate.span)
        if not row[margin]:
            assert gate.tolerance is None
            continue
        assert gate.tolerance is not None and gate.tolerance.rel_span is not None
        assert gate.tolerance.abs is None
        assert gate.tolerance.rel_span.literal == row[margin]
        assert_span(text, gate.tolerance.rel_span)
        written = row[margin]
        rel = float(written[:-1]) / 100 if written.endswith("%") else float(written)
        assert gate.tolerance.rel == pytest.approx(rel)


def test_quoted_cells_commas_and_doubled_quotes() -> None:
    text = read("throughput_expected.csv")
    found = parse_table(THROUGHPUT, text, DECL)
    assert found is not None
    gates = {g.name: g for g in found.gates}
    llama = gates["llama2_7b_decode, bs1"]  # a comma inside a quoted name
    assert text[llama.start - 1] == text[llama.end] == '"'  # the span is inside the quotes
    assert llama.literal == "41.2"
    assert 'vit_b16 "patch" train' in gates  # doubled quotes read as csv reads them


def test_missing_value_and_duplicate_rows_are_hints() -> None:
    text = read("throughput_expected.csv")
    found = parse_table(THROUGHPUT, text, DECL)
    assert found is not None
    missing, twice = found.unbound
    assert (missing.name, missing.line) == ("whisper_small_decode", 7)
    assert "no value in column 'expected'" in missing.reason
    first = next(g for g in found.gates if g.name == twice.name)
    assert (twice.name, twice.line, twice.literal) == ("resnet50_train_bs256", 8, "2901.0")
    assert f"line {first.line}" in twice.reason
    assert first.literal == "2875.4"  # the first row is the gate


def test_absolute_tolerance_sides_and_metric_template() -> None:
    text = read("throughput_expected.csv")
    decl = DECL.model_copy(
        update={"absolute": True, "sides": "lower", "metric": "bench/{key}/{unit}"}
    )
    found = parse_table(THROUGHPUT, text, decl)
    assert found is not None
    gate = found.gates[1]
    assert (gate.name, gate.metric, gate.op, gate.sides) == (
        "bert_large_pretrain_seq512",
        "bench/bert_large_pretrain_seq512/seq/s",
        ">=",
        "lower",
    )
    assert gate.tolerance is not None
    assert (gate.tolerance.rel, gate.tolerance.abs) == (None, 0.05)
    assert gate.tolerance.abs_span is not None and gate.tolerance.abs_span.literal == "0.05"


def test_headerless_table_with_declared_columns() -> None:
    text = read("expected_results.csv")
    rows = records(text)
    decl = CsvDecl(
        columns=PYTORCH_COLUMNS,
        key="benchmark",
        value="expected",
        tolerance="noise_margin",
        metric="{benchmark}/{metric}",
    )
    found = parse_table("benchmarks/expected_results.csv", text, decl)
    assert found is not None and found.unbound == ()
    assert [(g.name, g.metric, g.value) for g in found.gates] == [
        (r[0], f"{r[0]}/{r[1]}", float(r[2])) for r in rows
    ]
    for gate, row in zip(found.gates, rows, strict=True):
        assert_span(text, gate.span)
        assert gate.tolerance is not None and gate.tolerance.rel == float(row[3])
        assert gate.tolerance.rel_span is not None
        assert gate.tolerance.rel_span.literal == row[3].strip()  # " 0.015": the number only
        assert_span(text, gate.tolerance.rel_span)


def test_limit_tables_take_the_op_or_the_value_columns_name() -> None:
    text = "metric,min_score\nexact_match,0.61\n"
    found = parse_table("t.csv", text, CsvDecl(key="metric", value="min_score", kind="limit"))
    assert found is not None
    (gate,) = found.gates
    assert (gate.kind, gate.op, gate.tolerance) == ("limit", ">=", None)
    decl = CsvDecl(key="metric", value="min_score", kind="limit", op="<")
    found = parse_table("t.csv", text, decl)
    assert found is not None and found.gates[0].op == "<"
    with pytest.raises(ThresholdFileError, match="'==' is for reference tables"):
        parse_table("t.csv", text, decl.model_copy(update={"op": "=="}))
    with pytest.raises(ThresholdFileError, match="needs 'op'"):
        parse_table(
            "t.csv",
            "metric,bound\nexact_match,0.61\n",
            CsvDecl(key="metric", value="bound", kind="limit"),
        )


@pytest.mark.parametrize(
    ("text", "decl", "line", "words"),
    [
        (
            "name,expected\nbleu,31.2\n",
            DECL,
            1,
            "'benchmark' is not in the header ('name', 'expected')",
        ),
        (read("expected_results.csv"), DECL, 1, "looks like data: name the columns"),
        (
            "benchmark,expected\nbleu,31.2\nrouge,high\n",
            DECL.model_copy(update={"tolerance": None}),
            3,
            "'high' is not a number",
        ),
        ("benchmark,expected,noise_margin\nbleu,31.2,tight\n", DECL, 2, "'tight' is not a number"),
        (
            "benchmark,expected,noise_margin\nbleu,31.2\n",
            DECL,
            2,
            "the row has 2 cells; 3 are needed",
        ),
        ('benchmark,expected,noise_margin\nbleu,"31"2,0.1\n', DECL, 2, "plainly written"),
        ("benchmark,expected\n,31.2\n", DECL.model_copy(update={"tolerance": None}), 2, "no name"),
        (
            "benchmark,expected\nbleu,31.2\n",
            DECL.model_copy(update={"tolerance": None, "metric": "{suite}/{key}"}),
            1,
            "'suite'",
        ),
        (
            "benchmark,expected\nbleu," + "1" * 101 + "\n",
            DECL.model_copy(update={"tolerance": None}),
            2,
            "not a number",
        ),
        (
            "benchmark,expected\n" + "b" * 140_000 + ",1\n",
            DECL.model_copy(update={"tolerance": None}),
            2,
            "not valid CSV",
        ),
    ],
)
def test_declared_table_errors_name_the_line(
    text: str, decl: CsvDecl, line: int, words: str
) -> None:
    with pytest.raises(ThresholdFileError) as info:
        parse_table("bench/expected.csv", text, decl)
    assert info.value.line == line
    assert words in info.value.message


def test_recognised_header_reference_table() -> None:
    text = read("throughput_expected.csv")
    undeclared = parse_table(THROUGHPUT, text, None)
    declared = parse_table(THROUGHPUT, text, DECL)
    assert undeclared is not None and declared is not None
    assert undeclared == declared


def test_recognised_header_min_max_limits() -> None:
    text = read("eval_limits.csv")
    header, *rows = records(text)
    found = parse_table("eval/eval_limits.csv", text, None)
    assert found is not None and found.unbound == ()
    wanted = [
        (f"{r[0]}/{r[1]}.{column}", f"{r[0]}/{r[1]}", op, r[header.index(column)])
        for r in rows
        for column, op in (("min", ">="), ("max", "<="))
        if r[header.index(column)]
    ]
    assert [(g.name, g.metric, g.op, g.literal) for g in found.gates] == wanted
    assert {g.kind for g in found.gates} == {"limit"}
    for gate in found.gates:
        assert_span(text, gate.span)


def test_recognised_header_with_an_op_column() -> None:
    text = read("metric_ops.csv")
    _, *rows = records(text)
    found = parse_table("ci/metric_ops.csv", text, None)
    assert found is not None
    assert [(g.metric, g.op, g.literal, g.kind) for g in found.gates] == [
        (r[0], r[1], r[2], "limit") for r in rows
    ]


@pytest.mark.parametrize(
    "text",
    [
        read("sweep_results.csv"),  # a results table: no threshold column
        "name,value\nbleu,31.2\n",  # a value column says no direction
        "benchmark,threshold\nbleu,31.2\n",  # nor does a threshold without an op column
        "benchmark,expected,baseline\nbleu,31.2,30.9\n",  # two references: ambiguous
        "benchmark,expected,min\nbleu,31.2,30.0\n",  # a reference and a limit: ambiguous
        "metric,op,threshold\nbleu,~,31.2\n",  # not an operator
        read("expected_results.csv"),  # no header at all
    ],
)
def test_unrecognised_tables_give_a_hint_never_a_gate(text: str) -> None:
    found = parse_table("bench/table.csv", text, None)
    assert found is not None and found.gates == ()
    (hint,) = found.unbound
    (decl,) = parse_config(hint.config).files
    assert decl.path == "bench/table.csv" and decl.csv is not None
    row = first_numbers(text)
    assert hint.name in row and hint.literal in row


def test_the_hint_for_a_headerless_table_declares_its_columns() -> None:
    text = read("expected_results.csv")
    found = parse_table("benchmarks/expected_results.csv", text, None)
    assert found is not None
    (hint,) = found.unbound
    (decl,) = parse_config(hint.config).files
    assert decl.csv is not None
    following = parse_table("benchmarks/expected_results.csv", text, decl.csv)
    assert following is not None
    assert [g.literal for g in following.gates] == [r[2] for r in records(text)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "benchmark,expected\n",
        "a,b\nc,d\n",
        "model,expected\nresnet50,pass\n",  # expected outcomes, not numbers
    ],
)
def test_tables_without_numbers_are_not_threshold_files(text: str) -> None:
    assert parse_table("t.csv", text, None) is None


def test_rebaseline_rewrites_only_the_value_or_the_tolerance() -> None:
    text = read("throughput_expected.csv", VARIANTS["bom-crlf"])
    found = parse_table(THROUGHPUT, text, DECL)
    assert found is not None
    for gate in found.gates:
        edited = replace_literals(text, [(gate, "999.5")])
        assert edited == text[: gate.start] + "999.5" + text[gate.end :]
        again = parse_table(THROUGHPUT, edited, DECL)
        assert again is not None
        assert next(g for g in again.gates if g.name == gate.name).value == 999.5
    gate = found.gates[1]
    assert gate.tolerance is not None and gate.tolerance.rel_span is not None
    span = gate.tolerance.rel_span
    at_tolerance: Gate = gate.model_copy(
        update=span.model_dump(include={"literal", "start", "end", "line"})
    )
    edited = replace_literals(text, [(at_tolerance, "0.07")])
    assert edited == text[: span.start] + "0.07" + text[span.end :]
    again = parse_table(THROUGHPUT, edited, DECL)
    assert again is not None and again.gates[1].tolerance is not None
    assert again.gates[1].tolerance.rel == 0.07


def test_find_gates_reads_a_declared_table_and_one_named_without_csv() -> None:
    path = "bench/expected.csv"
    text = read("throughput_expected.csv")
    config = parse_config(
        "files:\n"
        f"  - path: {path}\n"
        "    csv: {key: benchmark, value: expected, tolerance: noise_margin, kind: reference}\n"
        '    metrics: {"llama2_7b_decode, bs1": perf/llama_decode}\n'
    )
    found = find_gates(path, text, config)
    assert found is not None
    assert [g.metric for g in found.gates][2] == "perf/llama_decode"
    assert all(g.kind == "reference" for g in found.gates)
    named = find_gates(path, read("sweep_results.csv"), parse_config(f"files: [{path}]"))
    assert named is not None and named.gates == () and len(named.unbound) == 1
    assert find_gates("other/results.csv", read("sweep_results.csv"), parse_config("")) is not None
