"""Webhooks of the threshold dashboard: its checkboxes, acted on.

``issues`` ``edited`` of a repository's dashboard issue counts only when the issue is the one
its store record names (``bot.adapters.store.dashboards``) and the App wrote it (GitHub says so:
``performed_via_github_app``, or its bot user); any other issue, one carrying the dashboard's
marker included, is ignored, and so is an edit by the App itself (its own rewrite).

- A sender with the permission the config at the default branch asks for
  (``permissions.rebaseline``, as ``/rebaseline`` on a drift issue): each box the edit ticked
  that is still ticked in the issue as it is now and not in the body the App last wrote is
  acted on, once — "rebaseline this gate" / "rebaseline every failing gate of this file" open
  the rebaseline PR as ``/rebaseline`` does, "check again now" watches the repository again.  A
  box is known by recomputing the boxes of the gates at the default branch's head: a key that
  matches none is answered "no such gate any more".  The body is then written back with those
  boxes unticked and one note line each (who asked, what was done), kept in the record's
  ``notes`` too; the record keeps that body with every box unticked (a box another ticked
  meanwhile is acted on by its own delivery).  An edit that ticks nothing is left as it is.
- Anyone else (another bot too): the body is written back as the App last wrote it, and
  nothing is done.

Both are audited (action ``dashboard``: once per delivery and box, or per revert).  The edit
is handled under the record's lease (a second edit waits, ``CLAIM_WAIT`` seconds, then its
delivery is retried; its last attempt waits for a lease not renewed to expire), reading
the issue as it is now, so a repeated or late delivery finds its boxes unticked already; a
retried delivery skips the boxes it audited.  A failed action ends in its note line ("failed:
…") and the log; a transient one (GitHub 5xx, a lease held) is retried first, while the
delivery has attempts left.

After an edit whose boxes had an effect (a PR opened or updated, a check done), once the
lease is released, the repository is watched again for the App's ``finish`` step
(``HandlerContext.finish``, ``bot.features.drift.watch.finish_now``): the dashboard shows what
was done at once (the PR on the gate's line, the fresh evaluation), rewritten only when what
it shows changed, under the lease as every write of it.

Bounds: at most ``MAX_BOXES`` boxes acted on per edit (the others are unticked, with a note);
the gates read with the drift watch's bounds (``max_files`` files of ``max_bytes`` each).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from bot.adapters.github.api import GitHubAPI, RepoInfo
from bot.adapters.github.app import app_login
from bot.adapters.github.identity import is_own_comment
from bot.adapters.store import dashboards
from bot.adapters.store.dashboards import BODY_LIMIT, Dashboard
from bot.core.commands import Command
from bot.core.dashboard.asked import NO_SUCH_GATE, Asked, noted
from bot.core.dashboard.body import DASHBOARD_MARKER
from bot.core.dashboard.boxes import Box, ticked, untick
from bot.core.formatting import plural
from bot.core.retry import TransientError, is_transient
from bot.core.routing import Router
from bot.features.comments import is_bot
from bot.features.context import HandlerContext
from bot.features.drift.read import list_branch, read_file
from bot.features.drift.watch import (
    BRANCHES,
    WatchOptions,
    finish_now,
    handler_options,
    watch_repository,
)
from bot.features.payloads import IssuesEvent
from bot.features.respond import audit_once, audited, permitted

ACTION = "dashboard"  # the audit log's action
MAX_BOXES = 10  # boxes acted on per edit
UNCHANGED = ("unchanged", "skipped")
EFFECTS = ("opened", "updated", "done")  # outcomes after which the dashboard is rewritten
CLAIM_WAIT = 2.0  # seconds an edit waits for the record's lease before its retry
CLAIM_POLL = 0.2  # seconds between two claims

router = Router[HandlerContext]()


@router.register("issues", "edited")
def on_edited(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Act on the boxes a maintainer ticked on the dashboard; revert anyone else's edit."""
    event = IssuesEvent.model_validate(payload)
    if event.issue.pull_request is not None or event.changes.body is None:
        return
    repo, number = event.repository.full_name, event.issue.number
    login = app_login(ctx.settings).get()
    if login and event.sender.login.lower() == login.lower():
        return  # the App's own rewrite
    record = dashboards.get(ctx.sessions, repo)
    if record is None or record.issue != number:
        return
    issue = payload.get("issue")
    if not isinstance(issue, dict) or not is_own_comment(issue, ctx.settings.app_id, login):
        ctx.log.warning("dashboard: %s#%d is not the App's issue: edit ignored", repo, number)
        return
    options = handler_options(ctx.settings, ctx.locks, ctx.finish, ctx.delivery.id)
    owner = options.owner
    installation_id = ctx.delivery.installation_id or record.installation_id
    held = _claim(ctx, repo, installation_id, owner, options.lease_seconds)
    if held is None:
        _retry_or_log(ctx, f"dashboard of {repo}: being written by another worker")
        return
    try:
        acted = _edited(ctx, event, held, owner, replace(options, finish=None))
    finally:
        dashboards.release(ctx.sessions, repo, owner)
    if acted is not None:  # what it shows changed: rewritten now, not by the next round
        gh = ctx.installation_client()
        finish_now(gh, ctx.sessions, installation_id, acted, ctx.history, options)


