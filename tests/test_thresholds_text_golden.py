"""Plain-text golden files (``step value`` lines, or one value per line): a golden curve,
named by the config or read by a script of the repository, else a hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.discover import find_gates, is_candidate
from bot.core.thresholds.edit import SpanEdit, replace_spans
from bot.core.thresholds.errors import ThresholdFileError

PPL_PATH = "ci/reference_eval_ppl.txt"
PPL = """\
# eval perplexity every 500 steps from step 1000 (bf16, 8 x A100)
18.204
15.87   # after warmup
14.3311

13.9052
"""
PPL_CONFIG = """
files:
  - path: ci/reference_*.txt
    kind: reference
    tolerance: {rel: 0.05}
    steps: {start: 1000, interval: 500}
    metrics: {eval_ppl: eval/perplexity}
"""


def _values(text: str) -> list[str]:
    """The numbers as the file writes them: each line's last token, comments left out."""
    lines = (line.split("#")[0].split() for line in text.splitlines())
    return [tokens[-1] for tokens in lines if tokens]


def _found(path: str, text: str, config: str = "{}", **related: str) -> ThresholdFile | None:
    texts = {name.replace("__", "/").replace("_DOT_", "."): t for name, t in related.items()}
    return find_gates(path, text, parse_config(config), related=texts)


def _one(found: ThresholdFile | None) -> Gate:
    assert found is not None
    (gate,) = found.gates
    return gate


def test_config_named_values_are_a_curve_from_the_configured_first_step() -> None:
    gate = _one(_found(PPL_PATH, PPL, PPL_CONFIG))
    values = _values(PPL)
    assert (gate.name, gate.metric, gate.kind, gate.op) == (
        "eval_ppl",
        "eval/perplexity",
        "reference",
        "==",
    )
    assert [p.step for p in gate.points] == [1000 + 500 * i for i in range(len(values))]
    assert [p.span.literal for p in gate.points] == values
    assert (gate.literal, gate.value) == (values[-1], float(values[-1]))
    assert gate.tolerance is not None and gate.tolerance.rel == 0.05
    for point in gate.points:
        assert PPL[point.span.start : point.span.end] == point.span.literal
        assert point.span.line == PPL[: point.span.start].count("\n") + 1


def test_rebaseline_rewrites_one_step_and_keeps_comments() -> None:
    gate = _one(_found(PPL_PATH, PPL, PPL_CONFIG))
    second = gate.points[1].span
    edited = replace_spans(PPL_PATH, PPL, [SpanEdit(second, "16.02", "eval_ppl step 1500")])
    assert edited.splitlines()[2] == "16.02   # after warmup"
    assert edited.replace("16.02", "15.87") == PPL


def test_without_steps_in_the_config_a_list_counts_from_zero() -> None:
    config = "files: [{path: ci/reference_eval_ppl.txt, kind: reference}]"
    gate = _one(_found(PPL_PATH, PPL, config))
    assert [p.step for p in gate.points] == list(range(len(_values(PPL))))
    assert gate.metric == "eval_ppl"  # the stem without reference_


STEPWISE = "# step  dev wer\n100 0.412\n200 0.301\n300 nan\n400 0.2277\n"
PY_READER = """\
import os

import numpy as np

REF = os.path.join(os.path.dirname(__file__), "data", "golden_wer_curve.txt")


def test_dev_wer_curve(trainer):
    ref = np.genfromtxt(REF, comments="#")
    out = trainer.fit(steps=400)
    got = [out.history["dev_wer"][int(s)] for s in ref[:, 0]]
    assert np.allclose(got, ref[:, 1], atol=0.004, equal_nan=True)
"""


def test_python_reader_gives_metric_and_tolerance_without_config() -> None:
    path = "tests/data/golden_wer_curve.txt"
    found = _found(path, STEPWISE, tests__test_wer_DOT_py=PY_READER)
    gate = _one(found)
    assert (gate.metric, gate.kind, gate.op) == ("dev_wer", "reference", "==")
    assert [(p.step, p.value) for p in gate.points] == [
        (100, 0.412),
        (200, 0.301),
        (300, None),
        (400, 0.2277),
    ]
    assert gate.literal == "0.2277"
    assert gate.tolerance is not None and (gate.tolerance.abs, gate.tolerance.rel) == (0.004, None)


LOOP_READER = """\
import pytest

GOLD = "tests/resources/train_ce_expected.txt"
FIRST_STEP = 200
EVERY = 100


def _load(name):
    with open(name) as fh:
        return [float(x) for x in fh.read().split()]


class TestCurve:
    def test_follows_golden(self, run):
        expected = _load(GOLD)
        result = run(max_steps=600)
        for i, ref in enumerate(expected):
            step = FIRST_STEP + i * EVERY
            assert result.metrics["train_ce"][step] == pytest.approx(ref, rel=0.03)
"""


