"""Thresholds held in attributes (issue 28): set in ``setUp`` / ``setUpClass`` / ``__init__``
of the test class or of a base class in the same file, or on an object a fixture returns;
the documented ``test_fn.name[key]`` declaration for a local dict of a test method; and a
``files:`` entry that only maps metrics for a file read without declarations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import RepoConfig, parse_config
from bot.core.models import ThresholdFile
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError

RUNNER = CliRunner()
Row = tuple[str, str, str, str]  # name, metric, op, literal


def _found(
    text: str, config: RepoConfig | None = None, path: str = "tests/test_x.py"
) -> ThresholdFile:
    found = find_gates(path, text, config or RepoConfig())
    assert found is not None
    for gate in found.gates:
        assert text[gate.start : gate.end] == gate.literal
    return found


def _rows(found: ThresholdFile) -> set[Row]:
    return {(g.name, g.metric, g.op, g.literal) for g in found.gates}


INHERITED = """
import unittest


class SegmentationBase(unittest.TestCase):
    def setUp(self):
        self.min_mean_iou = 0.463
        self.caps = {"latency_ms": 88.0, "peak_memory_gb": 11.5}


class TestSegFormer(SegmentationBase):
    def test_mean_iou(self):
        out = segment()
        self.assertGreaterEqual(out["mean_iou"], self.min_mean_iou)

    def test_budget(self):
        out = segment()
        caps = self.caps
        for name, cap in caps.items():
            with self.subTest(name=name):
                self.assertLessEqual(out[name], cap)
"""


def test_an_attribute_set_in_a_base_class_of_the_same_file_is_followed() -> None:
    assert _rows(_found(INHERITED)) == {
        ("SegmentationBase.min_mean_iou", "mean_iou", ">=", "0.463"),
        ("SegmentationBase.caps[latency_ms]", "latency_ms", "<=", "88.0"),
        ("SegmentationBase.caps[peak_memory_gb]", "peak_memory_gb", "<=", "11.5"),
    }


FIXTURE_OBJECT = """
import pytest


class SpeechBudget:
    def __init__(self):
        self.max_wer = 0.087
        self.floors = {"rtf_speedup": 14.0}


class Limits:
    MAX_CER = 0.031


@pytest.fixture
def budget():
    return SpeechBudget()


def test_wer(budget):
    report = transcribe_librispeech()
    assert report["wer"] <= budget.max_wer
    for name, floor in budget.floors.items():
        assert report[name] >= floor


class TestCharacters:
    def setup_method(self):
        self.limits = Limits()

    def test_cer(self):
        assert transcribe()["cer"] < self.limits.MAX_CER
"""


def test_attributes_of_an_object_a_fixture_or_setup_builds_are_followed() -> None:
    assert _rows(_found(FIXTURE_OBJECT)) == {
        ("SpeechBudget.max_wer", "wer", "<=", "0.087"),
        ("SpeechBudget.floors[rtf_speedup]", "rtf_speedup", ">=", "14.0"),
        ("Limits.MAX_CER", "cer", "<", "0.031"),
    }


CLASS_SETUP = """
import unittest


