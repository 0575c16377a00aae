"""Pairing gates between the base and the head of a pull request."""

from __future__ import annotations

from pathlib import Path

from bot.core.models import ThresholdFile
from bot.core.thresholds.diff import diff_gates, removed_gates
from bot.core.thresholds.shell.script import parse_shell

SCRIPT = (Path(__file__).resolve().parent / "data" / "nightly_gsm8k.sh").read_text(encoding="utf-8")
PATH = "tests/ci/gsm8k.sh"


def parse(text: str) -> ThresholdFile:
    return parse_shell(PATH, text)


def summary(base: str | None, head: str) -> list[tuple[str, str, float | None, float, bool]]:
    changes = diff_gates(parse(base) if base is not None else None, parse(head))
    return [
        (c.head.name, c.head.metric, c.base.value if c.base else None, c.head.value, c.changed)
        for c in changes
    ]


def test_unchanged_file_pairs_every_gate() -> None:
    changes = diff_gates(parse(SCRIPT), parse(SCRIPT))
    assert len(changes) == len(parse(SCRIPT).gates)
    assert all(c.base == c.head and not c.changed for c in changes)


def test_changed_value_with_lines_shifted() -> None:
    head = "# a new comment line\n" + SCRIPT.replace(
        "EVAL_ACC_MIN_VALUE=0.56", "EVAL_ACC_MIN_VALUE=0.50"
    )
    changes = {(c.head.name, c.head.metric): c for c in diff_gates(parse(SCRIPT), parse(head))}
    acc = changes[("EVAL_ACC_MIN_VALUE", "eval/all/avg_score")]
    assert acc.changed and acc.base is not None
    assert (acc.base.value, acc.head.value) == (0.56, 0.50)
    assert acc.head.line == acc.base.line + 1
    tokens = changes[("AVG_NUM_TOKENS_MAX_VALUE", "generate/avg_num_tokens")]
    assert not tokens.changed and tokens.base is not None


def test_new_file_and_new_gate() -> None:
    assert all(base is None and changed for _, _, base, _, changed in summary(None, SCRIPT))
    base = "A=1\necho 'm >= $A'\n"
    head = "A=1\nB=2\necho 'm >= $A' 'n <= $B'\n"
    assert summary(base, head) == [("A", "m", 1.0, 1.0, False), ("B", "n", None, 2.0, True)]


def test_metric_or_operator_change_is_matched_by_name() -> None:
    base = "A=1\necho 'm >= $A'\n"
    assert summary(base, "A=1\necho 'm2 >= $A'\n") == [("A", "m2", 1.0, 1.0, True)]
    changes = diff_gates(parse(base), parse("A=1\necho 'm > $A'\n"))
    assert changes[0].base is not None and changes[0].base.op == ">=" and changes[0].changed


def test_ambiguous_rename_is_new() -> None:
    base = "A=1\necho 'm >= $A' 'n >= $A'\n"
    head = "A=1\necho 'x >= $A' 'y >= $A'\n"
    assert [b for _, _, b, _, _ in summary(base, head)] == [None, None]


def test_removed_gates() -> None:
    base = parse("A=1\nB=2\necho 'm >= $A' 'n <= $B'\n")
    head = parse("A=1\necho 'm >= $A'\n")
    assert [g.name for g in removed_gates(base, head)] == ["B"]
    assert [g.name for g in removed_gates(base, None)] == ["A", "B"]
    assert removed_gates(None, head) == []
