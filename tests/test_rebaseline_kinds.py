"""``/rebaseline`` on reference gates, tolerances, coupled literals, golden curves and
placeholders: planned over fixture files in the shapes ML repositories write, with the
review built by the analysis from a history made here."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from bot.adapters.github.api import PullInfo
from bot.core.analysis.review import build_review
from bot.core.commands import Command, parse_command_line
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import (
    Coupled,
    CurvePoint,
    Gate,
    GateChange,
    History,
    Review,
    RuleSettings,
    Run,
    SourceSpec,
    Span,
    ThresholdFile,
    Tolerance,
)
from bot.core.thresholds.edit import format_literal
from bot.features.rebaseline.apply import curve_points
from bot.features.rebaseline.literals import tolerance_literal
from bot.features.rebaseline.plan import FilePlan, RebaselineResult, gate_key, plan_file
from bot.features.rebaseline.provenance import Provenance, supports_comments, write_provenance
from bot.features.rebaseline.replies import MAX_STEPS, rebaseline_reply
from bot.features.review.pull import PullThresholds

FIXTURES = Path(__file__).parent / "fixtures" / "gates" / "rebaseline"
TODAY = date(2026, 12, 2)
T0 = datetime(2026, 10, 1, tzinfo=UTC)


def text_of(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def span(text: str, literal: str, after: str = "") -> Span:
    """Where ``literal`` is written in ``text`` (its first occurrence after ``after``)."""
    start = text.index(literal, text.index(after) if after else 0)
    return Span(
        literal=literal, start=start, end=start + len(literal), line=text.count("\n", 0, start) + 1
    )


def reference_gate(path: str, text: str, literal: str, **kw: Any) -> Gate:
    where = span(text, literal, kw.pop("after", ""))
    fields: dict[str, Any] = {
        "name": "GSM8K_ACC_REF",
        "file": path,
        "line": where.line,
        "metric": "eval/gsm8k/acc",
        "op": ">=",
        "value": float(literal),
        "literal": literal,
        "start": where.start,
        "end": where.end,
        "kind": "reference",
    }
    fields.update(kw)
    return Gate(**fields)


def runs(
    values: dict[str, list[float]], series: list[dict[str, dict[int, float]]] | None = None
) -> History:
    count = len(next(iter(values.values())))
    return History(
        runs=tuple(
            Run(
                id=f"r{i}",
                created_at=T0 + timedelta(days=i),
                summary={metric: v[i] for metric, v in values.items()},
                series=series[i] if series else {},
            )
            for i in range(count)
        )
    )


def command(text: str) -> Command:
    cmd = parse_command_line(text)
    assert isinstance(cmd, Command)
    return cmd


def plan(
    tf: ThresholdFile, text: str, history: History, line: str, **kw: Any
) -> tuple[FilePlan, Review]:
    review = build_review([GateChange(head=g, base=g) for g in tf.gates], history)
    return plan_file(tf, text, review, command(line), today=TODAY, by="maya", **kw), review


def window(values: list[float], size: int = 20) -> list[float]:
    return values[-size:]


# --------------------------------------------------------------------------- references

PY = "tests/nightly/gsm8k_accuracy.py"


def accuracy_file(tolerance_in_file: bool = True) -> tuple[str, ThresholdFile]:
    text = text_of("gsm8k_accuracy.py")
    rel_span = span(text, "0.05", after="ACC_RTOL =") if tolerance_in_file else None
    gate = reference_gate(
        PY,
        text,
        "0.62",
        after="GSM8K_ACC_REF =",
        tolerance=Tolerance(rel=0.05, rel_span=rel_span),
        context="TestAccuracy.test_gsm8k",
    )
    return text, ThresholdFile(path=PY, gates=(gate,))


def accuracy_history(spread: float) -> tuple[History, list[float]]:
    rng = np.random.default_rng(3)
    values = [float(0.58 + spread * rng.uniform(-1, 1)) for _ in range(30)]
    return runs({"eval/gsm8k/acc": values}), values


def test_reference_is_rewritten_and_the_tolerance_left_alone() -> None:
    text, tf = accuracy_file()
    history, values = accuracy_history(0.004)  # the runs sit well inside a 5% band
    result, review = plan(tf, text, history, "/rebaseline")
    median = statistics.median(window(values))
    want = f"{median:.2f}"  # the literal's two decimals (and two significant digits)
    [edit] = result.edits
    assert edit.gate.name == "GSM8K_ACC_REF" and edit.part == ""
    assert (edit.old_literal, edit.new_literal) == ("0.62", want)
    assert "GSM8K_ACC_REF = " + want + "\n" in result.text
    assert "ACC_RTOL = 0.05\n" in result.text  # not asked: untouched
    assert result.tolerances == ()  # 5% around the new reference holds every run
    assert all(v >= float(want) * (1 - 0.05) for v in window(values))
    # a comment-friendly format: the provenance says how references were recomputed
    assert result.provenance_written
    assert (
        "#   rule: references are the median of the last 20 finished runs, 20 runs" in result.text
    )
    assert "allowance" not in result.text  # no limit changed
    compile(result.text, PY, "exec")  # still Python
    [gate_review] = review.gates
    assert gate_review.verdict == "unchanged_failing"  # 0.62 -5% is above every run


def _needed_rel(reference: float, values: list[float]) -> Decimal:
    """The relative tolerance for the band below ``reference`` to hold ``values``, rounded
    up at two decimals (the literal's), or more for two significant digits."""
    ref = Decimal(repr(reference))
    need = (ref - Decimal(repr(min(values)))) / ref
    places = max(2, 1 - need.adjusted())  # or more, to show two significant digits
    return need.quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING)


