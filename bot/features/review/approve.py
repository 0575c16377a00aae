"""``check_run`` ``requested_action``: the **Approve thresholds** button of our check run.

The sender (checked on every click) needs the permission the repository config asks
for (``permissions.approve``, default write).  An approval stores who, when, the
head SHA of the clicked check run and, for every gate at that SHA, its file, name, metric,
operator, history source and value (``bot.features.review.approval.gate_key``), then
reviews the PR again: publishing turns ``action_required`` into ``success`` "approved by
@user" while the head's gates equal the approved ones, so a later push that changes any of
these needs a new approval and one that changes none keeps it.  A history source the PR
names for a gate is read once an approval covers it (``bot.core.thresholds.pinning``).
A refusal is a polite PR comment naming the permission.  Both are audited.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.adapters.store import approvals
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import RequestedActionEvent
from bot.features.respond import audit_once, permitted, refuse, reply
from bot.features.review.approval import approval_not_applied, gate_values
from bot.features.review.check_run import is_ours, pull_number
from bot.features.review.handlers import review_for_delivery
from bot.features.review.pull import APPROVE, ReviewOutcome, read_thresholds

router = Router[HandlerContext]()


@router.register("check_run", "requested_action")
def on_requested_action(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Approve the gate values of the clicked check run's head, if the sender may."""
    event = RequestedActionEvent.model_validate(payload)
    run = event.check_run
    if event.requested_action.identifier != APPROVE.identifier or not is_ours(ctx, run):
        return
    number = pull_number(ctx, event)
    if number is None:
        ctx.log.info("approve on check run %d: no open PR for %s", run.id, run.head_sha)
        return
    gh = ctx.installation_client()
    repo, user = event.repository.full_name, event.sender.login
    pull = gh.pull(repo, number)
    allowed, level, required = permitted(gh, repo, pull.base_sha, user, "approve")
    if not allowed:
        refuse(
            ctx,
            gh,
            repo,
            number,
            key="approve",
            user=user,
            action="approve",
            level=level,
            required=required,
            message=f"check run {run.id}",
        )
        return
    at_head = replace(pull, head_sha=run.head_sha)
    limit = ctx.settings.max_threshold_file_bytes
    values = gate_values(read_thresholds(gh, repo, at_head, max_bytes=limit).files)
    with ctx.sessions.begin() as session:
        latest = approvals.latest(session, repo, number)
        again = latest is not None and (latest.approver, latest.head_sha) == (user, run.head_sha)
        if not (again and approvals.still_valid(latest, values)):  # a retried delivery
            approvals.approve(
                session,
                repo=repo,
                pr_number=number,
                head_sha=run.head_sha,
                approver=user,
                gate_values=values,
            )
    outcome = review_for_delivery(ctx, repo, number)
    reason = not_applied(outcome, run.head_sha)
    if reason is not None:
        reply(ctx, gh, repo, number, "approve", approval_not_applied(user, reason))
    audit_once(
        ctx,
        repo=repo,
        number=number,
        actor=user,
        action="approve",
        outcome="done" if reason is None else "stored",
        detail={"head_sha": run.head_sha, "gate_values": values},
        message=f"check run {run.id}",
    )


def not_applied(outcome: ReviewOutcome, approved_sha: str) -> str | None:
    """Why an approval does not make the PR's check green, or None when it does."""
    if outcome.review is None:
        return f"the PR was not reviewed ({outcome.reason})."
    if outcome.check_run is not None and outcome.check_run.conclusion == "success":
        return None
    if outcome.review.conclusion == "neutral":
        return "the run history cannot be read right now; the check turns green once it can."
    return (
        f"the PR's gate values changed after the approved commit {approved_sha[:7]}: "
        "approve the check run of the new head."
    )
