"""Gates in Python test files (issue 12, part 2; placeholders and hints, parts 7 and 8).

The fixtures under ``tests/fixtures/gates/python`` are test files in the shapes ML
repositories write (pytest modules, unittest classes, functional regression tests with
golden values, a nightly check script), mixing real gates with asserts that are no gates;
each test states exactly which gates a file holds.  Shape-by-shape cases follow, then the
config (metric names, declared constants, hints that round-trip), the bad cases, and the
CLI end to end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import RepoConfig, parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates, is_candidate
from bot.core.thresholds.errors import ThresholdFileError

FIXTURES = Path(__file__).parent / "fixtures" / "gates" / "python"
NO_CONFIG = RepoConfig()

Row = tuple[str, str, str, str, str]  # name, metric, op, literal, kind


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _found(name: str, config: RepoConfig = NO_CONFIG, text: str | None = None) -> ThresholdFile:
    text = _text(name) if text is None else text
    found = find_gates(f"tests/{name}", text, config)
    assert found is not None
    for gate in found.gates:  # every literal is where the gate says, as written
        assert text[gate.start : gate.end] == gate.literal
        assert gate.value == float(gate.literal)
    return found


def _rows(found: ThresholdFile) -> set[Row]:
    return {(g.name, g.metric, g.op, g.literal, g.kind) for g in found.gates}


def _gate(found: ThresholdFile, name: str) -> Gate:
    return next(g for g in found.gates if g.name == name)


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


# --------------------------------------------------------------------------- fixtures


def test_pytest_module_gates_and_its_non_gates() -> None:
    found = _found("test_eval_accuracy.py")
    assert _rows(found) == {
        ("MMLU_MIN", "mmlu", ">=", "0.612", "limit"),
        ("TASK_THRESHOLDS[arc_challenge]", "arc_challenge", ">=", "0.48", "limit"),
        ("TASK_THRESHOLDS[winogrande]", "winogrande", ">=", "0.695", "limit"),
        ("test_commonsense[hellaswag]", "hellaswag", ">=", "0.71", "limit"),
        ("test_commonsense[piqa-full]", "piqa", ">=", "0.78", "limit"),
        ("test_score_band[score]", "score", ">=", "0.55", "limit"),
        ("test_score_band[score]", "score", "<=", "0.9", "limit"),
        (
            "test_perplexity[wikitext/word_perplexity]",
            "wikitext/word_perplexity",
            "<",
            "11.5",
            "limit",
        ),
        ("test_perplexity[latency_ms]", "latency_ms", "<=", "250", "limit"),
        (
            "test_gsm8k_matches_reference[gsm8k/exact_match]",
            "gsm8k/exact_match",
            "==",
            "0.561",
            "reference",
        ),
    }
    assert _gate(found, "MMLU_MIN").context == "test_mmlu"
    text = _text("test_eval_accuracy.py")
    assert _gate(found, "MMLU_MIN").line == _line(text, "MMLU_MIN = ")
    approx = _gate(found, "test_gsm8k_matches_reference[gsm8k/exact_match]")
    assert approx.tolerance is not None and approx.tolerance.rel is None
    assert approx.tolerance.abs == 0.02 and approx.tolerance.abs_span is not None
    assert approx.tolerance.abs_span.literal == "0.02"
    latency = _gate(found, "test_perplexity[latency_ms]")
    assert latency.ignored == f"marked '# threshold-bot: ignore' on line {latency.line}"
    assert [g.name for g in found.gates if g.ignored] == [latency.name]
    assert found.unbound == ()  # MAX_RETRIES, NUM_SHARDS: no threshold names, no hints


def test_training_regression_curves_and_tolerance_arithmetic() -> None:
    text = _text("test_training_regression.py")
    found = _found("test_training_regression.py")
    assert _rows(found) == {
        ("EXPECTED_LOSS", "losses", "==", "10.3542", "reference"),
        ("test_grad_norms[grad_norms]", "grad_norms", "==", "2.88", "reference"),
        ("BASELINE_TOKENS_PER_SEC", "tokens_per_sec", ">=", "41250.0", "reference"),
        ("test_memory[peak_memory_gb]", "peak_memory_gb", "<=", "21.5", "reference"),
        ("test_final_loss[final_loss]", "final_loss", "==", "3.105", "reference"),
    }
    curve = _gate(found, "EXPECTED_LOSS")
    assert [(p.step, p.value) for p in curve.points] == [
        (1, 10.8123),
        (2, 10.7311),
        (3, None),
        (4, 10.4876),
        (5, 10.3542),
    ]
    assert curve.points[2].span.literal == 'float("nan")'
    assert curve.tolerance is not None and curve.tolerance.abs == 0.02
    assert curve.tolerance.abs_span is not None
    assert curve.tolerance.abs_span.line == _line(text, "LOSS_ATOL = ")
    grad = _gate(found, "test_grad_norms[grad_norms]")
    assert [(p.step, p.value) for p in grad.points] == [(0, 3.91), (1, 3.42), (2, 2.88)]
    assert grad.tolerance is not None and (grad.tolerance.rel, grad.tolerance.abs) == (0.05, None)
    throughput = _gate(found, "BASELINE_TOKENS_PER_SEC")
    assert throughput.tolerance is not None and throughput.tolerance.rel == 0.08
    assert throughput.tolerance.rel_span is not None
    assert throughput.tolerance.rel_span.line == _line(text, "THROUGHPUT_RTOL = ")
    assert throughput.sides == "lower"
    assert _gate(found, "test_memory[peak_memory_gb]").sides == "upper"
    final = _gate(found, "test_final_loss[final_loss]")
    assert final.tolerance is not None and (final.tolerance.rel, final.tolerance.abs) == (
        0.01,
        None,
    )
    [hint] = found.unbound  # WARMUP_STEPS is a count: no hint
    assert hint.name == "LOSS_THRESHOLD" and hint.literal == "2.5"
    assert "passed to throughput_check() as a positional argument" in hint.reason


def test_unittest_class_gates() -> None:
    found = _found("test_asr_quality.py")
    assert _rows(found) == {
        ("TestASRQuality.WER_MAX", "wer", "<", "0.081", "limit"),
        ("TestASRQuality.test_char_error_rate[cer]", "cer", "<", "0.035", "limit"),
        ("TestASRQuality.rtf_floor", "rtf_speedup", ">=", "12.5", "limit"),
        (
            "TestASRQuality.test_confidence[mean_confidence]",
            "mean_confidence",
            "==",
            "0.87",
            "reference",
        ),
        (
            "TestASRQuality.test_confidence[calibration_error]",
            "calibration_error",
            "==",
            "0.04",
            "reference",
        ),
        ("TestASRQuality.test_bookkeeping[bleu]", "bleu", ">=", "30", "limit"),
    }
    delta = _gate(found, "TestASRQuality.test_confidence[mean_confidence]").tolerance
    places = _gate(found, "TestASRQuality.test_confidence[calibration_error]").tolerance
    assert delta is not None and delta.abs == 0.02 and delta.abs_span is not None
    assert places is not None and places.abs == 0.5 * 10**-2 and places.abs_span is None
    wer = _gate(found, "TestASRQuality.WER_MAX")
    assert wer.context == "TestASRQuality.test_word_error_rate"


def test_parametrized_dataclass_cases_with_a_two_sided_band() -> None:
    text = _text("test_quantized_lm_eval.py")
    found = _found("test_quantized_lm_eval.py")
    metric = "results/gsm8k/exact_match,strict-match"
    assert _rows(found) == {
        (
            "ACCURACY_CONFIGS[acme/llama-8b-instruct-w8a8].expected_value",
            metric,
            "==",
            "0.76",
            "reference",
        ),
        (
            "ACCURACY_CONFIGS[acme/qwen-7b-instruct-fp8].expected_value",
            metric,
            "==",
            "0.81",
            "reference",
        ),
    }
    for gate in found.gates:
        assert gate.tolerance is not None and gate.tolerance.abs == 0.03
        assert gate.tolerance.abs_span is not None
        assert gate.tolerance.abs_span.line == _line(text, "RTOL = ")
        assert gate.context == "test_gsm8k_correctness"


def test_a_check_script_is_read_when_the_config_names_it() -> None:
    path = "scripts/check_nightly_metrics.py"
    assert not is_candidate(path, NO_CONFIG)  # not a test file by its name
    assert is_candidate(path, parse_config("python: ['scripts/*.py']\n"))
    text = _text("check_nightly_metrics.py")
    found = find_gates(path, text, NO_CONFIG)
    assert found is not None
    assert _rows(found) == {
        ("MIN_EVAL_ACCURACY", "eval_accuracy", ">=", "0.82", "limit"),
        ("MAX_TRAIN_LOSS", "train_loss", "<=", "1.45", "limit"),
        ("main[eval_loss]", "eval_loss", "<=", "1.6", "limit"),
    }  # the negation of each failing condition; ``epoch < 3: sys.exit(0)`` is no failure


def test_python_globs_restrict_which_files_are_scanned() -> None:
    config = parse_config("python: ['tests/integration/**/*.py']\n")
    assert is_candidate("tests/integration/nightly/test_acc.py", config)
    assert not is_candidate("tests/test_eval_accuracy.py", config)
    assert is_candidate("tests/test_eval_accuracy.py", NO_CONFIG)


# --------------------------------------------------------------------------- shapes

SHAPES = [  # id, the assert, "metric op literal kind rel abs" (- for none)
    ("limit", "assert metrics['accuracy'] >= 0.7", "accuracy >= 0.7 limit - -"),
    ("flipped", "assert 0.7 <= result.accuracy", "accuracy >= 0.7 limit - -"),
    ("get", "assert metrics.get('eval_loss') < 2.0", "eval_loss < 2.0 limit - -"),
    ("conversions", "assert float(out['loss'].item()) < 2", "loss < 2 limit - -"),
    ("negative", "assert reward > -0.5", "reward > -0.5 limit - -"),
    ("unittest reversed", "self.assertGreater(9.5, ppl)", "ppl < 9.5 limit - -"),
    ("assertTrue", "self.assertTrue(accuracy >= 0.8)", "accuracy >= 0.8 limit - -"),
    ("not", "assert not (loss > 2.0)", "loss <= 2.0 limit - -"),
    ("if fail", "if score < 0.5:\n        pytest.fail('low')", "score >= 0.5 limit - -"),
    (
        "array_less",
        "np.testing.assert_array_less(latency_ms, 250.0)",
        "latency_ms < 250.0 limit - -",
    ),
    ("approx rel", "assert acc == pytest.approx(0.5, rel=0.05)", "acc == 0.5 reference 0.05 -"),
    ("approx abs reversed", "assert approx(0.5, abs=0.01) == acc", "acc == 0.5 reference - 0.01"),
    ("approx default", "assert acc == pytest.approx(0.5)", "acc == 0.5 reference 1e-6 1e-12"),
    ("almost default", "self.assertAlmostEqual(acc, 0.5)", "acc == 0.5 reference - 0.5e-7"),
    ("almost places", "self.assertAlmostEquals(acc, 0.5, 2)", "acc == 0.5 reference - 0.005"),
    (
        "assert_close default",
        "torch.testing.assert_close(loss, torch.tensor(2.0))",
        "loss == 2.0 reference 1.3e-6 1e-5",
    ),
    (
        "assert_close",
        "torch.testing.assert_close(loss, 2.0, rtol=0.01, atol=0.001)",
        "loss == 2.0 reference 0.01 0.001",
    ),
    ("allclose default", "np.testing.assert_allclose(loss, 2.0)", "loss == 2.0 reference 1e-7 -"),
    (
        "allclose positional",
        "numpy.testing.assert_allclose(loss, 2.0, 0.01, 0.001)",
        "loss == 2.0 reference 0.01 0.001",
    ),
    ("np.isclose", "assert np.isclose(acc, 0.5)", "acc == 0.5 reference 1e-5 1e-8"),
    (
        "torch.allclose",
        "assert torch.allclose(loss, torch.tensor(2.0), atol=0.1)",
        "loss == 2.0 reference 1e-5 0.1",
    ),
    ("math.isclose", "assert math.isclose(acc, 0.5, rel_tol=0.05)", "acc == 0.5 reference 0.05 -"),
    ("math.isclose default", "assert math.isclose(acc, 0.5)", "acc == 0.5 reference 1e-9 -"),
    (
        "almost_equal",
        "np.testing.assert_almost_equal(loss, 2.0, decimal=2)",
        "loss == 2.0 reference - 1.5e-2",
    ),
    ("abs diff", "assert abs(acc - 0.5) <= 0.01", "acc == 0.5 reference - 0.01"),
    ("abs diff reversed", "assert abs(0.5 - acc) < 0.01", "acc == 0.5 reference - 0.01"),
    ("relative", "assert abs(loss - 2.0) / 2.0 < 0.05", "loss == 2.0 reference 0.05 -"),
    ("ratio", "assert abs(loss / 2.0 - 1) < 0.05", "loss == 2.0 reference 0.05 -"),
    ("scaled", "assert abs(loss - 2.0) <= 0.05 * 2.0", "loss == 2.0 reference 0.05 -"),
    ("both", "assert abs(loss - 2.0) <= 0.01 + 0.05 * abs(2.0)", "loss == 2.0 reference 0.05 0.01"),
    ("lower rel", "assert acc >= 0.95 * (1 - 0.08)", "acc >= 0.95 reference 0.08 -"),
    ("upper rel", "assert loss <= 2.0 * (1 + 0.1)", "loss <= 2.0 reference 0.1 -"),
    ("lower abs", "assert acc >= 0.95 - 0.02", "acc >= 0.95 reference - 0.02"),
    ("upper abs", "assert loss <= 2.0 + 0.1", "loss <= 2.0 reference - 0.1"),
    ("drop", "assert (0.95 - acc) / 0.95 <= 0.05", "acc >= 0.95 reference 0.05 -"),
    ("rise", "assert (loss - 2.0) / 2.0 <= 0.05", "loss <= 2.0 reference 0.05 -"),
    ("factor", "REF_ACC = 0.91\n    assert acc >= REF_ACC * 0.98", "acc >= 0.91 reference 0.02 -"),
    (
        "named band",
        "EXPECTED = 0.54\n    RTOL = 0.03\n"
        "    assert acc - RTOL < EXPECTED and acc + RTOL > EXPECTED",
        "acc == 0.54 reference - 0.03",
    ),
    (
        "named difference",
        "REF = 0.54\n    ATOL = 0.03\n    assert acc - REF <= ATOL",
        "acc <= 0.54 reference - 0.03",
    ),
]


def _test_file(body: str) -> str:
    return f"import math\n\nimport numpy as np\nimport pytest\n\n\ndef test_it():\n    {body}\n"


@pytest.mark.parametrize(("code", "expected"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_each_shape(code: str, expected: str) -> None:
    found = _found("test_shape.py", text=_test_file(code))
    [gate] = found.gates
    metric, op, literal, kind, rel, absolute = expected.split()
    assert [gate.metric, gate.op, gate.literal, gate.kind] == [metric, op, literal, kind]
    tolerance = gate.tolerance
    found_rel, found_abs = (tolerance.rel, tolerance.abs) if tolerance else (None, None)
    for wanted, got in ((rel, found_rel), (absolute, found_abs)):
        assert (
            (got is None)
            if wanted == "-"
            else (got is not None and math.isclose(got, float(wanted)))
        )
    assert gate.context == "test_it"


NON_GATES = [
    "assert len(metrics) == 3",
    "assert x.shape == (2, 3)",
    "assert step > 0",
    "assert isinstance(x, float)",
    "assert y == 0",
    "assert response.status_code == 200",
    "assert loss is not None",
    "assert metrics['num_samples'] >= 100",
    "assert len(batch) <= 64",
    "assert out.abs().max() < 1e-5",
    "assert max_err < 1e-4",
    "assert 0.0 <= accuracy <= 1.0",
    "assert torch.allclose(out, ref)",
    "assert compute_accuracy([1, 0], [1, 1]) == pytest.approx(0.5)",
    "assert accuracy == 0.5",
    "assert x > 0.5",
    "TIMEOUT = 600\n    assert elapsed_time < TIMEOUT",
    "assert metrics['epoch'] >= 3",
    "assert config.dropout < 0.5",
    "assert acc >= 0.9 * 0.8",
    "assert acc > 0.5 or loss < 2.0",
    "if acc < 0.5:\n        print('low')",
    "assert abs(acc - 0.5) >= 0.01",
    "assert acc - 0.05 < 0.9",
    "np.testing.assert_allclose(softmax([1.0, 2.0]), [0.2689, 0.7311], rtol=1e-4)",
    "expected = torch.tensor([0.1, 0.2])\n    torch.testing.assert_close(y, expected, atol=1e-4)",
    "acc = accuracy(torch.tensor([1, 0, 1]), [1, 1, 1])\n    assert 0.66 < acc < 0.67",
    "assert loss.item() < 1e6",
    "assert sched(1000) < 1e-4",
    "assert losses[-1] < 0.5 * losses[0]",
]


@pytest.mark.parametrize("code", NON_GATES)
def test_what_is_not_a_gate(code: str) -> None:
    assert find_gates("tests/test_shape.py", _test_file(code), NO_CONFIG) is None


def test_aggregations_of_a_series() -> None:
    code = "assert np.mean(losses[-5:]) < 2.1\n    assert max(grad_norms) <= 4.5"
    found = _found("test_shape.py", text=_test_file(code))
    assert {(g.metric, g.aggregation, g.last_steps) for g in found.gates} == {
        ("losses", "mean", 5),
        ("grad_norms", "max", None),
    }


def test_loops_over_thresholds_and_golden_values() -> None:
    text = """
