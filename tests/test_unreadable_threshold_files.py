"""A threshold file GitHub will not serve (over ``MAX_FILE_BYTES``, forbidden) is said in the
review, at the head (``action_required``, no Approve button) and at the base (gates new)."""

from __future__ import annotations

from bot.adapters.github.errors import GitHubForbidden
from bot.features.review.pull import review_pull
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_history_errors import arranged
from tests.test_review_pr import SCRIPT, script


def test_a_threshold_file_over_the_limit_at_the_head_requires_action() -> None:
    gh, _ = arranged()
    size = len(script("0.50").encode())
    gh.max_file_bytes = size - 1  # the proposed script no longer fits

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.status == "reviewed" and outcome.review is not None
    assert outcome.review.conclusion == "action_required"
    shown = f"{SCRIPT}: cannot be read: {SCRIPT} is {size:,} bytes, over the limit".replace(
        "_", "\\_"
    )
    assert shown in gh.comments[5].body
    check = gh.check_for(gh.pulls[5].head_sha)
    assert check.conclusion == "action_required" and check.actions == ()


def test_a_threshold_file_forbidden_at_the_base_is_reviewed_as_new() -> None:
    gh: RecordingGitHub
    gh, _ = arranged()
    base_reads = 0
    original = gh.file_text

    def file_text(repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        nonlocal base_reads
        if path == SCRIPT and ref != gh.pulls[5].head_sha:
            base_reads += 1
            raise GitHubForbidden("GitHub 403: Resource not accessible by integration", 403)
        return original(repo, path, ref, max_bytes=max_bytes)

    gh.file_text = file_text  # type: ignore[method-assign]
    outcome = review_pull(gh, gh.repo, 5)

    assert base_reads == 1 and outcome.review is not None
    (gate,) = outcome.review.gates
    assert gate.changed and gate.old == gate.proposed == 0.50  # no base: the gate is new
    assert any("cannot be read at the base" in w for w in outcome.review.warnings)
