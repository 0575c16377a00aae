"""A delivery that failed for good is visible in its PR: the check run says what failed.

The worker calls ``report_failure`` once a delivery will not be retried (a permanent
error, the attempts used up, the per-job time limit).  When the delivery concerns a pull
request (``pull_request``, a comment on a PR, our check run), the PR's check run is
completed as ``failure`` with the reason and how to retry; otherwise nothing is posted.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.api import GitHubAPI
from bot.core.render.markdown import code
from bot.features.context import HandlerContext

TITLE = "Review failed"
HOW_TO_RETRY = "Comment `/threshold-bot retry` on the PR, or re-run this check, to try again."


def _field(payload: dict[str, Any], *path: str) -> object:
    value: object = payload
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def failed_pull(gh: GitHubAPI, event: str, payload: dict[str, Any]) -> tuple[str, int, str] | None:
    """``(repo, number, head_sha)`` of the PR a delivery is about, or None."""
    repo = _field(payload, "repository", "full_name")
    if not isinstance(repo, str):
        return None
    number: object = None
    head: object = None
    if event == "pull_request":
        number = _field(payload, "pull_request", "number")
        head = _field(payload, "pull_request", "head", "sha")
    elif event == "issue_comment" and _field(payload, "issue", "pull_request") is not None:
        number = _field(payload, "issue", "number")
    elif event == "check_run":
        head = _field(payload, "check_run", "head_sha")
        external = _field(payload, "check_run", "external_id")
        number = int(external) if isinstance(external, str) and external.isdigit() else None
    if not isinstance(number, int):
        return None
    if not isinstance(head, str):
        head = gh.pull(repo, number).head_sha
    return repo, number, head


def failure_summary(event: str, error: str) -> str:
    """The check run's summary: what failed (the error in a code span) and how to retry."""
    return (
        f"threshold-bot could not finish handling the `{event}` event for this PR: "
        f"{code(error[:300])}\n\n{HOW_TO_RETRY}"
    )


def report_failure(ctx: HandlerContext, payload: dict[str, Any], error: str) -> bool:
    """Complete the PR's check run as ``failure`` saying why; whether one was posted."""
    gh = ctx.installation_client()
    target = failed_pull(gh, ctx.delivery.event, payload)
    if target is None:
        return False
    repo, number, head_sha = target
    gh.upsert_check_run(
        repo,
        head_sha,
        conclusion="failure",
        title=TITLE,
        summary=failure_summary(ctx.delivery.event, error),
        external_id=str(number),
    )
    return True
