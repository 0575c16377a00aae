"""Reference gates, placeholders and hints in the PR comment, the check run, the terminal
table and the JSON review, from hand-built Reviews."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from bot.core.models import Band, GateReview, Tolerance, UnboundVariable
from bot.core.render.markdown import escape
from bot.core.render.review import render_check, render_comment, render_json
from bot.core.render.terminal import review_table
from bot.core.thresholds.hints import config_lines
from tests.test_render import MD, gate, review, tables

REF, REL = 0.95, 0.08  # eval/gsm8k/acc ≈ 0.95 ±8%


def reference(**kw: Any) -> GateReview:
    """A reference gate as the analysis reports it: ``acc >= 0.95 * (1 - 0.08)``."""
    margin = REL * REF
    base: dict[str, Any] = {
        "name": "gsm8k_acc",
        "file": "tests/test_accuracy.py",
        "line": 12,
        "metric": "eval/gsm8k/acc",
        "op": ">=",
        "old": 0.97,
        "proposed": REF,
        "recomputed": 0.93,
        "old_literal": "0.97",
        "proposed_literal": "0.95",
        "kind": "reference",
        "reference": REF,
        "tolerance": Tolerance(rel=REL),
        "sides": "lower",
        "old_band": Band(band_low=0.97 - REL * 0.97),
        "proposed_band": Band(band_low=REF - margin),
        "context": "TestAccuracy.test_gsm8k",
        "explanation": "the band holds every run",
    }
    base.update(kw)
    return gate(**base)


def gate_cells(text: str) -> list[list[str]]:
    return [[c.content for c in row] for row in tables(text)[0][1:]]


def test_reference_row_reads_as_ci_checks_it() -> None:
    low = f"{REF - REL * REF:.3f}"  # 0.874
    text = render_comment(review(gates=(reference(),)))
    [row] = gate_cells(text)
    assert row[0] == "<code>gsm8k\\_acc</code> in <code>TestAccuracy.test\\_gsm8k</code>"
    assert row[1] == f"<code>eval/gsm8k/acc</code> ≈ 0.95 ±8% (≥ {low})"
    assert row[2] == "0.97 → **0.95**"  # old → proposed reference
    assert row[3] == "0.93"  # the rule's reference
    assert row[5] == "**3**/30" and row[6] == "0/20"
    line = "- <code>gsm8k\\_acc</code> in <code>TestAccuracy.test\\_gsm8k</code> "
    assert line + "(tests/test\\_accuracy.py line 12): the band holds every run." in text


def test_upper_and_two_sided_bands() -> None:
    upper = reference(op="<=", sides="upper", proposed_band=Band(band_high=REF + REL * REF))
    both = reference(
        name="both",
        op="==",
        sides="both",
        proposed_band=Band(band_low=REF - REL * REF, band_high=REF + REL * REF),
    )
    up_row, both_row = gate_cells(render_comment(review(gates=(upper, both))))
    high = f"{REF + REL * REF:.3f}"  # 1.026
    assert up_row[1].endswith(f"≈ 0.95 ±8% (≤ {high})")
    assert both_row[1].endswith(f"≈ 0.95 ±8% ({REF - REL * REF:.3f} – {high})")


def test_band_from_the_tolerance_when_the_review_has_none() -> None:
    absolute = reference(
        proposed=2.5, proposed_literal="2.5", tolerance=Tolerance(abs=0.05), proposed_band=None
    )
    absolute = absolute.model_copy(update={"op": "<=", "sides": "upper", "decimals": 1})
    [row] = gate_cells(render_comment(review(gates=(absolute,))))
    assert row[1] == f"<code>eval/gsm8k/acc</code> ≈ 2.5 ±0.05 (≤ {2.5 + 0.05:.2f})"
    exact = reference(tolerance=None, proposed_band=None)
    [row] = gate_cells(render_comment(review(gates=(exact,))))
    assert row[1].endswith("≈ 0.95 ±0 (≥ 0.95)")


def test_aggregation_and_worst_step() -> None:
    curve = reference(
        name="lm loss",
        metric="lm loss",
        op="<=",
        sides="upper",
        context="",
        proposed=10.79,
        proposed_literal="10.79",
        tolerance=Tolerance(rel=0.05),
        proposed_band=Band(band_high=10.79 * 1.05),
        worst_step=45,
        aggregation="median of the last 5 steps",
        file="tests/golden/loss.json",
        line=7,
    )
    text = render_comment(review(gates=(curve,)))
    [row] = gate_cells(text)
    assert row[0] == "<code>lm loss</code>"  # no test function, no "in"
    assert row[1] == (
        f"median of the last 5 steps of <code>lm loss</code> ≈ 10.79 ±5% (≤ {10.79 * 1.05:.4f})"
    )
    assert "(tests/golden/loss.json line 7; worst at step 45)" in text


def test_placeholders_are_listed_apart_and_never_asked_for() -> None:
    placeholder = gate(
        name="TOKENS_MAX",
        verdict="too_tight",
        ignored="marked `# threshold-bot: ignore` (line 9)",
        proposed_literal="999",
        proposed=999.0,
        recomputed=300.0,
    )
    judged = gate(verdict="too_tight", recomputed=0.5, proposed=0.55)
    text = render_comment(review(conclusion="action_required", gates=(judged, placeholder)))
    rows = gate_cells(text)
    assert [r[0] for r in rows] == ["<code>EVAL\\_ACC\\_MIN\\_VALUE</code>"]
    assert "1 of 1 gate needs attention" in text.splitlines()[1]
    assert "1 placeholder not judged" in text.splitlines()[1]
    assert "Placeholders, not judged (1):" in text
    reason = escape(placeholder.ignored)  # outside text (the parser's words about the file)
    assert f"- <code>TOKENS\\_MAX</code> = 999 (tests/ci/gsm8k.sh line 38): {reason}\n" in text
    what_to_do = render_comment(
        review(conclusion="action_required", gates=(judged, placeholder)), app_mode=True
    ).split("#### What to do")[1]
    assert "TOKENS" not in what_to_do and "EVAL\\_ACC\\_MIN\\_VALUE" in what_to_do
    only = render_check(review(gates=(placeholder,)))
    assert only.title == "1 placeholder, nothing to judge"
    assert "Nothing to judge" in render_comment(review(gates=(placeholder,))).splitlines()[1]


def test_hints_show_config_lines_in_a_fence_that_cannot_break() -> None:
    sneaky = "LOSS`````MAX"
    config = config_lines("train.sh", sneaky, "train/loss")
    hint = UnboundVariable(
        name=sneaky,
        file="train.sh",
        line=4,
        literal="2.5",
        reason="passed as a positional argument",
        config=config,
    )
    plain = UnboundVariable(name="SEED", file="train.sh", line=2, literal="42", reason="r")
    text = render_comment(review(hints=(hint, plain)))
    assert "Not checked (2 numeric values are not bound to a gate):" in text
    assert text.count("<details>") == text.count("</details>") == 1
    tokens = MD.parse(text)
    [fence] = [t for t in tokens if t.type == "fence"]
    assert fence.info == "yaml" and fence.content == config + "\n"
    assert "`" * 6 + "yaml" in text  # longer than the five backticks of the name
    # the block is inside the folded part, after its summary
    assert text.index("<details><summary>Config lines that would declare it (1)") < text.index(
        "`" * 6 + "yaml"
    )
    without = render_comment(review(hints=(plain,)))
    assert "<details>" not in without and "yaml" not in without


def test_rule_values_and_command_for_a_tolerance_too_tight() -> None:
    needed = Tolerance(rel=0.12)
    tight = reference(
        verdict="too_tight",
        recomputed=0.93,
        recomputed_tolerance=needed,
        proposed_failures={"failed": 2, "total": 20},
    )
    assert needed.margin(0.93) > Tolerance(rel=REL).margin(0.93)  # the data: too tight
    text = render_comment(review(conclusion="action_required", gates=(tight,)), app_mode=True)
    [row] = gate_cells(text)
    assert row[3] == "0.93 ±12%"
    assert "Comment <code>/rebaseline gsm8k\\_acc --tolerance</code>" in text
    assert "\n- Or press **Approve thresholds**" in text
    assert "(<code>gsm8k\\_acc</code> = 0.93 ±12%)" in text
    cli = render_comment(review(conclusion="action_required", gates=(tight,)))
    assert "<code>gsm8k\\_acc = 0.93 ±12%</code> at <code>tests/test\\_accuracy.py:12</code>" in cli
    assert " gsm8k_acc --tolerance\n  ```" in cli and "/rebaseline" not in cli
    # a wide enough tolerance: only the reference moves, no --tolerance
    fits = reference(verdict="looser_than_rule", recomputed_tolerance=Tolerance(rel=0.05))
    app = render_comment(review(conclusion="action_required", gates=(fits,)), app_mode=True)
    assert "Comment <code>/rebaseline gsm8k\\_acc</code>" in app and "--tolerance" not in app
    assert "**Rule for a reference ± tolerance:** the reference is the window's median" in app


def test_json_has_the_reference_contract() -> None:
    spanned = Tolerance.model_validate(
        {"rel": REL, "rel_span": {"literal": "0.08", "start": 40, "end": 44, "line": 12}}
    )
    data = json.loads(render_json(review(gates=(reference(tolerance=spanned), gate()))))
    ref, limit = data["gates"]
    assert ref["kind"] == "reference" and limit["kind"] == "limit"
    assert ref["reference"] == REF and ref["sides"] == "lower"
    assert ref["tolerance"] == {"rel": REL, "abs": None}  # no file offsets
    assert ref["proposed_band"] == {"band_low": REF - REL * REF, "band_high": None}
    assert ref["old_band"] == {"band_low": 0.97 - REL * 0.97, "band_high": None}
    assert ref["context"] == "TestAccuracy.test_gsm8k" and ref["ignored"] == ""
    assert limit["tolerance"] is None and limit["proposed_band"] is None


def test_terminal_table_shows_references_and_placeholders() -> None:
    console = Console(width=250, record=True, color_system=None)
    placeholder = gate(name="TOKENS_MAX", ignored="listed in the config's ignore")
    console.print(review_table(review(gates=(reference(worst_step=45), placeholder))))
    text = console.export_text()
    assert f"eval/gsm8k/acc ≈ 0.95 ±8% (≥ {REF - REL * REF:.3f})" in text
    assert "in TestAccuracy.test_gsm8k" in text and "worst at step 45" in text
    assert "Placeholders, not judged (1)\n- TOKENS_MAX = 0.50" in text
    assert "listed in the config's ignore" in text


def test_the_test_is_not_named_twice() -> None:
    named = reference(name="TestAccuracy.test_gsm8k[acc]", context="TestAccuracy.test_gsm8k")
    [row] = gate_cells(render_comment(review(gates=(named,))))
    assert row[0] == "<code>TestAccuracy.test\\_gsm8k\\[acc\\]</code>"
