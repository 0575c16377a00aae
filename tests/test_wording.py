"""Words that match the data (issue #11): the approved headline, "1 of 4 gates needs
attention", and literals shown as written (``0.50``, ``0.040``), through the renderers, the
real CLI and the App's ``review_pull`` against the recording GitHub."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.models import Failures, GateReview, Review, WindowInfo
from bot.core.render.review import MARKER, render_check, render_comment
from bot.core.render.terminal import review_table
from bot.features.review.approval import gate_values
from bot.features.review.pull import read_thresholds, review_pull
from tests.fakes.recording_github import RecordingGitHub

NOTE = "Approved by @maya on 2026-12-02"


def gate(name: str, verdict: str = "ok", **kw: object) -> GateReview:
    fields: dict[str, object] = {
        "name": name,
        "file": "ci.sh",
        "line": 3,
        "metric": "m",
        "op": ">=",
        "old": 0.56,
        "proposed": 0.5,
        "recomputed": 0.5,
        "window": WindowInfo(kind="last", runs=20),
        "window_min": 0.53,
        "window_max": 0.6,
        "old_failures": Failures(failed=0, total=30),
        "proposed_failures": Failures(failed=0, total=20),
        "consecutive_failures": 0,
        "failing_since": None,
        "verdict": verdict,
        "changed": True,
        "decimals": 2,
        "old_literal": "0.56",
        "proposed_literal": "0.50",
    }
    fields.update(kw)
    return GateReview.model_validate(fields)


FOUR = (
    gate("A_MIN", "too_tight", proposed_failures=Failures(failed=2, total=20)),
    gate("B_MIN"),
    gate("C_MIN"),
    gate("D_MIN", "unchanged", changed=False, old=0.5, old_literal="0.50"),
)


def test_one_of_four_gates_needs_attention() -> None:
    review = Review(conclusion="action_required", gates=FOUR)
    headline = render_comment(review).splitlines()[1]
    assert headline == (
        "❌ **Action required:** 1 of 4 gates needs attention (<code>A\\_MIN</code> too tight)."
    )
    assert render_check(review).title == "1 of 4 gates needs attention"
    single = Review(conclusion="success", gates=FOUR[1:2])
    assert render_comment(single).splitlines()[1] == (
        "✅ **No action needed:** 1 gate fits the recent runs."
    )


def test_approved_headline_says_who_and_which_values() -> None:
    review = Review(conclusion="action_required", gates=FOUR)
    text = render_comment(review, app_mode=True, approved=NOTE)
    headline = text.splitlines()[1]
    assert headline.startswith(
        "✅ **Approved by @&#8203;maya on 2026-12-02** for <code>A\\_MIN</code> = 0.50: the"
        " check passes with these values"
    )
    assert "Action required" not in text
    assert "The review found: 1 of 4 gates needs attention" in headline
    assert "Approve thresholds" not in text  # nothing left to do
    check = render_check(review, approved=NOTE)
    assert check.title == NOTE
    assert check.summary.splitlines()[0] == headline


def test_literals_keep_their_written_decimals() -> None:
    unverified = gate(
        "LOGPROBS_MAX",
        "no_data",
        op="<=",
        old=0.04,
        proposed=0.04,
        changed=False,
        recomputed=None,
        decimals=0,
        old_literal="0.040",
        proposed_literal="0.040",
    )
    moved = gate("EVAL_MIN", "no_data", recomputed=None, decimals=0)
    review = Review(conclusion="action_required", gates=(moved, unverified))
    text = render_comment(review)
    rows = [line for line in text.splitlines() if line.startswith("| <code>")]
    assert "| 0.56 → **0.50** |" in rows[0]
    assert "| 0.040 |" in rows[1]
    console = Console(width=200, record=True, color_system=None)
    console.print(review_table(review))
    table = console.export_text()
    assert "0.56 → 0.50" in table and "0.040" in table
    assert "0.5 " not in table and "0.04 " not in table


def test_cli_shows_literals_of_gates_without_data(tmp_path: Path) -> None:
    start = datetime(2026, 7, 1, tzinfo=UTC)
    rows = [
        {"id": f"r{i}", "created_at": (start + timedelta(days=i)).isoformat(), "summary": {"x": i}}
        for i in range(5)
    ]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    body = 'check --asserts "eval/acc >= $EVAL_MIN" "logprobs <= $LOGPROBS_MAX"\n'
    (tmp_path / "base.sh").write_text(f"EVAL_MIN=0.56\nLOGPROBS_MAX=0.040\n{body}")
    (tmp_path / "head.sh").write_text(f"EVAL_MIN=0.50\nLOGPROBS_MAX=0.040\n{body}")
    args = ["review", "--history", str(tmp_path / "runs.jsonl"), "--file"]
    result = CliRunner().invoke(
        app, [*args, str(tmp_path / "head.sh"), "--base", str(tmp_path / "base.sh")]
    )
    assert result.exit_code == 0, result.output
    assert "| 0.56 → **0.50** |" in result.stdout and "| 0.040 |" in result.stdout


# --------------------------------------------------------------------------- the App

SCRIPT = "tests/ci/nightly.sh"


def nightly(value: str) -> str:
    return f'EVAL_MIN={value}\ncheck --asserts "eval/acc >= $EVAL_MIN"\n'


def test_app_comment_after_approval_says_approved() -> None:
    gh = RecordingGitHub()
    start = datetime(2026, 7, 1, tzinfo=UTC)
    runs = "".join(
        json.dumps(
            {
                "id": f"r{i}",
                "created_at": (start + timedelta(days=i)).isoformat(),
                "summary": {"eval/acc": 0.55 + (i % 4) / 100},
            }
        )
        + "\n"
        for i in range(30)
    )
    config = "sources:\n  ci:\n    kind: file\n    path: ci/runs.jsonl\ndefault_source: ci\n"
    gh.commit({SCRIPT: nightly("0.50"), ".github/threshold-bot.yml": config, "ci/runs.jsonl": runs})
    pull = gh.open_pull(8, {SCRIPT: nightly("0.560")})  # fails the runs at 0.55
    approval = SimpleNamespace(
        approver="maya",
        approved_at=datetime(2026, 12, 2, tzinfo=UTC),
        gate_values=gate_values(read_thresholds(gh, gh.repo, gh.pulls[8]).files),
    )

    review_pull(gh, gh.repo, 8, approvals=lambda _repo, _number: approval)

    check = gh.check_for(pull.head_sha)
    assert (check.conclusion, check.title) == ("success", NOTE)
    body = gh.comments[8].body
    assert body.splitlines()[0] == MARKER
    headline = body.splitlines()[1]
    assert headline.startswith(
        "✅ **Approved by @&#8203;maya on 2026-12-02** for <code>EVAL\\_MIN</code> = 0.560"
    )
    assert "Action required" not in body and "1 of 1 gate needs attention" in headline
    assert check.summary.splitlines()[0] == headline


def test_terminal_title_of_a_gate_without_data() -> None:
    unverified = gate("EVAL_MIN", "no_data", changed=False, recomputed=None)
    console = Console(width=200, record=True, color_system=None)
    console.print(review_table(Review(conclusion="neutral", gates=(unverified,))))
    first = console.export_text().splitlines()[0].strip()
    assert first == "⚪ Not verified: 1 of 1 gate cannot be verified (EVAL_MIN: no data)."


def test_quoted_names_in_explanations_are_code_and_stay_inert() -> None:
    evil = "x|y <img src=a> @octocat"
    g = gate("EVAL_MIN", "no_data", recomputed=None, explanation=f"no run has `{evil}` here")
    text = render_comment(Review(conclusion="action_required", gates=(g,)))
    line = next(line for line in text.splitlines() if line.startswith("- <code>EVAL"))
    assert line.endswith(": no run has <code>x\\|y \\<img src=a\\> @&#8203;octocat</code> here.")
