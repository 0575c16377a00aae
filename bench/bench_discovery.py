"""Time of gate discovery (``find_gates``) on the two large threshold files of issue 12.

(a) a generated 5,000-line Python test file (module constants, dicts of thresholds read in
loops, parametrized cases, unittest assertions, ``pytest.approx``, golden curves and the
asserts that are no gates: lengths, shapes, status codes), read with no configuration;
(b) a generated 2 MB YAML file of speculative-decoding models, each with ``min_al``,
declared by one config pattern (``models.*.min_al``, metric ``{1}/acceptance_length``).

It prints the best of ``RUNS`` wall-clock times of each (the target is under 0.5 s) and
what was found.  Run: ``.venv/bin/python bench/bench_discovery.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.config import RepoConfig, parse_config
from bot.core.models import ThresholdFile
from bot.core.thresholds.discover import find_gates

RUNS = 5
TARGET_S = 0.5
PYTHON_LINES = 5000
YAML_BYTES = 2_000_000
YAML_CONFIG = parse_config(
    "files:\n"
    "  - path: ci/spec_decode_thresholds.yaml\n"
    '    gates: [{key: "models.*.min_al", metric: "{1}/acceptance_length", op: ">="}]\n'
)

_HEADER = '''"""Generated: nightly quality gates of many checkpoints."""

import math

import numpy as np
import pytest
import torch

from evals import run_eval, run_training

RTOL = 0.05
'''

_BLOCK = """
ACC_MIN_{i} = 0.{a}
THRESHOLDS_{i} = {{"gsm8k": 0.5{b}, "mmlu": 0.6{b}, "arc": 0.4{b}}}
EXPECTED_LOSS_{i} = {{1: 10.8{b}, 2: 10.7{b}, 3: 10.6{b}, 4: 10.5{b}}}
NUM_WORKERS_{i} = 8


def test_accuracy_{i}(metrics):
    assert len(metrics) == 3
    assert metrics["num_samples"] > 0
    assert metrics["accuracy"] >= ACC_MIN_{i}
    assert 0.3 <= metrics["f1"] <= 0.9{b}
    assert metrics["score"] == pytest.approx(0.7{b}, rel=RTOL)


def test_thresholds_{i}(metrics):
    for task, minimum in THRESHOLDS_{i}.items():
        assert metrics[task] >= minimum, task


@pytest.mark.parametrize("task,floor", [("piqa", 0.7{b}), ("boolq", 0.8{b})])
def test_param_{i}(metrics, task, floor):
    assert metrics[task] >= floor


def test_loss_curve_{i}():
    losses = run_training(steps=4)
    for step, expected in EXPECTED_LOSS_{i}.items():
        assert abs(losses[step] - expected) <= 0.02
    torch.testing.assert_close(losses[-1], torch.tensor(losses[-1]))


class TestModel{i}:
    LOSS_MAX = 2.{b}

    def test_loss(self):
        result = run_eval("model-{i}")
        assert result.status_code == 200
        assert result["loss"] <= self.LOSS_MAX
        assert result["throughput"] >= 1200.0 * (1 - 0.08)
        assert abs(result["ppl"] - 9.{b}) / 9.{b} < 0.05
        assert np.isclose(result["bleu"], 31.{b}, rtol=0.01)
        assert result.shape == (2, 3)
"""


def python_file() -> str:
    """About ``PYTHON_LINES`` lines of the shapes above."""
    parts = [_HEADER]
    lines, i = _HEADER.count("\n"), 0
    while lines < PYTHON_LINES:
        block = _BLOCK.format(i=i, a=50 + i % 40, b=i % 10)
        parts.append(block)
        lines += block.count("\n")
        i += 1
    return "".join(parts)


def yaml_file() -> str:
    """About ``YAML_BYTES`` of models with their acceptance-length thresholds."""
    parts = ["# Generated: minimum acceptance length per draft model.\nmodels:\n"]
    size, i = len(parts[0]), 0
    while size < YAML_BYTES:
        entry = (
            f"  draft-model-{i:06d}:\n"
            f"    target: acme/llama-{i % 70}b-instruct\n"
            f"    num_speculative_tokens: {3 + i % 3}\n"
            f"    ref_al: {2 + (i % 90) / 100:.2f}\n"
            f"    min_al: {1.8 + (i % 90) / 100:.2f}\n"
            f"    notes: 'measured on mt-bench, batch size {1 + i % 8}'\n"
        )
        parts.append(entry)
        size += len(entry)
        i += 1
    return "".join(parts)


def best(parse: Callable[[], ThresholdFile | None]) -> tuple[float, ThresholdFile | None]:
    times, found = [], None
    for _ in range(RUNS):
        began = time.perf_counter()
        found = parse()
        times.append(time.perf_counter() - began)
    return min(times), found


def main() -> None:
    python, yaml = python_file(), yaml_file()
    cases: dict[str, tuple[str, Callable[[], ThresholdFile | None]]] = {
        "Python test file, no config": (
            f"{python.count(chr(10)):,} lines",
            lambda: find_gates("tests/test_nightly_quality.py", python, RepoConfig()),
        ),
        "YAML by pattern models.*.min_al": (
            f"{len(yaml.encode()) / 1e6:.1f} MB",
            lambda: find_gates("ci/spec_decode_thresholds.yaml", yaml, YAML_CONFIG),
        ),
    }
    print(f"{'input':34} {'size':>12} {'best s':>8} {'target':>7}  found")
    for label, (size, parse) in cases.items():
        seconds, found = best(parse)
        verdict = "ok" if seconds < TARGET_S else "SLOW"
        what = f"{len(found.gates)} gates, {len(found.unbound)} hints" if found else "nothing"
        print(f"{label:34} {size:>12} {seconds:8.3f} {verdict:>7}  {what}")


if __name__ == "__main__":
    main()