THRESHOLDS = {"gsm8k": 0.56, "mmlu": 0.61}
GOLDEN = [2.31, 2.12, 1.98]


def expected_accuracy():
    return {"arc": 0.44}


def test_known(results):
    for task, minimum in THRESHOLDS.items():
        assert results[task] >= minimum


def test_unknown_mapping(results):
    for task, score in results.items():
        assert score >= THRESHOLDS[task]


def test_enumerate(losses):
    for i, ref in enumerate(GOLDEN):
        assert losses[i] == pytest.approx(ref, rel=0.01)


def test_returned(results):
    for task, minimum in expected_accuracy().items():
        assert results[task] >= minimum
"""
    found = _found("test_loops.py", text=text)
    assert _rows(found) == {
        ("THRESHOLDS[gsm8k]", "gsm8k", ">=", "0.56", "limit"),
        ("THRESHOLDS[mmlu]", "mmlu", ">=", "0.61", "limit"),
        ("GOLDEN", "losses", "==", "1.98", "reference"),
        ("expected_accuracy[arc]", "arc", ">=", "0.44", "limit"),
    }
    assert _gate(found, "THRESHOLDS[gsm8k]").context == "test_known, test_unknown_mapping"
    assert [p.step for p in _gate(found, "GOLDEN").points] == [0, 1, 2]


def test_nested_tables_read_model_by_model() -> None:
    text = """
