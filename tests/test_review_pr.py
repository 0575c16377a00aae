"""``bot.features.review.pull`` against a recording in-memory GitHub (no HTTP).

The history has two regimes (``eval/all/avg_score`` around 0.40, then around 0.56
from run 20, the commit of merged PR #12); expected numbers are computed here from
the generated runs with the documented limit rule (docs/limit-rule.md).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from bot.core.history.sources import HistorySource, HistoryUnavailable
from bot.core.models import History, SourceSpec
from bot.core.render.review import render_check, render_comment
from bot.features.review.approval import gate_values
from bot.features.review.pull import APPROVE, read_thresholds, review_pull
from tests.fakes.recording_github import RecordingGitHub

SCRIPT = "tests/ci/nightly.sh"
HISTORY = "ci/history.jsonl"
CONFIG = ".github/threshold-bot.yml"
METRIC = "eval/all/avg_score"
FILE_SOURCE = f"sources:\n  ci:\n    kind: file\n    path: {HISTORY}\ndefault_source: ci\n"
RUNS = 40
SHIFT_AT = 20


def script(value: str, project: str | None = None) -> str:
    """A nightly CI script with one gate on ``eval/all/avg_score``."""
    project_arg = f' --project_name "{project}"' if project else ""
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        f"EVAL_ACC_MIN_VALUE={value}\n"
        f'python train.py{project_arg} --asserts "{METRIC} >= $EVAL_ACC_MIN_VALUE"\n'
    )


def scores() -> list[float]:
    """Deterministic scores: a step from ~0.40 to ~0.56 at run ``SHIFT_AT``."""
    rng = random.Random(7)
    return [
        round((0.40 if i < SHIFT_AT else 0.56) + rng.uniform(-0.03, 0.03), 4) for i in range(RUNS)
    ]


def history_jsonl(commits: list[str], values: list[float]) -> str:
    start = datetime(2026, 7, 1, tzinfo=UTC)
    lines = [
        json.dumps(
            {
                "id": f"run{i:03d}",
                "created_at": (start + timedelta(days=i)).isoformat(),
                "commit": commits[i],
                "summary": {METRIC: v},
            }
        )
        for i, v in enumerate(values)
    ]
    return "\n".join(lines) + "\n"


def rule_limit(window: list[float], literal: str, allowance: float = 0.05) -> float:
    """The documented lower-bound limit rule, rounded down at the literal's decimals (p=2)."""
    decimals = len(literal.split(".")[1])
    low = min(window)
    unrounded = low - allowance * abs(low)
    assert unrounded >= 0.1  # two significant digits need no more than ``decimals`` here
    scale = 10.0**decimals
    return math.floor(unrounded * scale) / scale


@pytest.fixture
def repo() -> RecordingGitHub:
    """Main has the script (0.56), the config and 40 runs; merged PR #12 made the step."""
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56"), CONFIG: FILE_SOURCE})
    for _ in range(RUNS - 1):
        gh.commit({})
    gh.commit({HISTORY: history_jsonl(gh.commits, scores())})
    gh.merged_pull(12, "Fully async rollout", gh.commits[SHIFT_AT])
    return gh


def test_too_tight_value_requires_action_with_approve_button(repo: RecordingGitHub) -> None:
    pull = repo.open_pull(7, {SCRIPT: script("0.55")})
    window = scores()[-20:]
    failed = sum(v < 0.55 for v in window)
    assert failed > 0  # the data make 0.55 too tight

    outcome = review_pull(repo, repo.repo, 7)

    assert outcome.status == "reviewed" and outcome.review is not None
    (gate,) = outcome.review.gates
    assert (gate.name, gate.old, gate.proposed) == ("EVAL_ACC_MIN_VALUE", 0.56, 0.55)
    assert gate.verdict == "too_tight"
    assert gate.proposed_failures.failed == failed and gate.proposed_failures.total == 20
    assert gate.recomputed == pytest.approx(rule_limit(window, "0.55"))
    assert outcome.review.conclusion == "action_required"
    check = repo.check_for(pull.head_sha)
    assert check.conclusion == "action_required"
    assert check.actions == (APPROVE,)
    assert check.external_id == "7"
    repo_url = "https://github.com/owner/repo"
    assert repo.comments[7].body == render_comment(outcome.review, repo_url=repo_url, app_mode=True)
    assert check.summary == render_check(outcome.review, repo_url=repo_url).summary
    assert repo.writes() == ["upsert_comment", "upsert_check_run"]


