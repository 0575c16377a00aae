"""Webhooks of the drift watch.

- ``push`` to the default branch touching the config, a file the watch reads, or a history
  file its gates read (or too many commits to tell): watch that repository now, with the
  App's ``finish`` step (``HandlerContext.finish``: the dashboard, rewritten when what it shows
  changed);
- ``pull_request`` ``closed`` of a rebaseline PR the watch opened: merged, its issue is
  closed with a comment and the record goes idle; closed unmerged, the drift is dismissed
  (the same drift does not open it again);
- ``issue_comment`` ``created`` on a drift issue: ``/rebaseline`` (with its options) opens
  the rebaseline PR, for a sender with the permission the config at the default branch asks,
  then the repository is watched again as a round does, for the ``finish`` step (the
  dashboard shows the PR at once; the file just acted on is not acted on again: its
  evaluation and record are as ``act`` left them); ``/threshold-bot help`` answers.
  Comments on other issues are ignored.

A handler's watch holds leases under an owner of its own (``handler_options``).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from bot.adapters.github.api import RepoInfo
from bot.adapters.store import drift as records
from bot.core.commands import HELP_TEXT, command_lines, parse_comment
from bot.core.config import CONFIG_PATH
from bot.core.render.markdown import escape
from bot.core.routing import Router
from bot.features.comments import is_bot
from bot.features.context import HandlerContext
from bot.features.drift.items import close
from bot.features.drift.place import Place
from bot.features.drift.read import watched
from bot.features.drift.watch import (
    BRANCHES,
    WatchOptions,
    finish_now,
    handler_options,
    watch_repository,
)
from bot.features.payloads import ClosedPullEvent, IssueCommentEvent, PushEvent
from bot.features.replies import problems
from bot.features.respond import audit_once, permitted, refuse, reply

MAX_LISTED_COMMITS = 20  # GitHub lists at most this many commits in a push payload

router = Router[HandlerContext]()


def _relevant(event: PushEvent) -> bool:
    """Whether a push to the default branch may change what the watch sees."""
    repo = event.repository.full_name
    if len(event.commits) >= MAX_LISTED_COMMITS or not event.commits:
        return True  # the list may be cut (or a force push lists none): cannot tell
    paths = {p for c in event.commits for p in (*c.added, *c.modified, *c.removed)}
    if CONFIG_PATH in paths:
        return True
    history = BRANCHES.history_paths(repo)
    if history is None or paths & history:
        return True  # not (completely) read here: the files it reads are not known yet
    config = BRANCHES.config(repo)
    return config is None or any(watched(path, config) for path in paths)


@router.register("push")
def on_push(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Watch the repository when a push to its default branch may change a gate's fate."""
    if not ctx.settings.drift_watch:
        return
    event = PushEvent.model_validate(payload)
    repository = event.repository
    if (
        event.deleted
        or repository.archived
        or event.ref != f"refs/heads/{repository.default_branch}"
    ):
        return
    if not _relevant(event):
        return
    info = RepoInfo(
        full_name=repository.full_name,
        default_branch=repository.default_branch,
        private=repository.private,
        url=repository.html_url,
    )
    gh = ctx.installation_client()
    done = watch_repository(
        gh,
        ctx.sessions,
        ctx.delivery.installation_id or 0,
        info,
        ctx.history,
        handler_options(ctx.settings, ctx.locks, ctx.finish, ctx.delivery.id),
    )
    for acted in done.acted:
        if acted.action not in ("unchanged", "skipped"):
            ctx.log.info("drift watch: %s: %s %s", done.repo, acted.file, acted.action)
    if done.finished:
        ctx.log.info("drift watch: %s: %s", done.repo, done.finished)