EXPECTED = {
    "llama-8b": {"gsm8k": 0.56, "mmlu": 0.66},
    "qwen-7b": {"gsm8k": 0.81},
}


@pytest.mark.parametrize("model", EXPECTED)
def test_models(model):
    results = run(model)
    for task, ref in EXPECTED[model].items():
        assert results[task] == pytest.approx(ref, abs=0.02)
"""
    found = _found("test_nested.py", text=text)
    assert _rows(found) == {
        ("EXPECTED[llama-8b][gsm8k]", "gsm8k", "==", "0.56", "reference"),
        ("EXPECTED[llama-8b][mmlu]", "mmlu", "==", "0.66", "reference"),
        ("EXPECTED[qwen-7b][gsm8k]", "gsm8k", "==", "0.81", "reference"),
    }


def test_constants_by_scope_and_the_tests_that_compare_them() -> None:
    text = """
ACC_MIN = 0.7


class TestAcc:
    LOSS_MAX = 2.0

    def setUp(self):
        self.f1_floor = 0.5

    def test_a(self):
        expected = 0.61
        assert self.results["mmlu"] >= expected
        assert self.results["acc"] >= ACC_MIN
        assert self.results["loss"] <= self.LOSS_MAX
        assert self.results["f1"] >= self.f1_floor