def test_value_from_the_rule_succeeds_without_actions(repo: RecordingGitHub) -> None:
    proposed = rule_limit(scores()[-20:], "0.56")
    pull = repo.open_pull(8, {SCRIPT: script(f"{proposed:.2f}")})

    outcome = review_pull(repo, repo.repo, 8)

    assert outcome.review is not None
    assert [g.verdict for g in outcome.review.gates] == ["ok"]
    check = repo.check_for(pull.head_sha)
    assert (check.conclusion, check.actions) == ("success", ())


def test_regime_change_is_attributed_to_the_merged_pull(repo: RecordingGitHub) -> None:
    repo.open_pull(9, {SCRIPT: script("0.50")})

    outcome = review_pull(repo, repo.repo, 9)

    assert outcome.review is not None
    shift = repo.commits[SHIFT_AT]
    (change,) = [c for c in outcome.review.changes if c.after_commit == shift]
    assert change.before_commit == repo.commits[SHIFT_AT - 1]
    assert change.pulls == (12,)
    ref = outcome.review.pulls[12]
    assert (ref.title, ref.url) == ("Fully async rollout", "https://github.com/owner/repo/pull/12")
    assert ref.url in repo.comments[9].body


def test_missing_history_leaves_a_changed_gate_unverified_and_says_how_to_retry(
    repo: RecordingGitHub,
) -> None:
    config = FILE_SOURCE.replace(HISTORY, "ci/missing.jsonl")
    repo.commit({CONFIG: config})
    pull = repo.open_pull(10, {SCRIPT: script("0.50")})

    outcome = review_pull(repo, repo.repo, 10)

    assert outcome.review is not None and outcome.review.error is not None
    assert "ci/missing.jsonl" in outcome.review.error
    check = repo.check_for(pull.head_sha)
    # a maintainer may vouch for a gate nothing verified: the button is there
    assert (check.conclusion, [a.identifier for a in check.actions]) == (
        "action_required",
        ["approve"],
    )
    assert "/threshold-bot retry" in repo.comments[10].body


def test_remote_source_unavailable_leaves_a_changed_gate_unverified(
    repo: RecordingGitHub,
) -> None:
    repo.commit({CONFIG: "", SCRIPT: script("0.56", project="gsm8k_ci")})  # main names it
    pull = repo.open_pull(11, {SCRIPT: script("0.50", project="gsm8k_ci")})

    class Down:
        def fetch(self, spec: SourceSpec) -> History:
            raise HistoryUnavailable("W&B answered 503")

    asked: list[SourceSpec] = []

    def remote(spec: SourceSpec) -> HistorySource:
        asked.append(spec)
        return Down()

    outcome = review_pull(repo, repo.repo, 11, remote_history=remote)

    assert [s.project for s in asked] == ["gsm8k_ci"]
    assert outcome.sources == tuple(asked)
    assert repo.check_for(pull.head_sha).conclusion == "action_required"
    assert "503" in repo.comments[11].body


def test_remote_source_is_read_through_the_factory(repo: RecordingGitHub) -> None:
    repo.commit({CONFIG: "", SCRIPT: script("0.56", project="gsm8k_ci")})
    repo.open_pull(13, {SCRIPT: script("0.50", project="gsm8k_ci")})
    text = repo.file_text(repo.repo, HISTORY, "main")
    assert text is not None
    from bot.core.history.formats import parse_history

    history = parse_history(text, HISTORY)
    remote: Callable[[SourceSpec], HistorySource] = lambda spec: _Fixed(history)  # noqa: E731

    outcome = review_pull(repo, repo.repo, 13, remote_history=remote)

    assert outcome.review is not None
    (gate,) = outcome.review.gates
    assert gate.window_min == pytest.approx(min(scores()[-20:]))