def test_tolerance_too_tight_is_named_unless_asked_then_widened() -> None:
    text, tf = accuracy_file()
    history, values = accuracy_history(0.06)  # ±10%: wider than the 5% tolerance
    new_ref = float(f"{statistics.median(window(values)):.2f}")
    needed = _needed_rel(new_ref, window(values))
    assert needed > Decimal("0.05")  # the data: the tolerance is too tight

    untouched, _ = plan(tf, text, history, "/rebaseline")
    assert [e.part for e in untouched.edits] == [""]
    [note] = untouched.tolerances
    assert (note.gate, note.reason, note.needed) == (
        "GSM8K_ACC_REF",
        "not_asked",
        Tolerance(rel=float(needed)).describe(),
    )
    assert "ACC_RTOL = 0.05\n" in untouched.text

    widened, _ = plan(tf, text, history, "/rebaseline --tolerance")
    edits = {e.part: e for e in widened.edits}
    assert set(edits) == {"", "tolerance"}
    assert edits["tolerance"].new_literal == f"{needed}"
    assert f"ACC_RTOL = {needed}\n" in widened.text and widened.tolerances == ()
    # the new band holds every run of the window
    rel = float(edits["tolerance"].new_literal)
    assert all(v >= new_ref * (1 - rel) for v in window(values))
    assert "tolerance widened where the runs did not fit" in widened.text


def test_a_tolerance_set_in_the_config_is_named_in_the_reply() -> None:
    text, tf = accuracy_file(tolerance_in_file=False)
    history, _ = accuracy_history(0.06)
    result, _ = plan(tf, text, history, "/rebaseline --tolerance")
    assert [e.part for e in result.edits] == [""]  # only the reference
    [note] = result.tolerances
    assert note.reason == "config"
    reply = rebaseline_reply(_result(result))
    assert f"change it to {note.needed} in `{CONFIG_PATH}`" in reply
    assert "<code>GSM8K\\_ACC\\_REF</code>" in reply


@pytest.mark.parametrize(
    ("literal", "old", "new", "expected"),
    [
        ("0.08", 0.08, 0.1234, "0.13"),  # the tolerance itself: rounded up
        ("8", 0.08, 0.1234, "13"),  # a percentage
        ("0.92", 0.08, 0.1234, "0.87"),  # a factor 1 - rtol: rounded down
        ("1.08", 0.08, 0.1234, "1.13"),  # a factor 1 + rtol
        ("1e-3", 0.001, 0.00123, "0.0013"),  # exponent literal: two significant digits
        ("0.5", 0.08, 0.1234, None),  # none of these forms
    ],
)
def test_tolerance_literal_forms(
    literal: str, old: float, new: float, expected: str | None
) -> None:
    where = Span(literal=literal, start=0, end=len(literal), line=1)
    assert tolerance_literal(where, old, new, 2) == expected
    if expected is not None:
        written = float(expected)
        # decoded back, the literal allows at least the tolerance needed
        decoded = {"0.08": written, "8": written / 100, "0.92": 1 - written, "1.08": written - 1}
        assert decoded.get(literal, written) >= new - 1e-12