def test_b(metrics):
    assert metrics["acc"] >= ACC_MIN
"""
    found = _found("test_scopes.py", text=text)
    assert _rows(found) == {
        ("ACC_MIN", "acc", ">=", "0.7", "limit"),
        ("TestAcc.LOSS_MAX", "loss", "<=", "2.0", "limit"),
        ("TestAcc.f1_floor", "f1", ">=", "0.5", "limit"),
        ("TestAcc.test_a.expected", "mmlu", ">=", "0.61", "limit"),
    }
    assert _gate(found, "ACC_MIN").context == "TestAcc.test_a, test_b"


def test_a_helpers_literals_are_read_at_each_call_site() -> None:
    text = """
ACC_MIN = 0.8


def within(prediction, true, tolerance=0.001):
    if not np.abs(prediction - true) < tolerance:
        pytest.fail("not within tolerance")


def at_least(results, key, minimum):
    assert results[key] >= minimum


class TestQuality:
    def _check_accuracy(self, result, expected):
        self.assertGreaterEqual(result["accuracy"], expected)

    def test_small(self):
        self._check_accuracy(evaluate("small"), 0.71)

    def test_large(self):
        self._check_accuracy(evaluate("large"), ACC_MIN)


def test_loss(results):
    within(results["loss"], 2.31, tolerance=0.05)
    within(results["ppl"], 9.8)
    at_least(results, "mmlu", 0.61)
