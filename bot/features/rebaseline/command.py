"""The ``/rebaseline`` command: the sender's permission, apply, audit, reply, re-review.

The sender's permission is checked every time, against the level the repository config
(at the PR's base) asks for; then ``bot.features.rebaseline.apply`` recomputes and
commits (or suggests) the new values, the reply says old → new per gate, and the new
head is reviewed again so the comment and check are current.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubPermanentError
from bot.core.commands import Command
from bot.core.render.markdown import escape
from bot.features.context import HandlerContext
from bot.features.rebaseline.apply import RebaselineError, rebaseline
from bot.features.rebaseline.plan import RebaselineResult
from bot.features.rebaseline.replies import rebaseline_reply
from bot.features.respond import audit_once, audited, permitted, refuse, reply
from bot.features.review.handlers import review_for_delivery

_WROTE = ("committed", "suggested")  # outcomes of a /rebaseline that wrote to GitHub


def run_rebaseline(
    ctx: HandlerContext,
    gh: GitHubAPI,
    repo: str,
    number: int,
    sender: str,
    command: Command,
    text: str,
) -> None:
    """``/rebaseline``: permission check of the sender, apply, audit, reply, re-review.

    The audit entry is written as soon as the new values are committed (or suggested),
    so a retried delivery (the re-review failed, say) does not apply them a second time:
    it only reviews the new head again.
    """
    key = f"line-{command.line}"
    done = audited(ctx, "rebaseline", text)
    if done in _WROTE:
        if done == "committed":
            review_for_delivery(ctx, repo, number)
        return
    pull = gh.pull(repo, number)
    allowed, level, required = permitted(gh, repo, pull.base_sha, sender, "rebaseline")
    if not allowed:
        refuse(
            ctx,
            gh,
            repo,
            number,
            key=key,
            user=sender,
            action="rebaseline",
            level=level,
            required=required,
            message=text,
        )
        return
    try:
        result = rebaseline(
            gh,
            repo,
            number,
            command,
            by=sender,
            remote_history=ctx.history,
            max_bytes=ctx.settings.max_threshold_file_bytes,
        )
    except (RebaselineError, GitHubPermanentError) as exc:
        reason = str(exc) if isinstance(exc, RebaselineError) else f"GitHub refused: {escape(exc)}"
        reply(ctx, gh, repo, number, key, f"**/rebaseline** did not run: {reason}.")
        audit_once(
            ctx,
            repo=repo,
            number=number,
            actor=sender,
            action="rebaseline",
            outcome="failed",
            detail={"reason": str(exc)},
            message=text,
        )
        ctx.log.warning("/rebaseline on %s#%d failed: %s", repo, number, exc)
        return
    audit_once(
        ctx,
        repo=repo,
        number=number,
        actor=sender,
        action="rebaseline",
        outcome=result.mode,
        detail=audit_detail(result),
        message=text,
    )
    reply(ctx, gh, repo, number, key, rebaseline_reply(result))
    if result.mode == "committed":
        review_for_delivery(ctx, repo, number)  # our own push's synchronize event is ignored
    ctx.log.info("/rebaseline on %s#%d by %s: %s", repo, number, sender, result.mode)


def audit_detail(result: RebaselineResult) -> dict[str, Any]:
    """What the audit log keeps of a rebaseline: gates old → new, commits, review, rule."""
    return {
        "gates": {
            f"{plan.path}:{edit.label}": [edit.old_literal, edit.new_literal]
            for plan in result.changed
            for edit in plan.edits
        },
        "commits": list(result.commits),
        "review_id": result.review_id,
        "rule": {"allowance": result.rule.allowance, "window": str(result.rule.window)},
        "unknown": list(result.unknown),
    }
