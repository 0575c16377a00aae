"""The App's review of a PR whose changed file has hints and no gate (issue 28), against the
recording GitHub: a file the config names (a shell script, a test file under ``python:``)
gets a ``neutral`` check run listing its hints with the config lines that bind them; a test
file read only because of its name stays quiet, as a file with nothing seen does.

The files are written here; the expected names, lines and config lines come from their text.
"""

from __future__ import annotations

from bot.features.review.pull import review_pull
from tests.fakes.recording_github import RecordingGitHub

CONFIG = ".github/threshold-bot.yml"
HISTORY = "ci/history.jsonl"
FILE_SOURCE = f"sources:\n  ci:\n    kind: file\n    path: {HISTORY}\ndefault_source: ci\n"
RUN = '{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {"eval/bleu": 28.1}}\n'
SCRIPT = "ci/nightly_ppl.sh"
TEST_FILE = "tests/quality/test_summaries.py"


def script(ceiling: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        f"PPL_CEILING={ceiling}\n"
        './bin/score_run --run out/last --max-ppl "$PPL_CEILING"\n'
    )


def python_test(floor: str) -> str:
    return (
        "from tools.scoring import check_bleu\n"
        "\n"
        f"BLEU_FLOOR = {floor}\n"
        "\n"
        "\n"
        "def test_summaries_hold_their_bleu():\n"
        '    check_bleu("out/summaries.json", BLEU_FLOOR)\n'
    )


def repo_with(config: str) -> RecordingGitHub:
    gh = RecordingGitHub()
    gh.commit(
        {
            CONFIG: config,
            HISTORY: RUN,
            SCRIPT: script("14.2"),
            TEST_FILE: python_test("27.5"),
        }
    )
    return gh


def test_a_script_with_only_hints_gets_a_neutral_check_listing_them() -> None:
    gh = repo_with(FILE_SOURCE)  # no shell: globs: every .sh script is the config's
    pull = gh.open_pull(31, {SCRIPT: script("13.9")})

    outcome = review_pull(gh, gh.repo, 31)

    assert outcome.status == "reviewed" and outcome.review is not None
    assert outcome.review.gates == () and outcome.review.conclusion == "neutral"
    (hint,) = outcome.review.hints
    assert (hint.file, hint.line, hint.name, hint.literal) == (SCRIPT, 3, "PPL_CEILING", "13.9")
    check = gh.check_for(pull.head_sha)
    assert check.conclusion == "neutral"
    assert check.title == "No gate bound; values like thresholds listed"
    assert "PPL_CEILING" in check.summary and "--max-ppl" in check.summary
    for line in hint.config.splitlines():  # the lines that bind it, as written
        assert line in check.summary
    assert "Declare the values" in check.text
    assert "PPL_CEILING" in gh.comments[31].body


def test_a_test_file_the_config_names_with_only_hints_gets_a_neutral_check() -> None:
    gh = repo_with(FILE_SOURCE + 'python: ["tests/quality/*.py"]\n')
    pull = gh.open_pull(32, {TEST_FILE: python_test("28.0")})

    outcome = review_pull(gh, gh.repo, 32)

    assert outcome.status == "reviewed" and outcome.review is not None
    (hint,) = outcome.review.hints
    assert (hint.file, hint.line, hint.name, hint.literal) == (TEST_FILE, 3, "BLEU_FLOOR", "28.0")
    check = gh.check_for(pull.head_sha)
    assert check.conclusion == "neutral"
    assert "key: BLEU_FLOOR" in check.summary and f"path: {TEST_FILE}" in check.summary


def test_a_test_file_read_for_its_name_only_with_only_hints_stays_quiet() -> None:
    gh = repo_with(FILE_SOURCE)
    gh.open_pull(33, {TEST_FILE: python_test("28.0")})

    outcome = review_pull(gh, gh.repo, 33)

    assert outcome.status == "skipped" and outcome.reason == "no threshold files"
    assert gh.writes() == []


def test_a_script_with_nothing_seen_stays_quiet() -> None:
    gh = repo_with(FILE_SOURCE)
    gh.open_pull(34, {SCRIPT: '#!/usr/bin/env bash\nSTEPS=40\necho "$STEPS"\n'})

    outcome = review_pull(gh, gh.repo, 34)

    assert outcome.status == "skipped"
    assert gh.writes() == []