"""
    found = _found("test_helpers.py", text=text)
    assert _rows(found) == {
        ("ACC_MIN", "accuracy", ">=", "0.8", "limit"),
        ("TestQuality.test_small[accuracy]", "accuracy", ">=", "0.71", "limit"),
        ("test_loss[loss]", "loss", "==", "2.31", "reference"),
        ("test_loss[ppl]", "ppl", "==", "9.8", "reference"),
        ("test_loss[mmlu]", "mmlu", ">=", "0.61", "limit"),
    }
    assert _gate(found, "ACC_MIN").context == "TestQuality.test_large"
    ppl = _gate(found, "test_loss[ppl]").tolerance  # the helper's default
    assert ppl is not None and ppl.abs == 0.001 and ppl.abs_span is not None
    assert ppl.abs_span.line == _line(text, "def within")


def test_fixtures_of_the_module_that_return_a_value() -> None:
    text = """
@pytest.fixture
def tolerance() -> float:
    return 0.015


@pytest.fixture
def min_accuracy():
    \"\"\"The floor the nightly run must reach.\"\"\"
    return 0.82


def test_basin(results, tolerance):
    assert abs(results["stability"] - 0.41) < tolerance


def test_acc(results, min_accuracy):
    assert results["accuracy"] >= min_accuracy
