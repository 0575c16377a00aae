"""``issue_comment`` events: slash commands in PR comments.

Only new comments (``created``) on pull requests count: an edit could otherwise
re-run a command someone already ran, and comments on plain issues or by bots are
ignored.  A comment with a command gets an 👀 reaction at once, then:

- ``/threshold-bot help`` → the help; ``/threshold-bot retry`` → a fresh review;
- ``/rebaseline …`` → if the sender (checked every time) has the permission the
  repository config asks for, ``bot.features.rebaseline.apply``; then a reply with old → new
  per gate, and a re-review of the new head so the comment and check are current;
- a command that cannot be parsed → a reply saying what is wrong.

Every command is recorded in the audit log.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubPermanentError
from bot.core.commands import HELP_TEXT, Command, command_lines, parse_comment
from bot.core.render.markdown import escape
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import IssueCommentEvent, User
from bot.features.rebaseline.apply import RebaselineError, rebaseline
from bot.features.rebaseline.plan import RebaselineResult
from bot.features.rebaseline.replies import rebaseline_reply
from bot.features.replies import problems
from bot.features.respond import audit_once, audited, permitted, refuse, reply
from bot.features.review.handlers import review_for_delivery


def is_bot(user: User) -> bool:
    """Whether a GitHub account is a bot (Apps, dependabot …): their comments are ignored."""
    return user.type == "Bot" or user.login.lower().endswith("[bot]")


router = Router[HandlerContext]()


@router.register("issue_comment", "created")
def on_comment(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Run the slash commands of a new PR comment."""
    event = IssueCommentEvent.model_validate(payload)
    if event.issue.pull_request is None or is_bot(event.sender) or is_bot(event.comment.user):
        return
    body = event.comment.body or ""
    parsed = parse_comment(body)
    if not parsed.commands and not parsed.problems:
        return
    gh = ctx.installation_client()
    repo, number, sender = event.repository.full_name, event.issue.number, event.sender.login
    gh.add_reaction(repo, event.comment.id, "eyes")
    if parsed.problems:
        reply(ctx, gh, repo, number, "problems", problems(parsed.problems))
        for problem in parsed.problems:
            audit_once(
                ctx,
                repo=repo,
                number=number,
                actor=sender,
                action="command",
                outcome="invalid",
                detail={"problem": problem.message},
                message=problem.text,
            )
    lines = dict(command_lines(body))
    for command in parsed.commands:
        text = lines.get(command.line, f"/{command.kind}")[:200]
        run_command(ctx, gh, repo, number, sender, command, text)


def run_command(
    ctx: HandlerContext,
    gh: GitHubAPI,
    repo: str,
    number: int,
    sender: str,
    command: Command,
    text: str,
) -> None:
    """Run one parsed command for ``sender`` on PR ``number``."""
    key = f"line-{command.line}"
    if command.kind == "help":
        reply(ctx, gh, repo, number, key, HELP_TEXT)
        outcome = "done"
    elif command.kind == "retry":
        review = review_for_delivery(ctx, repo, number)
        if review.status == "skipped":
            reply(ctx, gh, repo, number, key, f"Nothing to review: {escape(review.reason)}.")
        outcome = review.status
    else:
        run_rebaseline(ctx, gh, repo, number, sender, command, text)
        return
    audit_once(
        ctx,
        repo=repo,
        number=number,
        actor=sender,
        action=command.kind,
        outcome=outcome,
        message=text,
    )


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
        result = rebaseline(gh, repo, number, command, by=sender, remote_history=ctx.history)
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
            f"{plan.path}:{edit.gate.name}": [edit.gate.literal, edit.new_literal]
            for plan in result.changed
            for edit in plan.edits
        },
        "commits": list(result.commits),
        "review_id": result.review_id,
        "rule": {"allowance": result.rule.allowance, "window": str(result.rule.window)},
        "unknown": list(result.unknown),
    }
