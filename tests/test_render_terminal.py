"""``threshold-bot review --format table``: the whole review, readable at 80 columns.

Through the real CLI on the demo example (its generated history): every line fits the
width, every gate name, metric and verdict is whole on one line, each explanation is there
(joined across wraps), and so are the regimes, the method line with the window's dates and
what to do in command-line words; the same at 160 columns.  The pure renderer shows
reference bands, placeholders, unbound values with their config lines and warnings.
"""

from __future__ import annotations

import json
import re
from contextlib import chdir
from datetime import datetime
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.formatting import day_month_year
from bot.core.models import PullRef, UnboundVariable
from bot.core.render.terminal import review_table
from demo.data import ExamplePaths, write_example
from tests.test_render import gate, review
from tests.test_render_kinds import REF, REL, reference

RUNNER = CliRunner()
SIGNS = {">=": "≥", ">": ">", "<=": "≤", "<": "<", "==": "="}
WORDS = {
    "ok": "ok",
    "unchanged": "unchanged",
    "too_tight": "too tight",
    "looser_than_rule": "looser than the rule",
    "unchanged_failing": "failing, unchanged",
    "no_data": "no data",
}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


def _review(paths: ExamplePaths, *extra: str, columns: int = 80) -> Result:
    """``review`` run in the example's directory, as a user would (relative paths)."""
    files = [p.relative_to(paths.root) for p in (paths.history, paths.head, paths.base)]
    args = ["review", "--history", files[0], "--file", files[1], "--base", files[2]]
    with chdir(paths.root):
        return RUNNER.invoke(app, [str(a) for a in (*args, *extra)], env={"COLUMNS": str(columns)})


def _flat(text: str) -> str:
    return " ".join(text.split())


def _date(text: str) -> str:
    return day_month_year(datetime.fromisoformat(text.replace("Z", "+00:00")))


@pytest.mark.parametrize("columns", [80, 160])
def test_the_table_holds_the_whole_review_at_the_width(example: ExamplePaths, columns: int) -> None:
    shown = _review(example, "--format", "table", columns=columns)
    data: dict[str, Any] = json.loads(_review(example, "--format", "json").stdout)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in shown.stdout  # nothing cut
    assert any(len(line) > 80 for line in lines) is (columns > 80)  # the width is used
    flat = _flat(shown.stdout)
    for g in data["gates"]:
        assert any(g["name"] in line for line in lines)
        assert any(f"{g['metric']} {SIGNS[g['op']]}" in line for line in lines)
        verdicts = [line.split(None, 1)[1] for line in lines if line.startswith("  verdict ")]
        assert WORDS[g["verdict"]] in verdicts
        assert _flat(g["explanation"]) in flat
        assert f"{g['file']} line {g['line']}" in flat
    # the regimes: each period with its runs, and the method line with the window's dates
    assert "Regimes" in lines
    for regime in data["regimes"]:
        assert _date(regime["start"]) in shown.stdout and _date(regime["end"]) in shown.stdout
        assert f"{regime['runs']} runs" in shown.stdout
    # at 80 columns a block per regime; at 160 a row per metric, a column per regime
    assert any(line.startswith("median of") for line in lines) is (columns == 160)
    for metric in {m for regime in data["regimes"] for m in regime["medians"]} & {
        g["metric"] for g in data["gates"]
    }:
        assert sum(metric in line for line in lines) >= (2 if columns == 80 else 1)
    window = data["gates"][0]["window"]
    dates = f"({_date(window['first'])} – {_date(window['last'])})"
    assert f"Window: the last {window['runs']} finished runs with the metric {dates}" in flat
    # what to do, in command-line words: the edit at file:line, the rebaseline command
    fixes = [g for g in data["gates"] if g["verdict"] in ("too_tight", "looser_than_rule")]
    assert fixes
    for g in fixes:
        value = f"{g['recomputed']:.{g['decimals']}f}"
        assert f"{g['name']} = {value} at {g['file']}:{g['line']}" in flat
    head = example.head.relative_to(example.root)
    pasted = _flat(shown.stdout.replace("\\\n", ""))  # as a shell reads continued lines
    assert f"threshold-bot rebaseline --file {head} --history history.jsonl" in pasted
    assert "/rebaseline" not in shown.stdout and "Approve thresholds" not in shown.stdout


def test_the_table_is_written_to_a_file_at_80_columns(example: ExamplePaths) -> None:
    out = example.root / "review.txt"
    written = _review(example, "--format", "table", "--output", str(out), columns=0)
    assert written.exit_code == 0 and written.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.splitlines()[0].startswith("❌ Action required")
    assert all(line == line.rstrip() for line in text.splitlines())  # no padding
    # without --format, outside a terminal, the PR comment as before
    assert _review(example).stdout.startswith("<!-- threshold-bot:review -->")


def _render(width: int, **kw: Any) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(review_table(review(**kw)))
    return console.export_text()