# --------------------------------------------------------------------------- coupled

YAML = "ci/spec_decode_acceptance.yaml"


def test_coupled_literal_follows_its_reference() -> None:
    text = text_of("spec_decode_acceptance.yaml")
    gates = []
    for model, ref, low in (
        ("llama3-8b-eagle", "3.42", "3.25"),
        ("qwen2-7b-medusa", "2.87", "2.73"),
    ):
        coupled = Coupled(
            name=f"models.{model}.min_al", factor=0.95, span=span(text, low, after=model)
        )
        gates.append(
            reference_gate(
                YAML,
                text,
                ref,
                after=model,
                name=f"models.{model}.ref_al",
                metric=f"spec_decode/{model}/acceptance_length",
                tolerance=Tolerance(rel=0.05),
                coupled=(coupled,),
            )
        )
    rng = np.random.default_rng(11)
    llama = [float(3.1 + rng.normal(0, 0.01)) for _ in range(25)]
    history = runs({gates[0].metric: llama, gates[1].metric: [2.87] * 25})
    result, _ = plan(ThresholdFile(path=YAML, gates=tuple(gates)), text, history, "/rebaseline")
    new_ref = f"{statistics.median(window(llama)):.2f}"
    new_min = format_literal(0.95 * float(new_ref), 2)
    assert [(e.label, e.old_literal, e.new_literal) for e in result.edits] == [
        ("models.llama3-8b-eagle.ref_al", "3.42", new_ref),
        ("models.llama3-8b-eagle.ref_al coupled models.llama3-8b-eagle.min_al", "3.25", new_min),
    ]  # qwen2 already has the rule's reference: neither of its literals moves
    data = yaml.safe_load(result.text)
    assert data["models"]["llama3-8b-eagle"] == {
        "draft": "eagle-llama3-8b",
        "ref_al": float(new_ref),
        "min_al": float(new_min),
    }
    assert data["models"]["qwen2-7b-medusa"]["min_al"] == 2.73
    added = [line for line in result.text.splitlines() if line not in text.splitlines()]
    assert [line.lstrip()[:15] for line in added] == [
        "# threshold-bot",
        "#   rule: refer",
        "ref_al: " + new_ref,
        "min_al: " + new_min,
    ]  # the provenance comment, indented as the first literal changed, then the literals


# --------------------------------------------------------------------------- curves

JSON = "tests/functional/golden_lm_loss.json"
STEPS = (1, 6, 11, 16)


def curve_gate(text: str) -> Gate:
    points = []
    for step in STEPS:
        literal_at = span(text, f'"{step}": ')
        start = literal_at.end
        raw = text[start : text.index("\n", start)].rstrip(",")
        literal = raw.strip('"')
        start += raw.index(literal)
        where = Span(literal=literal, start=start, end=start + len(literal), line=literal_at.line)
        points.append(
            CurvePoint(step=step, value=None if literal == "nan" else float(literal), span=where)
        )
    last = points[-1].span
    return Gate(
        name="lm loss",
        file=JSON,
        line=last.line,
        metric="lm loss",
        op="==",
        value=float(last.literal),
        literal=last.literal,
        start=last.start,
        end=last.end,
        kind="reference",
        tolerance=Tolerance(rel=0.05),
        points=tuple(points),
        source=SourceSpec(kind="file", path="ci/history.jsonl"),
    )


def curve_history() -> History:
    rng = np.random.default_rng(5)
    golden = {1: 10.85, 6: 10.79, 11: 10.70, 16: 10.61}
    series = [
        {"lm loss": {s: float(v - 0.2 + rng.normal(0, 0.01)) for s, v in golden.items()}}
        for _ in range(25)
    ]
    return runs({"lm loss": [s["lm loss"][16] for s in series]}, series)


class Fetched:
    """A history source that counts what it is asked."""

    def __init__(self, history: History) -> None:
        self.history, self.asked = history, []  # type: ignore[var-annotated]

    def fetch(self, spec: SourceSpec) -> History:
        self.asked.append(spec)
        return self.history


