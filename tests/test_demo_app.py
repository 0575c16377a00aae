"""``python -m demo.app``: the App demo runs offline and prints what the App posted."""

from __future__ import annotations

import pytest

from bot.core.render.review import MARKER
from demo.app import main
from demo.data import build_example


def test_demo_prints_the_comment_and_check_run(capsys: pytest.CaptureFixture[str]) -> None:
    example = build_example()
    effect = example.repo.effect_pulls[-1]  # the PR that started the newest regime

    assert main() == 0

    out = capsys.readouterr().out
    assert "-> 202" in out and "(done)" in out
    assert out.count(MARKER) == 1
    assert "Action required" in out
    assert f"/pull/{effect})" in out  # the regime table links the PR that moved the metrics
    assert "check run 'threshold-bot'" in out and ": action_required" in out
    assert "button: [Approve thresholds]" in out