class _Fixed:
    def __init__(self, history: History) -> None:
        self.history = history

    def fetch(self, spec: SourceSpec) -> History:
        return self.history


def test_pull_without_threshold_files_gets_nothing(repo: RecordingGitHub) -> None:
    repo.open_pull(14, {"README.md": "hello\n", "src/app.py": "x = 0.5\n"})

    outcome = review_pull(repo, repo.repo, 14)

    assert outcome.status == "skipped"
    assert repo.writes() == [] and repo.comments == {} and repo.checks == {}


def test_closed_pull_is_skipped(repo: RecordingGitHub) -> None:
    pull = repo.open_pull(15, {SCRIPT: script("0.50")})
    repo.pulls[15] = pull.__class__(**{**pull.__dict__, "state": "closed"})

    outcome = review_pull(repo, repo.repo, 15)

    assert outcome.status == "skipped" and repo.writes() == []


def test_second_review_edits_the_same_comment_and_check(repo: RecordingGitHub) -> None:
    pull = repo.open_pull(16, {SCRIPT: script("0.55")})
    first = review_pull(repo, repo.repo, 16)
    second = review_pull(repo, repo.repo, 16)

    assert first.comment is not None and second.comment is not None
    assert second.comment.id == first.comment.id and not second.comment.created
    assert len(repo.checks) == 1 and repo.check_for(pull.head_sha).conclusion == "action_required"


def test_config_is_read_at_the_base_not_the_head(repo: RecordingGitHub) -> None:
    # The PR points the history at a file that does not exist: the base config still wins.
    bad = FILE_SOURCE.replace(HISTORY, "ci/other.jsonl")
    repo.open_pull(17, {SCRIPT: script("0.50"), CONFIG: bad})

    outcome = review_pull(repo, repo.repo, 17)

    assert outcome.review is not None and outcome.review.error is None
    assert [s.path for s in outcome.sources] == [HISTORY]


def test_a_pr_changing_the_config_is_marked_and_requires_action(repo: RecordingGitHub) -> None:
    # The value the rule gives would pass; the config the PR also rewrites makes it a case
    # for a maintainer, with the reason, as the Action says it (bot.core.thresholds.pinning).
    proposed = rule_limit(scores()[-20:], "0.56")
    loose = FILE_SOURCE + "rule:\n  allowance: 0.25\n"
    pull = repo.open_pull(21, {SCRIPT: script(f"{proposed:.2f}"), CONFIG: loose})

    outcome = review_pull(repo, repo.repo, 21)

    assert outcome.review is not None
    assert [g.verdict for g in outcome.review.gates] == ["ok"]
    assert outcome.review.conclusion == "action_required"
    assert any(
        w.startswith(f"the PR changes {CONFIG} (the repository config)")
        for w in outcome.review.warnings
    )
    assert repo.check_for(pull.head_sha).conclusion == "action_required"


def test_a_pr_rewriting_the_history_a_gate_reads_is_reviewed_against_the_base_and_marked(
    repo: RecordingGitHub,
) -> None:
    # The PR loosens the gate and rewrites the history so that the loosening looks right:
    # the base's runs judge it, and the rewrite is named.
    loose = 0.10
    flattering = history_jsonl(repo.commits, [loose + 0.01] * RUNS)
    pull = repo.open_pull(22, {SCRIPT: script(f"{loose:.2f}"), HISTORY: flattering})

    outcome = review_pull(repo, repo.repo, 22)

    assert outcome.review is not None
    (gate,) = outcome.review.gates
    assert gate.recomputed == pytest.approx(rule_limit(scores()[-20:], "0.10"))
    assert outcome.review.conclusion == "action_required"
    said = [w for w in outcome.review.warnings if w.startswith(f"the PR changes {HISTORY}")]
    assert said == [
        f"the PR changes {HISTORY} (the run history of EVAL_ACC_MIN_VALUE): this review reads "
        "it at the base, and the change takes effect only once merged; a maintainer must look"
    ]
    assert repo.check_for(pull.head_sha).conclusion == "action_required"


