"""``python -m demo.app``: the App demo runs offline and prints what the App posted."""

from __future__ import annotations

import re

import pytest

from bot.core.render.markdown import escape
from bot.core.render.review import MARKER
from demo.app import REPO, main
from demo.data import build_example


def test_demo_prints_the_comment_and_check_run(capsys: pytest.CaptureFixture[str]) -> None:
    repo = build_example().repo
    titles = {p.number: p.title for p in repo.pulls}

    assert main() == 0

    out = capsys.readouterr().out
    assert "-> 202" in out and "(done)" in out
    assert out.count(MARKER) == 1
    assert "Action required" in out
    regime_rows = [line for line in out.splitlines() if line.startswith("| ") and " – " in line]
    assert regime_rows
    for number in repo.effect_pulls:  # each regime change names the PR that moved the metrics
        assert any(
            f"[#{number}](https://github.com/{REPO}/pull/{number}) {escape(titles[number])}" in row
            for row in regime_rows
        ), number
    assert "/tmp" not in out  # no machine-specific path in what the App posted
    assert "check run 'threshold-bot'" in out and ": action_required" in out
    assert "button: [Approve thresholds]" in out
    # the comment links the report; the demo's App serves it at its own local address
    (link,) = set(re.findall(r"http://127\.0\.0\.1:\d+/reports/[\w-]{43}", out))
    assert f"[Open the interactive report]({link})" in out
    assert f"{link}  (200, " in out
