"""``issue_comment`` events: slash commands in PR comments.

Only new comments (``created``) on pull requests count: an edit could otherwise
re-run a command someone already ran, and comments on plain issues or by bots are
ignored.  A comment with a command gets an 👀 reaction at once, then:

- ``/threshold-bot help`` → the help; ``/threshold-bot retry`` → a fresh review, at most
  once per ``RETRY_COOLDOWN_SECONDS`` per PR (``bot.features.retry``);
- ``/rebaseline …`` → ``bot.features.rebaseline.command``;
- a command that cannot be parsed → a reply saying what is wrong.

Every command is recorded in the audit log.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.api import GitHubAPI
from bot.core.commands import HELP_TEXT, Command, command_lines, parse_comment
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import IssueCommentEvent, User
from bot.features.rebaseline.command import run_rebaseline
from bot.features.replies import problems
from bot.features.respond import audit_once, reply
from bot.features.retry import run_retry


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
        run_retry(ctx, gh, repo, number, sender, key, text)  # audits itself: rate-limited
        return
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