def test_invalid_config_falls_back_to_defaults_with_a_warning(repo: RecordingGitHub) -> None:
    repo.commit({CONFIG: "rule: [not, a, mapping]\n"})
    repo.open_pull(18, {SCRIPT: script("0.50", project="gsm8k_ci")})

    outcome = review_pull(repo, repo.repo, 18)

    assert outcome.review is not None
    assert any(CONFIG in w and "default" in w for w in outcome.review.warnings)


def test_a_window_over_the_maximum_is_said_in_the_review_not_a_crash(
    repo: RecordingGitHub,
) -> None:
    repo.commit({CONFIG: FILE_SOURCE + "rule:\n  window: 7000\n"})
    pull = repo.open_pull(19, {SCRIPT: script("0.50", project="gsm8k_ci")})

    outcome = review_pull(repo, repo.repo, 19)

    assert outcome.status == "reviewed" and outcome.review is not None
    warning = (
        f"{CONFIG}:7: rule.window: invalid window '7000': at most 1,000 runs"
        " — using the default settings"
    )
    assert warning in outcome.review.warnings
    assert "at most 1,000 runs" in repo.comments[19].body
    check = repo.check_for(pull.head_sha)
    assert check.conclusion is not None and "at most 1,000 runs" in check.summary


GATES_CONFIG = FILE_SOURCE + (
    "files:\n"
    "  - path: ci/gates.yaml\n"
    "    gates:\n"
    f'      - {{key: eval.min, metric: "{METRIC}", op: ">="}}\n'
)


def test_unparseable_threshold_file_names_file_and_line(repo: RecordingGitHub) -> None:
    repo.commit({CONFIG: GATES_CONFIG, "ci/gates.yaml": "eval:\n  min: 0.50\n"})
    pull = repo.open_pull(19, {SCRIPT: script("0.50"), "ci/gates.yaml": "eval:\n  min: [0.5\n"})

    outcome = review_pull(repo, repo.repo, 19)

    assert outcome.review is not None
    # the script's gate is still reviewed; the broken file makes the PR need action
    assert [g.name for g in outcome.review.gates] == ["EVAL_ACC_MIN_VALUE"]
    assert outcome.review.gates[0].verdict == "ok"
    assert outcome.review.conclusion == "action_required"
    assert outcome.review.warnings[0].startswith("ci/gates.yaml:3: ")
    check = repo.check_for(pull.head_sha)
    assert check.title == "Cannot read ci/gates.yaml:3"
    # a broken file cannot be approved away: no button, and a covering approval is ignored
    assert (check.conclusion, check.actions) == ("action_required", ())
    approval = SimpleNamespace(
        approver="maint",
        approved_at=datetime(2026, 12, 1, tzinfo=UTC),
        gate_values=gate_values(read_thresholds(repo, repo.repo, pull).files),
    )
    review_pull(repo, repo.repo, 19, approvals=lambda _repo, _number: approval)
    assert repo.check_for(pull.head_sha).conclusion == "action_required"


def test_removing_a_gate_is_reported(repo: RecordingGitHub) -> None:
    two = script("0.56") + 'TOKENS_MAX=300\npython eval.py --asserts "tokens <= $TOKENS_MAX"\n'
    repo.commit({SCRIPT: two})
    repo.open_pull(20, {SCRIPT: script("0.50")})

    outcome = review_pull(repo, repo.repo, 20)

    assert outcome.review is not None
    assert any("TOKENS_MAX" in w and "removes" in w for w in outcome.review.warnings)
