"""``pull_request`` events: review the PR on every change; forget it when it closes.

``opened`` / ``synchronize`` / ``reopened`` / ``ready_for_review`` run the review
(drafts included: see ``bot.features.review.pull``), and so does ``edited`` when the PR
was retargeted to another base branch (its config, gates and diff are the new base's); an
edit of the title or body changes nothing.  ``review_for_delivery`` is what
every feature calls to review a PR again (*Re-run*, ``retry``, approvals, ``/rebaseline``);
it also records PRs whose review reads remote history (W&B …) so that the periodic
re-check (``bot.features.review.recheck``) can re-review them, and keeps the PR's interactive
report (``bot.features.review.report``).  ``closed`` forgets the PR and deletes its report.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.store import reports, tracked
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import PullRequestEvent
from bot.features.review.pull import ReviewOutcome
from bot.features.review.recheck import PULL_WAIT_SECONDS, review_and_track
from bot.features.review.report import ReportOptions

REVIEW_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review")


router = Router[HandlerContext]()


@router.register("pull_request", *REVIEW_ACTIONS)
def on_pull_request(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Review the PR (comment + check run) when it opens or its head moves."""
    event = PullRequestEvent.model_validate(payload)
    review_for_delivery(ctx, event.repository.full_name, event.pull_request.number)


@router.register("pull_request", "edited")
def on_edited(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Review the PR again when its base branch changed (``changes.base``)."""
    event = PullRequestEvent.model_validate(payload)
    if event.changes.base is not None:
        review_for_delivery(ctx, event.repository.full_name, event.pull_request.number)


@router.register("pull_request", "closed")
def on_closed(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Stop re-checking a closed PR, and stop serving its interactive report."""
    event = PullRequestEvent.model_validate(payload)
    repo, number = event.repository.full_name, event.pull_request.number
    with ctx.sessions.begin() as session:
        tracked.untrack(session, repo, number)
        reports.delete_pull(session, repo, number)


def review_for_delivery(ctx: HandlerContext, repo: str, number: int) -> ReviewOutcome:
    """Review PR ``number`` of ``repo`` as this delivery's installation, and log the result."""
    gh = ctx.installation_client()
    installation = ctx.delivery.installation_id or 0
    limit = ctx.settings.max_threshold_file_bytes
    outcome = review_and_track(
        gh,
        ctx.sessions,
        installation,
        repo,
        number,
        ctx.history,
        locks=ctx.locks,
        max_bytes=limit,
        reports=ReportOptions.of(ctx.settings),
        # waiting for another review of the PR leaves this job time for its own
        wait=min(PULL_WAIT_SECONDS, ctx.settings.job_timeout_seconds / 2),
    )
    if outcome.review is not None:
        ctx.log.info("reviewed %s#%d: %s", repo, number, outcome.review.conclusion)
    else:
        ctx.log.info("skipped %s#%d: %s", repo, number, outcome.reason)
    return outcome