def _claim(
    ctx: HandlerContext, repo: str, installation_id: int, owner: str, seconds: float
) -> Dashboard | None:
    """The record's lease, waited for ``CLAIM_WAIT`` seconds; on the delivery's last attempt,
    until a lease that is not renewed has expired (``seconds`` and one more)."""
    last = ctx.delivery.attempt >= ctx.settings.max_attempts
    deadline = time.monotonic() + (seconds + 1.0 if last else CLAIM_WAIT)
    while True:
        held = dashboards.claim(
            ctx.sessions, repo=repo, installation_id=installation_id, owner=owner, seconds=seconds
        )
        if held is not None or time.monotonic() >= deadline:
            return held
        time.sleep(CLAIM_POLL)


def _retry_or_log(ctx: HandlerContext, why: str) -> None:
    """Retry the delivery later while it has attempts left; else say so in the log."""
    if ctx.delivery.attempt < ctx.settings.max_attempts:
        raise TransientError(why)
    ctx.log.warning("%s: the edit was not handled", why)


def _edited(
    ctx: HandlerContext, event: IssuesEvent, held: Dashboard, owner: str, options: WatchOptions
) -> RepoInfo | None:
    """Act on the edit under the record's lease; the repository when a box was acted on with
    an effect (a PR opened or updated, a check done), for the ``finish`` step after it."""
    repo, number, sender = event.repository.full_name, event.issue.number, event.sender.login
    gh = ctx.installation_client()
    now = gh.update_issue(repo, number).body  # no fields: the issue as it is now (GET)
    if now == held.body:
        return None  # reverted or acted on already (a repeated or late delivery)
    asked = (ticked(event.issue.body or "") & ticked(now)) - ticked(held.body)
    info = gh.repository(repo)
    sha = gh.branch_head(repo, info.default_branch)
    if is_bot(event.sender):
        allowed, level, required = False, "bot", ""
    else:
        allowed, level, required = permitted(
            gh, repo, sha or info.default_branch, sender, "rebaseline"
        )
    if not allowed:
        if held.body:
            gh.update_issue(repo, number, body=held.body)
        ctx.log.info("dashboard: %s#%d: @%s (%s) edited it: reverted", repo, number, sender, level)
        audit_once(
            ctx,
            repo=repo,
            number=number,
            actor=sender,
            action=ACTION,
            outcome="reverted",
            detail={"level": level, "required": required, "boxes": sorted(asked)},
            message="revert",
        )
        return None
    if not asked:
        return None  # a maintainer's edit that ticks nothing: left as it is
    keys = sorted(asked, key=now.find)  # in the body's order
    known = _current_boxes(gh, info, sha, options) if sha else {}
    record, lines, effect = held, [], False
    for index, key in enumerate(keys):
        if audited(ctx, ACTION, key) is not None:
            continue  # acted on by an earlier attempt of this delivery
        box = known.get(key)
        if index >= MAX_BOXES:
            done = Asked(sender, box, f"not done: at most {MAX_BOXES} boxes per edit")
        else:
            done = _act(ctx, gh, info, sender, box, options)
        record = record.noted(done.note)
        dashboards.save(ctx.sessions, record, owner)
        ctx.log.info("dashboard: %s#%d: %s", repo, number, done.note)
        audit_once(
            ctx,
            repo=repo,
            number=number,
            actor=sender,
            action=ACTION,
            outcome=_outcome(done),
            detail=None if box is None else {**box.model_dump(), "number": done.number},
            message=key,
        )
        lines.append(done.line)
        effect = effect or _outcome(done) in EFFECTS
    body = noted(untick(now, keys), lines, DASHBOARD_MARKER)
    gh.update_issue(repo, number, body=body)
    kept = untick(body, ticked(body))  # another's tick, its own delivery pending: not the App's
    if len(kept) <= BODY_LIMIT:
        dashboards.save(ctx.sessions, replace(record, body=kept), owner)
    return info if effect else None