def test_curve_steps_are_rewritten_and_nan_kept() -> None:
    text = text_of("golden_lm_loss.json")
    gate = curve_gate(text)
    tf = ThresholdFile(path=JSON, gates=(gate,))
    history = curve_history()
    review = build_review([GateChange(head=gate, base=gate)], history)
    found = PullThresholds(
        pull=_pull(),
        config=RepoConfig(),
        base_sha="b" * 40,
        files=(tf,),
        changes=(GateChange(head=gate, base=gate),),
    )
    source = Fetched(history)
    points = curve_points(found, review, source)
    assert [s.series for s in source.asked] == [("lm loss",)]  # the per-step series asked for
    result = plan_file(tf, text, review, command("/rebaseline"), today=TODAY, points=points)
    medians = {
        s: statistics.median(r.series["lm loss"][s] for r in history.finished[-20:]) for s in STEPS
    }
    expected = {s: f"{medians[s]:.2f}" for s in (1, 6, 16)}
    assert {e.part: e.new_literal for e in result.edits} == {
        f"step {s}": v for s, v in expected.items()
    }
    data = json.loads(result.text)  # still JSON: no provenance comment in it
    assert not result.provenance_written and "threshold-bot" not in result.text
    assert data["lm loss"]["values"] == {
        "1": float(expected[1]),
        "6": float(expected[6]),
        "11": "nan",
        "16": float(expected[16]),
    }
    # without the steps' values a curve is left alone, never half-rewritten
    alone = plan_file(tf, text, review, command("/rebaseline"), today=TODAY)
    assert alone.edits == () and alone.no_data == ("lm loss",)


def test_reply_lists_a_long_curve_briefly() -> None:
    text = text_of("golden_lm_loss.json")
    gate = curve_gate(text)
    review = build_review([GateChange(head=gate, base=gate)], curve_history())
    many = [(p, (p.value or 0) - 0.5) for p in gate.points] * 3  # the same steps, for the rows
    tf = ThresholdFile(path=JSON, gates=(gate,))
    result = plan_file(
        tf, text, review, command("/rebaseline"), today=TODAY, points={gate_key(gate): many[:4]}
    )
    rows = result.edits + tuple(
        e.model_copy(update={"part": f"step {100 + i}"}) for i, e in enumerate(result.edits * 2)
    )
    reply = rebaseline_reply(_result(result.model_copy(update={"edits": rows})))
    assert (
        reply.count(
            "| <code>tests/functional/golden\\_lm\\_loss.json</code> | <code>lm loss</code> step"
        )
        == MAX_STEPS
    )
    assert f"and {len(rows) - MAX_STEPS} more steps" in reply


# --------------------------------------------------------------------------- placeholders, formats


def test_placeholders_are_never_rewritten() -> None:
    text, tf = accuracy_file()
    ignored = tf.gates[0].model_copy(update={"ignored": "marked `# threshold-bot: ignore`"})
    history, _ = accuracy_history(0.004)
    tf = ThresholdFile(path=PY, gates=(ignored,))
    named, _ = plan(tf, text, history, "/rebaseline GSM8K_ACC_REF --tolerance")
    assert named.edits == () and named.text == text and named.ignored == ("GSM8K_ACC_REF",)
    assert "Placeholders, never rewritten: <code>GSM8K\\_ACC\\_REF</code>" in rebaseline_reply(
        _result(named)
    )
    every, _ = plan(tf, text, history, "/rebaseline")
    assert every.edits == () and every.ignored == ()


def test_no_provenance_in_csv_tables() -> None:
    text = text_of("benchmark_expectations.csv")
    path = "ci/benchmark_expectations.csv"
    gate = reference_gate(
        path,
        text,
        "0.712",
        name="gsm8k",
        metric="gsm8k",
        op="==",
        tolerance=Tolerance(abs=0.015, abs_span=span(text, "0.015")),
    )
    history = runs({"gsm8k": [0.70 + i / 10_000 for i in range(25)]})
    result, _ = plan(ThresholdFile(path=path, gates=(gate,)), text, history, "/rebaseline")
    [edit] = result.edits
    assert edit.new_literal == f"{statistics.median(window(history_values(history, 'gsm8k'))):.3f}"
    assert not result.provenance_written and "#" not in result.text
    assert result.text.splitlines()[2] == f"gsm8k,{edit.new_literal},0.015"


