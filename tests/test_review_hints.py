"""Hints are part of the review (issue 28): a file in which literals reach a comparison but
no gate is bound is reviewed (zero gates, its hints, ``neutral``), in every format, through
the real command line; "no threshold gates found" (exit 2) is said only when nothing at all
was seen. ``backtest`` and ``rebaseline`` say there is nothing to do, naming the hints.

The files are written here, in shapes of their own: a BLEU floor a Python test passes to a
scoring helper the repository does not hold, a perplexity ceiling a shell script passes to
a scoring program as an option. Expected hints come from these texts (names, lines,
literals); the config lines are checked by binding them (tests/test_hint_paste_back.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app

PYTHON = "tests/test_summaries.py"
PYTHON_TEXT = (
    "from tools.scoring import check_bleu\n"
    "\n"
    "BLEU_FLOOR = 27.5\n"
    "\n"
    "\n"
    "def test_summaries_hold_their_bleu():\n"
    '    check_bleu("out/summaries.json", BLEU_FLOOR)\n'
)
SHELL = "ci/nightly_ppl.sh"
SHELL_TEXT = (
    "#!/usr/bin/env bash\n"
    "set -euo pipefail\n"
    "PPL_CEILING=14.2\n"
    './bin/score_run --run out/last --max-ppl "$PPL_CEILING"\n'
)
NOTHING = "ci/hello.sh"
NOTHING_TEXT = '#!/usr/bin/env bash\nSTEPS=40\necho "$STEPS"\n'
HISTORY = "runs.jsonl"
HISTORY_TEXT = (
    '{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {"eval/bleu": 28.1}}\n'
)
# (file, name, line, literal, how the reason names its use) for each hinted file
HINTED = {
    PYTHON: ("BLEU_FLOOR", 3, "27.5", "check_bleu()"),
    SHELL: ("PPL_CEILING", 3, "14.2", "--max-ppl"),
}


@pytest.fixture(name="repo")
def repo_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for path, text in ((PYTHON, PYTHON_TEXT), (SHELL, SHELL_TEXT), (NOTHING, NOTHING_TEXT)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / HISTORY).write_text(HISTORY_TEXT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("path", sorted(HINTED))
@pytest.mark.parametrize("history", [True, False], ids=["history", "no-history"])
def test_json_review_of_a_file_with_only_hints(repo: Path, path: str, history: bool) -> None:
    extra = ["--history", HISTORY] if history else []  # without: no source is needed
    result = cli("review", "--file", path, "--format", "json", *extra)

    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    assert review["conclusion"] == "neutral"
    assert review["gates"] == []
    name, line, literal, use = HINTED[path]
    (hint,) = review["hints"]
    assert set(hint) == {"file", "line", "literal", "name", "reason", "config", "compared"}
    assert (hint["file"], hint["line"], hint["literal"], hint["name"]) == (
        path,
        line,
        literal,
        name,
    )
    assert path.split("/")[-1] in hint["config"] or path in hint["config"]
    assert f"key: {name}" in hint["config"]
    assert use in hint["reason"]
    assert "unbound" not in review  # one list of hints, under its documented name


def test_fail_on_neutral_fails_a_review_with_only_hints(repo: Path) -> None:
    result = cli("review", "--file", PYTHON, "--format", "json", "--fail-on", "neutral")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["hints"][0]["name"] == "BLEU_FLOOR"  # still printed
    passed = cli("review", "--file", PYTHON, "--format", "json", "--fail-on", "action_required")
    assert passed.exit_code == 0


@pytest.mark.parametrize("fmt", ["markdown", "table", "html"])
def test_every_format_shows_the_hints_and_their_config_lines(
    repo: Path, fmt: str, tmp_path: Path
) -> None:
    out = tmp_path / f"review.{fmt}"
    result = cli("review", "--file", SHELL, "--format", fmt, "--output", str(out))

    assert result.exit_code == 0, result.output
    shown = out.read_text()
    for words in ("PPL_CEILING", "14.2", "key: PPL_CEILING", f"path: {SHELL}"):
        assert words in shown, (fmt, words)


def test_a_table_keeps_each_config_line_whole(repo: Path) -> None:
    """Pasted from a terminal, the config lines are the lines the review means: a line
    wider than the terminal is not folded onto the next (it would not parse)."""
    result = cli("review", "--file", SHELL, "--format", "table")

    hint = json.loads(cli("review", "--file", SHELL, "--format", "json").stdout)["hints"][0]
    printed = [line.strip() for line in result.stdout.splitlines()]
    for line in hint["config"].splitlines():
        assert line.strip() in printed


def test_no_threshold_gates_found_only_when_nothing_was_seen(repo: Path) -> None:
    result = cli("review", "--file", NOTHING, "--format", "json", "--history", HISTORY)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip() == f"threshold-bot: error: {NOTHING}: no threshold gates found"


def test_backtest_of_a_file_with_only_hints_says_there_is_nothing_to_backtest(
    repo: Path,
) -> None:
    result = cli("backtest", "--file", PYTHON, "--history", HISTORY)

    assert result.exit_code == 0
    assert result.stdout == ""
    first, *rest = result.stderr.splitlines()
    assert first.startswith(f"{PYTHON}: no gate bound, nothing to backtest; 1 value reaches")
    assert "BLEU_FLOOR = 27.5" in rest[0] and "          - key: BLEU_FLOOR" in rest


def test_rebaseline_of_a_file_with_only_hints_writes_nothing_and_names_them(repo: Path) -> None:
    result = cli("rebaseline", "--file", SHELL, "--history", HISTORY)

    assert result.exit_code == 0
    assert (repo / SHELL).read_text() == SHELL_TEXT
    first, *rest = result.stderr.splitlines()
    assert first.startswith(f"{SHELL}: no gate bound, nothing to rewrite; 1 value reaches")
    assert f"{SHELL}:3: PPL_CEILING = 14.2" in rest[0]


def test_rebaseline_and_backtest_of_a_file_with_nothing_are_usage_errors(repo: Path) -> None:
    for command in ("rebaseline", "backtest"):
        result = cli(command, "--file", NOTHING, "--history", HISTORY)
        assert result.exit_code == 2
        assert "no threshold gates found" in result.stderr