def _outcome(done: Asked) -> str:
    """The audit's outcome: ``opened``, ``updated``, ``done``, ``not done``, ``failed``,
    ``gone`` (no such gate any more)."""
    return "gone" if done.box is None else done.done.split(":")[0].split(",")[0]


def _current_boxes(
    gh: GitHubAPI, info: RepoInfo, sha: str, options: WatchOptions
) -> dict[str, Box]:
    """Every box the gates at ``sha`` could show, by key: each gate's, each file's, and
    "check again now" (the files read as the drift watch reads them, with its bounds)."""
    repo = info.full_name
    branch = BRANCHES.get(repo, sha) or list_branch(
        gh,
        repo,
        info.default_branch,
        sha,
        max_bytes=options.max_bytes,
        max_files=options.max_files,
    )
    for path in branch.paths:
        if path not in branch.read:
            branch, _size = read_file(gh, branch, path, max_bytes=options.max_bytes)
    BRANCHES.put(branch)
    boxes = [Box(action="check")]
    for tf in branch.files:
        boxes.append(Box(action="rebaseline-file", file=tf.path))
        boxes += [Box(action="rebaseline-gate", file=tf.path, gate=g.name) for g in tf.gates]
    return {box.key: box for box in boxes}


def _act(
    ctx: HandlerContext,
    gh: GitHubAPI,
    info: RepoInfo,
    sender: str,
    box: Box | None,
    options: WatchOptions,
) -> Asked:
    """Do what ``box`` asks for; what was done.  A failure is logged and said, never raised,
    unless it is worth retrying while the delivery has attempts left."""
    try:
        return _do(ctx, gh, info, sender, box, options)
    except Exception as exc:
        if is_transient(exc) and ctx.delivery.attempt < ctx.settings.max_attempts:
            raise
        ctx.log.exception("dashboard: %s: %s for @%s failed", info.full_name, box, sender)
        return Asked(sender, box, f"failed: {type(exc).__name__}")


def _do(
    ctx: HandlerContext,
    gh: GitHubAPI,
    info: RepoInfo,
    sender: str,
    box: Box | None,
    options: WatchOptions,
) -> Asked:
    if box is None:
        return Asked(sender, None, NO_SUCH_GATE)
    installation = ctx.delivery.installation_id or 0
    if box.action == "check":
        done = watch_repository(gh, ctx.sessions, installation, info, ctx.history, options)
        if done.problem:
            return Asked(sender, box, f"failed: {done.problem}")
        busy = [a for a in done.acted if a.action == "busy"]
        if busy:
            _retry_or_log(ctx, f"{info.full_name}: {busy[0].file} is being written")
        changed = [a for a in done.acted if a.action not in UNCHANGED]
        checked = plural(len(done.acted), "threshold file")
        return Asked(sender, box, f"done, {checked} checked, {len(changed)} item(s) written")
    command = Command(kind="rebaseline", line=0, gates=(box.gate,) if box.gate else ())
    done = watch_repository(
        gh,
        ctx.sessions,
        installation,
        info,
        ctx.history,
        options,
        only=box.file,
        command=command,
    )
    acted = done.acted[0] if done.acted else None
    if acted is not None and acted.action == "busy":
        _retry_or_log(ctx, f"{info.full_name}: {box.file} is being written")
        return Asked(sender, box, "failed: its drift item was being written by another worker")
    if acted is not None and acted.action in ("opened", "updated") and acted.number:
        return Asked(sender, box, acted.action, acted.number)
    why = (acted.detail if acted else done.problem) or "nothing to rebaseline"
    return Asked(sender, box, f"not done: {why}")
