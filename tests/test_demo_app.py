"""``python -m demo.app``: the App demo runs offline and prints what the App posted: the
Markdown when piped, the review as a table (the Markdown to files) on a terminal."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from bot.core.render.markdown import escape
from bot.core.render.review import MARKER
from demo.app import REPO, main
from demo.data import build_example
from tests.terminal import at_a_terminal

pytestmark = pytest.mark.servers


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


def test_on_a_terminal_the_demo_shows_the_review_as_a_table(tmp_path: Path) -> None:
    status, shown = at_a_terminal([sys.executable, "-m", "demo.app"], cwd=tmp_path)
    assert status == 0, shown
    posted = tmp_path / "build" / "demo"
    comment = (posted / "pr-comment.md").read_text(encoding="utf-8")
    check = (posted / "check-run.md").read_text(encoding="utf-8")
    assert comment.startswith(MARKER) and "Action required" in comment
    assert check.splitlines()[0] == comment.splitlines()[1]  # the check run's summary
    # the Markdown went to the files, named on the screen; the screen got the table
    assert "PR comment (Markdown)  build/demo/pr-comment.md" in shown
    assert "its summary (Markdown)  build/demo/check-run.md" in shown
    lines = [line.rstrip() for line in shown.splitlines()]
    assert MARKER not in shown and "<code>" not in shown
    assert not any(line.startswith("|") for line in lines)  # no Markdown table row
    assert any(line.startswith("❌ Action required: ") for line in lines)
    assert "Gates" in lines and "Regimes" in lines and "What to do" in lines
    gates = re.findall(r"^\| <code>([^<]+)</code> \|", comment, re.MULTILINE)
    assert len(gates) >= 2
    for name in gates:  # each gate of the comment's table has its block, under its name
        assert name.replace("\\_", "_") in lines
    assert "button: [Approve thresholds]" in shown