def test_python_loop_gives_first_step_and_interval() -> None:
    path = "tests/resources/train_ce_expected.txt"
    text = "2.91\n2.55\n2.40\n"
    gate = _one(_found(path, text, tests__test_curve_DOT_py=LOOP_READER))
    assert gate.metric == "train_ce"
    assert [p.step for p in gate.points] == [200, 300, 400]
    assert gate.tolerance is not None and gate.tolerance.rel == 0.03


SHELL_READER = """\
#!/bin/bash
set -e
GOLD_FILE=eval/golden_rouge_l.txt
ROUGE_TOL=0.015
python summarize.py --out out.txt
python scripts/compare.py out.txt "$GOLD_FILE" --tol "$ROUGE_TOL"
"""


def test_shell_reader_gives_its_tolerance_and_the_config_still_names_the_metric() -> None:
    path = "eval/golden_rouge_l.txt"
    config = "files: [{path: eval/golden_rouge_l.txt, metrics: {rouge_l: summ/rouge_l}}]"
    gate = _one(_found(path, "0.3811\n0.3902\n", config, ci__nightly_DOT_sh=SHELL_READER))
    assert gate.metric == "summ/rouge_l"
    assert gate.tolerance is not None and gate.tolerance.abs == 0.015


def test_reader_that_does_not_mention_the_file_is_not_followed() -> None:
    found = _found("tests/data/golden_wer_curve.txt", STEPWISE, tests__other_DOT_py="x = 1\n")
    assert found is not None and found.gates == ()
    assert [u.literal for u in found.unbound] == ["0.2277"]


def test_golden_named_file_without_reader_or_config_is_a_hint_whose_lines_bind_it() -> None:
    path = "results/baseline_top5_acc.txt"
    text = "0 0.412\n1 0.655\n2 0.731\n"
    found = _found(path, text)
    assert found is not None and found.gates == ()
    (hint,) = found.unbound
    assert (hint.literal, hint.line) == ("0.731", 3)
    assert hint.config
    pasted = _one(_found(path, text, hint.config))
    assert (pasted.metric, pasted.literal, pasted.kind) == ("top5_acc", "0.731", "reference")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("requirements.txt", "numpy==1.26\n"),
        ("notes/loss.txt", "1.0\n2.0\n"),  # a numeric file whose name says nothing
        ("tests/golden/prompt.txt", "Once upon a time\n"),  # golden, but not numbers
        ("tests/golden/matrix.txt", "1 2 3\n4 5 6\n"),  # three columns: not a curve
    ],
)
def test_other_text_files_are_not_goldens(path: str, text: str) -> None:
    assert _found(path, text) is None


def test_which_text_files_are_candidates() -> None:
    bare = parse_config("{}")
    assert is_candidate("tests/golden/gpt_loss.txt", bare)
    assert is_candidate("ci/expected_val_acc.dat", bare)
    assert not is_candidate("requirements.txt", bare)
    assert not is_candidate("docs/loss_values.txt", bare)
    assert is_candidate("docs/loss_values.txt", parse_config("files: [docs/*.txt]"))


def test_named_file_that_is_not_numbers_says_which_line() -> None:
    with pytest.raises(ThresholdFileError, match=r":3: .*'n/a' is not a number"):
        _found(PPL_PATH, "1.5\n1.4\nn/a\n", PPL_CONFIG)


def test_text_goldens_are_bounded() -> None:
    long = "1\n" * 150_000  # 300 kB, too many lines
    wide = "0." + "1" * 90 + "\n"
    with pytest.raises(ThresholdFileError, match="more than 100000 lines"):
        _found(PPL_PATH, long, PPL_CONFIG)
    with pytest.raises(ThresholdFileError, match="characters"):
        _found(PPL_PATH, wide * 12_000, PPL_CONFIG)  # 1.1 MB
    assert _found("tests/golden/loss.txt", long) is None  # unnamed: not read at all


def test_steps_in_the_config_schema() -> None:
    schema = json.loads(Path("schema/threshold-bot.schema.json").read_text())
    assert "steps" in json.dumps(schema["$defs"]["FileDecl"]["properties"])
    with pytest.raises(Exception, match="interval"):
        parse_config("files: [{path: a.txt, steps: {start: 0, interval: 0}}]")


def test_review_reads_a_configured_text_golden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ci").mkdir()
    golden = tmp_path / PPL_PATH
    golden.write_text(PPL)
    config = tmp_path / "config.yml"
    config.write_text(PPL_CONFIG)
    history = tmp_path / "runs.jsonl"
    history.write_text('{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {}}\n')
    args = ["review", "--file", PPL_PATH, "--history", str(history), "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--config", str(config)])
    assert result.exit_code == 0, result.output
    (gate,) = json.loads(result.stdout)["gates"]
    assert (gate["metric"], gate["old_literal"], gate["kind"]) == (
        "eval/perplexity",
        _values(PPL)[-1],
        "reference",
    )
    assert yaml.safe_load(PPL_CONFIG)["files"][0]["steps"]["start"] == 1000