def history_values(history: History, metric: str) -> list[float]:
    return [r.summary[metric] for r in history.finished]


def _pull() -> PullInfo:
    return PullInfo(
        number=7,
        title="t",
        url="u",
        state="open",
        draft=False,
        merged=False,
        author="a",
        base_ref="main",
        base_sha="b" * 40,
        head_ref="h",
        head_sha="h" * 40,
        head_repo="o/r",
    )


def _result(file_plan: FilePlan) -> RebaselineResult:
    return RebaselineResult(mode="dry_run", pull=_pull(), rule=RuleSettings(), plans=(file_plan,))


@pytest.mark.parametrize(
    ("path", "comments"),
    [
        ("ci/benchmark_expectations.csv", False),
        ("ci/golden.json", False),
        ("ci/runs.jsonl", False),
        ("tests/test_accuracy.py", True),
        ("ci/nightly.sh", True),
        ("ci/thresholds.toml", True),
        ("ci/spec.yaml", True),
    ],
)
def test_provenance_only_where_hash_starts_a_comment(path: str, comments: bool) -> None:
    assert supports_comments(path) is comments


def test_provenance_never_splits_a_continued_line() -> None:
    text = "python eval.py \\\n  --min-acc 0.56 \\\n  --max-loss 2.5\necho done\n"
    prov = Provenance(rule=RuleSettings(), window_first=None, window_last=None, runs=20, on=TODAY)
    after = write_provenance(text, prov, first_gate_line=3)  # the gate is on line 3
    assert after.endswith(text) and after.startswith("# threshold-bot: rebaselined 2026-12-02")


def test_a_curve_whose_source_fails_now_is_left_alone() -> None:
    text = text_of("golden_lm_loss.json")
    gate = curve_gate(text)
    review = build_review([GateChange(head=gate, base=gate)], curve_history())
    found = PullThresholds(
        pull=_pull(),
        config=RepoConfig(),
        base_sha="b" * 40,
        files=(ThresholdFile(path=JSON, gates=(gate,)),),
        changes=(GateChange(head=gate, base=gate),),
    )

    class Down:
        def fetch(self, spec: SourceSpec) -> History:
            raise HistoryUnavailable("W&B answered 503")

    assert curve_points(found, review, Down()) == {}


def test_a_reference_literal_shared_by_disagreeing_gates_is_left_alone() -> None:
    text, tf = accuracy_file()
    first = tf.gates[0]
    second = first.model_copy(update={"metric": "eval/gsm8k/acc_strict"})
    shared = ThresholdFile(path=PY, gates=(first, second))
    _, values = accuracy_history(0.004)
    same = runs({first.metric: values, second.metric: values})
    agreed, _ = plan(shared, text, same, "/rebaseline")
    assert [e.new_literal for e in agreed.edits] == [f"{statistics.median(window(values)):.2f}"]
    apart = runs({first.metric: values, second.metric: [v - 0.1 for v in values]})
    left, _ = plan(shared, text, apart, "/rebaseline")
    assert left.edits == () and left.text == text


# --------------------------------------------------------------------------- step checks


def test_a_check_on_one_step_is_rebaselined_by_the_limit_rule_not_the_median() -> None:
    from bot.core.thresholds.discover import find_gates

    path = "tests/e2e/run_sft.sh"
    text = 'python check.py --check \'data["train/loss"]["10"] < 0.8\'\n'
    found = find_gates(path, text, RepoConfig())
    assert found is not None
    (gate,) = found.gates
    assert (gate.kind, gate.op, [p.step for p in gate.points]) == ("limit", "<", [10])
    at_step = [0.70 + 0.002 * (i % 7) for i in range(25)]
    history = runs(
        {"train/loss": [0.5] * 25},  # the summary (last step) differs from step 10
        [{"train/loss": {10: v}} for v in at_step],
    )

    planned, _ = plan(found, text, history, "/rebaseline")

    (edit,) = planned.edits
    top = max(window(at_step))
    exact = Decimal(repr(top)) * Decimal("1.05")
    expected = (exact * 100).to_integral_value(rounding=ROUND_CEILING) / 100
    assert edit.new_literal == str(expected)
    assert edit.new_literal != format_literal(statistics.median(window(at_step)), 2)