def test_references_placeholders_hints_and_warnings_at_80_columns() -> None:
    long_name = "test_accuracy_of_the_gsm8k_benchmark_with_the_new_tokenizer_after_step_500"
    ref = reference(
        name=long_name,
        worst_step=45,
        warnings=("the metric is logged twice in some runs",),
    )
    placeholder = gate(name="TOKENS_MAX", ignored="marked # threshold-bot: ignore")
    hint = UnboundVariable(
        name="MAX_STEPS",
        file="tests/ci/nightly.sh",
        line=11,
        literal="40",
        reason="not compared with a metric",
        config="files:\n  - path: tests/ci/nightly.sh\n    gates:\n      - name: MAX_STEPS\n",
    )
    text = _render(
        80,
        gates=(ref, placeholder),
        hints=(hint,),
        warnings=("the history holds 3 duplicate run ids",),
    )
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    flat = _flat(text)
    assert any(long_name in line for line in lines)
    assert f"eval/gsm8k/acc ≈ 0.95 ±8% (≥ {REF - REL * REF:.3f})" in flat  # the band
    assert "worst at step 45" in flat and "in TestAccuracy.test_gsm8k" in flat
    assert "warning: the metric is logged twice in some runs" in flat
    assert "Placeholders, not judged (1)" in lines
    assert "- TOKENS_MAX = 0.50 (tests/ci/gsm8k.sh line 38): marked # threshold-bot: ignore" in (
        lines
    )
    assert "MAX_STEPS = 40 (tests/ci/nightly.sh line 11): not compared with a metric" in flat
    assert [line.rstrip() for line in lines if line.startswith("    ")][-4:] == [
        "    files:",
        "      - path: tests/ci/nightly.sh",
        "        gates:",
        "          - name: MAX_STEPS",
    ]
    assert "warning: the history holds 3 duplicate run ids" in flat
    assert "Rule for a reference ± tolerance: the reference is the window's median" in flat


def test_the_regime_table_is_a_table_when_it_fits() -> None:
    wide = _render(160).splitlines()
    narrow = _render(40).splitlines()
    header = next(line for line in wide if line.startswith("period"))
    assert "runs" in header and "eval/all/avg_score" in header and "started by" in header
    assert not any(line.startswith("period") for line in narrow)  # a block per regime
    assert max(len(line) for line in narrow) <= 40
    assert sum("eval/all/avg_score" in line for line in narrow) >= 2


def test_pull_requests_start_the_regimes_they_are_known_for() -> None:
    first, *rest = review().changes
    kw: dict[str, Any] = {
        "changes": (first.model_copy(update={"pulls": (1799,)}), *rest),
        "pulls": {1799: PullRef(number=1799, title="Switch the tokenizer")},
    }
    (row,) = [line for line in _render(80, **kw).splitlines() if "#1799" in line]
    assert row.startswith("10 Jul 2026 – 19 Jul 2026") and "Switch the tokenizer" in row
    narrow = _flat(_render(40, **kw))
    assert "10 Jul 2026 – 19 Jul 2026, 10 runs, started by #1799 Switch the tokenizer" in narrow


def test_outside_text_of_the_regimes_prints_no_escape_sequence() -> None:
    hostile = "eval/\x1b]0;pwned\x07score\x9b2J"
    first, *rest = review().regimes
    regimes = (
        first.model_copy(update={"medians": {hostile: 0.5}}),
        *(r.model_copy(update={"medians": {hostile: 0.6}}) for r in rest),
    )
    change = review().changes[0].model_copy(update={"pulls": (7,)})
    title = "Fix \x1b[2Jthe \x1b]8;;https://evil.example\x07loader"
    for width in (40, 80, 160):
        text = _render(
            width,
            gates=(gate(metric=hostile, source="wandb:org/\x1b]0;pwned\x07proj"),),
            regimes=regimes,
            changes=(change,),
            pulls={7: PullRef(number=7, title=title)},
        )
        assert re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) == []
        assert "eval/score" in text and "#7 Fix the loader" in _flat(text)
        assert "pwned" not in text and "evil.example" not in text
        assert "wandb:org/proj" in _flat(text)


def test_an_unreadable_history_says_so_in_command_line_words() -> None:
    unverified = gate(verdict="no_data", recomputed=None, changed=False)
    error = "W&B answered 401: set WANDB_API_KEY on the server"
    text = _flat(_render(80, conclusion="neutral", gates=(unverified,), error=error))
    assert text.startswith("⚪ Not reviewed: the run history could not be read")
    assert "set WANDB_API_KEY" in text and "on the server" not in text
    assert "Nothing was checked: the run history could not be read." in text


def test_values_not_bound_to_a_gate_are_listed_with_what_to_do() -> None:
    hint = UnboundVariable(
        name="EVAL_MIN",
        file="tests/ci/nightly.sh",
        line=9,
        literal="0.5",
        reason="compared with a metric the config does not name",
        config="files:\n  - path: tests/ci/nightly.sh\n",
    )
    text = _render(80, conclusion="neutral", gates=(), regimes=(), changes=(), hints=(hint,))
    lines = text.splitlines()
    assert lines[0] == "⚪ No gate bound in this change: 1 value like a threshold below."
    assert "Not checked (1 numeric value is not bound to a gate)" in lines
    assert 'Declare the values under "Not checked" that are thresholds' in _flat(text)
    assert "Regimes" not in lines and "Gates" not in lines