ZIP_READER = """\
import json
from pathlib import Path

CURVE = Path("ci") / "baseline_grad_norm.dat"


def test_grad_norm(history):
    for step, ref in zip(range(50, 1000, 50), CURVE.read_text().split()):
        got = history.get("optim/grad_norm")[step]
        assert abs(got - float(ref)) <= 0.2
"""
FLAG_READER = """\
#!/usr/bin/env bash
python tools/compare_curve.py --actual out/bpb.txt --golden ci/golden/bpb.txt --rtol=0.01
"""


def test_zip_with_a_range_gives_first_step_and_interval_and_abs_tolerance() -> None:
    gate = _one(_found("ci/baseline_grad_norm.dat", "1.8\n1.2\n", tests__test_gn_DOT_py=ZIP_READER))
    assert gate.metric == "optim/grad_norm"
    assert [p.step for p in gate.points] == [50, 100]
    assert gate.tolerance is not None and (gate.tolerance.abs, gate.tolerance.rel) == (0.2, None)


def test_shell_reader_passing_a_tolerance_flag() -> None:
    gate = _one(_found("ci/golden/bpb.txt", "0 1.02\n10 0.97\n", ci__curve_DOT_sh=FLAG_READER))
    assert gate.metric == "bpb"
    assert gate.tolerance is not None and gate.tolerance.rel == 0.01


UNITTEST_READER = """\
import unittest

import numpy as np

EXPECTED = "tests/assets/expected_flops_util.txt"


class MfuTest(unittest.TestCase):
    def test_mfu(self):
        want = np.loadtxt(EXPECTED)
        stats = self.run_bench()
        self.assertAlmostEqual(stats["mfu"], float(want[-1]), delta=0.015)

    def test_curve(self):
        want = np.loadtxt(EXPECTED)
        got = np.array(self.run_bench()["mfu_per_step"])
        worst = np.max(np.abs(got - want))
        assert worst <= 0.02
"""


def test_unittest_reader_and_a_worst_difference() -> None:
    gate = _one(
        _found("tests/assets/expected_flops_util.txt", "0.41\n0.43\n", t__t_DOT_py=UNITTEST_READER)
    )
    assert gate.metric == "mfu"  # the first comparison: assertAlmostEqual with delta
    assert gate.tolerance is not None and gate.tolerance.abs == 0.015
    second = UNITTEST_READER.replace("self.assertAlmostEqual", "print")
    gate = _one(_found("tests/assets/expected_flops_util.txt", "0.41\n0.43\n", t__t_DOT_py=second))
    assert gate.metric == "mfu_per_step"
    assert gate.tolerance is not None and gate.tolerance.abs == 0.02


def test_readers_are_bounded() -> None:
    chain = "".join(f"v{i} = v{i - 1} + v{i - 1} + v{i - 1}\n" for i in range(1, 1500))
    reader = f'v0 = "golden_wer_curve.txt"\n{chain}assert abs(out["wer"] - v1499) <= 0.1\n'
    gate = _one(_found("tests/data/golden_wer_curve.txt", STEPWISE, t__a_DOT_py=reader))
    assert (gate.metric, gate.tolerance and gate.tolerance.abs) == ("wer", 0.1)
    huge = reader + "#" * 300_000  # over the bound: not followed, the file is a hint
    found = _found("tests/data/golden_wer_curve.txt", STEPWISE, t__a_DOT_py=huge)
    assert found is not None and found.gates == () and len(found.unbound) == 1


def test_config_glob_matching_a_text_file_without_a_golden_list_is_a_note() -> None:
    config = "files: [{path: 'ci/**', kind: reference}]"
    found = _found("ci/README.txt", "How to refresh the references\n", config)
    assert found is not None and found.gates == () and found.unbound == ()
    assert found.notes == ("ci/README.txt:1: not a golden list",)


EXACT_READER = """\
from pathlib import Path

IDS = Path(__file__).parent / "expected_token_ids.txt"


def test_tokenizer_round_trip(tokenizer):
    expected = [int(x) for x in IDS.read_text().split()]
    assert tokenizer.encode("hello world") == expected
"""


def test_a_reader_comparing_exactly_leaves_a_hint_not_a_gate() -> None:
    path = "tests/expected_token_ids.txt"
    found = _found(path, "15496\n995\n", tests__test_tok_DOT_py=EXACT_READER)
    assert found is not None and found.gates == ()
    (hint,) = found.unbound
    assert hint.literal == "995" and "tests/test_tok.py" in hint.reason


def test_a_closeness_check_without_a_tolerance_binds_with_the_configs() -> None:
    reader = EXACT_READER.replace(
        'assert tokenizer.encode("hello world") == expected',
        'np.testing.assert_allclose(tokenizer.stats()["entropy"], expected)',
    )
    path = "tests/expected_token_ids.txt"
    config = "tolerance: {rel: 0.1}"
    gate = _one(_found(path, "15496\n995\n", config, tests__test_tok_DOT_py=reader))
    assert gate.metric == "entropy"
    assert gate.tolerance is not None and gate.tolerance.rel == 0.1