"""
    found = _found("test_fixtures.py", text=text)
    assert _rows(found) == {
        ("min_accuracy", "accuracy", ">=", "0.82", "limit"),
        ("test_basin[stability]", "stability", "==", "0.41", "reference"),
    }
    basin = _gate(found, "test_basin[stability]").tolerance
    assert basin is not None and basin.abs == 0.015 and basin.abs_span is not None
    assert basin.abs_span.line == _line(text, "return 0.015")


def test_a_constant_assigned_twice_is_a_hint_not_a_gate() -> None:
    text = _test_file("assert metrics['accuracy'] >= ACC_MIN") + "\nACC_MIN = 0.7\nACC_MIN = 0.75\n"
    found = _found("test_twice.py", text=text)
    assert found.gates == ()
    [hint] = found.unbound
    assert hint.name == "ACC_MIN" and hint.config == ""
    assert hint.reason == (
        "compared with accuracy on line 8, but assigned 2 times (lines 10, 11): "
        "its value is not known"
    )


def test_names_do_not_change_when_unrelated_lines_are_inserted() -> None:
    base_text = _text("test_eval_accuracy.py")
    head_text = "# a comment\nimport os\n\n" + base_text.replace(
        "def test_mmlu(metrics):\n", "def test_mmlu(metrics):\n    os.environ.get('HF_HOME')\n"
    )
    base, head = _found("test_eval_accuracy.py"), _found("test_eval_accuracy.py", text=head_text)
    changes = diff_gates(base, head)
    assert len(changes) == len(base.gates) == len(head.gates)
    assert all(c.base is not None and not c.changed for c in changes)


# --------------------------------------------------------------------------- config, hints


def test_the_config_maps_names_to_history_keys() -> None:
    config = parse_config(
        "metrics: {score: eval/gsm8k/score}\n"
        "files:\n  - path: tests/test_eval_accuracy.py\n    metrics: {mmlu: eval/mmlu/acc}\n"
    )
    found = _found("test_eval_accuracy.py", config)
    metrics = {g.name: g.metric for g in found.gates}
    assert metrics["test_score_band[score]"] == "eval/gsm8k/score"
    assert metrics["MMLU_MIN"] == "eval/mmlu/acc"
    assert metrics["TASK_THRESHOLDS[winogrande]"] == "winogrande"  # not mapped: as written
    unmapped = _rows(_found("test_eval_accuracy.py"))
    assert len(unmapped) == len(_rows(found))


def test_hints_name_the_reason_and_the_config_lines_that_declare_them() -> None:
    found = _found("test_helpers_only.py")
    assert found.gates == ()
    hints = {u.name: u for u in found.unbound}
    assert set(hints) == {"LOSS_THRESHOLD", "TOKENS_PER_SEC_MIN", "ACC_FLOOR"}  # not SEED
    loss = hints["LOSS_THRESHOLD"]
    assert (loss.literal, loss.line) == ("2.5", _line(_text("test_helpers_only.py"), "LOSS_T"))
    assert loss.reason == (
        "passed to assert_within_budget() as a positional argument on line 15, "
        "not compared in this file"
    )
    assert hints["TOKENS_PER_SEC_MIN"].reason.startswith(
        "passed to assert_within_budget() as min_throughput= on line 15"
    )
    assert "assigned 2 times (lines 9, 10)" in hints["ACC_FLOOR"].reason
    assert hints["ACC_FLOOR"].config == ""
    [entry] = parse_config(loss.config).files
    [declared] = entry.gates
    assert entry.path == "tests/test_helpers_only.py"
    assert (declared.key, declared.metric, declared.op) == ("LOSS_THRESHOLD", "loss", "<=")


def test_a_hints_config_lines_declare_the_gate() -> None:
    hint = next(u for u in _found("test_helpers_only.py").unbound if u.name == "LOSS_THRESHOLD")
    found = _found("test_helpers_only.py", parse_config(hint.config))
    [gate] = found.gates
    assert (gate.name, gate.metric, gate.op, gate.literal, gate.kind) == (
        "LOSS_THRESHOLD",
        "loss",
        "<=",
        "2.5",
        "limit",
    )
    assert gate.pattern == "files.0.gates.0"
    assert "LOSS_THRESHOLD" not in {u.name for u in found.unbound}


def test_hints_for_class_constants_and_tables() -> None:
    text = """