class SummaryRegression(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rouge1_floor = 0.391
        cls.limits = {"rouge2": 0.182, "rougeL": 0.355}
        cls.outputs = summarize_all()

    def test_rouge1(self):
        self.assertGreater(self.outputs["rouge1"], self.rouge1_floor)

    def test_others(self):
        for key in self.limits:
            with self.subTest(key):
                self.assertGreaterEqual(self.outputs[key], self.limits[key])


class TestTwoWrites(unittest.TestCase):
    def setUp(self):
        self.min_recall = 0.5

    def test_recall(self):
        self.min_recall = 0.6
        self.assertGreaterEqual(retrieve()["recall"], self.min_recall)
"""


def test_set_up_class_attributes_and_dicts_looped_over_are_gates() -> None:
    found = _found(CLASS_SETUP)
    assert _rows(found) == {
        ("SummaryRegression.rouge1_floor", "rouge1", ">", "0.391"),
        ("SummaryRegression.limits[rouge2]", "rouge2", ">=", "0.182"),
        ("SummaryRegression.limits[rougeL]", "rougeL", ">=", "0.355"),
    }
    assert [u.name for u in found.unbound] == ["min_recall"]  # assigned twice: a hint


DATACLASS = """
from dataclasses import dataclass
import unittest

import pytest


@dataclass
class Floors:
    min_accuracy: float = 0.71
    max_loss: float = 1.9


@pytest.fixture
def stricter():
    return Floors(min_accuracy=0.74)


@pytest.fixture
def defaults():
    return Floors()


def test_classifier(stricter, defaults):
    m = run()
    assert m["accuracy"] >= stricter.min_accuracy
    assert m["loss"] <= defaults.max_loss


class TestOverride(unittest.TestCase):
    min_bleu = 20.0

    def setUp(self):
        self.min_bleu = 25.0

    def test_bleu(self):
        self.assertGreaterEqual(score()["bleu"], self.min_bleu)
"""


def test_a_field_given_when_the_object_is_built_wins_over_its_default() -> None:
    found = _found(DATACLASS)
    assert {(g.metric, g.op, g.literal) for g in found.gates} == {
        ("accuracy", ">=", "0.74"),
        ("loss", "<=", "1.9"),
    }
    hint = next(u for u in found.unbound if u.name == "min_bleu")  # class default, then setUp
    assert "assigned 2 times" in hint.reason


FIXTURES = """
import pytest


class TestVision:
    @pytest.fixture
    def floors(self):
        return {"top1": 0.761, "top5": 0.929}

    def test_imagenet(self, floors):
        acc = evaluate()
        assert acc["top1"] >= floors["top1"]


@pytest.fixture(scope="module")
def budget():
    limits = {"latency_p99_ms": 95.0}
    server = start()
    yield limits
    server.stop()


@pytest.fixture
def stream():
    for chunk in read():
        yield {"tokens_per_s": 350.0}


def test_latency(budget, stream):
    stats = bench()
    assert stats["latency_p99_ms"] <= budget["latency_p99_ms"]
    assert stats["tokens_per_s"] >= stream["tokens_per_s"]
"""


def test_a_fixture_of_the_class_or_one_that_yields_gives_its_value() -> None:
    assert _rows(_found(FIXTURES)) == {
        ("TestVision.floors[top1]", "top1", ">=", "0.761"),
        ("budget.limits[latency_p99_ms]", "latency_p99_ms", "<=", "95.0"),
    }  # not the fixture yielding in a loop: which value a test gets is not one literal


LOCAL_DICT = """
import unittest


class TestReasoning(unittest.TestCase):
    def test_math(self):
        expected = {"gsm8k": 0.56, "minerva_math": 0.21}
        report_to_dashboard(expected)


def test_commonsense():
    expected = {"hellaswag": 0.612}
    report_to_dashboard(expected)
"""


@pytest.mark.parametrize(
    "key", ["test_math.expected[gsm8k]", "TestReasoning.test_math.expected[gsm8k]"]
)
def test_a_local_dict_of_a_test_method_is_declared_as_test_fn_name_key(key: str) -> None:
    config = parse_config(
        "files:\n  - path: tests/test_x.py\n    gates:\n"
        f'      - {{key: "{key}", metric: eval/gsm8k/acc, op: ">="}}\n'
        '      - {key: "test_commonsense.expected", metric: "eval/{key}/acc", op: ">="}\n'
    )
    found = _found(LOCAL_DICT, config)
    assert {(g.metric, g.op, g.literal) for g in found.gates} == {
        ("eval/gsm8k/acc", ">=", "0.56"),
        ("eval/hellaswag/acc", ">=", "0.612"),
    }


def test_a_short_declaration_naming_two_methods_is_an_error() -> None:
    text = LOCAL_DICT + (
        "\n\nclass TestOther(unittest.TestCase):\n"
        "    def test_math(self):\n        expected = {'gsm8k': 0.4}\n"
    )
    config = parse_config(
        "files:\n  - path: tests/test_x.py\n    gates:\n"
        '      - {key: "test_math.expected[gsm8k]", metric: gsm8k, op: ">="}\n'
    )
    with pytest.raises(ThresholdFileError, match=r"TestReasoning\.test_math, TestOther\.test_math"):
        find_gates("tests/test_x.py", text, config)


CHECKS_YAML = """\
checks:
  - "eval/accuracy >= 0.71"
  - "train/loss <= 2.4"
"""


@pytest.mark.parametrize(
    "entry", ["metrics: {eval/accuracy: eval/acc}", "tolerance: {rel: 0.05}", "kind: limit"]
)
def test_an_entry_setting_only_names_or_defaults_does_not_warn_when_gates_were_read(
    entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the repository: the entry's path is relative to it
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "checks.yaml").write_text(CHECKS_YAML)
    (tmp_path / "cfg.yml").write_text(f"files:\n  - path: ci/checks.yaml\n    {entry}\n")
    history = tmp_path / "runs.jsonl"
    history.write_text('{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {}}\n')
    args = ["review", "--file", "ci/checks.yaml", "--history", str(history), "--config", "cfg.yml"]
    result = RUNNER.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    assert {g["old_literal"] for g in review["gates"]} == {"0.71", "2.4"}
    assert review["warnings"] == []
