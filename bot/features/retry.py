"""``/threshold-bot retry``: review the PR again, at most once per cooldown per PR.

The audit log is the rate limit: a retry claims its audit entry (outcome ``started``)
before the review, in one statement that fails when another delivery retried the same PR
less than ``Settings.retry_cooldown_seconds`` ago; the entry then gets the review's
status.  A retry within the cooldown is answered with the time it may run again, audited as
``throttled`` (which does not count), and reviews nothing.
"""

from __future__ import annotations

from datetime import timedelta

from bot.adapters.github.api import GitHubAPI
from bot.adapters.store import audit
from bot.core.render.markdown import escape
from bot.features.context import HandlerContext
from bot.features.replies import retry_later
from bot.features.respond import audit_once, audited, reply
from bot.features.review.handlers import review_for_delivery

STARTED = "started"
THROTTLED = "throttled"


def run_retry(
    ctx: HandlerContext, gh: GitHubAPI, repo: str, number: int, sender: str, key: str, text: str
) -> None:
    """Review PR ``number`` again for ``sender``, unless it was retried within the cooldown.

    Idempotent per delivery: a redelivered retry whose review did not finish reviews again;
    one that finished, or was throttled, does nothing more.
    """
    done = audited(ctx, "retry", text)
    if done not in (None, STARTED):
        return
    if done is None:
        cooldown = ctx.settings.retry_cooldown_seconds
        with ctx.sessions.begin() as session:
            until = audit.claim(
                session,
                repo=repo,
                pr_number=number,
                actor=sender,
                action="retry",
                outcome=STARTED,
                delivery_id=ctx.delivery.id,
                message=text,
                cooldown=timedelta(seconds=cooldown),
                ignore=THROTTLED,
            )
        if until is not None:
            reply(ctx, gh, repo, number, key, retry_later(until, cooldown))
            audit_once(
                ctx,
                repo=repo,
                number=number,
                actor=sender,
                action="retry",
                outcome=THROTTLED,
                detail={"until": until.isoformat()},
                message=text,
            )
            return
    review = review_for_delivery(ctx, repo, number)
    if review.status == "skipped":
        reply(ctx, gh, repo, number, key, f"Nothing to review: {escape(review.reason)}.")
    with ctx.sessions.begin() as session:
        audit.set_outcome(
            session,
            delivery_id=ctx.delivery.id,
            action="retry",
            message=text,
            outcome=review.status,
        )