EXPECTED_LOSSES = [10.8, 10.7]


class TestPerf:
    LATENCY_BUDGET_MS = 120.0

    def test_x(self):
        check_curve(run(), EXPECTED_LOSSES)
        assert_latency(run(), budget=self.LATENCY_BUDGET_MS)
"""
    found = _found("test_perf.py", text=text)
    assert found.gates == ()
    hints = {u.name: u for u in found.unbound}
    assert set(hints) == {"EXPECTED_LOSSES", "TestPerf.LATENCY_BUDGET_MS"}
    losses = hints["EXPECTED_LOSSES"]
    assert (losses.literal, losses.config) == ("10.8", "")
    line = _line(text, "check_curve(")
    assert losses.reason == (
        f"2 values, passed to check_curve() as a positional argument on line {line}, "
        "not compared in this file"
    )
    latency = hints["TestPerf.LATENCY_BUDGET_MS"]
    assert latency.reason.startswith(f"passed to assert_latency() as budget= on line {line + 1}")
    [gate] = _found("test_perf.py", parse_config(latency.config), text).gates
    assert (gate.name, gate.metric, gate.literal) == (
        "TestPerf.LATENCY_BUDGET_MS",
        "latency_budget_ms",
        "120.0",
    )


def test_declared_constants_curves_and_tables() -> None:
    config = parse_config(
        "files:\n"
        "  - path: tests/test_training_regression.py\n"
        "    gates:\n"
        "      - {key: LOSS_THRESHOLD, metric: train/loss, op: '<='}\n"
        "      - {key: EXPECTED_LOSS, metric: train/loss, kind: reference,\n"
        "         tolerance: {abs: LOSS_ATOL}}\n"
        "  - path: tests/test_eval_accuracy.py\n"
        "    gates:\n"
        "      - {key: TASK_THRESHOLDS, metric: 'eval/{key}/acc', op: '>='}\n"
        "      - {key: 'TASK_THRESHOLDS[winogrande]', metric: wino, op: '>', name: WINO}\n"
    )
    training = _found("test_training_regression.py", config)
    loss = _gate(training, "LOSS_THRESHOLD")
    assert (loss.metric, loss.op, loss.literal, loss.pattern) == (
        "train/loss",
        "<=",
        "2.5",
        "files.0.gates.0",
    )
    curve = _gate(training, "EXPECTED_LOSS")
    assert (curve.metric, curve.kind, curve.op, curve.pattern) == (
        "train/loss",
        "reference",
        "==",
        "files.0.gates.1",
    )
    assert curve.tolerance is not None and curve.tolerance.abs == 0.02
    assert curve.tolerance.abs_span is not None and curve.tolerance.abs_span.literal == "0.02"
    assert [p.step for p in curve.points] == [1, 2, 3, 4, 5]
    assert curve.context == "test_loss_curve"  # the discovered gate it replaces was checked there
    assert [g.name for g in training.gates].count("EXPECTED_LOSS") == 1
    evals = _rows(_found("test_eval_accuracy.py", config))
    assert (
        "TASK_THRESHOLDS[arc_challenge]",
        "eval/arc_challenge/acc",
        ">=",
        "0.48",
        "limit",
    ) in evals
    assert ("WINO", "wino", ">", "0.695", "limit") in evals


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("NO_SUCH_THRESHOLD", "no constant assigned a number exactly once has that name"),
        ("ACC_FLOOR", "ACC_FLOOR is assigned 2 times in this file"),
    ],
)
def test_a_declared_key_that_names_nothing_is_an_error(key: str, reason: str) -> None:
    config = parse_config(
        f"files:\n  - path: tests/test_helpers_only.py\n"
        f"    gates: [{{key: {key}, metric: m, op: '>='}}]\n"
    )
    with pytest.raises(ThresholdFileError) as error:
        find_gates("tests/test_helpers_only.py", _text("test_helpers_only.py"), config)
    assert str(error.value).startswith(f"tests/test_helpers_only.py: files.0.gates.0: key {key!r}")
    assert reason in str(error.value)


# --------------------------------------------------------------------------- bad input


def test_a_file_that_does_not_parse_is_reported_with_its_line() -> None:
    text = _text("test_broken.py.txt")
    with pytest.raises(ThresholdFileError) as error:
        find_gates("tests/test_broken.py", text, NO_CONFIG)
    assert error.value.line == _line(text, 'if metrics["loss"] > 2.0')
    assert error.value.message.startswith("not valid Python: ")


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "-" * 100_000 + "1\n",
        "x = " + "a." * 50_000 + "b\n",
        "x = " + "(" * 300 + ")" * 300,
    ],
    ids=["unary", "attributes", "parentheses"],
)
def test_nesting_too_deep_is_refused(text: str) -> None:
    with pytest.raises(ThresholdFileError) as error:
        find_gates("tests/test_deep.py", text, NO_CONFIG)
    assert error.value.path == "tests/test_deep.py"


def test_the_number_of_gates_reported_is_capped() -> None:
    asserts = "".join(f"    assert metrics['acc_{i}'] >= 0.5\n" for i in range(1200))
    found = _found("test_many.py", text=f"def test_all(metrics):\n{asserts}")
    assert len(found.gates) == 1000
    assert found.notes == ("1200 gates found; only the first 1000 are reviewed",)
    assert found.gates[-1].metric == "acc_999"


def test_literal_places_survive_a_bom_crlf_and_wide_characters() -> None:
    text = (
        "\ufeffACC_MIN = 0.7\r\ndef test_a(m):\r\n"
        '    label = "précision ≥"; assert m["naïve_acc"] >= 0.5\r\n'
    )
    found = _found("test_wide.py", text=text)  # checks text[start:end] == literal
    assert {(g.metric, g.literal, g.line) for g in found.gates} == {("naïve_acc", "0.5", 3)}
    assert [u.literal for u in found.unbound] == ["0.7"]  # ACC_MIN: not used, a hint


# --------------------------------------------------------------------------- end to end


def test_review_of_a_python_file_through_the_cli(tmp_path: Path) -> None:
    history = tmp_path / "runs.jsonl"
    values = [0.63, 0.64, 0.62, 0.65, 0.63]
    history.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "created_at": f"2026-11-0{i + 1}T00:00:00Z",
                    "summary": {"mmlu": v, "score": 0.7, "arc_challenge": 0.5},
                }
            )
            + "\n"
            for i, v in enumerate(values)
        )
    )
    result = CliRunner().invoke(
        app,
        [
            "review",
            "--file",
            str(FIXTURES / "test_eval_accuracy.py"),
            "--history",
            str(history),
            "--format",
            "json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    gates = {(g["name"], g["op"]): g for g in json.loads(result.stdout)["gates"]}
    expected = {(row[0], row[2]): row for row in _rows(_found("test_eval_accuracy.py"))}
    assert set(gates) == set(expected)
    for key, (_, metric, op, literal, kind) in expected.items():
        shown = gates[key]
        assert (shown["metric"], shown["op"], shown["old_literal"]) == (metric, op, literal)
        assert shown["kind"] == kind
    mmlu = gates["MMLU_MIN", ">="]
    assert mmlu["context"] == "test_mmlu"
    assert mmlu["window_min"] == min(values) and mmlu["window_max"] == max(values)
    assert math.isclose(mmlu["old"], 0.612)
    assert mmlu["old_failures"] == {"failed": 0, "total": len(values)}