@router.register("pull_request", "closed")
def on_pull_closed(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """A rebaseline PR of the watch was merged (close its item) or closed (dismissed)."""
    event = ClosedPullEvent.model_validate(payload)
    repo, number = event.repository.full_name, event.pull_request.number
    item = records.by_number(ctx.sessions, repo, number)
    if item is None or item.pull != number:
        return
    options = WatchOptions.of(ctx.settings, ctx.locks)
    claimed = records.claim(
        ctx.sessions,
        repo=repo,
        file=item.file,
        installation_id=item.installation_id,
        owner=options.owner,
        seconds=options.lease_seconds,
    )
    if claimed is None:  # a worker is writing this item: the next round sees the PR closed
        return
    try:
        if event.pull_request.merged:
            place = _place(ctx, repo, options)
            at = event.pull_request.merged_at
            merged_at = at.astimezone(UTC).replace(tzinfo=None) if at and at.tzinfo else at
            close(place, claimed, "merged", pull=number, merged_at=merged_at)
            ctx.log.info("drift watch: %s#%d merged: %s closed", repo, number, item.file)
        else:
            records.save(ctx.sessions, claimed.pull_closed(), options.owner)
            ctx.log.info("drift watch: %s#%d closed unmerged: %s", repo, number, item.file)
    finally:
        records.release(ctx.sessions, repo, item.file, options.owner)


def _place(ctx: HandlerContext, repo: str, options: WatchOptions) -> Place:
    """Enough of a ``Place`` to close items (no files are rewritten)."""
    return Place(
        gh=ctx.installation_client(),
        sessions=ctx.sessions,
        installation_id=ctx.delivery.installation_id or 0,
        repo=repo,
        branch="",
        sha="",
        files={},
        texts={},
        owner=options.owner,
        lease_seconds=options.lease_seconds,
        review_pull=lambda number: None,
    )


@router.register("issue_comment", "created")
def on_issue_comment(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Slash commands on a drift issue (comments on PRs are ``bot.features.comments``')."""
    event = IssueCommentEvent.model_validate(payload)
    if event.issue.pull_request is not None:
        return
    if is_bot(event.sender) or is_bot(event.comment.user):
        return
    repo, number, sender = event.repository.full_name, event.issue.number, event.sender.login
    item = records.by_number(ctx.sessions, repo, number)
    if item is None or item.issue != number:
        return
    body = event.comment.body or ""
    parsed = parse_comment(body)
    if not parsed.commands and not parsed.problems:
        return
    gh = ctx.installation_client()
    gh.add_reaction(repo, event.comment.id, "eyes")
    if parsed.problems:
        reply(ctx, gh, repo, number, "problems", problems(parsed.problems))
    lines = dict(command_lines(body))
    options = handler_options(ctx.settings, ctx.locks, ctx.finish, ctx.delivery.id)
    changed: RepoInfo | None = None  # the repository, once a rebaseline PR was written
    for command in parsed.commands:
        key = f"line-{command.line}"
        text = lines.get(command.line, f"/{command.kind}")[:200]
        if command.kind != "rebaseline":
            reply(ctx, gh, repo, number, key, HELP_TEXT)
            continue
        info = gh.repository(repo)
        head = gh.branch_head(repo, info.default_branch) or info.default_branch
        allowed, level, required = permitted(gh, repo, head, sender, "rebaseline")
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
            continue
        done = watch_repository(
            gh,
            ctx.sessions,
            ctx.delivery.installation_id or 0,
            info,
            ctx.history,
            options,
            only=item.file,
            command=command,
        )
        acted = done.acted[0] if done.acted else None
        opened = acted is not None and acted.action in ("opened", "updated") and acted.number
        why = (acted.detail if acted else done.problem) or "nothing to rebaseline"
        if command.dry_run and acted is not None and acted.action == "unchanged" and why:
            message = f"**/rebaseline --dry-run**: the pull request would change {escape(why)}."
        elif opened and acted is not None:
            verb = "Opened" if acted.action == "opened" else "Updated"
            message = f"{verb} #{acted.number} with the rule's values."
        else:
            message = f"**/rebaseline** did not run: {escape(why)}."
        reply(ctx, gh, repo, number, key, message)
        audit_once(
            ctx,
            repo=repo,
            number=number,
            actor=sender,
            action="rebaseline",
            outcome="dry_run" if command.dry_run else "opened" if opened else "failed",
            detail={"file": item.file, "pull": acted.number if acted else None},
            message=text,
        )
        if opened:
            changed = info
    if changed is not None:
        finish_now(
            gh, ctx.sessions, ctx.delivery.installation_id or 0, changed, ctx.history, options
        )
