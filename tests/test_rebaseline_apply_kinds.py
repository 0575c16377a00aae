"""``/rebaseline`` end to end against the recording GitHub: a Python test's reference gate
and a golden-curve JSON file, read from the PR as the App reads them, with a history file
whose rows carry per-step series; the commits are checked byte for byte."""

from __future__ import annotations

import json
import random
import statistics
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from pathlib import Path

import pytest

from bot.core.commands import Command, parse_command_line
from bot.features.rebaseline.apply import rebaseline
from bot.features.rebaseline.replies import rebaseline_reply
from tests.fakes.recording_github import RecordingGitHub

FIXTURES = Path(__file__).parent / "fixtures" / "gates" / "rebaseline"
PY = "tests/test_gsm8k_accuracy.py"
CURVE = "tests/functional/golden_lm_loss.json"
HISTORY = "ci/history.jsonl"
CONFIG = ".github/threshold-bot.yml"
SETTINGS = f"""\
sources:
  ci:
    kind: file
    path: {HISTORY}
default_source: ci
files:
  - path: {CURVE}
    tolerance: 0.05
"""
RUNS, WINDOW = 30, 20
GOLDEN = {1: 10.85, 6: 10.79, 11: 10.70, 16: 10.61}


def history() -> tuple[str, list[float], list[dict[int, float]]]:
    """Accuracy around 0.58 (±6%), the loss curve 0.2 below the golden one."""
    rng = random.Random(17)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    acc, curves, lines = [], [], []
    for i in range(RUNS):
        acc.append(round(0.58 + rng.uniform(-0.035, 0.035), 4))
        curves.append({s: round(v - 0.2 + rng.gauss(0, 0.01), 4) for s, v in GOLDEN.items()})
        lines.append(
            json.dumps(
                {
                    "id": f"run{i:03d}",
                    "created_at": (start + timedelta(days=i)).isoformat(),
                    "summary": {"eval/gsm8k/acc": acc[-1], "lm loss": curves[-1][16]},
                    "series": {"lm loss": {str(s): v for s, v in curves[-1].items()}},
                }
            )
        )
    return "\n".join(lines) + "\n", acc, curves


@pytest.fixture
def gh() -> RecordingGitHub:
    gh = RecordingGitHub()
    text, _, _ = history()
    gh.commit(
        {
            PY: (FIXTURES / "gsm8k_accuracy.py").read_text(),
            CURVE: (FIXTURES / "golden_lm_loss.json").read_text(),
            CONFIG: SETTINGS,
            HISTORY: text,
        }
    )
    base = gh.snapshots[gh.commits[-1]]
    gh.open_pull(
        7,
        {
            PY: base[PY].replace("GSM8K_ACC_REF = 0.62", "GSM8K_ACC_REF = 0.63"),
            CURVE: base[CURVE].replace('"1": 10.85', '"1": 10.86'),
        },
    )
    return gh


def round_up(tolerance: Decimal, decimals: int = 2, digits: int = 2) -> Decimal:
    """Rounded up at the literal's decimals, or more to show two significant digits (the
    rule for tolerances, docs/limit-rule.md)."""
    places = max(decimals, digits - 1 - tolerance.adjusted())
    return tolerance.quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING)


def run(gh: RecordingGitHub, line: str) -> tuple[str, str, str]:
    command = parse_command_line(line)
    assert isinstance(command, Command)
    result = rebaseline(gh, gh.repo, 7, command, by="maya", today=date(2026, 12, 2))
    head = gh.snapshots[gh.pulls[7].head_sha] if result.mode != "committed" else None
    files = gh.snapshots[gh.branches["branch-7"]]
    assert head is None or files == head
    return files[PY], files[CURVE], rebaseline_reply(result)


def test_reference_and_curve_are_committed(gh: RecordingGitHub) -> None:
    _, acc, curves = history()
    python, curve, reply = run(gh, "/rebaseline")
    reference = f"{statistics.median(acc[-WINDOW:]):.2f}"
    assert f"GSM8K_ACC_REF = {reference}\n" in python and "ACC_RTOL = 0.05\n" in python
    steps = {s: f"{statistics.median(c[s] for c in curves[-WINDOW:]):.2f}" for s in (1, 6, 11, 16)}
    values = json.loads(curve)["lm loss"]["values"]
    assert values == {
        "1": float(steps[1]),
        "6": float(steps[6]),
        "11": "nan",  # a nan golden value is never rewritten
        "16": float(steps[16]),
    }
    assert "threshold-bot" not in curve and "# threshold-bot: rebaselined" in python
    assert "committed the new values" in reply
    assert "; references: the median of the same runs." in reply
    assert f"0.63 → **{reference}**" in reply and "<code>lm loss</code> step 6" in reply
    # ±6% around 0.58 does not fit a 5% band: the reply says so, the tolerance stays
    assert "The tolerance of <code>GSM8K\\_ACC\\_REF</code>" in reply
    assert "`/rebaseline --tolerance` also widens it" in reply


def test_tolerance_is_widened_when_asked(gh: RecordingGitHub) -> None:
    _, acc, _ = history()
    python, _, reply = run(gh, "/rebaseline GSM8K_ACC_REF --tolerance")
    window = acc[-WINDOW:]
    reference = Decimal(f"{statistics.median(window):.2f}")
    needed = round_up((reference - Decimal(repr(min(window)))) / reference)
    assert f"GSM8K_ACC_REF = {reference}\n" in python
    assert f"ACC_RTOL = {needed}\n" in python
    assert all(v >= float(reference) * (1 - float(needed)) for v in window)
    assert f"0.05 → **{needed}**" in reply and "tolerance" in reply
    assert "golden" not in reply  # only the named gate
